"""The parity cases: one spec per strategy/feature, the invalid specs, and the image-URI grid.

A case is an example spec from ``examples/specs/`` plus overrides (deep-merged), so the example
files stay the single source for "what a user writes".
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml

from airflow_dist_training.sagemaker.naming import job_name as derive_job_name
from airflow_dist_training.spec.training import TrainingJobSpec
from tests.paths import REPO

SPECS = REPO / "examples" / "specs"
REGION = "us-west-2"
RUN_IDENTITY = "parity_dag:train:manual__2026-01-01T00:00:00+00:00:-1"


# what we resolve for examples/specs/huggingface_trn1.yaml in us-west-2 (the SDK cannot resolve it)
HF_TRN1_IMAGE = (
    "763104351884.dkr.ecr.us-west-2.amazonaws.com/huggingface-pytorch-training-neuronx:"
    "1.13.1-transformers4.36.2-neuronx-py310-sdk2.18.0-ubuntu20.04"
)
NULL = "<null>"  # an override value that sets the key to None (None itself removes the key)


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        elif value == NULL:
            out[key] = None
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def load(example: str, overrides: dict[str, Any] | None = None) -> TrainingJobSpec:
    data = yaml.safe_load((SPECS / f"{example}.yaml").read_text())
    return TrainingJobSpec.model_validate(_merge(data, overrides or {}))


@dataclass(frozen=True)
class RequestCase:
    id: str
    example: str
    overrides: dict[str, Any] = field(default_factory=dict)
    region: str = REGION
    run_identity: bool = False  # plan with a run identity (adds our run-identity tag)

    @property
    def spec(self) -> TrainingJobSpec:
        return load(self.example, self.overrides)

    @property
    def job_name(self) -> str:
        if self.run_identity:
            return derive_job_name(self.spec.name, RUN_IDENTITY)
        return f"parity-{self.id.replace('_', '-')}"


ALL_OPTIONS = {
    "compute": {"volume_kms_key": "kms-vol", "keep_alive_seconds": 600, "volume_size_gb": 100},
    "environment": {"NCCL_DEBUG": "INFO", "FI_EFA_USE_DEVICE_RDMA": "1"},
    "hyperparameters": {"name": "abc", "flag": True, "cfg": {"a": 1}, "lr": 0.1, "layers": [1, 2]},
    "output": {"kms_key": "kms-out", "compression": "NONE"},
    "max_retry_attempts": 2,
    "tensorboard": {"s3_path": "s3://my-ml-bucket/tb", "local_path": "/opt/ml/output/tensorboard"},
    "tags": {"team": "ml", "cost-center": "42"},
    "channels": {
        "train": {
            "type": "s3",
            "uri": "s3://my-ml-bucket/imagenet/train",
            "distribution": "ShardedByS3Key",
            "input_mode": "FastFile",
            "content_type": "application/x-image",
            "compression": "Gzip",
        },
        "manifest": {"type": "s3", "uri": "s3://my-ml-bucket/m.manifest", "data_type": "ManifestFile"},
    },
}

# Fields added for complete CreateTrainingJob coverage (docs/reference/request-coverage.md).
COVERAGE_OPTIONS = {
    "compute": {"training_plan_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/plan-1"},
    "image": {
        "repository_access_mode": "Vpc",
        "repository_credentials_provider_arn": "arn:aws:lambda:us-east-1:123456789012:function:creds",
    },
    "hyperparameters": {"epochs": 3, "resume_from": NULL},
    "container_log_level": 10,
    "infra_check": True,
    "remote_debug": True,
    "session_tag_chaining": False,
    "channels": {
        "train": None,
        "recordio": {
            "type": "s3",
            "uri": "s3://my-ml-bucket/recordio/train",
            "record_wrapping": "RecordIO",
            "shuffle_seed": 42,
            "input_mode": "Pipe",
        },
        "augmented": {
            "type": "s3",
            "uri": "s3://my-ml-bucket/aug.manifest",
            "data_type": "AugmentedManifestFile",
            "attribute_names": ["source-ref", "label"],
        },
    },
}

REQUEST_CASES = [
    RequestCase("smddp", "smddp_p4d"),
    RequestCase("pytorchddp", "pytorchddp_p3"),
    RequestCase("smddp_p5_torchrun", "smddp_p5_torchrun"),
    RequestCase("torch_distributed_gpu", "torch_distributed_p4d"),
    RequestCase("torch_distributed_trn1", "torch_distributed_trn1"),
    RequestCase("smp_v1", "smp_v1_p4d"),
    RequestCase("smp_v2", "smp_v2_p4d"),
    RequestCase("smp_v2_p5", "smp_v2_p4d", {"compute": {"instance_type": "ml.p5.48xlarge"}}),
    RequestCase("mpi", "mpi_horovod"),
    RequestCase("parameter_server", "parameter_server_tf"),
    RequestCase("multi_worker_mirrored", "multi_worker_mirrored_tf"),
    RequestCase("heterogeneous_mpi", "heterogeneous_mpi"),
    RequestCase(
        "heterogeneous_smddp",
        "smddp_p4d",
        {
            "compute": {
                "instance_type": None,
                "instance_count": None,
                "instance_groups": [
                    {"name": "data", "instance_type": "ml.c5.18xlarge", "instance_count": 2},
                    {"name": "gpu", "instance_type": "ml.p4d.24xlarge", "instance_count": 2},
                ],
            },
            "distribution": {"instance_group": "gpu"},
            "channels": {"train": {"instance_groups": ["data"]}},
        },
    ),
    RequestCase(
        "heterogeneous_torch_distributed",
        "torch_distributed_p4d",
        {
            "compute": {
                "instance_type": None,
                "instance_count": None,
                "instance_groups": [
                    {"name": "a", "instance_type": "ml.p4d.24xlarge", "instance_count": 1},
                    {"name": "b", "instance_type": "ml.g5.48xlarge", "instance_count": 1},
                ],
            },
            "distribution": {"instance_group": "b"},
        },
    ),
    RequestCase(
        "single_group_smddp",  # one group: the SDK uses it as the training group by itself
        "smddp_p4d",
        {
            "compute": {
                "instance_type": None,
                "instance_count": None,
                "instance_groups": [{"name": "gpu", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}],
            },
        },
    ),
    RequestCase(
        "heterogeneous_no_strategy",  # image follows the first GPU group, not the first group
        "torch_distributed_p4d",
        {
            "distribution": {"strategy": "none"},
            "compute": {
                "instance_type": None,
                "instance_count": None,
                "instance_groups": [
                    {"name": "cpu", "instance_type": "ml.c5.18xlarge", "instance_count": 1},
                    {"name": "gpu", "instance_type": "ml.g5.48xlarge", "instance_count": 1},
                ],
            },
        },
    ),
    RequestCase("network_isolation", "torch_distributed_p4d", {"network": {"network_isolation": True}}),
    RequestCase("network_isolation_tf", "multi_worker_mirrored_tf", {"network": {"network_isolation": True}}),
    RequestCase(
        "spot_checkpoint_local_path",
        "torch_distributed_p4d",
        {"checkpoint": {"local_path": "/opt/ml/checkpoints"}},
    ),
    RequestCase("all_options", "smddp_p4d", ALL_OPTIONS),
    RequestCase("coverage_options", "torch_distributed_p4d", COVERAGE_OPTIONS),
    RequestCase("debugger_off", "pytorchddp_p3", {"debugger": {"hook": False, "profiler": False}}),
    RequestCase("none_pytorch", "torch_distributed_p4d", {"distribution": {"strategy": "none"}}),
    RequestCase("none_tensorflow", "mpi_horovod", {"distribution": None, "compute": {"instance_count": 1}}),
    RequestCase(
        "efs_channel",
        "torch_distributed_p4d",
        {
            "channels": {
                "train": {
                    "type": "efs",
                    "file_system_id": "fs-0123456789abcdef0",
                    "directory_path": "/data",
                    "access_mode": "rw",
                    "content_type": None,
                }
            }
        },
    ),
    RequestCase("region_cn", "torch_distributed_p4d", region="cn-north-1"),
    RequestCase("region_debugger_unsupported", "pytorchddp_p3", region="ap-southeast-3"),
    RequestCase("region_govcloud", "mpi_horovod", region="us-gov-west-1"),
    RequestCase("run_identity_tag", "torch_distributed_p4d", run_identity=True),
    # issue 25: the SDK's TensorFlow list has 2.9.2 (generated from fw_utils now)
    RequestCase(
        "smddp_tensorflow_2_9_2",
        "smddp_p4d",
        {"image": {"framework": "tensorflow", "framework_version": "2.9.2", "py_version": "py39"}},
    ),
    # the TensorFlow estimator's distribution is never None: DebugHookConfig dropped on one instance too
    RequestCase(
        "tensorflow_single_checkpoint_local_path",
        "mpi_horovod",
        {
            "distribution": None,
            "compute": {"instance_count": 1},
            "checkpoint": {"s3_uri": "s3://my-ml-bucket/ckpt", "local_path": "/opt/ml/checkpoints"},
        },
    ),
    RequestCase("huggingface_torch_distributed", "huggingface_p4d"),
    RequestCase(
        "huggingface_alias_versions",
        "huggingface_p4d",
        {"image": {"transformers_version": "4.56", "pytorch_version": "2.8"}, "distribution": {"strategy": "none"}},
    ),
    RequestCase("huggingface_pytorchddp", "huggingface_p4d", {"distribution": {"strategy": "pytorchddp"}}),
    RequestCase(
        "huggingface_smddp",
        "huggingface_p4d",
        {
            "image": {"transformers_version": "4.28.1", "pytorch_version": "2.0.0", "py_version": "py310"},
            "distribution": {"strategy": "smddp"},
        },
    ),
    RequestCase(
        "huggingface_smp_v1",
        "huggingface_p4d",
        {
            "image": {"transformers_version": "4.28.1", "pytorch_version": "2.0.0", "py_version": "py310"},
            "distribution": {"strategy": "smp_v1", "processes_per_host": 8, "smp": {"parameters": {"partitions": 2}}},
        },
    ),
    RequestCase(
        "huggingface_tensorflow",
        "huggingface_p4d",
        {
            "image": {"transformers_version": "4.17.0", "pytorch_version": None, "tensorflow_version": "2.6.3", "py_version": "py38"},
            "distribution": {"strategy": "none"},
            "compute": {"instance_type": "ml.p3.16xlarge", "instance_count": 1},
            "checkpoint": {"s3_uri": "s3://my-ml-bucket/ckpt", "local_path": "/opt/ml/checkpoints"},
        },
    ),
    # Trainium: the SDK needs an image_uri for Hugging Face; with ours, the rest of the request is the SDK's
    RequestCase("huggingface_trn1_image_uri", "huggingface_trn1", {"image": {"uri": HF_TRN1_IMAGE}}),
    RequestCase("container_entry_point", "own_entry_point"),
    RequestCase(
        "container_entry_point_framework_image",
        "torch_distributed_p4d",
        {"image": {"uri": "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-team/trainer:1", "framework": None,
                   "framework_version": None, "py_version": None, "container_entry_point": ["bash", "/opt/run.sh"]}},
    ),
]


@dataclass(frozen=True)
class ErrorCase:
    """An invalid spec: the SDK raises ``sdk_message`` (checked), ours must contain it (whitespace-normalised)."""

    id: str
    example: str
    overrides: dict[str, Any]
    sdk_message: str  # the SDK's text, as verified by the driver (substring of str(exc))

    @property
    def spec(self) -> TrainingJobSpec:
        return load(self.example, self.overrides)


ERROR_CASES = [
    ErrorCase(
        "smddp_p5_without_torch_distributed",
        "smddp_p4d",
        {"compute": {"instance_type": "ml.p5.48xlarge"}},
        "SMModelParallel and SMDataParallel currently do not support p5 instances.",
    ),
    ErrorCase(
        "smp_v1_p5",
        "smp_v1_p4d",
        {"compute": {"instance_type": "ml.p5.48xlarge"}},
        "SMModelParallel and SMDataParallel currently do not support p5 instances.",
    ),
    ErrorCase(
        "smddp_unsupported_version",
        "smddp_p4d",
        {"image": {"framework_version": "2.3.0", "py_version": "py311"}},
        "Provided framework_version 2.3.0 is not supported by smdataparallel.",
    ),
    ErrorCase(
        "pytorchddp_unsupported_version",
        "pytorchddp_p3",
        {"image": {"framework_version": "2.8.0", "py_version": "py312"}},
        "Provided framework_version 2.8.0 is not supported by smdataparallel.",
    ),
    ErrorCase(
        "torch_distributed_unsupported_version",
        "torch_distributed_p4d",
        {"image": {"framework_version": "2.4.0", "py_version": "py311"}},
        "Provided framework_version 2.4.0 is not supported by torch_distributed for instance ml.p4d.24xlarge.",
    ),
    ErrorCase(
        "torch_distributed_trn1_version",
        "torch_distributed_trn1",
        {"image": {"uri": None, "framework": "pytorch", "framework_version": "2.1.0", "py_version": "py310"}},
        "Provided framework_version 2.1.0 is not supported by torch_distributed for instance ml.trn1.32xlarge.",
    ),
    ErrorCase(
        "torch_distributed_cpu",
        "torch_distributed_p4d",
        {"compute": {"instance_type": "ml.c5.18xlarge"}},
        "Currently torch_distributed is supported only for GPU and Trainium instances.",
    ),
    ErrorCase(
        "torch_distributed_not_python",
        "torch_distributed_p4d",
        {"source": {"entry_point": "train.sh"}},
        "Unsupported entry point type for the distribution torch_distributed.",
    ),
    ErrorCase(
        "trainium_smdistributed",
        "smddp_p5_torchrun",
        {
            "image": {"uri": "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training-neuronx:2.1.2"},
            "compute": {"instance_type": "ml.trn1.32xlarge"},
            "distribution": {"torch_distributed": False},
        },
        "Provided distribution strategy smdistributed is not supported for Trainium instances.",
    ),
    ErrorCase(
        "trainium_mpi",
        "smddp_p5_torchrun",
        {
            "image": {"uri": "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training-neuronx:2.1.2"},
            "compute": {"instance_type": "ml.trn1.32xlarge"},
            "distribution": {"strategy": "mpi", "torch_distributed": None},
        },
        "Provided distribution strategy mpi is not supported for Trainium instances.",
    ),
    ErrorCase(
        "smp_v1_bad_partitions",
        "smp_v1_p4d",
        {"distribution": {"smp": {"parameters": {"partitions": 0, "microbatches": 4}}}},
        "The number of partitions must be a positive integer.",
    ),
    ErrorCase(
        "smp_v1_bad_microbatches",
        "smp_v1_p4d",
        {"distribution": {"smp": {"parameters": {"partitions": 2, "microbatches": "four"}}}},
        "The number of microbatches must be a positive integer.",
    ),
    ErrorCase(
        "smp_v1_ddp_and_horovod",
        "smp_v1_p4d",
        {"distribution": {"smp": {"parameters": {"partitions": 2, "ddp": True, "horovod": True}}}},
        "'ddp' and 'horovod' cannot be simultaneously enabled.",
    ),
    ErrorCase(
        "smp_v1_no_default_partition",
        "smp_v1_p4d",
        {"distribution": {"smp": {"parameters": {"partitions": 2, "auto_partition": False}}}},
        "default_partition must be supplied if auto_partition is set to False!",
    ),
    ErrorCase(
        "smp_v1_default_partition_too_big",
        "smp_v1_p4d",
        {
            "distribution": {
                "smp": {"parameters": {"partitions": 2, "auto_partition": False, "default_partition": 2}}
            }
        },
        "default_partition must be less than the number of partitions!",
    ),
    ErrorCase(
        "smp_v1_memory_weight",
        "smp_v1_p4d",
        {"distribution": {"smp": {"parameters": {"partitions": 2, "memory_weight": 1.5}}}},
        "memory_weight must be between 0.0 and 1.0!",
    ),
    ErrorCase(
        "mwms_tf_2_8",
        "multi_worker_mirrored_tf",
        {"image": {"framework_version": "2.8", "py_version": "py39"}},
        "Multi Worker Mirrored Strategy is only supported from framework_version 2.9 but received 2.8",
    ),
    ErrorCase(
        "mwms_pytorch",
        "multi_worker_mirrored_tf",
        {"image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"}},
        "Multi Worker Mirrored Strategy is currently only supported with dict_keys(['tensorflow']) frameworks but received pytorch",
    ),
    ErrorCase(
        "vpc_subnets_only",
        "torch_distributed_p4d",
        {"network": {"security_group_ids": []}},
        "When setting up custom VPC, both subnets and security_group_ids must be set",
    ),
    ErrorCase(
        "hetero_unknown_group",
        "heterogeneous_mpi",
        {"distribution": {"instance_group": "nope"}},
        "Invalid training instance group nope !",
    ),
    ErrorCase(
        "hetero_two_groups_no_training_group",
        "heterogeneous_mpi",
        {"distribution": {"instance_group": None}},
        "Distribution should only contain one instance group name !",
    ),
    ErrorCase(
        "hetero_parameter_server_group",
        "heterogeneous_mpi",
        {"distribution": {"strategy": "parameter_server", "processes_per_host": None}},
        "Don't set training instance groups while no distribution strategies enabled!",
    ),
    ErrorCase(
        "single_group_smp_v2",
        "smp_v2_p4d",
        {
            "compute": {
                "instance_type": None,
                "instance_count": None,
                "instance_groups": [{"name": "gpu", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}],
            },
        },
        "Don't set training instance groups while no distribution strategies enabled!",
    ),
    ErrorCase(
        "trainium_group_torch_distributed",  # issue 25: the named group counts as a second strategy
        "torch_distributed_trn1",
        {
            "compute": {
                "instance_type": None,
                "instance_count": None,
                "instance_groups": [{"name": "trn", "instance_type": "ml.trn1.32xlarge", "instance_count": 2}],
            },
            "distribution": {"instance_group": "trn"},
        },
        "Multiple distribution strategies are not supported for Trainium instances.",
    ),
    ErrorCase(
        "huggingface_smddp_unsupported_version",
        "huggingface_p4d",
        {"distribution": {"strategy": "smddp"}},
        "Provided framework_version 2.8.0 is not supported by smdataparallel.",
    ),
    ErrorCase(
        "huggingface_torch_distributed_version",
        "huggingface_p4d",
        {"image": {"transformers_version": "4.6.1", "pytorch_version": "1.8.1", "py_version": "py36"}},
        "Provided framework_version 1.8.1 is not supported by torch_distributed for instance ml.p4d.24xlarge.",
    ),
    ErrorCase(
        "huggingface_torch_distributed_cpu",
        "huggingface_p4d",
        {"compute": {"instance_type": "ml.c5.18xlarge"}},
        "Currently torch_distributed is supported only for GPU and Trainium instances.",
    ),
    ErrorCase(
        "huggingface_trainium_mpi",
        "huggingface_trn1",
        {"image": {"uri": HF_TRN1_IMAGE}, "distribution": {"strategy": "mpi"}},
        "Provided distribution strategy mpi is not supported for Trainium instances.",
    ),
]

# Image-URI grid: (framework, version, py_version, instance type) x regions.
IMAGE_REGIONS = [
    "us-east-1",
    "us-west-2",
    "eu-west-1",
    "ap-southeast-3",
    "cn-north-1",
    "us-gov-west-1",
    "il-central-1",
]
IMAGE_GRID: list[tuple[str, str, str | None, str]] = [
    ("pytorch", "2.8.0", "py312", "ml.p4d.24xlarge"),
    ("pytorch", "2.8", "py312", "ml.g5.2xlarge"),
    ("pytorch", "2.7.1", "py312", "ml.c5.4xlarge"),
    ("pytorch", "2.5.1", "py311", "ml.p5.48xlarge"),
    ("pytorch", "2.4.0", "py311", "ml.p4d.24xlarge"),
    ("pytorch", "2.2.0", "py310", "ml.p3.16xlarge"),
    ("pytorch", "2.0", "py310", "ml.g4dn.12xlarge"),
    ("pytorch", "1.13.1", "py39", "ml.p4d.24xlarge"),
    ("pytorch", "1.12.1", "py38", "ml.m5.xlarge"),
    ("pytorch", "2.8.0", None, "ml.p4d.24xlarge"),
    ("pytorch", "1.11.0", "py38", "ml.trn1.32xlarge"),
    ("pytorch", "1.11", "py38", "ml.trn1n.32xlarge"),
    ("pytorch", "2.1.0", None, "ml.trn1.32xlarge"),  # deliberate: the SDK swaps in 1.11.0, we refuse
    ("pytorch", "1.8.0", None, "ml.p3.2xlarge"),  # two py_versions: py_version required
    ("pytorch", "2.8.0", "py311", "ml.p4d.24xlarge"),  # wrong py_version
    ("pytorch", "9.9.9", "py312", "ml.p4d.24xlarge"),  # unknown version
    ("tensorflow", "2.13.0", "py310", "ml.trn1.32xlarge"),  # no TensorFlow image for Trainium
    ("tensorflow", "2.19.0", "py312", "ml.g5.2xlarge"),
    ("tensorflow", "2.13.0", "py310", "ml.c5.4xlarge"),
    ("tensorflow", "2.13", "py310", "ml.p3.2xlarge"),
    ("tensorflow", "2.9", "py39", "ml.p4d.24xlarge"),
    ("tensorflow", "2.8", "py39", "ml.p4d.24xlarge"),
    ("tensorflow", "2.3.2", "py37", "ml.p3.2xlarge"),
]
# Hugging Face: (transformers version, base framework, base version, py_version, instance type)
HF_IMAGE_GRID: list[tuple[str, str, str, str, str]] = [
    ("4.56.2", "pytorch", "2.8.0", "py312", "ml.p4d.24xlarge"),
    ("4.56", "pytorch", "2.8", "py312", "ml.g5.2xlarge"),
    ("4.49.0", "pytorch", "2.5.1", "py311", "ml.p5.48xlarge"),
    ("4.26.0", "pytorch", "1.13.1", "py39", "ml.p4d.24xlarge"),
    ("4.17.0", "tensorflow", "2.6.3", "py38", "ml.p3.16xlarge"),
    ("4.17", "tensorflow", "2.6", "py38", "ml.g4dn.xlarge"),
    ("4.6.1", "pytorch", "1.7.1", "py36", "ml.p3.2xlarge"),
    ("4.4.2", "pytorch", "1.6.0", "py36", "ml.p3.2xlarge"),  # no container version: cu110-ubuntu18.04
    ("4.56.2", "pytorch", "2.8.0", "py312", "ml.c5.xlarge"),  # refused: GPU images only
    ("4.56.2", "pytorch", "2.7.1", "py312", "ml.p4d.24xlarge"),  # refused: no such base
    ("4.56.2", "pytorch", "2.8.0", "py311", "ml.p4d.24xlarge"),  # refused: py_version
    ("9.9.9", "pytorch", "2.8.0", "py312", "ml.p4d.24xlarge"),  # refused: unknown transformers
]
SMP_V2_GRID: list[tuple[str, str, str]] = [
    ("2.4.1", "py311", "ml.p4d.24xlarge"),
    ("2.3.1", "py310", "ml.p4d.24xlarge"),
    ("2.5.1", "py311", "ml.p5.48xlarge"),
    ("2.2.0", "py310", "ml.p4de.24xlarge"),
    ("2.0.1", "py310", "ml.p4d.24xlarge"),
    ("2.0.1", "py310", "ml.p5.48xlarge"),
    ("2.1.2", "py310", "ml.g5.48xlarge"),
]
SMP_V2_REGIONS = ["us-west-2", "eu-west-1", "ap-northeast-1", "cn-north-1", "af-south-1"]
ALL_REGIONS = [
    "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1",
    "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-4", "ap-southeast-5", "ap-southeast-6",
    "ap-southeast-7", "ca-central-1", "ca-west-1", "cn-northwest-1", "eu-central-1", "eu-central-2", "eu-north-1",
    "eu-south-1", "eu-south-2", "eu-west-2", "eu-west-3", "me-central-1", "me-south-1", "mx-central-1",
    "sa-east-1", "us-east-2", "us-gov-east-1", "us-iso-east-1", "us-isob-east-1", "us-isof-east-1",
    "us-isof-south-1", "us-west-1",
]  # fmt: skip
SMP_V2_DISTRIBUTION = {
    "torch_distributed": {"enabled": True},
    "smdistributed": {"modelparallel": {"enabled": True}},
}


def image_cases() -> list[dict[str, Any]]:
    cases = []
    for framework, version, py_version, instance_type in IMAGE_GRID:
        for region in IMAGE_REGIONS:
            cases.append(
                {
                    "id": f"image:{framework}:{version}:{py_version}:{instance_type}:{region}",
                    "kind": "image",
                    "framework": framework,
                    "version": version,
                    "py_version": py_version,
                    "instance_type": instance_type,
                    "region": region,
                }
            )
    for region in ALL_REGIONS:  # every registry region: account and ECR hostname
        cases.append(
            {
                "id": f"image:pytorch:2.8.0:py312:ml.g5.2xlarge:{region}",
                "kind": "image",
                "framework": "pytorch",
                "version": "2.8.0",
                "py_version": "py312",
                "instance_type": "ml.g5.2xlarge",
                "region": region,
            }
        )
    for version, base, base_version, py_version, instance_type in HF_IMAGE_GRID:
        for region in IMAGE_REGIONS:
            cases.append(
                {
                    "id": f"hf-image:{version}:{base}{base_version}:{py_version}:{instance_type}:{region}",
                    "kind": "image",
                    "framework": "huggingface",
                    "version": version,
                    "base": base,
                    "base_version": base_version,
                    "py_version": py_version,
                    "instance_type": instance_type,
                    "region": region,
                }
            )
    for version, py_version, instance_type in SMP_V2_GRID:
        for region in SMP_V2_REGIONS:
            cases.append(
                {
                    "id": f"smp-image:{version}:{py_version}:{instance_type}:{region}",
                    "kind": "image",
                    "framework": "pytorch",
                    "version": version,
                    "py_version": py_version,
                    "instance_type": instance_type,
                    "region": region,
                    "distribution": SMP_V2_DISTRIBUTION,
                }
            )
    return cases


NAME_BASES = ["my_job", "llm-finetune", "a" * 70]


# The SDK's default output bucket (sagemaker-{region}-{account}): the driver's session returns this name.
SDK_DEFAULT_BUCKET = f"sagemaker-{REGION}-123456789012"


def difference_cases() -> list[dict[str, Any]]:
    """SDK runs behind the deliberate differences (test_deliberate_differences.py)."""
    from tests.parity.mapping import sdk_estimator_case
    from tests.parity.regenerate_images import FW_UTILS_LISTS

    no_output = sdk_estimator_case(
        "difference:default_output", load("torch_distributed_p4d", {"output": None}), job_name="parity-default-output",
        region=REGION,
    )  # fmt: skip
    no_output["default_bucket"] = SDK_DEFAULT_BUCKET
    hf_trn1 = sdk_estimator_case(
        "difference:huggingface_trn1", load("huggingface_trn1"), job_name="parity-hf-trn1", region=REGION
    )
    constants = {"id": "difference:fw_utils", "kind": "constants", "names": sorted(FW_UTILS_LISTS.values())}
    return [no_output, hf_trn1, constants]
