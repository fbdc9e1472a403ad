"""For each invalid spec the SDK rejects, our error contains the SDK's own message text.

Messages are compared whitespace-normalised: the SDK embeds ``\\n`` in its ValueErrors, we print one
line per problem, prefixed with the spec field path.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.request import plan_training_job
from tests.parity.cases import ERROR_CASES, REGION, ErrorCase


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c.id)
def test_error_contains_sdk_message(case: ErrorCase, sdk_results: dict[str, Any]) -> None:
    result = sdk_results[f"error:{case.id}"]
    assert "error" in result, f"the SDK accepted invalid case {case.id}"
    assert normalise(case.sdk_message) in normalise(result["error"]), (
        f"the SDK's message changed: {result['error']!r}"
    )
    with pytest.raises(SpecValidationError) as info:
        plan_training_job(case.spec, job_name="parity-error", region=REGION)
    ours = [normalise(f"{p.path}: {p.message}") for p in info.value.problems]
    sdk_first_sentence = normalise(result["error"])
    assert any(normalise(case.sdk_message) in line for line in ours), (
        f"our errors do not contain the SDK's message.\n  sdk:  {sdk_first_sentence}\n  ours: "
        + "\n        ".join(ours)
    )
