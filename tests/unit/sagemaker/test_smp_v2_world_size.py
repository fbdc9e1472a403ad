"""SMP v2 degrees against the world size (instances x GPUs per instance), the way a user meets them:
``airflow-dist-training validate`` / ``plan`` on a spec file. One test per rule; the wording is SMP's
where its reference has one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_dist_training.cli import main

P4D = "ml.p4d.24xlarge"  # 8 GPUs


def _spec(tmp_path: Path, parameters: dict[str, Any], instances: int = 1) -> Path:
    data = {
        "name": "llama-smp-v2",
        "image": {"framework": "pytorch", "framework_version": "2.4.1", "py_version": "py311"},
        "source": {"entry_point": "train.py", "source_dir": "s3://my-ml-bucket/code/sourcedir.tar.gz"},
        "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "compute": {"instance_type": P4D, "instance_count": instances},
        "distribution": {"strategy": "smp_v2", "smp": {"parameters": parameters}},
        "output": {"s3_path": "s3://my-ml-bucket/output"},
    }
    path = tmp_path / "smp.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], parameters: dict[str, Any], instances: int = 1) -> str:
    """Both commands refuse the spec (exit 2, nothing printed on stdout); the error text."""
    path = _spec(tmp_path, parameters, instances)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert main(["plan", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert captured.err == err
    return err


@pytest.mark.parametrize(
    ("parameters", "instances", "error"),
    [
        pytest.param(  # the first case: 16 shards x TP 8 on one 8-GPU instance
            {"hybrid_shard_degree": 16, "tensor_parallel_degree": 8},
            1,
            "distribution.smp.parameters.hybrid_shard_degree: 16 is larger than the world size 8 "
            "(instances x GPUs per instance): The value must be between 0 and world_size.",
            id="hybrid_shard_degree-range",
        ),
        pytest.param(  # printed "model-parallel degree 16, 1 replicas" before
            {"tensor_parallel_degree": 16},
            1,
            "distribution.smp.parameters.tensor_parallel_degree: 16 is larger than the world size 8 "
            "(instances x GPUs per instance): The value must be between 1 and world_size.",
            id="tensor_parallel_degree-range",
        ),
        pytest.param(  # printed "2 data-parallel replicas" (8 // 3) before
            {"tensor_parallel_degree": 3},
            1,
            "distribution.smp.parameters.tensor_parallel_degree: 3 does not divide the world size 8 "
            "(instances x GPUs per instance): set a value that evenly divides the number of GPUs in your "
            "cluster (one of [1, 2, 4, 8])",
            id="tensor_parallel_degree-divides",
        ),
        pytest.param(
            {"expert_parallel_degree": 3},
            2,
            "distribution.smp.parameters.expert_parallel_degree: 3 does not divide the world size 16",
            id="expert_parallel_degree-divides",
        ),
        pytest.param(
            {"expert_parallel_degree": 32},
            2,
            "distribution.smp.parameters.expert_parallel_degree: 32 is larger than the world size 16",
            id="expert_parallel_degree-range",
        ),
        pytest.param(
            {"context_parallel_degree": 6},
            2,
            "distribution.smp.parameters.context_parallel_degree: 6 does not divide the world size 16",
            id="context_parallel_degree-divides",
        ),
        pytest.param(  # each divides 8, their product does not fit
            {"tensor_parallel_degree": 4, "context_parallel_degree": 4},
            1,
            "distribution.smp.parameters.context_parallel_degree: tensor_parallel_degree x "
            "context_parallel_degree = 4 x 4 = 16 does not divide the world size 8",
            id="tensor-x-context-fits",
        ),
        pytest.param(  # each fits 8 alone; 4 shards x TP 4 do not
            {"hybrid_shard_degree": 4, "tensor_parallel_degree": 4},
            1,
            "distribution.smp.parameters.hybrid_shard_degree: 4 shards x tensor_parallel_degree 4 = 16 does not "
            "fit the world size 8: with tensor parallelism the shards are taken from world_size / "
            "tensor_parallel_degree = 2 GPUs, so hybrid_shard_degree must divide 2 (one of [1, 2]; 0 picks the "
            "largest)",
            id="hybrid-x-tensor-fits",
        ),
        pytest.param(
            {"hybrid_shard_degree": 3},
            1,
            "distribution.smp.parameters.hybrid_shard_degree: 3 shards x tensor_parallel_degree 1 = 3 does not "
            "fit the world size 8",
            id="hybrid_shard_degree-divides",
        ),
        pytest.param(
            {"hybrid_shard_degree": 2, "context_parallel_degree": 4},
            1,
            "distribution.smp.parameters.context_parallel_degree: 4 is larger than the hybrid shard degree 2: "
            "The value must be between 1 and world_size , and must be <= hybrid_shard_degree.",
            id="context-within-hybrid-shard",
        ),
    ],
)
def test_smp_v2_degrees_that_cannot_fit_the_cluster_are_refused_with_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], parameters: dict[str, Any], instances: int, error: str
) -> None:
    assert error in _refused(tmp_path, capsys, parameters, instances)


def test_hybrid_shard_degree_zero_is_smps_default_and_the_replicas_count_tensor_and_context_groups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 0: "the largest possible hybrid_shard_degree"; 16 GPUs / (TP 2 x CP 2) = 4 batches per step
    path = _spec(tmp_path, {"hybrid_shard_degree": 0, "tensor_parallel_degree": 2, "context_parallel_degree": 2}, 2)
    assert main(["plan", str(path)]) == 0
    assert "Processes        16 (model-parallel degree 4, 4 data-parallel replicas)" in capsys.readouterr().out


def test_one_replica_is_one_replica(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(_spec(tmp_path, {"tensor_parallel_degree": 8}))]) == 0
    assert "Processes        8 (model-parallel degree 8, 1 data-parallel replica)\n" in capsys.readouterr().out
