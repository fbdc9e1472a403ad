"""Scripts written the way public SageMaker examples are run unchanged on simulated hosts.

Each job really runs: Linux namespaces per host (own /opt/ml, host name algo-N, /etc/hosts,
port 7777), AWS's in-container toolkit or our launcher, real torch.distributed (gloo on CPU).
"""

from __future__ import annotations

import io
import json
import tarfile
import textwrap
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.hooks.local_training import LocalTrainingHook
from airflow_dist_training.local.hosts import probe

from .conftest import script_spec

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().namespaces, reason=f"no Linux namespaces here: {probe().why}"),
]


def run(tmp_path: Path, spec: dict[str, Any], name: str) -> tuple[dict[str, Any], list[str], Path]:
    root = tmp_path / "root"
    lines: list[str] = []
    result = LocalTrainingHook(root=root, use_s3=False, stop_grace_seconds=5).run_job(
        spec, name, log=lines.append, allow_oversubscribe=True
    )
    return dict(result), lines, root / name


def model_files(result: dict[str, Any]) -> dict[str, str]:
    with tarfile.open(result["model_artifact_uri"].removeprefix("file://")) as tar:
        return {
            m.name: tar.extractfile(m).read().decode(errors="replace")  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


FIXED_PATHS = textwrap.dedent(
    """
    import json, socket
    rows = open("/opt/ml/input/data/train/rows.csv").read().splitlines()
    config = json.load(open("/opt/ml/input/config/resourceconfig.json"))
    host = socket.gethostname()
    assert host == config["current_host"], (host, config)
    open(f"/opt/ml/model/{host}.txt", "w").write(f"{host} saw {len(rows)} rows")
    """
)


@pytest.mark.parametrize("hosts", [2, 3])
def test_a_script_hard_coding_opt_ml_paths_runs_on_every_host(tmp_path: Path, hosts: int) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text("a\nb\nc\n")
    spec = script_spec(
        tmp_path,
        FIXED_PATHS,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": hosts},
        distribution={"strategy": "none"},
        channels={"train": {"type": "s3", "uri": "s3://adt-test-bucket/rows/", "local_source": str(data)}},
    )
    result, lines, _ = run(tmp_path, spec, f"fixed-paths-{hosts}")
    assert result["status"] == "Completed"
    assert model_files(result) == {f"algo-{i}.txt": f"algo-{i} saw 3 rows" for i in range(1, hosts + 1)}
    assert any("toolkit runner" in line for line in lines)  # AWS's own `train` entry point ran it


OWN_RENDEZVOUS = textwrap.dedent(
    """
    import json, os, socket
    import torch, torch.distributed as dist, torch.multiprocessing as mp

    def worker(local_rank, hosts, rank, out):
        dist.init_process_group("gloo", init_method=f"tcp://{hosts[0]}:7777", rank=rank, world_size=len(hosts))
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t)
        open(out, "w").write(json.dumps({"sum": t.item(), "world": dist.get_world_size(), "host": socket.gethostname()}))
        dist.destroy_process_group()

    if __name__ == "__main__":
        hosts = json.loads(os.environ["SM_HOSTS"])
        rank = hosts.index(os.environ["SM_CURRENT_HOST"])
        mp.spawn(worker, args=(hosts, rank, os.path.join(os.environ["SM_MODEL_DIR"], f"r{rank}.json")), nprocs=1)
    """
)


@pytest.mark.parametrize("hosts", [2, 3])
def test_a_script_using_sm_hosts_first_as_rendezvous_on_port_7777(tmp_path: Path, hosts: int) -> None:
    spec = script_spec(
        tmp_path,
        OWN_RENDEZVOUS,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": hosts},
        distribution={"strategy": "none"},
    )
    result, _, _ = run(tmp_path, spec, f"own-rdzv-{hosts}")
    files = {k: json.loads(v) for k, v in model_files(result).items()}
    expected = float(sum(range(1, hosts + 1)))
    assert files == {
        f"r{r}.json": {"sum": expected, "world": hosts, "host": f"algo-{r + 1}"} for r in range(hosts)
    }


DDP = textwrap.dedent(
    """
    import os, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.ones(8, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"step={step} loss={loss.item():.4f}", flush=True)
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
        open(os.path.join(os.environ["SM_MODEL_DIR"], "world.txt"), "w").write(os.environ["WORLD_SIZE"])
    dist.destroy_process_group()
    """
)


def test_the_toolkit_torchrun_runner_trains_ddp_across_two_hosts(tmp_path: Path) -> None:
    spec = script_spec(
        tmp_path,
        DDP,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": 2},
        metric_definitions=[{"name": "loss", "regex": "loss=([0-9.]+)"}],
    )
    result, lines, job = run(tmp_path, spec, "toolkit-ddp")
    text = "\n".join(lines)
    # the toolkit's own command line: SageMaker's master address and port
    assert (
        "torchrun --nnodes 2 --nproc_per_node 1 --master_addr algo-1 --master_port 7777 --node_rank 0" in text
    )
    assert "--node_rank 1" in text
    assert set(model_files(result)) == {"model.pt", "world.txt"}
    assert model_files(result)["world.txt"] == "2"
    assert "loss" in result["final_metrics"]
    assert (job / "output" / "success").exists()
    hyperparameters = json.loads((job / "input" / "config" / "hyperparameters.json").read_text())
    assert hyperparameters["sagemaker_torch_distributed_enabled"] == "true"  # the request's own encoding


MODEL_TRAINER = textwrap.dedent(
    """
    import json, os, torch, torch.distributed as dist
    need = ["SM_HOST_COUNT", "SM_CURRENT_HOST_RANK", "SM_MASTER_ADDR", "SM_MASTER_PORT", "SM_SOURCE_DIR"]
    seen = {k: os.environ[k] for k in need}
    dist.init_process_group("gloo")
    t = torch.tensor([1.0]); dist.all_reduce(t)
    seen.update(sum=t.item(), rank=dist.get_rank(), cwd=os.getcwd(), epochs=os.environ["SM_HP_EPOCHS"])
    path = os.path.join("/opt/ml/output/data", f"rank{dist.get_rank()}.json")
    open(path, "w").write(json.dumps(seen))
    dist.destroy_process_group()
    """
)


@pytest.mark.parametrize("hosts", [2, 3])
def test_a_model_trainer_torchrun_script_runs_in_launcher_mode(tmp_path: Path, hosts: int) -> None:
    spec = script_spec(
        tmp_path,
        MODEL_TRAINER,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": hosts},
        distribution={"strategy": "launcher", "launcher": "torchrun", "processes_per_host": 1},
        hyperparameters={"epochs": 2},
    )
    result, lines, job = run(tmp_path, spec, f"model-trainer-{hosts}")
    assert result["status"] == "Completed"
    for rank in range(hosts):
        folder = job if rank == 0 else job / "hosts" / f"algo-{rank + 1}"
        seen = json.loads((folder / "output" / "data" / f"rank{rank}.json").read_text())
        assert seen == {
            "SM_HOST_COUNT": str(hosts),
            "SM_CURRENT_HOST_RANK": str(rank),
            "SM_MASTER_ADDR": "algo-1",
            "SM_MASTER_PORT": "7777",
            "SM_SOURCE_DIR": "/opt/ml/code",
            "sum": float(hosts),
            "rank": rank,
            "cwd": "/opt/ml/code",
            "epochs": "2",
        }
    assert any("--master-addr=algo-1" in line and "--master-port=7777" in line for line in lines)


def tiny_wheel(folder: Path) -> Path:
    """A real wheel of a one-module package, built here (no network, no build backend)."""
    wheel = folder / "adt_tiny_dep-0.1-py3-none-any.whl"
    files = {
        "adt_tiny_dep/__init__.py": "ANSWER = 42\n",
        "adt_tiny_dep-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: adt-tiny-dep\nVersion: 0.1\n",
        "adt_tiny_dep-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "adt_tiny_dep-0.1.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr("adt_tiny_dep-0.1.dist-info/RECORD", record)
    return wheel


NEEDS_DEP = textwrap.dedent(
    """
    import adt_tiny_dep, socket
    open(f"/opt/ml/model/{socket.gethostname()}.txt", "w").write(str(adt_tiny_dep.ANSWER))
    """
)


def test_requirements_txt_is_installed_into_a_cached_environment(tmp_path: Path) -> None:
    spec = script_spec(
        tmp_path,
        NEEDS_DEP,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": 2},
        distribution={"strategy": "none"},
    )
    code = Path(spec["source"]["source_dir"])
    tiny_wheel(code)
    (code / "requirements.txt").write_text("./adt_tiny_dep-0.1-py3-none-any.whl\n")
    result, lines, _ = run(tmp_path, spec, "requirements-1")
    assert model_files(result) == {"algo-1.txt": "42", "algo-2.txt": "42"}
    assert any("requirements.txt: pip install -r" in line for line in lines)
    envs = list((tmp_path / "root" / "_envs").glob("*/adt_tiny_dep/__init__.py"))
    assert len(envs) == 1
    import importlib.util

    assert importlib.util.find_spec("adt_tiny_dep") is None  # never installed into this environment
    _, again, _ = run(tmp_path, spec, "requirements-2")
    assert any("reusing the cached environment" in line for line in again)


USES_SHIPPED_HELPER = textwrap.dedent(
    """
    import socket
    import checkpoint_helper, mylib
    open(f"/opt/ml/model/{socket.gethostname()}.txt", "w").write(f"{checkpoint_helper.X} {mylib.Y}")
    """
)


def test_source_dependencies_ship_with_the_code_to_every_host(tmp_path: Path) -> None:
    """A helper file and a package from outside source_dir (``source.dependencies``, the SDK's
    ``dependencies``) are importable on each host under AWS's toolkit, as on a stock image."""
    spec = script_spec(
        tmp_path,
        USES_SHIPPED_HELPER,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": 2},
        distribution={"strategy": "none"},
    )
    (tmp_path / "checkpoint_helper.py").write_text("X = 'helper'\n")
    (tmp_path / "lib" / "mylib").mkdir(parents=True)
    (tmp_path / "lib" / "mylib" / "__init__.py").write_text("Y = 'package'\n")
    spec["source"]["dependencies"] = [str(tmp_path / "checkpoint_helper.py"), str(tmp_path / "lib" / "mylib")]
    result, lines, _ = run(tmp_path, spec, "dependencies-1")
    assert model_files(result) == {"algo-1.txt": "helper package", "algo-2.txt": "helper package"}
    assert any("toolkit runner" in line for line in lines)


RANK1_RAISES = textwrap.dedent(
    """
    import os, torch.distributed as dist
    dist.init_process_group("gloo")
    print(f"rank {dist.get_rank()} ready", flush=True)
    if dist.get_rank() == 1:
        raise RuntimeError("rank 1 lost its data shard")
    dist.barrier()
    """
)


def test_rank_1_raising_fails_the_job_like_sagemaker(tmp_path: Path) -> None:
    spec = script_spec(tmp_path, RANK1_RAISES, compute={"instance_type": "ml.m5.xlarge", "instance_count": 2})
    with pytest.raises(TrainingJobError) as info:
        run(tmp_path, spec, "rank1-raises")
    error = info.value
    assert error.status == "Failed"
    assert str(error).startswith("Local training job rank1-raises failed on host algo-2")
    assert "RuntimeError: rank 1 lost its data shard" in str(error)  # the host's last error lines
    reason = error.failure_reason or ""
    # the failing host and its last error line first, then the toolkit's text
    assert reason.startswith(
        "AlgorithmError: algo-2: [rank1]: RuntimeError: rank 1 lost its data shard\nExecuteUserScriptError:\nExitCode 1\n"
    )
    assert "rank 1 lost its data shard" in reason
    assert len(reason) <= 1024  # SageMaker's limit
    failure = tmp_path / "root" / "rank1-raises" / "hosts" / "algo-2" / "output" / "failure"
    assert failure.read_text().startswith("ExecuteUserScriptError:")


HANGS = textwrap.dedent(
    """
    import os, time, torch.distributed as dist
    if os.environ["SM_CURRENT_HOST"] == "algo-1":
        time.sleep(600)  # the master never opens its store
    dist.init_process_group("gloo", init_method="tcp://algo-1:7777", rank=1, world_size=2)
    """
)


def test_a_rendezvous_hang_fails_with_its_cause_not_after_max_runtime(tmp_path: Path) -> None:
    spec = script_spec(
        tmp_path,
        HANGS,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": 2},
        distribution={"strategy": "none"},
        local={"hang_seconds": 15},
    )
    started = time.time()
    with pytest.raises(TrainingJobError) as info:
        run(tmp_path, spec, "hangs")
    assert time.time() - started < 60
    reason = info.value.failure_reason or ""
    assert reason.startswith("AlgorithmError: Rendezvous hang after ")
    assert "nothing listens on algo-1:7777" in reason


SLOW = textwrap.dedent(
    """
    import time
    for i in range(1000):
        print(f"still working {i}", flush=True)
        time.sleep(1)
    """
)


def test_max_runtime_exceeded_comes_with_the_log_tail(tmp_path: Path) -> None:
    spec = script_spec(
        tmp_path, SLOW, distribution={"strategy": "none"}, stopping={"max_runtime_seconds": 20}
    )
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=False, stop_grace_seconds=2)
    job = hook.start_job(spec, "too-slow", log=lambda line: None)
    desc = job.wait(timeout=60)
    assert (desc["TrainingJobStatus"], desc["SecondaryStatus"]) == ("Stopped", "MaxRuntimeExceeded")
    assert desc["FailureReason"].startswith("MaxRuntimeExceeded: Training job timed out after 20 s.")
    assert "still working" in desc["FailureReason"]


def test_launcher_mode_files_are_in_the_store_where_the_request_says(tmp_path: Path) -> None:
    """The local run staged code and launcher files under the request's S3 URIs."""
    spec = script_spec(
        tmp_path,
        "print('hello')\n",
        distribution={"strategy": "launcher", "launcher": "torchrun", "processes_per_host": 1},
    )
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=False)
    sub = hook.submission(spec, "staged-1")
    channels = {
        c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in sub.request["InputDataConfig"]
    }
    code = sub.store.resolve(channels["code"]).path
    assert code is not None and code.is_file()
    with tarfile.open(fileobj=io.BytesIO(code.read_bytes())) as tar:
        assert tar.getnames() == ["t.py"]
    launcher = sub.store.resolve(channels["adt_launcher"] + "adt_launch.py").path
    assert launcher is not None and launcher.read_text().startswith("#!/usr/bin/env python3")
