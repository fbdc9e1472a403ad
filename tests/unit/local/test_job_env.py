"""Which interpreter runs a local job (local/job_env.py), and the default job environment's pins."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from airflow_dist_training.cli import main
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.local import job_env


def _pins() -> dict[str, str]:
    return dict(
        line.split("==", 1)
        for line in job_env.PYTORCH.constraints_text().splitlines()
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
    assert {p.replace("-", "_") for p in job_env.PYTORCH.packages} <= {p.replace("-", "_") for p in pins}


def _fake_env(root: Path, *, python_version: str = "3.11.7", stamp: dict[str, object] | None = None) -> Path:
    """An environment folder as `job-env` leaves it (no packages: only readiness is read)."""
    env = root / "job-envs" / "pytorch"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    (env / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion_info = {python_version}\n")
    wanted = stamp if stamp is not None else job_env._wanted_stamp(job_env.PYTORCH, python_version)
    (env / job_env.STAMP).write_text(json.dumps(wanted))
    return env / "bin" / "python"


def test_the_first_setting_that_names_an_interpreter_wins(tmp_path: Path) -> None:
    built = _fake_env(tmp_path)
    environ = {"ADT_JOB_ENVS": str(tmp_path / "job-envs")}
    python, why = job_env.job_python(None, environ)
    assert python == str(built)
    assert why == (
        "the pytorch job environment: torch, torchvision, numpy, sagemaker-training, "
        "sagemaker-pytorch-training; nothing of this provider"
    )
    with_env = {**environ, "ADT_LOCAL_PYTHON": "/opt/py/bin/python"}
    assert job_env.job_python(None, with_env) == ("/opt/py/bin/python", "$ADT_LOCAL_PYTHON")
    assert job_env.job_python("/spec/python", with_env)[0] == "/spec/python"


def _refusal(tmp_path: Path) -> str:
    with pytest.raises(SpecValidationError) as caught:
        job_env.job_python(None, {"ADT_JOB_ENVS": str(tmp_path / "job-envs")})
    return str(caught.value)


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (lambda root: None, "not built"),
        (
            lambda root: _fake_env(
                root, stamp={"format": 2, "recipe": "pytorch", "digest": "older pins", "python": "3.11.7"}
            ),
            "built from other pins or another recipe",
        ),
        (
            lambda root: _fake_env(root, stamp={**job_env._wanted_stamp(job_env.PYTORCH, "3.11.2")}),
            "built with Python 3.11.2, now 3.11.7",
        ),
        (
            lambda root: (_fake_env(root).parent.parent / job_env.STAMP).write_text(
                "sha256-of-the-pins-only"
            ),
            "built by an older release (no readable stamp)",
        ),
    ],
    ids=["missing", "other-pins", "other-python", "old-stamp"],
)
def test_a_missing_or_outdated_environment_is_refused_with_how_to_build_it(
    tmp_path: Path, make: Callable[[Path], object], what: str
) -> None:
    """Never the worker's interpreter instead: it has this provider, which no AWS image has."""
    make(tmp_path)
    where = tmp_path / "job-envs" / "pytorch"
    assert _refusal(tmp_path) == (
        f"job environment: local.python: the pytorch job environment at {where} is {what}: run "
        "`airflow-dist-training job-env` to build it (minutes the first time), or name an interpreter "
        "in local.python or $ADT_LOCAL_PYTHON"
    )


def test_the_stamp_covers_the_pins_the_recipe_and_the_python(tmp_path: Path) -> None:
    base = job_env.PYTORCH.digest()
    assert replace(job_env.PYTORCH, packages=(*job_env.PYTORCH.packages, "scipy")).digest() != base
    assert replace(job_env.PYTORCH, import_check="import torch").digest() != base
    assert replace(job_env.PYTORCH, constraints="job_env_constraints.txt").digest() == base
    assert job_env._wanted_stamp(job_env.PYTORCH, "3.11.7") != job_env._wanted_stamp(
        job_env.PYTORCH, "3.12.1"
    )


def test_images_resolve_to_their_recipe_and_a_toy_recipe_registers_by_name(tmp_path: Path) -> None:
    assert (
        job_env.recipe_for(
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-gpu-py312"
        ).name
        == "pytorch"
    )
    hf_image = (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/"
        "huggingface-pytorch-training:2.8.0-transformers4.56.2-gpu-py312-cu129-ubuntu22.04"
    )
    assert job_env.recipe_for(hf_image).name == "huggingface"
    assert job_env.recipe_for(None, "huggingface").name == "huggingface"
    toy = job_env.register_recipe(
        job_env.JobEnvRecipe(
            name="toy-jax",
            constraints="job_env_constraints.txt",
            packages=("jax",),
            import_check="import jax",
            frameworks=frozenset({"toy-jax"}),
            image_repositories=("toy-jax-training",),
        )
    )
    try:
        assert job_env.recipe_for("123.dkr.ecr.us-east-1.amazonaws.com/toy-jax-training:1.0") is toy
        assert job_env.recipe_for(None, "toy-jax") is toy
        with pytest.raises(
            SpecValidationError, match=r"the toy-jax job environment at .*/toy-jax is not built"
        ):
            job_env.job_python(None, {"ADT_JOB_ENVS": str(tmp_path)}, framework="toy-jax")
    finally:
        job_env.RECIPES.forget("toy-jax")


def test_the_cli_shows_the_interpreter_a_job_would_run_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ADT_LOCAL_PYTHON", raising=False)
    monkeypatch.setenv("ADT_JOB_ENVS", str(tmp_path / "job-envs"))
    assert main(["job-env", "--show"]) == 2
    assert "is not built: run `airflow-dist-training job-env`" in capsys.readouterr().err
    built = _fake_env(tmp_path)
    assert main(["job-env", "--show"]) == 0
    assert capsys.readouterr().out.startswith(f"{built}\tthe pytorch job environment")


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


def _pin_lines(text: str) -> dict[str, str]:
    return dict(
        line.split("==", 1) for line in text.splitlines() if "==" in line and not line.startswith("#")
    )


def test_the_huggingface_recipe_is_a_layer_whose_own_pins_win_and_torch_stays_the_bases() -> None:
    hf = job_env.HUGGINGFACE
    assert hf.base == "pytorch"
    own, pins = _pin_lines(hf.constraints_text()), _pin_lines(hf.pins_text())
    # what AWS's huggingface-pytorch-training:2.8.0-transformers4.56.2 image pins
    assert {k: own[k] for k in ("transformers", "accelerate", "datasets", "huggingface-hub")} == {
        "transformers": "4.56.2",
        "accelerate": "1.10.1",
        "datasets": "4.1.0",
        "huggingface-hub": "0.35.3",
    }
    assert pins["fsspec"] == "2025.9.0" != _pins()["fsspec"]  # the layer's pin replaces the base's
    assert pins["torch"] == _pins()["torch"] == "2.14.1"  # pip is never free to install another torch
    assert list(pins).count("fsspec") == 1
    # every package the build installs is pinned; a new base pin outdates the layer
    assert {p.replace("_", "-") for p in hf.packages} <= set(own)
    before = hf.digest()
    job_env.RECIPES.by_name["pytorch"] = replace(
        job_env.PYTORCH, packages=(*job_env.PYTORCH.packages, "scipy")
    )
    try:
        assert hf.digest() != before
    finally:
        job_env.RECIPES.by_name["pytorch"] = job_env.PYTORCH


def _fake_layer(root: Path, base_stamp: dict[str, object]) -> None:
    env = root / "job-envs" / "huggingface"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    (env / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.11.7\n")
    stamp = {**job_env._wanted_stamp(job_env.HUGGINGFACE, "3.11.7"), "base_stamp": base_stamp}
    (env / job_env.STAMP).write_text(json.dumps(stamp))


def test_a_layer_is_ready_only_over_the_build_of_its_base_it_was_installed_over(tmp_path: Path) -> None:
    environ = {"ADT_JOB_ENVS": str(tmp_path / "job-envs")}
    _fake_layer(tmp_path, job_env._wanted_stamp(job_env.PYTORCH, "3.11.7"))
    with pytest.raises(SpecValidationError) as caught:
        job_env.job_python(None, environ, framework="huggingface")
    base = tmp_path / "job-envs" / "pytorch"
    assert str(caught.value) == (
        f"job environment: local.python: the huggingface job environment at {tmp_path / 'job-envs' / 'huggingface'} "
        f"is a layer over the pytorch job environment at {base}, which is not built: run "
        "`airflow-dist-training job-env --recipe huggingface` to build it (minutes the first time), or name an "
        "interpreter in local.python or $ADT_LOCAL_PYTHON"
    )
    _fake_env(tmp_path)
    python, why = job_env.job_python(None, environ, framework="huggingface")
    assert python == str(tmp_path / "job-envs" / "huggingface" / "bin" / "python")
    assert why.startswith("the huggingface job environment: transformers, accelerate, datasets")
    # the base rebuilt with another Python: the layer's packages may not load over it
    (base / job_env.STAMP).write_text(json.dumps(job_env._wanted_stamp(job_env.PYTORCH, "3.11.9")))
    (base / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.11.9\n")
    assert job_env.why_not_ready(tmp_path / "job-envs" / "huggingface", job_env.HUGGINGFACE) == (
        "a layer over an earlier build of the pytorch job environment"
    )
