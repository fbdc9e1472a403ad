"""Default image URIs: ours (``resolve_image_uri`` over data/images.json) == ``sagemaker.image_uris``.

A grid of framework x version (aliases included) x py_version x instance type x region, plus the
SMP v2 image switch. Where the SDK refuses a combination, we must refuse it too.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_dist_training.sagemaker.images import ImageResolutionError, resolve_image_uri
from airflow_dist_training.spec.training import ImageSpec
from tests.parity.cases import image_cases

CASES = image_cases()
# Deliberate differences (docs/parity.md), by case id prefix -> why.
ALLOWED_SDK_ONLY = {
    "image:pytorch:2.1.0:None:ml.trn1.32xlarge:": (
        "the SDK's pytorch-neuron config has one version (1.11.0) and retrieve() returns it for ANY "
        "requested version; we refuse instead of silently running PyTorch 1.11 (give image.uri)"
    ),
}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_default_image_uri_matches_sdk(case: dict[str, Any], sdk_results: dict[str, Any]) -> None:
    sdk = sdk_results[case["id"]]
    if case["framework"] == "huggingface":
        image = ImageSpec(
            framework="huggingface",
            transformers_version=case["version"],
            py_version=case["py_version"],
            **{f"{case['base']}_version": case["base_version"]},
        )
    else:
        image = ImageSpec(
            framework=case["framework"], framework_version=case["version"], py_version=case["py_version"]
        )
    try:
        ours: str | None = resolve_image_uri(
            image,
            region=case["region"],
            instance_type=case["instance_type"],
            smp_v2=bool(case.get("distribution")),
        )
        our_error = None
    except ImageResolutionError as exc:
        ours, our_error = None, str(exc)
    allowed = next((why for prefix, why in ALLOWED_SDK_ONLY.items() if case["id"].startswith(prefix)), None)
    if allowed is not None:
        assert ours is None, f"we should refuse: {allowed}"
        if case["region"] == "us-west-2":  # where the SDK has the neuron image, it swaps it in
            assert ":1.11.0-neuron-" in sdk.get("uri", ""), (
                f"deliberate difference no longer occurs: {allowed}"
            )
        return
    if "uri" in sdk:
        assert ours == sdk["uri"], f"ours: {ours} (error: {our_error})\n sdk: {sdk['uri']}"
    else:
        assert ours is None, f"the SDK refuses this image ({sdk['error']}) but we resolve {ours}"
