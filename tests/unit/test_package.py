"""Packaging: provider registration, light imports, the CLI contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

PUBLIC_MODULES = [
    "airflow_dist_training",
    "airflow_dist_training.get_provider_info",
    "airflow_dist_training.spec.training",
    "airflow_dist_training.spec.loading",
    "airflow_dist_training.sagemaker.request",
    "airflow_dist_training.cli",
]
HEAVY = ["boto3", "botocore", "aiobotocore", "torch", "airflow.providers.amazon"]


def test_provider_info_uses_the_distribution_name():
    from airflow_dist_training.get_provider_info import get_provider_info

    info = get_provider_info()
    assert info["package-name"] == "airflow-dist-training"
    assert {"name", "description"} <= set(info)


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_public_module_imports_no_heavy_dependency(module):
    code = f"import sys, {module}\nheavy = [m for m in {HEAVY!r} if m in sys.modules]\nprint(','.join(heavy))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_dist_training.cli", *args], capture_output=True, text=True, cwd=REPO
    )


def test_cli_plan_json_prints_the_exact_request():
    out = _cli("plan", "--json", "--job-name", "job-1", "examples/specs/smp_v2_p4d.yaml")
    assert out.returncode == 0, out.stderr
    request = json.loads(out.stdout)
    assert request["TrainingJobName"] == "job-1"
    assert (
        request["HyperParameters"]["mp_parameters"]
        == '{"hybrid_shard_degree": 16, "tensor_parallel_degree": 2}'
    )


def test_cli_plan_summary_shows_cluster_batch_and_cost():
    out = _cli("plan", "examples/specs/torch_distributed_p4d.yaml")
    assert out.returncode == 0, out.stderr
    assert "Cluster size     16 devices = instances x devices per instance (ml.p4d.24xlarge: 8)" in out.stdout
    assert "Global batch     512 = 16 replicas x 32 per replica" in out.stdout
    assert "Cost bound       <= $7,236.08 (on-demand list prices (us-east-1) x max runtime 24 h x 4 jobs ($1,809.02 each)" in out.stdout


def test_cli_bad_spec_exits_2_with_one_line_per_problem(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nimage: {uri: img}\nsource: {entry_point: train.py, source_dir: s3://bkt/c.tar.gz}\n"
        "role_arn: arn:aws:iam::123456789012:role/R\ncompute: {instance_type: ml.p4d.24xlarge, instance_count: 2}\n"
        "distribution: {strategy: smp_v1, smp: {parameters: {partitions: 0}}}\noutput: {s3_path: s3://bkt/o}\n"
    )
    out = _cli("validate", str(bad))
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"error: {bad}: distribution.smp.parameters.partitions: must be a positive integer (The number of partitions "
        "must be a positive integer.)"
    ]
    assert "Traceback" not in out.stderr


def test_cli_broken_yaml_exits_2_with_line_number(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("name: x\nimage: {uri: img\n")
    out = _cli("validate", str(bad))
    assert out.returncode == 2
    assert out.stderr.startswith(f"error: {bad}: line 3, column 1: invalid YAML")


def test_cli_schema_is_json_schema():
    out = _cli("schema")
    schema = json.loads(out.stdout)
    assert schema["title"] == "TrainingJobSpec"
    assert "distribution" in schema["properties"]


# Every example spec validates and plans for both backends it claims: tests/docs/test_example_specs.py


def test_airflow_providers_list_shows_the_provider(tmp_path):
    import os

    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    airflow = Path(sys.executable).with_name("airflow")
    out = subprocess.run(
        [str(airflow), "providers", "list", "-o", "json"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    # Airflow may print log lines before the JSON document.
    names = {p["package_name"] for p in json.loads(out.stdout[out.stdout.index("[{") :])}
    assert "airflow-dist-training" in names
