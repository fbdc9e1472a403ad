"""The exact request the planner builds for every strategy's example spec."""

from __future__ import annotations

import json

import pytest

from airflow_dist_training.sagemaker.request import plan_training_job
from tests.unit.sagemaker.specs import JOB, REGION, example

SCRIPT_MODE = {
    "sagemaker_program": '"train.py"',
    "sagemaker_submit_directory": '"s3://my-ml-bucket/code/sourcedir.tar.gz"',
    "sagemaker_container_log_level": "20",
    "sagemaker_job_name": f'"{JOB}"',
    "sagemaker_region": f'"{REGION}"',
}


def plan(name: str, **kw):
    return plan_training_job(example(name, **kw), job_name=JOB, region=REGION)


def test_torch_distributed_p4d_request_is_exact():
    request = plan("torch_distributed_p4d").request
    assert request == {
        "TrainingJobName": JOB,
        "AlgorithmSpecification": {
            "TrainingInputMode": "File",
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-gpu-py312",
            "MetricDefinitions": [{"Name": "train_loss", "Regex": "loss=([0-9\\.]+)"}],
            "EnableSageMakerMetricsTimeSeries": True,
        },
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "OutputDataConfig": {"S3OutputPath": "s3://my-ml-bucket/output"},
        "ResourceConfig": {"VolumeSizeInGB": 200, "InstanceCount": 2, "InstanceType": "ml.p4d.24xlarge"},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400, "MaxWaitTimeInSeconds": 172800},
        "HyperParameters": {
            **SCRIPT_MODE,
            "epochs": "3",
            "lr": "0.0001",
            "model_name": '"llama-3-8b"',
            "sagemaker_torch_distributed_enabled": "true",
            "sagemaker_instance_type": '"ml.p4d.24xlarge"',
        },
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "FileSystemDataSource": {
                        "FileSystemId": "fs-0123456789abcdef0",
                        "FileSystemType": "FSxLustre",
                        "DirectoryPath": "/abcdefgh/datasets/train",
                        "FileSystemAccessMode": "ro",
                    }
                },
            }
        ],
        "VpcConfig": {"Subnets": ["subnet-0a1b2c3d"], "SecurityGroupIds": ["sg-0a1b2c3d"]},
        "EnableInterContainerTrafficEncryption": True,
        "EnableManagedSpotTraining": True,
        "CheckpointConfig": {"S3Uri": "s3://my-ml-bucket/checkpoints/llm-finetune"},
        "DebugHookConfig": {"S3OutputPath": "s3://my-ml-bucket/output", "CollectionConfigurations": []},
        "ProfilerConfig": {"S3OutputPath": "s3://my-ml-bucket/output", "DisableProfiler": False},
        "Tags": [{"Key": "team", "Value": "ml-platform"}],
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "smddp_p4d",
            {
                "sagemaker_distributed_dataparallel_enabled": "true",
                "sagemaker_instance_type": '"ml.p4d.24xlarge"',
                "sagemaker_distributed_dataparallel_custom_mpi_options": '"-verbose -x NCCL_DEBUG=VERSION"',
                # a local source_dir is packed and uploaded under the job's name
                "sagemaker_submit_directory": f'"s3://my-ml-bucket/{JOB}/source/sourcedir.tar.gz"',
            },
        ),
        (
            "pytorchddp_p3",
            {
                "sagemaker_distributed_dataparallel_enabled": "true",
                "sagemaker_instance_type": '"ml.p3.16xlarge"',
                "sagemaker_distributed_dataparallel_custom_mpi_options": '""',
            },
        ),
        (
            "smddp_p5_torchrun",
            {
                "sagemaker_distributed_dataparallel_enabled": "true",
                "sagemaker_instance_type": '"ml.p5.48xlarge"',
                "sagemaker_distributed_dataparallel_custom_mpi_options": '""',
                "sagemaker_torch_distributed_enabled": "true",
            },
        ),
        (
            "torch_distributed_trn1",
            {"sagemaker_torch_distributed_enabled": "true", "sagemaker_instance_type": '"ml.trn1.32xlarge"'},
        ),
        (
            "smp_v1_p4d",
            {
                "sagemaker_mpi_enabled": "true",
                "sagemaker_mpi_num_of_processes_per_host": "8",
                "sagemaker_mpi_custom_mpi_options": '"-verbose -x NCCL_DEBUG=WARN"',
                "mp_parameters": json.dumps(
                    {
                        "partitions": 2,
                        "microbatches": 4,
                        "ddp": True,
                        "pipeline": "interleaved",
                        "optimize": "speed",
                    }
                ),
                "sagemaker_distributed_dataparallel_enabled": "false",
                "sagemaker_instance_type": '"ml.p4d.24xlarge"',
            },
        ),
        (
            "smp_v2_p4d",
            {
                "mp_parameters": json.dumps({"hybrid_shard_degree": 16, "tensor_parallel_degree": 2}),
                "sagemaker_distributed_dataparallel_enabled": "false",
                "sagemaker_instance_type": '"ml.p4d.24xlarge"',
                "sagemaker_torch_distributed_enabled": "true",
            },
        ),
        (
            "mpi_horovod",
            {
                "sagemaker_mpi_enabled": "true",
                "sagemaker_mpi_num_of_processes_per_host": "4",
                "sagemaker_mpi_custom_mpi_options": '"-x HOROVOD_HIERARCHICAL_ALLREDUCE=1"',
                "model_dir": '"/opt/ml/model"',
                "sagemaker_program": '"train_hvd.py"',
            },
        ),
        (
            "parameter_server_tf",
            {
                "sagemaker_parameter_server_enabled": "true",
                "model_dir": f'"s3://my-ml-bucket/output/{JOB}/model"',
            },
        ),
        (
            "multi_worker_mirrored_tf",
            {
                "sagemaker_multi_worker_mirrored_strategy_enabled": "true",
                "model_dir": f'"s3://my-ml-bucket/output/{JOB}/model"',
            },
        ),
        (
            "heterogeneous_mpi",
            {
                "sagemaker_mpi_enabled": "true",
                "sagemaker_mpi_num_of_processes_per_host": "8",
                "sagemaker_mpi_custom_mpi_options": '""',
                "sagemaker_distribution_instance_groups": '["gpu"]',
                "model_dir": '"/opt/ml/model"',
            },
        ),
    ],
)
def test_strategy_hyperparameters_match_sdk_encoding(name, expected):
    p = plan(name)
    user = {k: json.dumps(v) for k, v in example(name).hyperparameters.items()}
    assert p.request["HyperParameters"] == {**SCRIPT_MODE, **user, **expected}


def test_smp_v2_switches_to_the_smp_image():
    image = plan("smp_v2_p4d").request["AlgorithmSpecification"]["TrainingImage"]
    assert (
        image
        == "658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:2.4.1-gpu-py311-cu121"
    )


def test_trainium_disables_the_profiler():
    assert plan("torch_distributed_trn1").request["ProfilerConfig"] == {"DisableProfiler": True}


def test_heterogeneous_cluster_resource_config_and_channel_groups():
    request = plan("heterogeneous_mpi").request
    assert request["ResourceConfig"] == {
        "VolumeSizeInGB": 30,
        "InstanceGroups": [
            {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2},
            {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1},
        ],
    }
    assert request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["InstanceGroupNames"] == ["data"]


def test_launcher_overrides_entrypoint_and_ships_its_own_channel():
    p = plan("launcher_any_image")
    algorithm = p.request["AlgorithmSpecification"]
    assert algorithm["ContainerEntrypoint"] == ["python3", "/opt/ml/input/data/adt_launcher/adt_launch.py"]
    assert algorithm["ContainerArguments"] == ["--config", "/opt/ml/input/data/adt_launcher/launch.json"]
    assert p.request["HyperParameters"] == {"epochs": "5", "model": "resnet50"}  # unquoted, like ModelTrainer
    assert [c["ChannelName"] for c in p.request["InputDataConfig"]] == ["code", "adt_launcher"]
    assert "DebugHookConfig" not in p.request and "ProfilerConfig" not in p.request
    uploads = {u.s3_uri: u for u in p.uploads}
    config = json.loads(uploads[f"s3://my-ml-bucket/{JOB}/adt_launcher/launch.json"].content)
    assert config["processes_per_host"] == {"ml.g5.48xlarge": 8}
    assert config["entry_point"] == "train.py"
    assert b"torch.distributed.run" in uploads[f"s3://my-ml-bucket/{JOB}/adt_launcher/adt_launch.py"].content


def test_local_source_dir_is_uploaded_where_the_sdk_puts_it():
    p = plan("smddp_p4d")
    assert [(u.kind, u.local_path, u.s3_uri) for u in p.uploads] == [
        ("source", "./src", f"s3://my-ml-bucket/{JOB}/source/sourcedir.tar.gz")
    ]
    assert p.request["HyperParameters"]["sagemaker_submit_directory"] == (
        f'"s3://my-ml-bucket/{JOB}/source/sourcedir.tar.gz"'
    )


def test_network_isolation_ships_code_as_a_channel():
    p = plan("smddp_p4d", network__network_isolation=True)
    assert p.request["EnableNetworkIsolation"] is True
    assert (
        p.request["HyperParameters"]["sagemaker_submit_directory"]
        == '"/opt/ml/input/data/code/sourcedir.tar.gz"'
    )
    code = p.request["InputDataConfig"][-1]
    assert code == {
        "ChannelName": "code",
        "DataSource": {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": f"s3://my-ml-bucket/{JOB}/source/sourcedir.tar.gz",
                "S3DataDistributionType": "FullyReplicated",
            }
        },
    }


def test_checkpoint_local_path_on_distributed_job_drops_debugger_hook():
    p = plan("torch_distributed_p4d", checkpoint__local_path="/opt/ml/checkpoints")
    assert p.request["CheckpointConfig"] == {
        "S3Uri": "s3://my-ml-bucket/checkpoints/llm-finetune",
        "LocalPath": "/opt/ml/checkpoints",
    }
    assert "DebugHookConfig" not in p.request


def test_run_identity_is_tagged_for_reattachment():
    p = plan_training_job(example("smddp_p4d"), job_name=JOB, region=REGION, run_identity="d:t:r:-1")
    assert {"Key": "airflow-dist-training:run-identity", "Value": "d:t:r:-1"} in p.request["Tags"]


def test_image_registry_follows_region():
    p = plan_training_job(example("torch_distributed_p4d"), job_name=JOB, region="cn-north-1")
    assert p.request["AlgorithmSpecification"]["TrainingImage"] == (
        "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/pytorch-training:2.8.0-gpu-py312"
    )
