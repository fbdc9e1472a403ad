"""Simulated hosts, stopping, and failures of the local backend with real torchrun processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.hooks.local_training import LocalTrainingHook

from .conftest import job_processes, script_spec

WHO_AM_I = textwrap.dedent(
    """
    import json, os, sys
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([1.0])
    dist.all_reduce(t)
    seen = {k: os.environ.get(k) for k in ("SM_HOSTS", "SM_CURRENT_HOST", "RANK", "LOCAL_RANK", "WORLD_SIZE",
            "GROUP_RANK", "SM_MODEL_DIR", "SM_USER_ARGS")}
    seen.update(dist_rank=dist.get_rank(), dist_world=dist.get_world_size(), sum=t.item(), argv=sys.argv[1:],
                config=json.load(open(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "resourceconfig.json"))))
    out = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank{dist.get_rank()}.json")
    open(out, "w").write(json.dumps(seen))
    dist.destroy_process_group()
    """
)

SLEEPER = textwrap.dedent(
    """
    import os, time
    # one write: print() under PYTHONUNBUFFERED writes the text and its newline apart, so the two
    # ranks' lines could merge into one
    os.write(1, f"ready rank={os.environ.get('RANK')}\\n".encode())
    time.sleep(600)
    """
)
# a worker a stop cannot end gracefully (say, busy in C code): only SIGKILL ends it
STUBBORN_SLEEPER = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + SLEEPER


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["namespaces", "none"])
def test_two_simulated_hosts_see_their_hosts_ranks_and_world_size(
    tmp_path: Path, isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADT_LOCAL_ISOLATION", isolation)
    spec = script_spec(
        tmp_path,
        WHO_AM_I,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": 2},
        hyperparameters={"epochs": 1},
    )
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=False)
    lines: list[str] = []
    result = hook.run_job(spec, "two-hosts", log=lines.append)
    assert result["status"] == "Completed"
    job = tmp_path / "root" / "two-hosts"
    seen0 = json.loads((job / "output" / "data" / "rank0.json").read_text())
    seen1 = json.loads((job / "hosts" / "algo-2" / "output" / "data" / "rank1.json").read_text())
    for seen in (seen0, seen1):
        assert seen["SM_HOSTS"] == '["algo-1","algo-2"]'
        assert seen["WORLD_SIZE"] == "2"
        assert seen["dist_world"] == 2
        assert seen["sum"] == 2.0
        assert seen["argv"] == ["--epochs", "1"]
        assert seen["LOCAL_RANK"] == "0"
    assert (seen0["SM_CURRENT_HOST"], seen0["RANK"], seen0["dist_rank"]) == ("algo-1", "0", 0)
    assert (seen1["SM_CURRENT_HOST"], seen1["RANK"], seen1["dist_rank"]) == ("algo-2", "1", 1)
    assert seen1["config"]["current_host"] == "algo-2"
    if isolation == "namespaces":  # AWS's toolkit in real /opt/ml, torchrun to algo-1:7777
        assert seen1["SM_MODEL_DIR"] == "/opt/ml/model"
        assert any(
            "torchrun --nnodes 2 --nproc_per_node 1 --master_addr algo-1 --master_port 7777 --node_rank 1"
            in line
            for line in lines
        )
    else:  # the relocated layout, the builtin runner
        assert seen1["SM_MODEL_DIR"] == str(job / "hosts" / "algo-2" / "model")
        assert any("--node-rank=1" in line and "--rdzv-backend=static" in line for line in lines)


def _wait_for(predicate, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


@pytest.mark.slow
def test_a_master_port_taken_before_the_bind_is_retried_on_a_new_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADT_LOCAL_ISOLATION", "none")  # a job network namespace has no port race
    from airflow_dist_training.local import launcher

    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = iter([taken.getsockname()[1]])
    real_free_port = launcher.free_port
    monkeypatch.setattr(launcher, "free_port", lambda: next(ports, None) or real_free_port())
    spec = script_spec(tmp_path, WHO_AM_I, compute={"instance_type": "ml.m5.xlarge", "instance_count": 2})
    lines: list[str] = []
    try:
        result = LocalTrainingHook(root=tmp_path / "root", use_s3=False).run_job(
            spec, "port-race", log=lines.append
        )
    finally:
        taken.close()
    assert result["status"] == "Completed"
    assert sum("rendezvous port was taken" in line for line in lines) == 1
    assert [t["status"] for t in result["timeline"]].count("Training") == 1


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["namespaces", "none"])
def test_stop_from_another_thread_kills_every_process_of_the_job(
    tmp_path: Path, isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # none: no PID namespace ends the job's processes; torchrun's workers are in sessions of their own
    monkeypatch.setenv("ADT_LOCAL_ISOLATION", isolation)
    spec = script_spec(
        tmp_path, STUBBORN_SLEEPER, distribution={"strategy": "torch_distributed", "processes_per_host": 2}
    )
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=False, stop_grace_seconds=5)
    name = f"stop-me-{isolation}-{os.getpid()}"  # processes are found by job name: one no other run uses
    lines: list[str] = []
    seen: dict[str, float] = {}

    def stopper() -> None:
        try:  # a slow start on a loaded machine is not what this test measures: allow it time
            _wait_for(lambda: "\n".join(lines).count("ready rank=") == 2, timeout=240)
            seen["processes"] = len(job_processes(name))
        finally:  # stop the job even when the wait failed, so a failure never waits out the job
            seen["stopped_at"] = time.time()
            hook.stop(name)

    thread = threading.Thread(target=stopper)
    thread.start()
    with pytest.raises(TrainingJobError) as info:
        hook.run_job(spec, name, log=lines.append)
    thread.join()
    assert seen.get("processes", 0) >= 3, "\n".join(lines[-40:])  # the torchrun agent and two workers were up
    assert info.value.status == "Stopped"
    assert time.time() - seen["stopped_at"] < 60  # the stop itself is prompt (grace 5 s)
    assert job_processes(name) == []
    assert hook.stop(name) is False  # nothing left to stop


PARENT = textwrap.dedent(
    """
    import sys
    from airflow_dist_training.hooks.local_training import LocalTrainingHook
    spec, root, log, name = sys.argv[1:5]
    out = open(log, "a", buffering=1)
    LocalTrainingHook(root=root, use_s3=False, stop_grace_seconds=5).run_job(
        spec, name, log=lambda line: out.write(line + "\\n"))
    """
)


@pytest.mark.slow
def test_sigterm_to_the_parent_leaves_no_orphan_training_processes(tmp_path: Path) -> None:
    spec = script_spec(
        tmp_path, SLEEPER, distribution={"strategy": "torch_distributed", "processes_per_host": 2}
    )
    spec_file = tmp_path / "spec.json"
    name = f"sigterm-me-{os.getpid()}"  # processes are found by job name: one no other run uses
    spec_file.write_text(json.dumps(spec))
    log = tmp_path / "parent.log"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(spec_file), str(tmp_path / "root"), str(log), name],
        env={**os.environ, "ADT_LOCAL_USE_S3": "0"},
    )
    try:  # a slow start on a loaded machine is not what this test measures: allow it time
        _wait_for(lambda: log.exists() and log.read_text().count("ready rank=") == 2, timeout=240)
        assert len(job_processes(name)) >= 3
    finally:  # SIGTERM the parent even when the wait failed, so no job outlives the test
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=60)
    _wait_for(lambda: job_processes(name) == [], timeout=20)


FAILING = textwrap.dedent(
    """
    import os, sys
    print("epoch=0 loss=1.0", flush=True)
    if os.environ.get("RANK") == "0":
        raise ValueError("boom from user script")
    """
)


@pytest.mark.slow
def test_failing_script_raises_with_its_last_lines_and_the_failure_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADT_LOCAL_ISOLATION", "none")  # the builtin runner's failure text
    spec = script_spec(tmp_path, FAILING, metric_definitions=[{"name": "loss", "regex": "loss=([0-9.]+)"}])
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=False)
    with pytest.raises(TrainingJobError) as info:
        hook.run_job(spec, "fails", log=lambda line: None)
    error = info.value
    failure_file = tmp_path / "root" / "fails" / "output" / "failure"
    assert error.status == "Failed"
    text = str(error)
    assert text.startswith("Local training job fails failed on host algo-1 (exit code 1).")
    assert 'raise ValueError("boom from user script")' in text  # the script's last lines
    failure = failure_file.read_text()
    # the toolkit's text; stdout and stderr interleave in either order within its excerpt
    assert failure.startswith('ExecuteUserScriptError:\nExitCode 1\nErrorMessage "')
    assert 'raise ValueError("boom from user script")\nValueError: boom from user script' in failure
    assert f"Failure file {failure_file}:\n{failure}" in text
    assert error.failure_reason is not None and error.failure_reason.startswith(
        "AlgorithmError: algo-1: ValueError: boom from user script\nExecuteUserScriptError:\nExitCode 1\n"
    )
    assert not (tmp_path / "root" / "fails" / "output" / "success").exists()


OWN_FAILURE = textwrap.dedent(
    """
    import os, sys
    open(os.path.join(os.environ["SM_OUTPUT_DIR"], "failure"), "w").write("CUDA out of patience: lower --batch-size")
    sys.exit(3)
    """
)


def test_a_failure_file_written_by_the_script_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADT_LOCAL_ISOLATION", "none")  # the builtin runner keeps the exit code
    spec = script_spec(tmp_path, OWN_FAILURE, distribution={"strategy": "none"})
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=False)
    with pytest.raises(TrainingJobError) as info:
        hook.run_job(spec, "own-failure", log=lambda line: None)
    assert "failed on host algo-1 (exit code 3)" in str(info.value)
    assert str(info.value).endswith(":\nCUDA out of patience: lower --batch-size")
    assert info.value.failure_reason == "AlgorithmError: CUDA out of patience: lower --batch-size"


LAUNCHED = textwrap.dedent(
    """
    import json, os, torch.distributed as dist
    dist.init_process_group("gloo")
    out = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank{dist.get_rank()}.json")
    open(out, "w").write(json.dumps({k: os.environ[k] for k in ("SM_HOST_COUNT", "SM_CURRENT_HOST_RANK", "SM_MODEL_DIR")}))
    dist.destroy_process_group()
    """
)


@pytest.mark.slow
def test_launcher_mode_runs_in_the_fallback_layout_and_warns_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_dist_training.local import hosts

    monkeypatch.setenv("ADT_LOCAL_ISOLATION", "none")
    monkeypatch.setattr(hosts, "_WARNED", set())
    spec = script_spec(
        tmp_path,
        LAUNCHED,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": 2},
        distribution={"strategy": "launcher", "launcher": "torchrun", "processes_per_host": 1},
    )
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=False)
    lines: list[str] = []
    result = hook.run_job(spec, "fallback-launcher", log=lines.append)
    assert result["status"] == "Completed"
    job = tmp_path / "root" / "fallback-launcher"
    seen = json.loads((job / "hosts" / "algo-2" / "output" / "data" / "rank1.json").read_text())
    assert seen == {
        "SM_HOST_COUNT": "2",
        "SM_CURRENT_HOST_RANK": "1",
        "SM_MODEL_DIR": str(job / "hosts" / "algo-2" / "model"),  # relocated: no real /opt/ml
    }
    warnings = [line for line in lines if "Linux namespaces are not available here" in line]
    assert len(warnings) == 1 and "fixed /opt/ml/... paths" in warnings[0]
    hook.run_job(spec, "fallback-launcher-2", log=lines.append)
    assert len([line for line in lines if "Linux namespaces are not available here" in line]) == 1
