"""Which interpreter runs a local job (local/job_env.py), and the default job environment's pins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from airflow_dist_training.cli import main
from airflow_dist_training.local import job_env


def _pins() -> dict[str, str]:
    return dict(
        line.split("==", 1)
        for line in job_env.constraints_text().splitlines()
        if "==" in line and not line.startswith("#")
    )


def test_the_job_environment_pins_a_torch_torchvision_pair_that_belongs_together() -> None:
    pins = _pins()
    torch_minor = int(pins["torch"].split(".")[1])
    # torchvision 0.(N+15) is built for torch 2.N (0.29 <-> 2.14); any other pair fails to load its ops
    assert pins["torchvision"].split(".")[:2] == ["0", str(torch_minor + 15)], pins
    for package in ("numpy", "sagemaker_training", "sagemaker_pytorch_training"):
        assert package in pins
    # every package the build installs is pinned
    assert {p.replace("-", "_") for p in job_env.PACKAGES} <= {p.replace("-", "_") for p in pins}


def _fake_env(root: Path, stamp: str) -> Path:
    env = root / "job-envs" / "pytorch"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    (env / job_env.STAMP).write_text(stamp)
    return env / "bin" / "python"


def test_the_first_setting_that_names_an_interpreter_wins(tmp_path: Path) -> None:
    built = _fake_env(tmp_path, job_env._wanted_stamp())
    environ = {"ADT_JOB_ENVS": str(tmp_path / "job-envs")}
    assert job_env.job_python(None, environ) == (str(built), job_env.job_python(None, environ)[1])
    assert "the default job environment" in job_env.job_python(None, environ)[1]
    with_env = {**environ, "ADT_LOCAL_PYTHON": "/opt/py/bin/python"}
    assert job_env.job_python(None, with_env) == ("/opt/py/bin/python", "$ADT_LOCAL_PYTHON")
    assert job_env.job_python("/spec/python", with_env)[0] == "/spec/python"


def test_an_environment_built_from_other_pins_is_not_used(tmp_path: Path) -> None:
    _fake_env(tmp_path, "pins of an older release")
    python, why = job_env.job_python(None, {"ADT_JOB_ENVS": str(tmp_path / "job-envs")})
    assert python == sys.executable
    assert why == (
        f"the worker's own interpreter: no default job environment at {tmp_path / 'job-envs' / 'pytorch'}, "
        "so a script importing torchvision or numpy may fail here; `airflow-dist-training job-env` builds it"
    )


def test_the_cli_shows_the_interpreter_a_job_would_run_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    built = _fake_env(tmp_path, job_env._wanted_stamp())
    monkeypatch.delenv("ADT_LOCAL_PYTHON", raising=False)
    monkeypatch.setenv("ADT_JOB_ENVS", str(tmp_path / "job-envs"))
    assert main(["job-env", "--show"]) == 0
    assert capsys.readouterr().out.startswith(f"{built}\tthe default job environment")


def test_a_failed_build_exits_1_with_pips_last_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a "base interpreter" that cannot create a venv: the error names the step, no traceback
    assert main(["job-env", "--path", str(tmp_path / "env"), "--python", "/bin/false"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "error: creating the venv failed (exit code 1)"
    assert "Traceback" not in err


def test_an_interpreter_that_is_not_there_is_the_settings_error_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "t.py").write_text("print('never runs')\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: t\n"
        "image: {framework: pytorch, framework_version: '2.8.0'}\n"
        f"source: {{entry_point: t.py, source_dir: {tmp_path}}}\n"
        "compute: {instance_type: ml.m5.xlarge, instance_count: 1}\n"
    )
    monkeypatch.setenv("ADT_LOCAL_PYTHON", str(tmp_path / "no-such-python"))
    code = main(["run", str(spec), "--backend", "local", "--jobs-root", str(tmp_path / "jobs")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"local.python: {tmp_path / 'no-such-python'} ($ADT_LOCAL_PYTHON) is not an executable file" in err
    assert "Traceback" not in err
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").rglob("t.py"))
