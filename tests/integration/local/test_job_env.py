"""A job script that imports torchvision and numpy runs on the local backend with nothing choosing
its Python: the default job environment (``airflow-dist-training job-env``, built by
scripts/setup.sh: torch 2.14.1 + torchvision 0.29.1 + numpy + AWS's toolkit). The worker's own
venv keeps the CPU build of torch 2.13.0, beside which PyPI's torchvision cannot load
(docs/local-backend.md, "The job's Python"). The job, and a local evaluation, see nothing of this
provider, of Airflow or of this machine."""

from __future__ import annotations

import json
import tarfile
import textwrap
from pathlib import Path

import pytest

from airflow_dist_training.hooks.local_training import LocalTrainingHook
from airflow_dist_training.local.hosts import probe
from tests.paths import REPO

from .conftest import script_spec

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().namespaces, reason=f"no Linux namespaces here: {probe().why}"),
]

VISION = textwrap.dedent(
    """
    import importlib.util, json, os, socket, sys, numpy, torch, torch.distributed as dist, torchvision
    from torchvision.ops import nms
    boxes = torch.from_numpy(numpy.array([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], dtype="float32"))
    kept = nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist()
    dist.init_process_group("gloo")
    total = torch.tensor([float(len(kept))]); dist.all_reduce(total)
    host = socket.gethostname()
    open(f"/opt/ml/model/{host}.txt", "w").write(
        f"{host} torchvision {torchvision.__version__} torch {torch.__version__} kept {kept} sum {total.item()}"
    )
    # what the job sees: printed (its log) and saved with the model
    seen = {"provider": importlib.util.find_spec("airflow_dist_training") is not None,
            "environ": dict(os.environ), "path": sys.path, "executable": sys.executable,
            "prefix": sys.prefix, "base_prefix": sys.base_prefix}
    print("SEEN " + json.dumps(seen), flush=True)
    json.dump(seen, open(f"/opt/ml/model/{host}-probe.json", "w"))
    dist.destroy_process_group()
    """
)


def test_a_job_runs_torchvision_in_the_default_job_python_and_sees_nothing_of_this_machine(
    tmp_path: Path, job_env_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2-host job under AWS's toolkit imports torchvision and numpy, runs ``nms``, then a gloo
    all-reduce, with nothing choosing its Python. As on an AWS image, the provider reaches it only
    by being shipped, and it sees no variable of this provider or of Airflow and no path of this
    machine: the worker's PYTHONPATH (here the repository) does not leak into the job; its Python
    is the image's /opt/conda (the job environment mounted there), in its environment,
    ``sys.path``, its log and its status messages. (One job for both: each costs 15-35 s.)"""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("ADT_LOCAL_PROBE_SETTING", str(tmp_path))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(REPO / "dags"))
    monkeypatch.setenv("PWD", str(REPO))
    spec = script_spec(
        tmp_path,
        VISION,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": 2},
        stopping={"max_runtime_seconds": 900},
    )
    lines: list[str] = []
    result = LocalTrainingHook(root=tmp_path / "root", use_s3=False, stop_grace_seconds=5).run_job(
        spec, "torchvision-2", log=lines.append
    )
    assert result["status"] == "Completed"
    with tarfile.open(result["model_artifact_uri"].removeprefix("file://")) as tar:
        files = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert sorted(files) == ["algo-1-probe.json", "algo-1.txt", "algo-2-probe.json", "algo-2.txt"]
    for host in ("algo-1", "algo-2"):
        # both hosts ran torchvision's compiled op (nms) on numpy data, then a gloo all-reduce
        text = files[f"{host}.txt"]
        assert text.startswith(f"{host} torchvision 0.29.1"), text
        assert "torch 2.14.1" in text and "kept [0, 2] sum 4.0" in text, text
    assert f"[local] job Python: {job_env_python} (the pytorch job environment" in "\n".join(lines)
    # AWS's toolkit, installed in that environment, launched it with its own torchrun command
    assert any("toolkit runner" in line for line in lines)
    # ... with the job environment as the image's /opt/conda
    assert any("/opt/conda/bin/python -c" in line for line in lines)

    machine = [str(REPO), str(job_env_python.parent.parent), str(Path.home() / ".cache"), str(tmp_path)]
    job_lines = [line for line in lines if line.startswith(("[algo-1] ", "[algo-2] "))]
    assert sum(" SEEN " in line for line in job_lines) == 2, lines
    for host in ("algo-1", "algo-2"):
        seen = json.loads(files[f"{host}-probe.json"])
        assert seen["provider"] is False, seen
        assert seen["executable"] == "/opt/conda/bin/python" and seen["prefix"] == "/opt/conda", seen
        assert (
            seen["environ"]["PATH"]
            == "/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        )
        assert any(p.startswith("/opt/conda/lib/python3.") for p in seen["path"]), seen["path"]
        texts = {
            "environment": [f"{k}={v}" for k, v in seen["environ"].items()],
            "sys": [*seen["path"], seen["executable"], seen["prefix"], seen["base_prefix"]],
            "log": job_lines,
            "status messages": [t["message"] for t in result["timeline"]],
        }
        for where, found in texts.items():
            leaks = [t for t in found for m in machine if m in t]
            assert not leaks, f"the job's {where} shows this machine: {leaks}"
        assert not [k for k in seen["environ"] if k.startswith(("ADT_", "AIRFLOW"))], sorted(seen["environ"])


EVALUATION_PROBE = textwrap.dedent(
    """
    import argparse, importlib.util, json, os, pathlib, sys
    p = argparse.ArgumentParser()
    p.add_argument("--model-dir"); p.add_argument("--output-dir")
    a = p.parse_args()
    weight = float(pathlib.Path(a.model_dir, "weights.txt").read_text())
    rows = len(pathlib.Path(os.environ["ADT_DATA_DIR"], "test.csv").read_text().splitlines())
    seen = {"provider": importlib.util.find_spec("airflow_dist_training") is not None,
            "environ": dict(os.environ), "path": sys.path, "executable": sys.executable,
            "prefix": sys.prefix, "base_prefix": sys.base_prefix, "argv": sys.argv, "cwd": os.getcwd(),
            "model": os.path.realpath(a.model_dir), "output": os.path.realpath(a.output_dir)}
    print("SEEN " + json.dumps(seen), flush=True)
    print(f"evaluating {sys.executable} {a.model_dir}", file=sys.stderr, flush=True)
    pathlib.Path(a.output_dir, "evaluation.json").write_text(
        json.dumps({"metrics": {"accuracy": weight}, "details": {"rows": rows}})
    )
    """
)


def test_a_local_evaluation_runs_as_a_processing_job_that_sees_only_what_sagemaker_gives(
    tmp_path: Path, job_env_python: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Local evaluation runs in the same processing container as the test endpoint's processing
    jobs: the image's /opt/conda, its code, model, data and output under /opt/ml/processing, the
    evaluation contract's variables and nothing of this provider, Airflow or this machine in its
    environment, ``sys.*``, its log or the task's log."""
    import logging

    from airflow_dist_training.hooks.evaluation import LocalEvaluationRunner

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("ADT_LOCAL_PROBE_SETTING", str(tmp_path))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(REPO / "dags"))
    monkeypatch.setenv("PWD", str(REPO))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "probe.py").write_text(EVALUATION_PROBE)
    checkpoint, data = tmp_path / "checkpoint", tmp_path / "data"
    checkpoint.mkdir()
    (checkpoint / "weights.txt").write_text("0.625")
    data.mkdir()
    (data / "test.csv").write_text("x,y\n1,2\n3,4\n")
    caplog.set_level(logging.INFO, logger="airflow_dist_training.hooks.evaluation")
    result = LocalEvaluationRunner().run(
        script=str(tmp_path / "code" / "probe.py"),
        model_uri=str(checkpoint),
        work_dir=tmp_path / "work",
        output_dir=tmp_path / "out",
        data_dir=str(data),
    )
    # the script read the checkpoint and the data where SageMaker puts them, and its result is here
    assert result == tmp_path / "out" / "evaluation.json"
    assert json.loads(result.read_text()) == {"metrics": {"accuracy": 0.625}, "details": {"rows": 3}}
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[evaluate] SEEN ")]
    seen = json.loads(line.removeprefix("[evaluate] SEEN "))
    assert seen["provider"] is False, seen
    assert seen["executable"] == "/opt/conda/bin/python3" and seen["prefix"] == "/opt/conda", seen
    assert seen["argv"] == [
        "/opt/ml/processing/input/code/probe.py",
        *("--model-dir", "/opt/ml/processing/model", "--output-dir", "/opt/ml/processing/evaluation"),
    ]
    assert (seen["cwd"], seen["model"], seen["output"]) == (
        "/",
        "/opt/ml/processing/model",
        "/opt/ml/processing/evaluation",
    )
    env = seen["environ"]
    assert env["PATH"] == "/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    # the documented evaluation contract (docs/evaluation.md), as in the SageMaker request
    assert {k: v for k, v in env.items() if k.startswith("ADT_")} == {
        "ADT_MODEL_DIR": "/opt/ml/processing/model",
        "ADT_OUTPUT_DIR": "/opt/ml/processing/evaluation",
        "ADT_DATA_DIR": "/opt/ml/processing/input/data",
    }
    assert not [k for k in env if k.startswith("AIRFLOW")], sorted(env)
    machine = [str(REPO), str(job_env_python.parent.parent), str(Path.home() / ".cache"), str(tmp_path)]
    task_log = [
        r.getMessage() for r in caplog.records if not r.getMessage().startswith("Evaluation Python: ")
    ]
    assert "[evaluate] evaluating /opt/conda/bin/python3 /opt/ml/processing/model" in task_log
    texts = {
        "environment": [f"{k}={v}" for k, v in env.items()],
        "sys": [*seen["path"], seen["executable"], seen["prefix"], seen["base_prefix"], *seen["argv"]],
        "task log": task_log,
    }
    for where, found in texts.items():
        leaks = [t for t in found for m in machine if m in t]
        assert not leaks, f"the evaluation's {where} shows this machine: {leaks}"
