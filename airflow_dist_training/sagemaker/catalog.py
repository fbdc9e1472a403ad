"""Catalogs kept as data (``data/*.json``): instance types, on-demand prices, DLC image registries.

Loaded once per process and cached. Pure: no AWS calls.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

_FAMILY = re.compile(r"^ml[\._]([a-z\d\-]+)")


@dataclass(frozen=True)
class InstanceType:
    name: str
    accelerator: str  # "gpu", "trainium" or "cpu"
    accelerators: int
    devices: int  # default processes per host: GPUs, NeuronCores, or 1
    vcpus: int
    memory_gib: float
    efa: bool
    accelerator_model: str | None

    @property
    def family(self) -> str:
        return instance_family(self.name)


def instance_family(instance_type: str) -> str:
    """``ml.p4d.24xlarge`` -> ``p4d`` (as the SDK's ``validate_distribution_for_instance_type``)."""
    match = _FAMILY.match(instance_type)
    return match.group(1) if match else ""


def is_gpu_family(instance_type: str) -> bool:
    """The SDK's ``_is_gpu_instance``: family starting with p or g."""
    return instance_family(instance_type).startswith(("p", "g")) or instance_type == "local_gpu"


def is_trainium(instance_type: str) -> bool:
    return instance_family(instance_type).startswith("trn")


def _load(name: str) -> dict[str, Any]:
    text = resources.files("airflow_dist_training.sagemaker").joinpath("data", name).read_text()
    return json.loads(text)


@cache
def instance_catalog() -> dict[str, InstanceType]:
    raw = _load("instances.json")["instances"]
    return {name: InstanceType(name=name, **fields) for name, fields in raw.items()}


def lookup_instance(name: str) -> InstanceType | None:
    return instance_catalog().get(name)


def unknown_instance_message(name: str) -> str:
    close = difflib.get_close_matches(name, list(instance_catalog()), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown instance type {name!r} (not in the instance catalog{hint})"


@cache
def price_table() -> dict[str, Any]:
    return _load("prices.json")


def hourly_price(name: str) -> float | None:
    value = price_table()["usd_per_hour"].get(name)
    return float(value) if value is not None else None


@cache
def image_config() -> dict[str, Any]:
    return _load("images.json")


@cache
def known_regions() -> frozenset[str]:
    """Regions with SageMaker training images (the DLC registry sets in ``images.json``)."""
    regions: set[str] = set()
    for registries in image_config()["registry_sets"].values():
        regions.update(registries)
    return frozenset(regions)
