"""The SageMaker test endpoint's overhead: the same 2-host job through the endpoint vs the local
backend's executor directly, measured side by side, alternating, several rounds.

- **endpoint**: an :class:`~airflow_dist_training.emulator.server.Emulator` on 127.0.0.1; the
  client uploads the code, sends ``CreateTrainingJob`` with boto3 and polls
  ``DescribeTrainingJob`` (every 0.2 s) until ``Completed``. Data, code, checkpoints and the model
  go through the endpoint's S3; logs go to its CloudWatch Logs.
- **local (anchor)**: ``LocalExecutor.start(request).wait()`` with the same request, reading and
  writing a folder standing in for the buckets.

Same request both ways (2 hosts x 1 process, torch_distributed on CPU, the demo's train.py).
Ratio = median(endpoint) / median(local); goal <= 1.3.

``--fsx``: the endpoint's job reads its training data through an FSx for Lustre channel instead
(a file system on the endpoint, the dataset staged once beforehand by a data repository
association and an import task, outside the timing); the local anchor is unchanged.

    .venv/bin/python bench/emulator_overhead.py [--rounds 3] [--epochs 2] [--fsx] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# examples/train.py imports the checkpoint helper, which jobs get with their code (source.dependencies)
HELPER = REPO / "airflow_dist_training" / "checkpointing.py"
BUCKET = "adt-bench"


def request_for(name: str, epochs: int) -> tuple[dict[str, Any], list[Any]]:
    from airflow_dist_training.sagemaker.request import plan_training_job
    from airflow_dist_training.spec.loading import load_spec

    spec = {
        "name": "bench",
        "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
        "source": {"entry_point": "train.py", "source_dir": str(REPO / "examples"), "dependencies": [str(HELPER)]},
        "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 2},
        "distribution": {"strategy": "torch_distributed"},
        "hyperparameters": {"epochs": epochs, "hidden": 16},
        "channels": {"train": {"type": "s3", "uri": f"s3://{BUCKET}/data/train"}},
        "output": {"s3_path": f"s3://{BUCKET}/models"},
        "checkpoint": {"s3_uri": f"s3://{BUCKET}/checkpoints/{name}"},
        "metric_definitions": [{"name": "train:loss", "regex": "epoch=\\d+ loss=([0-9.]+)"}],
    }
    plan = plan_training_job(load_spec(spec), job_name=name, region="us-east-1")
    return plan.request, list(plan.uploads)


def _body(upload: Any) -> bytes:
    from airflow_dist_training.source_archive import pack_source_dir

    if upload.content is not None:
        return bytes(upload.content)
    return pack_source_dir(upload.local_path, upload.dependencies)


def stage_on_fsx(emu: Any) -> dict[str, Any]:
    """A file system on the endpoint with the dataset imported at /bench/train; the FSx channel."""
    ec2, fsx = emu.client("ec2"), emu.client("fsx")
    vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.30.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]
    sg = ec2.create_security_group(GroupName="bench", Description="bench", VpcId=vpc)["GroupId"]
    fs = fsx.create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet["SubnetId"]], SecurityGroupIds=[sg]
    )["FileSystem"]
    fsx.create_data_repository_association(
        FileSystemId=fs["FileSystemId"],
        FileSystemPath="/bench/train",
        DataRepositoryPath=f"s3://{BUCKET}/data/train/",
    )
    task = fsx.create_data_repository_task(
        Type="IMPORT_METADATA_FROM_REPOSITORY", FileSystemId=fs["FileSystemId"], Report={"Enabled": False}
    )["DataRepositoryTask"]
    while fsx.describe_data_repository_tasks(TaskIds=[task["TaskId"]])["DataRepositoryTasks"][0][
        "Lifecycle"
    ] in (
        "PENDING",
        "EXECUTING",
    ):
        time.sleep(0.2)
    mount = fs["LustreConfiguration"]["MountName"]
    return {
        "channel": {
            "FileSystemDataSource": {
                "FileSystemId": fs["FileSystemId"],
                "FileSystemAccessMode": "ro",
                "FileSystemType": "FSxLustre",
                "DirectoryPath": f"/{mount}/bench/train",
            }
        },
        "vpc": {"SecurityGroupIds": [sg], "Subnets": [subnet["SubnetId"]]},
    }


def through_endpoint(
    emu: Any, name: str, epochs: int, data: Path, fsx: dict[str, Any] | None = None
) -> float:
    s3, sm = emu.client("s3"), emu.client("sagemaker")
    request, uploads = request_for(name, epochs)
    if fsx is not None:
        for channel in request["InputDataConfig"]:
            if channel["ChannelName"] == "train":
                channel["DataSource"] = fsx["channel"]
        request["VpcConfig"] = fsx["vpc"]
    for upload in uploads:
        bucket, key = upload.s3_uri[len("s3://") :].split("/", 1)
        s3.put_object(Bucket=bucket, Key=key, Body=_body(upload))
    start = time.perf_counter()
    sm.create_training_job(**request)
    while True:
        desc = sm.describe_training_job(TrainingJobName=name)
        status = desc["TrainingJobStatus"]
        if status in ("Completed", "Failed", "Stopped"):
            break
        time.sleep(0.2)
    elapsed = time.perf_counter() - start
    if status != "Completed":
        raise SystemExit(f"endpoint job {name} ended {status}: {desc.get('FailureReason')}")
    return elapsed


def local_directly(root: Path, name: str, epochs: int, data: Path) -> float:
    from airflow_dist_training.emulator.training import EXECUTOR_OPTIONS
    from airflow_dist_training.local.executor import JobOptions, LocalExecutor
    from airflow_dist_training.local.store import RequestStore

    buckets = root / "buckets"
    request, uploads = request_for(name, epochs)
    for upload in uploads:
        target = buckets / upload.s3_uri[len("s3://") :]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_body(upload))
    target = buckets / BUCKET / "data" / "train" / "data.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes((data / "train" / "data.csv").read_bytes())
    executor = LocalExecutor(
        root / "jobs", store=RequestStore(buckets), options=JobOptions(**EXECUTOR_OPTIONS)
    )
    start = time.perf_counter()
    desc = executor.start(request).wait()
    elapsed = time.perf_counter() - start
    if desc["TrainingJobStatus"] != "Completed":
        raise SystemExit(f"local job {name} ended {desc['TrainingJobStatus']}: {desc.get('FailureReason')}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--fsx", action="store_true", help="the endpoint's job reads an FSx channel")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round: the suite checks the bench still runs")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.epochs = 1, 1
    from airflow_dist_training.emulator.server import Emulator

    with tempfile.TemporaryDirectory(prefix="adt-bench-emu-") as tmp:
        root = Path(tmp)
        subprocess.run(
            [
                sys.executable,
                str(REPO / "examples" / "make_dataset.py"),
                "--out",
                str(root / "data"),
                "--train",
                "800",
                "--test",
                "200",
            ],
            check=True,
            capture_output=True,
        )
        endpoint_times: list[float] = []
        local_times: list[float] = []
        with Emulator(root=root / "emulator") as emu:
            s3 = emu.client("s3")
            s3.create_bucket(Bucket=BUCKET)
            s3.upload_file(str(root / "data" / "train" / "data.csv"), BUCKET, "data/train/data.csv")
            fsx = stage_on_fsx(emu) if args.fsx else None
            for i in range(args.rounds):
                # alternate which goes first, so neither always gets the warmer machine
                order = [("endpoint", endpoint_times), ("local", local_times)]
                for kind, times in order if i % 2 == 0 else reversed(order):
                    name = f"bench-{kind}-{i}"
                    if kind == "endpoint":
                        times.append(through_endpoint(emu, name, args.epochs, root / "data", fsx))
                    else:
                        times.append(local_directly(root / f"local-{i}", name, args.epochs, root / "data"))
                    print(f"  round {i + 1} {kind:8s} {times[-1]:6.2f} s", flush=True)
        me, ml = statistics.median(endpoint_times), statistics.median(local_times)
        print(
            f"2-host job (torch_distributed, 2 x 1 process, {args.epochs} epochs), {args.rounds} alternating rounds"
        )
        print(
            f"  local executor directly  median {ml:6.2f} s  runs {', '.join(f'{x:.2f}' for x in local_times)}"
        )
        channel = "FSx channel" if args.fsx else "S3 channel"
        print(
            f"  through the endpoint     median {me:6.2f} s  runs {', '.join(f'{x:.2f}' for x in endpoint_times)}"
            f"  ({channel})"
        )
        print(f"  ratio endpoint/local = {me / ml:.3f}x  (goal <= 1.30x)")


if __name__ == "__main__":
    main()
