"""The local executor's reading of a CreateTrainingJob request (no process is started here)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.hooks.local_training import LocalTrainingHook
from airflow_dist_training.local import hosts
from airflow_dist_training.local.executor import JobOptions, LocalExecutor, LocalRequestError
from airflow_dist_training.local.store import RequestStore
from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.spec.loading import load_spec
from tests.paths import REPO


def request(**over: Any) -> dict[str, Any]:
    req: dict[str, Any] = {
        "TrainingJobName": "req-1",
        "AlgorithmSpecification": {
            "TrainingInputMode": "File",
            "TrainingImage": "img/pytorch-training:2.8.0-cpu",
        },
        "RoleArn": "arn:aws:iam::123456789012:role/R",
        "HyperParameters": {
            "sagemaker_program": '"train.py"',
            "sagemaker_submit_directory": '"s3://b/src.tar.gz"',
        },
        "OutputDataConfig": {"S3OutputPath": "s3://b/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
    }
    req.update(over)
    return req


def test_the_local_request_is_the_sagemaker_planners_request(tmp_path: Path) -> None:
    spec = load_spec(REPO / "examples" / "specs" / "local_demo.yaml")
    hook = LocalTrainingHook(root=tmp_path / "root", base_dir=REPO, use_s3=False)
    local = hook.submission(spec, "local-demo-1", check_paths=False, stage=False, region="us-east-1")
    sagemaker = plan_training_job(spec, job_name="local-demo-1", region="us-east-1")
    assert local.request == sagemaker.request
    assert local.request["AlgorithmSpecification"]["ContainerEntrypoint"][0] == "python3"
    # the local stand-ins are mounts under the URIs the request names
    assert (
        local.store.local_uri("s3://adt-demo-bucket/data/train") == (REPO / ".adt-demo/data/train").as_uri()
    )
    assert local.options.processes_per_host == 2


@pytest.mark.parametrize(
    ("hyperparameters", "path", "text"),
    [
        (
            {"sagemaker_mpi_enabled": "true"},
            "HyperParameters.sagemaker_mpi_enabled",
            "nearest local equivalent is distribution.strategy: torch_distributed",
        ),
        (
            {"sagemaker_distributed_dataparallel_enabled": "true"},
            "HyperParameters.sagemaker_distributed_dataparallel_enabled",
            'dist.init_process_group("gloo") on CPU',
        ),
        (
            {"mp_parameters": '{"partitions": 2}'},
            "HyperParameters.mp_parameters",
            "plain PyTorch FSDP or DDP on CPU",
        ),
        (
            {"sagemaker_parameter_server_enabled": "true"},
            "HyperParameters.sagemaker_parameter_server_enabled",
            "PyTorch only",
        ),
    ],
)
def test_strategies_that_need_gpus_or_mpi_are_refused_with_the_nearest_equivalent(
    tmp_path: Path, hyperparameters: dict[str, str], path: str, text: str
) -> None:
    req = request()
    req["HyperParameters"].update(hyperparameters)
    with pytest.raises(LocalRequestError) as info:
        LocalExecutor(tmp_path).start(req)
    assert [p.path for p in info.value.problems] == [path]
    assert text in info.value.problems[0].message
    assert not (tmp_path / "req-1").exists()  # nothing was launched or prepared


def test_launcher_mpirun_is_refused_up_front(tmp_path: Path) -> None:
    store = RequestStore(tmp_path / "buckets")
    store.put_bytes(
        json.dumps({"launcher": "mpirun", "entry_point": "t.py"}).encode(),
        "s3://b/j/adt_launcher/launch.json",
    )
    req = request(
        HyperParameters={},
        AlgorithmSpecification={
            "TrainingInputMode": "File",
            "TrainingImage": "img",
            "ContainerEntrypoint": ["python3", "/opt/ml/input/data/adt_launcher/adt_launch.py"],
            "ContainerArguments": ["--config", "/opt/ml/input/data/adt_launcher/launch.json"],
        },
        InputDataConfig=[
            {
                "ChannelName": "adt_launcher",
                "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://b/j/adt_launcher/"}},
            }
        ],
    )
    with pytest.raises(LocalRequestError) as info:
        LocalExecutor(tmp_path / "jobs", store).start(req)
    assert "launcher mpirun cannot run on the local backend" in str(info.value)
    assert "use launcher: torchrun" in str(info.value)


def test_a_request_without_entry_point_or_program_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LocalRequestError, match="cannot tell what the image would run"):
        LocalExecutor(tmp_path).start(request(HyperParameters={}))


def test_pipe_mode_is_refused(tmp_path: Path) -> None:
    req = request(AlgorithmSpecification={"TrainingInputMode": "Pipe", "TrainingImage": "img"})
    with pytest.raises(LocalRequestError, match="Pipe mode is not simulated locally"):
        LocalExecutor(tmp_path).start(req)


def test_the_toolkit_is_never_imported_in_this_process(tmp_path: Path) -> None:
    LocalExecutor(tmp_path).plan(request(), options=JobOptions(runner="auto"))
    assert "sagemaker_training" not in sys.modules
    assert "sagemaker_pytorch_container" not in sys.modules


def test_store_resolves_mounts_then_the_bucket_folder(tmp_path: Path) -> None:
    store = RequestStore(
        tmp_path / "buckets",
        mounts={"s3://b/data": tmp_path / "data", "s3://b/data/special": tmp_path / "sp"},
    )
    assert store.resolve("s3://b/data/x/y.csv").path == tmp_path / "data" / "x" / "y.csv"
    assert store.resolve("s3://b/data/special/z").path == tmp_path / "sp" / "z"  # the longest mount wins
    assert store.resolve("s3://b/other/k").path == tmp_path / "buckets" / "b" / "other" / "k"
    assert store.resolve("s3://b/data/").path == tmp_path / "data"
    store.put_bytes(b"hi", "s3://b/other/k")
    assert store.get_prefix("s3://b/other", tmp_path / "copy") == 1
    assert (tmp_path / "copy" / "k").read_bytes() == b"hi"
    with pytest.raises(FileNotFoundError, match="s3://b/missing: no such object or prefix"):
        store.get_prefix("s3://b/missing", tmp_path / "nothing")


def test_the_fallback_warns_once_naming_what_will_not_work() -> None:
    none = hosts.probe("none")
    assert not none.namespaces and none.why == "ADT_LOCAL_ISOLATION=none"
    hosts._WARNED.discard("fallback")
    first = hosts.warn_fallback_once(none)
    assert first is not None
    assert "fixed /opt/ml/... paths" in first and "host names (algo-1, SM_HOSTS, SM_MASTER_ADDR)" in first
    assert hosts.warn_fallback_once(none) is None


def test_hosts_file_maps_every_host_to_its_own_loopback_address() -> None:
    assert hosts.hosts_file(["algo-1", "algo-2"]).splitlines()[-2:] == [
        "127.0.0.2\talgo-1",
        "127.0.0.3\talgo-2",
    ]


def test_a_failure_reason_capped_mid_path_keeps_no_piece_of_this_machines_path() -> None:
    from airflow_dist_training.local.supervisor import without_cut_path

    env = "/root/.cache/airflow-dist-training/job-envs/pytorch"
    capped = 'AlgorithmError: algo-1: boom\n  File "/root/.cache/airflow-dist-training/job-e'
    assert without_cut_path(capped, env, "/opt/conda") == 'AlgorithmError: algo-1: boom\n  File "/opt/conda'
    # a whole path is the caller's plain replace; unrelated text stays as it is
    assert without_cut_path("ExecuteUserScriptError: /root is read-only", env, "/opt/conda").endswith("read-only")


def test_the_request_plan_names_where_each_artifact_goes_and_what_it_cannot_honour(tmp_path: Path) -> None:
    rp = LocalExecutor(tmp_path).plan(
        request(CheckpointConfig={"S3Uri": "s3://b/ckpt", "LocalPath": "/data/ckpt"}),
        options=JobOptions(runner="builtin", processes_per_host=2),
    )
    assert (rp.mode, rp.plan.hosts, rp.plan.torchrun_hosts) == ("builtin", ["algo-1", "algo-2"], [])
    assert rp.model_uri == "s3://b/out/req-1/output/model.tar.gz"
    assert rp.output_uri == "s3://b/out/req-1/output/output.tar.gz"
    assert rp.checkpoint_uri == "s3://b/ckpt" and rp.code_uri == "s3://b/src.tar.gz"
    # the local backend's plan summary shows these to the user before anything runs
    assert rp.warnings == [
        "CheckpointConfig.LocalPath /data/ckpt: the local backend syncs /opt/ml/checkpoints only"
    ]
