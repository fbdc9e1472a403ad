"""Hardware rules that catch real mistakes before launch (each example of issue 14 reproduced)."""

from __future__ import annotations

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.catalog import hourly_price
from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.sagemaker.summary import render_plan
from airflow_dist_training.spec.loading import load_spec
from tests.unit.sagemaker.specs import JOB, REGION, example

NEURON_IMAGE = (
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training-neuronx:2.1.2-neuronx-py310-sdk2.20.0-ubuntu20.04"
)
GPU_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-gpu-py312"


def _errors(name: str, **overrides) -> list[str]:
    with pytest.raises(SpecValidationError) as info:
        plan_training_job(example(name, **overrides), job_name=JOB, region=REGION)
    return [str(p) for p in info.value.problems]


def _plan(name: str, **overrides):
    return plan_training_job(example(name, **overrides), job_name=JOB, region=REGION)


def test_smddp_on_g4dn_xlarge_is_refused_with_the_sdks_message():
    assert _errors("smddp_p4d", compute__instance_type="ml.g4dn.xlarge") == [
        "compute.instance_type: Provided instance_type ml.g4dn.xlarge is not supported by smdataparallel. "
        "Please specify one of the supported instance types:('ml.p3.16xlarge', 'ml.p3dn.24xlarge', "
        "'ml.p4d.24xlarge', 'ml.p4de.24xlarge', 'ml.p5.48xlarge', 'ml.p5e.48xlarge', 'ml.p5en.48xlarge', "
        "'local_gpu') (use torch_distributed for DDP on other GPU instances)"
    ]


def test_smddp_with_an_explicit_image_on_g5_is_refused_too():
    errors = _errors("smddp_p5_torchrun", compute__instance_type="ml.g5.48xlarge")
    assert errors[0].startswith("compute.instance_type: Provided instance_type ml.g5.48xlarge is not supported")


def test_smddp_without_an_instance_type_gets_the_sdks_message():
    data = example("smddp_p4d").model_dump(mode="json", exclude_unset=True)
    del data["compute"]["instance_type"]
    with pytest.raises(SpecValidationError) as info:
        load_spec(data)
    assert str(info.value) == "compute.instance_type: Please specify an instance_type for smdataparallel."


def test_neuron_image_on_a_gpu_instance_is_refused():
    errors = _errors(
        "torch_distributed_trn1", compute__instance_type="ml.g5.2xlarge", compute__instance_count=1
    )
    assert errors == [
        f"image.uri: {NEURON_IMAGE} is an AWS Neuron image: it runs only on Trainium/Inferentia instances "
        "(ml.trn*, ml.inf*), not on ml.g5.2xlarge"
    ]


def test_gpu_image_on_trainium_is_refused():
    errors = _errors("smddp_p5_torchrun", compute__instance_type="ml.trn1.32xlarge", distribution__strategy="torch_distributed", distribution__torch_distributed=None)
    assert (
        f"image.uri: {GPU_IMAGE} is a CUDA (GPU) image: Trainium instances (ml.trn1.32xlarge) need an AWS Neuron "
        "image (e.g. pytorch-training-neuronx)" in errors
    )


def test_smp_v1_with_more_processes_than_gpus_is_refused():
    assert _errors("smp_v1_p4d", distribution__processes_per_host=64) == [
        "distribution.processes_per_host: 64 processes per host but ml.p4d.24xlarge has 8 GPUs: smp_v1 runs one "
        "process per device; use at most 8"
    ]


def test_mpi_processes_per_host_is_checked_on_gpus_only():
    assert _errors("mpi_horovod", distribution__processes_per_host=8) == [
        "distribution.processes_per_host: 8 processes per host but ml.g5.12xlarge has 4 GPUs: mpi runs one "
        "process per device; use at most 4"
    ]
    plan = _plan("mpi_horovod", compute__instance_type="ml.c5.18xlarge", distribution__processes_per_host=36)
    assert plan.cluster.processes == 72


def test_processes_per_host_on_a_one_per_host_strategy_is_a_warning():
    plan = _plan("parameter_server_tf", distribution__processes_per_host=4)
    assert (
        "distribution.processes_per_host: is not used by strategy 'parameter_server' (one process per host); it "
        "applies to: launcher, mpi, smp_v1" in [str(w) for w in plan.warnings]
    )


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("compute__instance_count", True, "compute.instance_count: must be an integer, not a boolean (true)"),
        ("compute__instance_count", "2", "compute.instance_count: must be an integer, not the string '2'"),
        ("distribution__processes_per_host", True, "distribution.processes_per_host: must be an integer, not a boolean (true)"),
        ("spot__enabled", "yes", "spot.enabled: must be true or false, got 'yes'"),
        ("network__network_isolation", 1, "network.network_isolation: must be true or false, got 1"),
        ("max_retry_attempts", False, "max_retry_attempts: must be an integer, not a boolean (false)"),
    ],
)
def test_strict_integers_and_booleans(path, value, message):
    data = example("torch_distributed_p4d").model_dump(mode="json", exclude_unset=True)
    target = data
    *parents, leaf = path.split("__")
    for part in parents:
        target = target.setdefault(part, {})
    target[leaf] = value
    with pytest.raises(SpecValidationError) as info:
        load_spec(data)
    assert [str(p) for p in info.value.problems] == [message]


def test_multi_node_gpu_strategy_on_a_type_without_efa_warns():
    plan = _plan("torch_distributed_p4d", compute__instance_type="ml.g6.xlarge")
    assert (
        "compute.instance_type: ml.g6.xlarge has no EFA: multi-node gradient exchange runs over TCP and may dominate "
        "step time" in [str(w) for w in plan.warnings]
    )
    assert not [w for w in _plan("torch_distributed_p4d").warnings if "EFA" in str(w)]
    assert not [w for w in _plan("torch_distributed_p4d", compute__instance_type="ml.g5.12xlarge").warnings if "EFA" in str(w)]


def test_summary_counts_one_process_per_gpu_when_processes_per_host_is_ignored():
    plan = _plan(
        "torch_distributed_p4d",
        distribution__processes_per_host=64,
        batch__global_batch_size=None,
        batch__per_device_batch_size=32,
    )
    assert plan.cluster.processes == 16 and plan.cluster.replicas == 16
    text = render_plan(plan)
    assert "Processes        16 (model-parallel degree 1, 16 data-parallel replicas)" in text
    assert "Global batch     512 = 16 replicas x 32 per replica" in text
    assert "starts one process per device" in text


def test_scaling_advice_names_fewer_larger_instances_with_both_cost_bounds():
    plan = _plan("pytorchddp_p3", compute__instance_type="ml.p3.8xlarge", distribution__strategy="torch_distributed")
    hours = 86400 / 3600
    small = 2 * hourly_price("ml.p3.8xlarge") * hours  # type: ignore[operator]
    large = 1 * hourly_price("ml.p3.16xlarge") * hours  # type: ignore[operator]
    assert plan.advice == [
        "the same 8 devices fit on 1 x ml.p3.16xlarge instead of 2 x ml.p3.8xlarge: scale up before scaling out "
        "(the distributed-training guide), the devices then talk over in-instance links; "
        f"cost bound ${large:,.2f} vs ${small:,.2f}"
    ]
    assert f"Advice           {plan.advice[0]}" in render_plan(plan)
    assert _plan("torch_distributed_p4d").advice == []  # 8-GPU instances are already the largest
