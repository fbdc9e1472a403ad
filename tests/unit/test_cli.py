"""CLI messages: flags blamed on the flag, planning errors name the file, pipelines validated, --version."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_dist_training import __version__
from airflow_dist_training.cli import build_parser, main
from tests.paths import REPO

SPEC = str(REPO / "examples" / "specs" / "smddp_p4d.yaml")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_bad_region_is_blamed_on_the_flag(capsys):
    code, _, err = _run(capsys, "validate", SPEC, "--region", "mars-1")
    assert code == 2
    assert err == (
        "error: --region: 'mars-1' is not an AWS region with SageMaker training images (e.g. us-east-1, eu-west-1)\n"
    )


def test_bad_job_name_is_blamed_on_the_flag(capsys):
    code, _, err = _run(capsys, "plan", SPEC, "--job-name", "my_job")
    assert code == 2
    assert err.startswith("error: --job-name: 'my_job' must match")
    assert len(err.splitlines()) == 1


def test_planning_errors_name_the_file(capsys, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(Path(SPEC).read_text().replace("ml.p4d.24xlarge", "ml.g4dn.xlarge"))
    code, _, err = _run(capsys, "validate", str(spec))
    assert code == 2
    assert err.startswith(f"error: {spec}: compute.instance_type: ")


def test_validate_recognises_a_pipeline_file(capsys):
    path = str(REPO / "dags" / "pipelines" / "llm_finetune_sagemaker.yaml")
    code, out, _ = _run(capsys, "validate", path)
    assert code == 0
    assert out == f"{path}: valid pipeline 'llm_finetune_sagemaker' (backend sagemaker, planned for SageMaker (us-east-1))\n"
    code, out, _ = _run(capsys, "validate-pipeline", str(REPO / "dags" / "pipelines" / "demo_mlp_local.yaml"))
    assert code == 0 and "valid pipeline 'demo_mlp_local_yaml' (backend local)" in out


def test_invalid_pipeline_exits_2_naming_file_and_field(capsys, tmp_path):
    text = (REPO / "dags" / "pipelines" / "llm_finetune_sagemaker.yaml").read_text()
    path = tmp_path / "p.yaml"
    path.write_text(text.replace("../../", f"{REPO}/").replace("channel: train", "channel: nope"))
    code, _, err = _run(capsys, "validate", str(path))
    assert code == 2
    assert err.startswith(f"error: {path}: staging.channel: 'nope' names no channel of the training spec")


def test_schema_pipeline_prints_the_pipeline_schema(capsys):
    code, out, _ = _run(capsys, "schema", "--pipeline")
    assert code == 0 and '"title": "PipelineSpec"' in out and '"dag_id"' in out


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"airflow-dist-training {__version__}\n"


def test_help_has_no_rest_markup():
    parser = build_parser()
    texts = [parser.format_help()]
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        texts += [p.format_help() for p in action.choices.values()]  # type: ignore[union-attr]
    assert not any("``" in t for t in texts)
