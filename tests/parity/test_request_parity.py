"""Our CreateTrainingJob request == the SageMaker SDK v2's, field for field, for every strategy.

Each case plans an example spec with ``plan_training_job`` and builds the same job with the SDK's
estimator (see ``mapping.py``) against a mocked client. The two requests are flattened to
``path -> value`` and compared; the only differences allowed are the named ones below, and each
of them must actually show up (so the list, and docs/parity.md, cannot go stale).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from airflow_dist_training.sagemaker.naming import job_name as derive_job_name
from airflow_dist_training.sagemaker.request import RUN_IDENTITY_TAG, plan_training_job
from tests.parity.cases import REQUEST_CASES, RUN_IDENTITY, RequestCase

MISSING = "<missing>"


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """``{"A": {"B": [1]}}`` -> ``{"A.B[0]": 1}`` (empty containers kept as leaves)."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{path}.{key}" if path else key))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{path}[{i}]"))
        return out
    return {path: value}


def diff(ours: dict[str, Any], sdk: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    a, b = flatten(ours), flatten(sdk)
    return {
        k: (a.get(k, MISSING), b.get(k, MISSING))
        for k in sorted(set(a) | set(b))
        if a.get(k, MISSING) != b.get(k, MISSING)
    }


def render(differences: dict[str, tuple[Any, Any]]) -> str:
    lines = [
        f"  {path}\n      ours: {json.dumps(o)}\n      sdk:  {json.dumps(s)}"
        for path, (o, s) in differences.items()
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class AllowedDifference:
    """A deliberate, documented difference (docs/parity.md): exact path and both exact values."""

    name: str
    path: str
    ours: Any
    sdk: Any
    reason: str


# case id -> the deliberate differences expected in that case (nothing else may differ).
ALLOWED: dict[str, list[AllowedDifference]] = {
    "run_identity_tag": [
        AllowedDifference(
            name="run-identity-tag",
            path="Tags[1].Key",
            ours=RUN_IDENTITY_TAG,
            sdk=MISSING,
            reason="we tag each job with its Airflow run identity so a retry can find its job",
        ),
        AllowedDifference(
            name="run-identity-tag",
            path="Tags[1].Value",
            ours=RUN_IDENTITY,
            sdk=MISSING,
            reason="we tag each job with its Airflow run identity so a retry can find its job",
        ),
    ],
}


def our_request(case: RequestCase) -> dict[str, Any]:
    spec = case.spec
    if case.run_identity:
        # Our job name: sanitised base + run-identity hash (the SDK: base + timestamp); both sides get it.
        name = derive_job_name(spec.name, RUN_IDENTITY)
        assert name == case.job_name, "RequestCase.job_name must use our derivation for run-identity cases"
        plan = plan_training_job(spec, job_name=name, region=case.region, run_identity=RUN_IDENTITY)
    else:
        plan = plan_training_job(spec, job_name=case.job_name, region=case.region)
    return plan.request


@pytest.mark.parametrize("case", REQUEST_CASES, ids=lambda c: c.id)
def test_request_matches_sdk(case: RequestCase, sdk_results: dict[str, Any]) -> None:
    result = sdk_results[case.id]
    assert "request" in result, f"the SDK rejected case {case.id}: {result.get('error')}"
    differences = diff(our_request(case), result["request"])
    allowed = {d.path: d for d in ALLOWED.get(case.id, [])}
    unexpected = {
        p: v for p, v in differences.items() if p not in allowed or (allowed[p].ours, allowed[p].sdk) != v
    }
    assert not unexpected, (
        f"request differs from SDK {result.get('_sdk_version', '')} in {case.id}:\n" + render(unexpected)
    )
    missing = sorted(set(allowed) - set(differences))
    assert not missing, f"allowed differences no longer occur (update ALLOWED and docs/parity.md): {missing}"


def test_every_strategy_is_covered() -> None:
    from airflow_dist_training.spec.training import Strategy

    covered = {c.spec.distribution.strategy for c in REQUEST_CASES}
    # The launcher has no v2 estimator equivalent; see test_launcher_parity.py.
    assert covered == set(Strategy) - {Strategy.LAUNCHER}
