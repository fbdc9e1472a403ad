"""Each invalid case gets one exact, field-path error before anything is launched."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.spec.loading import load_spec

BASE: dict[str, Any] = {
    "name": "unit",
    "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
    "source": {"entry_point": "train.py", "source_dir": "s3://my-ml-bucket/code/sourcedir.tar.gz"},
    "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
    "compute": {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
    "output": {"s3_path": "s3://my-ml-bucket/output"},
}


def spec_with(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        target = data
        *parents, leaf = dotted.split("__")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return data


def errors_of(data: dict[str, Any], job_name: str = "job-1") -> list[str]:
    with pytest.raises(SpecValidationError) as info:
        plan_training_job(load_spec(data), job_name=job_name, region="us-east-1")
    return [str(p) for p in info.value.problems]


FSX = {"type": "fsx", "file_system_id": "fs-0123456789abcdef0", "directory_path": "/mnt1/data"}

CASES = [
    pytest.param(
        {"channels": {"train": FSX}},
        "channels.train: an FSx for Lustre channel needs VPC access: set network.subnets and "
        "network.security_group_ids (in the file system's VPC and Availability Zone)",
        id="fsx-without-vpc",
    ),
    pytest.param(
        {"channels": {"train": {**FSX, "type": "efs"}}},
        "channels.train: an EFS channel needs VPC access: set network.subnets and network.security_group_ids "
        "(in the file system's VPC and Availability Zone)",
        id="efs-without-vpc",
    ),
    pytest.param(
        {"spot": {"enabled": True, "max_wait_seconds": 3600}, "stopping": {"max_runtime_seconds": 7200}},
        "spot.max_wait_seconds: (3600) must be >= stopping.max_runtime_seconds (7200); "
        "the API rejects MaxWaitTimeInSeconds < MaxRuntimeInSeconds",
        id="maxwait-below-maxruntime",
    ),
    pytest.param(
        {"spot": {"enabled": True}},
        "spot.max_wait_seconds: is required for managed spot training (time to wait for capacity plus run time)",
        id="spot-without-maxwait",
    ),
    pytest.param(
        {"spot": {"on_demand_after_interruptions": 2}},
        "spot.on_demand_after_interruptions: is only used with spot.enabled: true",
        id="spot-budget-without-spot",
    ),
    pytest.param(
        {"spot": {"enabled": True, "max_wait_seconds": 172800, "on_demand_after_interruptions": 0}},
        "spot.on_demand_after_interruptions: Input should be greater than or equal to 1",
        id="on-demand-after-zero",
    ),
    pytest.param(
        {"hyperparameters": {f"h{i}": i for i in range(100)}},
        "hyperparameters: the request would carry 105 hyperparameters (100 yours + 5 added for the framework "
        "and strategy); the API allows at most 100",
        id="too-many-hyperparameters",
    ),
    pytest.param(
        {"hyperparameters": {"prompt": "x" * 2600}},
        "hyperparameters.prompt: encodes to 2602 characters; the API allows at most 2500",
        id="hyperparameter-too-long",
    ),
    pytest.param(
        {"environment": {"1BAD": "x"}},
        "environment.1BAD: key must match [a-zA-Z_][a-zA-Z0-9_]*",
        id="env-key-pattern",
    ),
    pytest.param(
        {"environment": {"TOKEN_FILE": "x" * 513}},
        "environment.TOKEN_FILE: value is 513 characters; the API allows at most 512",
        id="env-value-too-long",
    ),
    pytest.param(
        {"network": {"subnets": [f"subnet-{i:08x}" for i in range(17)], "security_group_ids": ["sg-1"]}},
        "network.subnets: has 17 subnets; the API allows 1 to 16",
        id="too-many-subnets",
    ),
    pytest.param(
        {"network": {"subnets": ["subnet-1"], "security_group_ids": [f"sg-{i}" for i in range(6)]}},
        "network.security_group_ids: has 6 security groups; the API allows 1 to 5",
        id="too-many-security-groups",
    ),
    pytest.param(
        {"network": {"subnets": ["subnet-1"]}},
        "network.security_group_ids: When setting up custom VPC, both subnets and security_group_ids must be set",
        id="subnets-without-security-groups",
    ),
    pytest.param(
        {"compute": {"instance_type": "ml.p4d.24xlarg", "instance_count": 2}},
        "compute.instance_type: 'ml.p4d.24xlarg' is not a SageMaker instance type name (ml.<family>.<size>, "
        "e.g. ml.g5.xlarge; did you mean ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p3dn.24xlarge?)",
        id="unknown-instance-type",
    ),
    pytest.param(
        {
            "compute": {"instance_type": "ml.p5.48xlarge", "instance_count": 2},
            "distribution": {"strategy": "smddp"},
            "image": {"uri": "img:1"},
        },
        "distribution.torch_distributed: SMModelParallel and SMDataParallel currently do not support p5 instances. "
        "Set distribution.torch_distributed: true to launch SMDDP through torchrun.",
        id="smddp-on-p5",
    ),
    pytest.param(
        {"distribution": {"strategy": "smddp"}},
        "image.framework_version: Provided framework_version 2.8.0 is not supported by smdataparallel. Please "
        "specify one of the supported framework versions: ['1.6', '1.6.0', '1.7', '1.7.1', '1.8', '1.8.0', "
        "'1.8.1', '1.9', '1.9.0', '1.9.1', '1.10', '1.10.0', '1.10.2', '1.11', '1.11.0', '1.12', '1.12.0', "
        "'1.12.1', '1.13.1', '2.0.0', '2.0.1', '2.1.0', '2.1.2', '2.2.0'] (PyTorch 2.3 and later need an "
        "explicit image.uri for SMDDP)",
        id="smddp-version",
    ),
    pytest.param(
        {
            "distribution": {"strategy": "torch_distributed"},
            "image": {"framework": "pytorch", "framework_version": "2.4.0"},
        },
        "image.framework_version: Provided framework_version 2.4.0 is not supported by torch_distributed for "
        "instance ml.p4d.24xlarge. Please specify one of the supported framework versions:['1.13.1', '2.0.0', "
        "'2.0.1', '2.1.0', '2.1.2', '2.2.0', '2.3.0', '2.3.1', '2.4.1', '2.5.1', '2.6.0', '2.7.1', '2.8.0']",
        id="torch-distributed-gpu-version",
    ),
    pytest.param(
        {
            "distribution": {"strategy": "torch_distributed"},
            "compute": {"instance_type": "ml.c5.4xlarge", "instance_count": 2},
        },
        "compute.instance_type: Currently torch_distributed is supported only for GPU and Trainium instances. "
        "(ml.c5.4xlarge is neither)",
        id="torch-distributed-cpu",
    ),
    pytest.param(
        {
            "distribution": {"strategy": "smddp"},
            "compute": {"instance_type": "ml.trn1.32xlarge", "instance_count": 2},
            "image": {"uri": "img:1"},
        },
        "distribution.strategy: Provided distribution strategy smdistributed is not supported for Trainium "
        "instances. Please specify one of the following supported distribution strategies: ['torch_distributed'] "
        "(or our 'launcher')",
        id="trainium-smddp",
    ),
    pytest.param(
        {"distribution": {"strategy": "smp_v1", "smp": {"parameters": {"partitions": 0}}}},
        "distribution.smp.parameters.partitions: must be a positive integer (The number of partitions must be a "
        "positive integer.)",
        id="smp-partitions",
    ),
    pytest.param(
        {
            "distribution": {
                "strategy": "smp_v1",
                "smp": {"parameters": {"partitions": 2, "ddp": True, "horovod": True}},
            }
        },
        "distribution.smp.parameters.ddp: 'ddp' and 'horovod' cannot be simultaneously enabled.",
        id="smp-ddp-horovod",
    ),
    pytest.param(
        {"distribution": {"strategy": "multi_worker_mirrored"}},
        "distribution.strategy: Multi Worker Mirrored Strategy is currently only supported with "
        "dict_keys(['tensorflow']) frameworks but received pytorch",
        id="mwms-on-pytorch",
    ),
    pytest.param(
        {
            "distribution": {"strategy": "multi_worker_mirrored"},
            "image": {"framework": "tensorflow", "framework_version": "2.8.0"},
        },
        "image.framework_version: Multi Worker Mirrored Strategy is only supported from framework_version 2.9 "
        "but received 2.8.0",
        id="mwms-tf-too-old",
    ),
    pytest.param(
        {"distribution": {"strategy": "torch_distributed", "custom_mpi_options": "-v"}},
        "distribution.custom_mpi_options: is not used by strategy 'torch_distributed'; it applies to: mpi, "
        "pytorchddp, smddp, smp_v1",
        id="mpi-options-with-torchrun",
    ),
    pytest.param(
        {
            "distribution": {"strategy": "torch_distributed"},
            "source": {"entry_point": "train.sh", "source_dir": "s3://my-ml-bucket/code/sourcedir.tar.gz"},
        },
        "source.entry_point: Unsupported entry point type for the distribution torch_distributed. Only python "
        "programs (*.py) are supported.",
        id="torchrun-shell-entry",
    ),
    pytest.param(
        {"distribution": {"strategy": "mpi", "instance_group": "gpu"}},
        "distribution.instance_group: Instance groups not specified in the estimator ! (compute.instance_groups is empty)",
        id="instance-group-without-groups",
    ),
    pytest.param(
        {"output": None},
        "output.s3_path: is required for SageMaker jobs (where model.tar.gz goes)",
        id="no-output-for-sagemaker",
    ),
]


@pytest.mark.parametrize(("changes", "message"), CASES)
def test_invalid_spec_gets_exact_field_path_error(changes, message):
    assert message in errors_of(spec_with(**changes))


def test_invalid_job_name_is_rejected():
    assert errors_of(spec_with(), job_name="my_job") == [
        "name: job name 'my_job' must match [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62} (letters, digits, inner hyphens)"
    ]


def test_all_problems_are_reported_at_once():
    data = spec_with(
        spot={"enabled": True, "max_wait_seconds": 1},
        environment={"bad-key": "x"},
        distribution={"strategy": "smp_v1", "smp": {"parameters": {"partitions": -1}}},
    )
    paths = [p.split(":")[0] for p in errors_of(data)]
    assert paths == ["spot.max_wait_seconds", "environment.bad-key", "distribution.smp.parameters.partitions"]


def test_spot_without_checkpoint_is_a_warning_not_an_error():
    plan = plan_training_job(
        load_spec(spec_with(spot={"enabled": True, "max_wait_seconds": 90000})),
        job_name="job-1",
        region="us-east-1",
    )
    assert [str(w) for w in plan.warnings] == [
        "checkpoint: spot training without checkpointing restarts from scratch after every interruption; set "
        "checkpoint.s3_uri"
    ]


def test_small_per_device_batch_warns_like_the_guide_example():
    # The guide: 1 GPU at batch 64 -> 32 GPUs drops the per-GPU batch to 2 and breaks convergence.
    data = spec_with(
        compute={"instance_type": "ml.p4d.24xlarge", "instance_count": 4},
        distribution={"strategy": "torch_distributed"},
        batch={"global_batch_size": 64, "min_per_device_batch_size": 8},
    )
    plan = plan_training_job(load_spec(data), job_name="job-1", region="us-east-1")
    assert plan.cluster.cluster_size == 32 and plan.cluster.per_device_batch_size == 2
    assert [str(w) for w in plan.warnings] == [
        "batch.min_per_device_batch_size: the per-device batch drops to 2 on 32 replicas (global batch 64), below "
        "your minimum of 8; convergence may break: raise the global batch (and learning rate) or use fewer devices"
    ]


def test_yaml_typo_names_the_field():
    with pytest.raises(SpecValidationError) as info:
        load_spec({**spec_with(), "hyperparamters": {"lr": 1}})
    assert [str(p) for p in info.value.problems] == [
        "hyperparamters: unknown field (check the spelling; see `airflow-dist-training schema`)"
    ]
