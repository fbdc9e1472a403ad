from __future__ import annotations

import logging
import tarfile
from pathlib import Path

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.evaluation import EvaluationScriptError, LocalEvaluationRunner

SCRIPT = """
import argparse, json, os, pathlib, sys
p = argparse.ArgumentParser()
p.add_argument("--model-dir"); p.add_argument("--output-dir"); p.add_argument("--mode", default="ok")
a = p.parse_args()
assert a.model_dir == os.environ["ADT_MODEL_DIR"] and a.output_dir == os.environ["ADT_OUTPUT_DIR"]
print("evaluating", sorted(os.listdir(a.model_dir)))
if a.mode == "crash":
    for i in range(30):
        print(f"err line {i}", file=sys.stderr)
    sys.exit(3)
if a.mode == "silent":
    sys.exit(0)
w = float(pathlib.Path(a.model_dir, "weights.txt").read_text())
pathlib.Path(a.output_dir, "evaluation.json").write_text(json.dumps({"metrics": {"accuracy": w}}))
"""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "evaluate.py"
    script.write_text(SCRIPT)
    (tmp_path / "weights.txt").write_text("0.75")
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "weights.txt", arcname="weights.txt")
    return script, archive


def test_runs_over_model_tarball_and_streams_output(setup, tmp_path: Path, caplog) -> None:
    script, archive = setup
    caplog.set_level(logging.INFO)
    out = LocalEvaluationRunner().run(
        script=str(script), model_uri=f"file://{archive}", work_dir=tmp_path / "w"
    )
    assert out.read_text() == '{"metrics": {"accuracy": 0.75}}'
    assert "[evaluate] evaluating ['weights.txt']" in caplog.text


def test_runs_over_checkpoint_directory(setup, tmp_path: Path) -> None:
    script, _ = setup
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "weights.txt").write_text("0.5")
    out = LocalEvaluationRunner().run(
        script=str(script), model_uri=str(ckpt), work_dir=tmp_path / "w", output_dir=tmp_path / "o"
    )
    assert out == tmp_path / "o" / "evaluation.json"


def test_failure_carries_exit_code_and_last_stderr_lines(setup, tmp_path: Path) -> None:
    script, archive = setup
    with pytest.raises(EvaluationScriptError) as exc:
        LocalEvaluationRunner(stderr_tail=3).run(
            script=str(script), model_uri=str(archive), work_dir=tmp_path / "w", arguments=["--mode", "crash"]
        )
    assert str(exc.value) == (
        f"evaluation script {script} exited with code 3; last 3 stderr line(s):\n"
        "  err line 27\n  err line 28\n  err line 29"
    )


def test_script_that_writes_nothing(setup, tmp_path: Path) -> None:
    script, archive = setup
    with pytest.raises(SpecValidationError) as exc:
        LocalEvaluationRunner().run(
            script=str(script),
            model_uri=str(archive),
            work_dir=tmp_path / "w",
            arguments=["--mode", "silent"],
            output_dir=tmp_path / "o",
        )
    assert str(exc.value) == (
        f"{tmp_path / 'o' / 'evaluation.json'}: the evaluation script {script} exited 0 but did not write evaluation.json"
    )


def test_missing_model_and_script(setup, tmp_path: Path) -> None:
    script, _ = setup
    with pytest.raises(SpecValidationError, match=r"model_uri: /nope/model.tar.gz does not exist"):
        LocalEvaluationRunner().run(
            script=str(script), model_uri="/nope/model.tar.gz", work_dir=tmp_path / "w"
        )
    with pytest.raises(SpecValidationError, match=r"script: /nope/evaluate.py does not exist"):
        LocalEvaluationRunner().run(
            script="/nope/evaluate.py", model_uri=str(tmp_path), work_dir=tmp_path / "w"
        )


def test_timeout_kills_the_script(tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text("import time, sys\nprint('starting', file=sys.stderr, flush=True)\ntime.sleep(30)\n")
    with pytest.raises(EvaluationScriptError) as exc:
        LocalEvaluationRunner().run(
            script=str(script), model_uri=str(tmp_path), work_dir=tmp_path / "w", timeout=1
        )
    assert (
        str(exc.value) == f"evaluation script {script} timed out after 1s; last 1 stderr line(s):\n  starting"
    )


def test_without_namespaces_the_processing_paths_are_folders_of_the_work_dir(
    setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """The fallback (docs/local-backend.md): /opt/ml is a folder of the work dir, where the
    checkpoint, the data and the output are links; the task log shows it as /opt/ml."""
    monkeypatch.setenv("ADT_LOCAL_ISOLATION", "none")
    script = tmp_path / "code" / "evaluate.py"
    script.parent.mkdir()
    script.write_text(
        "import json, os, pathlib, sys\n"
        "print('model', sys.argv[2], os.listdir(sys.argv[2]), os.listdir(os.environ['ADT_DATA_DIR']))\n"
        "pathlib.Path(sys.argv[4], 'evaluation.json').write_text(json.dumps({'metrics': {'m': 1}}))\n"
    )
    ckpt, data = tmp_path / "ckpt", tmp_path / "data"
    ckpt.mkdir()
    (ckpt / "weights.txt").write_text("0.5")
    data.mkdir()
    (data / "test.csv").write_text("x\n")
    caplog.set_level(logging.INFO)
    out = LocalEvaluationRunner().run(
        script=str(script),
        model_uri=str(ckpt),
        work_dir=tmp_path / "w",
        output_dir=tmp_path / "o",
        data_dir=str(data),
    )
    assert out == tmp_path / "o" / "evaluation.json" and out.is_file()
    opt_ml = tmp_path / "w" / "container" / "opt" / "ml"
    assert (opt_ml / "processing" / "model").resolve() == ckpt
    assert "[evaluate] model /opt/ml/processing/model ['weights.txt'] ['test.csv']" in caplog.text
    assert str(opt_ml) not in caplog.text
