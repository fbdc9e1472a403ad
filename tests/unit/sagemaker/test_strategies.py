"""The strategy registry: every ``Strategy`` member has one record, every consumer reads it, and a
strategy defined outside the package is validated, planned, encoded and planned locally from its
record alone (the walkthrough of ``docs/contributing.md`` is executed here too)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.local.contract import validate_local
from airflow_dist_training.sagemaker import strategies
from airflow_dist_training.sagemaker.request import cluster_facts, plan_training_job
from airflow_dist_training.sagemaker.strategies import (
    STRATEGY_FIELDS,
    LocalRun,
    StrategyContext,
    StrategyRecord,
    check_distribution,
    define_strategy,
    model_parallel_degree,
    record_for,
    register,
    unregister,
)
from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.training import DistributionSpec, Strategy, TrainingJobSpec
from tests.paths import REPO

ROOT = REPO
JOB = "job-0123456789"
REGION = "us-east-1"
BASE: dict[str, Any] = {
    "name": "registry",
    "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
    "source": {"entry_point": "train.py", "source_dir": "s3://my-ml-bucket/code/sourcedir.tar.gz"},
    "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
    "compute": {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
    "output": {"s3_path": "s3://my-ml-bucket/output"},
}


def spec_with(strategy: str, **distribution: Any) -> TrainingJobSpec:
    return load_spec({**BASE, "distribution": {"strategy": strategy, **distribution}})


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.value)
def test_every_strategy_member_goes_through_every_aspect_of_its_record(strategy: Strategy) -> None:
    record = record_for(strategy)
    assert record.strategy is strategy
    assert record.fields <= set(STRATEGY_FIELDS) <= set(DistributionSpec.model_fields)
    assert record.frameworks <= {"pytorch", "tensorflow"}
    assert record.local.launch in ("torchrun", "process")
    spec = spec_with(strategy.value)
    ctx = StrategyContext(spec=spec, image_uri="")
    check_distribution(ctx)  # validation: no KeyError, problems are Problems
    assert all(isinstance(p, Problem) for p in ctx.problems)
    encoded = record.encode(ctx)  # request encoding: sagemaker_* keys with JSON values
    assert all(isinstance(json.loads(v), object) for v in encoded.values())
    assert cluster_facts(spec, ctx.training_group).processes >= 1
    assert model_parallel_degree(spec) >= 1
    problems, _warnings = validate_local(spec, cpu_count=64, s3_available=True, check_paths=False)
    refused = [p.message for p in problems if p.path == "distribution.strategy"]
    assert refused == ([record.local.refusal] if record.local.refusal else [])


def test_registry_has_exactly_the_enum_members() -> None:
    assert set(strategies.REGISTRY.names()) == {s.value for s in Strategy}


def test_an_unknown_strategy_is_a_clear_error_not_a_key_error_deep_inside() -> None:
    with pytest.raises(SpecValidationError) as refused:
        record_for("nope")
    assert str(refused.value).startswith(
        "distribution.strategy: unknown distribution strategy 'nope'; registered strategies: none, smddp,"
    )


# ------------------------------------------------------------------ a strategy defined only in this test


def _toy_keys(ctx: StrategyContext) -> dict[str, str]:
    return {"sagemaker_toy_allreduce_enabled": json.dumps(True)}


def _toy_rule(ctx: StrategyContext) -> None:
    if (ctx.spec.distribution.processes_per_host or 1) > 4:
        ctx.error("distribution.processes_per_host", "toy_allreduce runs at most 4 processes per host")


@pytest.fixture
def toy() -> Iterator[Strategy]:
    strategy = define_strategy("toy_allreduce")
    register(
        StrategyRecord(
            strategy,
            encode=_toy_keys,
            local=LocalRun("torchrun"),
            rules=(_toy_rule,),
            frameworks=frozenset({"pytorch"}),
            fields=frozenset({"custom_mpi_options"}),
            trainium_name="toy_allreduce",
            instance_groups="one_group",
            processes="per_host",
        )
    )
    yield strategy
    unregister(strategy)


def test_a_toy_strategy_is_validated_planned_and_encoded_from_its_record_alone(toy: Strategy) -> None:
    spec = spec_with("toy_allreduce", processes_per_host=2, custom_mpi_options="-x FOO")
    assert spec.distribution.strategy is toy
    plan = plan_training_job(spec, job_name=JOB, region=REGION)
    hyperparameters = plan.request["HyperParameters"]
    assert hyperparameters["sagemaker_toy_allreduce_enabled"] == "true"
    assert hyperparameters["sagemaker_program"] == '"train.py"'
    assert plan.cluster.processes == 2 * 2  # "per_host": processes_per_host is honoured
    assert plan.request["AlgorithmSpecification"]["EnableSageMakerMetricsTimeSeries"] is True


def test_a_toy_strategy_rules_and_shared_rules_apply(toy: Strategy) -> None:
    with pytest.raises(SpecValidationError) as err:
        plan_training_job(
            load_spec(
                {
                    **BASE,
                    "image": {"framework": "tensorflow", "framework_version": "2.16", "py_version": "py310"},
                    "distribution": {"strategy": "toy_allreduce", "processes_per_host": 8, "smp": {}},
                }
            ),
            job_name=JOB,
            region=REGION,
        )
    text = str(err.value)
    assert "distribution.processes_per_host: toy_allreduce runs at most 4 processes per host" in text
    assert "toy_allreduce is only supported with the pytorch framework, not tensorflow" in text
    assert "distribution.smp: is not used by strategy 'toy_allreduce'; it applies to: smp_v1, smp_v2" in text
    # the shared messages are built from the registry, so they name the new strategy
    other = StrategyContext(spec=spec_with("none", custom_mpi_options="-x A"), image_uri="")
    check_distribution(other)
    assert (
        Problem(
            "distribution.custom_mpi_options",
            "is not used by strategy 'none'; it applies to: mpi, pytorchddp, smddp, smp_v1, toy_allreduce",
        )
        in other.problems
    )


def test_a_toy_strategy_plans_locally(
    toy: Strategy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_dist_training.hooks.local_training import LocalTrainingHook

    monkeypatch.setenv("ADT_LOCAL_ISOLATION", "none")  # the project's runner: it computes the SM_* environment

    (tmp_path / "train.py").write_text("print('hi')\n")
    spec = load_spec(
        {
            "name": "toy",
            "image": {"uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1"},
            "source": {"entry_point": "train.py", "source_dir": str(tmp_path)},
            "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 2},
            "distribution": {"strategy": "toy_allreduce", "processes_per_host": 1},
        }
    )
    problems, _ = validate_local(spec, cpu_count=4)
    assert problems == []
    hook = LocalTrainingHook(root=tmp_path / "jobs", base_dir=tmp_path, use_s3=False)
    plan = hook.plan(spec, "toy-job")  # the request executor's plan: what a run executes
    assert json.loads(plan.hyperparameters_file["sagemaker_toy_allreduce_enabled"]) is True
    assert plan.host_plans[0].env["SM_FRAMEWORK_PARAMS"] == '{"sagemaker_toy_allreduce_enabled":true}'


def test_unregistering_the_toy_makes_the_spec_reject_it_again(toy: Strategy) -> None:
    unregister(toy)
    with pytest.raises(SpecValidationError, match=r"distribution\.strategy"):
        spec_with("toy_allreduce")
    with pytest.raises(ValueError, match="built-in"):
        unregister(Strategy.MPI)


# ------------------------------------------------------------------ the contributing walkthrough

FENCE = re.compile(r"^```python\s*\n(.*?)^```", re.M | re.S)


def test_the_contributing_walkthrough_runs(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    blocks = FENCE.findall(text)
    assert len(blocks) >= 2
    namespace: dict[str, Any] = {"__name__": "docs_contributing"}
    try:
        for block in blocks:
            exec(compile(block, "docs/contributing.md", "exec"), namespace)
    finally:
        strategy = namespace.get("RING")
        if isinstance(strategy, Strategy) and strategies.REGISTRY.find(strategy):
            unregister(strategy)
