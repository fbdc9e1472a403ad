"""The SageMaker container contract as computed by the local backend (no launch).

The per-host plans, files and environments are the request executor's (``LocalTrainingHook.plan``:
the SageMaker planner's request, planned for this machine), i.e. what a run executes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.local.contract import (
    config_files,
    decode_hyperparameter,
    error_excerpt,
    failure_text,
    last_error_line,
    to_cmd_args,
    to_env_value,
    validate_local,
)
from airflow_dist_training.spec.loading import load_spec

# The 31 fixed variables of TT:environment.py#Environment.to_env_vars (contract reference §2.3).
FIXED_SM_VARS = {
    "SM_HOSTS", "SM_NETWORK_INTERFACE_NAME", "SM_HPS", "SM_USER_ENTRY_POINT", "SM_FRAMEWORK_PARAMS",
    "SM_RESOURCE_CONFIG", "SM_INPUT_DATA_CONFIG", "SM_OUTPUT_DATA_DIR", "SM_CHANNELS", "SM_CURRENT_HOST",
    "SM_CURRENT_INSTANCE_TYPE", "SM_CURRENT_INSTANCE_GROUP", "SM_CURRENT_INSTANCE_GROUP_HOSTS",
    "SM_INSTANCE_GROUPS", "SM_INSTANCE_GROUPS_DICT", "SM_DISTRIBUTION_INSTANCE_GROUPS", "SM_IS_HETERO",
    "SM_MODULE_NAME", "SM_LOG_LEVEL", "SM_FRAMEWORK_MODULE", "SM_INPUT_DIR", "SM_INPUT_CONFIG_DIR",
    "SM_OUTPUT_DIR", "SM_NUM_CPUS", "SM_NUM_GPUS", "SM_NUM_NEURONS", "SM_MODEL_DIR", "SM_MODULE_DIR",
    "SM_TRAINING_ENV", "SM_USER_ARGS", "SM_OUTPUT_INTERMEDIATE_DIR",
}  # fmt: skip
# Keys of SM_TRAINING_ENV (contract reference §2.3, verified list).
TRAINING_ENV_KEYS = set(
    "additional_framework_parameters, channel_input_dirs, current_host, current_instance_group, "
    "current_instance_group_hosts, current_instance_type, distribution_hosts, distribution_instance_groups, "
    "framework_module, hosts, hyperparameters, input_config_dir, input_data_config, input_dir, instance_groups, "
    "instance_groups_dict, is_hetero, is_master, is_modelparallel_enabled, is_smddpmprun_installed, "
    "is_smddprun_installed, job_name, log_level, master_hostname, model_dir, module_dir, module_name, "
    "network_interface_name, num_cpus, num_gpus, num_neurons, output_data_dir, output_dir, "
    "output_intermediate_dir, resource_config, topology, user_entry_point".split(", ")
)


def make_spec(tmp_path: Path, **over: Any) -> Any:
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / "train.py").write_text("print('hi')\n")
    (tmp_path / "data").mkdir(exist_ok=True)
    data: dict[str, Any] = {
        "name": "demo",
        "image": {"uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1"},
        "source": {"entry_point": "train.py", "source_dir": str(tmp_path / "code")},
        "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 1},
        "distribution": {"strategy": "torch_distributed", "processes_per_host": 2},
        "hyperparameters": {
            "epochs": 10,
            "lr": 0.001,
            "batch-size": 256,
            "optimizer": "adam",
            "use_amp": True,
            "layers": [64, 32],
            "b": 3,
            "opts": {"b": 2, "a": [1, 2]},
        },
        "environment": {"MY_VAR": "x"},
        "channels": {
            "train": {"type": "s3", "uri": "s3://bkt/train", "local_source": str(tmp_path / "data")},
            "Valid-Set": {"type": "s3", "uri": "s3://bkt/valid", "local_source": str(tmp_path / "data")},
        },
    }
    data.update(over)
    return load_spec(data)


def plan(tmp_path: Path, spec: Any, *, s3_available: bool = False, cpu_count: int = 8) -> Any:
    """The plan a run executes (the request executor's), on a machine with ``cpu_count`` cores,
    in the relocated layout (no namespaces: every host's tree is under the job directory)."""
    from unittest import mock

    from airflow_dist_training.hooks.local_training import LocalTrainingHook

    hook = LocalTrainingHook(root=tmp_path / "root", base_dir=tmp_path, use_s3=s3_available)
    with (
        mock.patch("os.sched_getaffinity", return_value=set(range(cpu_count)), create=True),
        mock.patch.dict("os.environ", {"ADT_LOCAL_ISOLATION": "none"}),
    ):
        return hook.plan(spec, "job-1")


def test_hyperparameters_file_holds_json_encoded_strings_like_the_sdk(tmp_path: Path) -> None:
    p = plan(tmp_path, make_spec(tmp_path))
    hps = p.hyperparameters_file
    assert all(isinstance(v, str) for v in hps.values())
    assert hps["epochs"] == "10"
    assert hps["optimizer"] == '"adam"'
    assert hps["use_amp"] == "true"
    assert hps["layers"] == "[64, 32]"
    assert hps["sagemaker_program"] == '"train.py"'
    assert hps["sagemaker_torch_distributed_enabled"] == "true"
    assert hps["sagemaker_container_log_level"] == "20"
    assert hps["sagemaker_job_name"] == '"job-1"'


def test_user_args_are_sorted_and_formatted_as_the_toolkit_does(tmp_path: Path) -> None:
    p = plan(tmp_path, make_spec(tmp_path))
    assert p.user_args == [
        "-b", "3", "--batch-size", "256", "--epochs", "10", "--layers", "[64, 32]", "--lr", "0.001",
        "--optimizer", "adam", "--opts", "a=[1, 2],b=2", "--use_amp", "True",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "arg", "env"),
    [
        ("10", "10", "10"),
        ("0.10", "0.1", "0.1"),
        ("1e-05", "1e-05", "1e-05"),
        ('"adam"', "adam", "adam"),
        ("adam", "adam", "adam"),
        ("007", "007", "007"),
        ("true", "True", "true"),
        ("True", "True", "True"),
        ("[64, 32]", "[64, 32]", "[64,32]"),
        ('["a", "b c"]', "['a', 'b c']", '["a","b c"]'),
        ('{"b": 2, "a": [1, 2]}', "a=[1, 2],b=2", '{"a":[1,2],"b":2}'),
        ('""', "", ""),
        ("null", "", ""),
    ],
)
def test_worked_examples_of_the_contract_reference(raw: str, arg: str, env: str) -> None:
    value = decode_hyperparameter(raw)
    assert to_cmd_args({"key": value}) == ["--key", arg]
    assert to_env_value(value) == env


def test_environment_has_every_toolkit_variable_with_toolkit_formats(tmp_path: Path) -> None:
    p = plan(tmp_path, make_spec(tmp_path))
    env = p.host_plans[0].env
    job = tmp_path / "root" / "job-1"
    assert FIXED_SM_VARS <= set(env)
    assert env["SM_HOSTS"] == '["algo-1"]'
    assert env["SM_CURRENT_HOST"] == "algo-1"
    assert env["SM_MODEL_DIR"] == str(job / "model")
    assert env["SM_OUTPUT_DATA_DIR"] == str(job / "output" / "data")
    assert env["SM_INPUT_CONFIG_DIR"] == str(job / "input" / "config")
    assert env["SM_CHANNELS"] == '["Valid-Set","train"]'  # code-point order
    assert env["SM_CHANNEL_TRAIN"] == str(job / "input" / "data" / "train")
    assert env["SM_CHANNEL_VALID-SET"] == str(job / "input" / "data" / "Valid-Set")
    assert env["SM_HPS"] == (
        '{"b":3,"batch-size":256,"epochs":10,"layers":[64,32],"lr":0.001,"optimizer":"adam",'
        '"opts":{"a":[1,2],"b":2},"use_amp":true}'
    )
    assert env["SM_HP_BATCH-SIZE"] == "256"
    assert env["SM_HP_USE_AMP"] == "true"
    assert env["SM_HP_OPTIMIZER"] == "adam"
    assert json.loads(env["SM_USER_ARGS"]) == p.user_args
    assert env["SM_NUM_GPUS"] == "0"
    assert env["SM_NUM_CPUS"] == "8"
    assert env["SM_FRAMEWORK_PARAMS"] == (
        '{"sagemaker_instance_type":"ml.g5.2xlarge","sagemaker_torch_distributed_enabled":true}'
    )
    assert env["SM_USER_ENTRY_POINT"] == "train.py"
    assert env["SM_MODULE_NAME"] == "train"
    assert env["SM_CURRENT_INSTANCE_GROUP"] == "homogeneousCluster"
    assert env["SM_DISTRIBUTION_INSTANCE_GROUPS"] == '["homogeneousCluster"]'
    assert env["SM_IS_HETERO"] == "false"
    assert env["SM_CHECKPOINT_DIR"] == str(job / "checkpoints")
    assert env["TRAINING_JOB_NAME"] == "job-1"
    training_env = json.loads(env["SM_TRAINING_ENV"])
    assert set(training_env) == TRAINING_ENV_KEYS
    assert training_env["framework_module"] is None
    assert training_env["is_master"] is True
    assert training_env["hyperparameters"]["batch-size"] == 256


def test_config_files_have_the_platform_shapes(tmp_path: Path) -> None:
    p = plan(tmp_path, make_spec(tmp_path))
    files = config_files(p, p.host_plans[0])
    rc = files["resourceconfig.json"]
    assert rc == {
        "current_host": "algo-1",
        "current_instance_type": "ml.g5.2xlarge",
        "current_group_name": "homogeneousCluster",
        "hosts": ["algo-1"],
        "instance_groups": [
            {
                "instance_group_name": "homogeneousCluster",
                "instance_type": "ml.g5.2xlarge",
                "hosts": ["algo-1"],
            }
        ],
        "network_interface_name": "lo",
    }
    assert files["inputdataconfig.json"]["train"] == {
        "TrainingInputMode": "File",
        "S3DistributionType": "FullyReplicated",
        "RecordWrapperType": "None",
    }


def test_two_hosts_get_their_own_tree_identity_and_node_rank(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, compute={"instance_type": "ml.g5.2xlarge", "instance_count": 2})
    p = plan(tmp_path, spec)
    job = tmp_path / "root" / "job-1"
    h1, h2 = p.host_plans
    assert [h1.host, h2.host] == ["algo-1", "algo-2"]
    assert (h1.node_rank, h2.node_rank) == (0, 1)
    assert h1.env["SM_HOSTS"] == h2.env["SM_HOSTS"] == '["algo-1","algo-2"]'
    assert h2.env["SM_CURRENT_HOST"] == "algo-2"
    assert h2.env["SM_MODEL_DIR"] == str(job / "hosts" / "algo-2" / "model")
    assert h2.resource_config["current_host"] == "algo-2"
    assert json.loads(h2.env["SM_TRAINING_ENV"])["is_master"] is False


def test_heterogeneous_cluster_runs_torchrun_only_in_the_distribution_group(tmp_path: Path) -> None:
    spec = make_spec(
        tmp_path,
        compute={
            "instance_groups": [
                {"name": "gpu", "instance_type": "ml.g5.2xlarge", "instance_count": 1},
                {"name": "cpu", "instance_type": "ml.c5.xlarge", "instance_count": 1},
            ]
        },
        distribution={"strategy": "torch_distributed", "processes_per_host": 1, "instance_group": "gpu"},
    )
    p = plan(tmp_path, spec)
    assert p.host_plans[1].env["SM_IS_HETERO"] == "true"
    assert p.host_plans[1].env["SM_CURRENT_INSTANCE_GROUP"] == "cpu"


def problems(tmp_path: Path, spec: Any, **kw: Any) -> list[str]:
    kw.setdefault("cpu_count", 2)
    found, _ = validate_local(spec, base_dir=tmp_path, **kw)
    return [str(p) for p in found]


def test_fsx_channel_without_local_source_is_rejected(tmp_path: Path) -> None:
    spec = make_spec(
        tmp_path,
        distribution={"strategy": "torch_distributed", "processes_per_host": 1},
        channels={
            "train": {"type": "fsx", "file_system_id": "fs-0123456789abcdef0", "directory_path": "/abcd/data"}
        },
    )
    assert problems(tmp_path, spec) == [
        "channels.train.local_source: an fsx channel needs local_source on the local backend: the local path or "
        "file:// URI standing in for FSx for Lustre fs-0123456789abcdef0:/abcd/data"
    ]


def test_s3_channel_without_local_source_needs_credentials(tmp_path: Path) -> None:
    spec = make_spec(
        tmp_path,
        distribution={"strategy": "torch_distributed", "processes_per_host": 1},
        channels={"train": {"type": "s3", "uri": "s3://bkt/train"}},
    )
    assert problems(tmp_path, spec) == [
        "channels.train.local_source: no local_source and no AWS credentials to download s3://bkt/train; "
        "set local_source to a local path or file:// URI"
    ]
    assert problems(tmp_path, spec, s3_available=True) == []


def test_more_processes_than_cores_needs_an_explicit_opt_in(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, distribution={"strategy": "torch_distributed", "processes_per_host": 4})
    assert problems(tmp_path, spec) == [
        "distribution.processes_per_host: 1 simulated host(s) x 4 process(es) per host = 4 processes, but this "
        "machine has 2 CPU core(s); lower processes_per_host or compute.instance_count, or pass "
        "allow_oversubscribe=True to run more processes than cores"
    ]
    assert problems(tmp_path, spec, allow_oversubscribe=True) == []


@pytest.mark.parametrize("strategy", ["smp_v1", "smp_v2", "mpi", "parameter_server", "multi_worker_mirrored"])
def test_strategies_that_cannot_run_locally_are_rejected_with_the_reason(
    tmp_path: Path, strategy: str
) -> None:
    spec = make_spec(tmp_path, distribution={"strategy": strategy, "processes_per_host": 1})
    found = problems(tmp_path, spec)
    assert len(found) == 1
    assert found[0].startswith(f"distribution.strategy: {strategy} ")
    assert "local backend" in found[0]


def test_smddp_is_refused_with_the_nearest_local_equivalent(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, distribution={"strategy": "smddp", "processes_per_host": 1})
    found, _ = validate_local(spec, cpu_count=2, base_dir=tmp_path)
    assert [str(p) for p in found] == [
        "distribution.strategy: smddp cannot run on the local backend: SMDDP needs NVIDIA GPUs, EFA and "
        "the smdistributed library; the nearest local equivalent is strategy torch_distributed with "
        'dist.init_process_group(backend="gloo") on CPU'
    ]


def test_missing_local_paths_are_reported(tmp_path: Path) -> None:
    spec = make_spec(
        tmp_path,
        distribution={"strategy": "torch_distributed", "processes_per_host": 1},
        channels={"train": {"type": "s3", "uri": "s3://bkt/t", "local_source": "nope"}},
        source={"entry_point": "missing.py", "source_dir": str(tmp_path / "code")},
    )
    assert problems(tmp_path, spec) == [
        f"source.entry_point: {tmp_path / 'code' / 'missing.py'} does not exist",
        f"channels.train.local_source: {tmp_path / 'nope'} does not exist",
    ]


def test_hook_raises_spec_validation_error_before_launch(tmp_path: Path) -> None:
    from airflow_dist_training.hooks.local_training import LocalTrainingHook

    spec = make_spec(tmp_path, distribution={"strategy": "mpi"})
    hook = LocalTrainingHook(root=tmp_path / "root", base_dir=tmp_path, use_s3=False)
    with pytest.raises(SpecValidationError) as info:
        hook.run_job(spec, "job-x")
    assert str(info.value).startswith(
        "local backend: distribution.strategy: mpi cannot run on the local backend"
    )
    assert not (tmp_path / "root" / "job-x").exists()


def test_checkpoint_store_is_the_local_uri(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, checkpoint={"s3_uri": "s3://bkt/ck/demo", "local_uri": "ck"})
    assert plan(tmp_path, spec).checkpoint_store.as_uri() == (tmp_path / "ck").as_uri()


def test_failure_text_and_excerpt_follow_the_toolkit() -> None:
    lines = [
        "epoch=0 loss=1",
        "Traceback (most recent call last):",
        '  File "t.py"',
        "ValueError: boom",
        "ValueError: boom",
    ]
    assert error_excerpt(lines) == "ValueError: boom"
    assert failure_text(2, "ValueError: boom", ["python", "t.py"]) == (
        'ExecuteUserScriptError:\nExitCode 2\nErrorMessage "ValueError: boom"\nCommand "python t.py"'
    )


@pytest.mark.parametrize(
    "pieces",
    [
        ["ModuleNotFoundError", ":", "No module named 'x'"],  # as a busy host's toolkit printed it
        ["ModuleNotFoundError", ": No module named 'x'"],
        ["ModuleNotFoundError:", "", "No module named 'x'"],
        ["ModuleNotFoundError: No module named 'x'"],
    ],
)
def test_the_last_error_line_is_whole_when_the_toolkit_printed_it_in_pieces(pieces: list[str]) -> None:
    lines = ["Traceback (most recent call last):", '  File "/opt/ml/code/t.py", line 1', *pieces, ""]
    assert last_error_line(lines) == "ModuleNotFoundError: No module named 'x'"


def test_an_exception_name_alone_with_no_message_stays_as_it_is() -> None:
    assert last_error_line(["Traceback (most recent call last):", "KeyboardInterrupt"]) == "KeyboardInterrupt"
    assert last_error_line(["step 3", "torch.OutOfMemoryError", "done"]) == "torch.OutOfMemoryError"


def test_the_last_error_line_is_the_scripts_not_the_toolkits_report() -> None:
    toolkit = "2026-12-03 23:29:12,311 sagemaker-training-toolkit"
    lines = [
        f"{toolkit} INFO     Exceptions not imported for SageMaker TF as Tensorflow is not installed.",
        "algo-2 cannot find its shard",  # sys.exit("...") prints only the message
        f"{toolkit} INFO     Waiting for the process to finish and give a return code.",
        f"{toolkit} ERROR    Reporting training FAILURE",
        f"{toolkit} ERROR    ExecuteUserScriptError:",
        "ExitCode 1",
        'ErrorMessage ""',
        'Command "/opt/conda/bin/python train.py"',
        f"{toolkit} ERROR    Encountered exit_code 1",
    ]
    assert last_error_line(lines) == "algo-2 cannot find its shard"
    # the script's stderr and the toolkit's log come through different pipes: either order
    assert last_error_line([*lines[:1], *lines[2:], lines[1]]) == "algo-2 cannot find its shard"
