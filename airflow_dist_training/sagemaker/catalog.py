"""Catalogs kept as data (``data/*.json``): instance types, on-demand prices, DLC image registries.

Loaded once per process and cached. Pure: no AWS calls.

The instance catalog never blocks new hardware: a type it does not know is a warning, its device
count is assumed from its family, and its cost bound is unknown. ``$ADT_INSTANCE_CATALOG`` names a
user file (same format as ``data/instances.json``, plus ``"prices": {"<region>": {"<type>": usd}}``)
merged over the shipped data. ``scripts/refresh_instance_catalog.py`` regenerates the shipped file.
"""

from __future__ import annotations

import difflib
import json
import os
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
    return json.loads(resources.files("airflow_dist_training.sagemaker").joinpath("data", name).read_text())


USER_CATALOG_ENV = "ADT_INSTANCE_CATALOG"
PRICE_REGION = "us-east-1"  # the region whose prices ship with the package
_FIELDS = ("accelerator", "accelerators", "devices", "vcpus", "memory_gib", "efa", "accelerator_model")


def _user_file() -> str | None:
    return os.environ.get(USER_CATALOG_ENV) or None


@cache
def _user_data(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    from airflow_dist_training.errors import SpecValidationError

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecValidationError(
            [("", f"cannot read the instance catalog override (${USER_CATALOG_ENV}): {exc}")], source=path
        ) from None
    if not isinstance(data, dict):
        raise SpecValidationError([("", "must be a JSON object with instances and/or prices")], source=path)
    return data


def _entry(name: str, fields: Any, source: str) -> InstanceType:
    from airflow_dist_training.errors import SpecValidationError

    guess = assumed_instance(name)
    merged = {f: getattr(guess, f) for f in _FIELDS}
    if not isinstance(fields, dict):
        raise SpecValidationError([(f"instances.{name}", "must be an object of fields")], source=source)
    merged.update({k: v for k, v in fields.items() if k in _FIELDS})
    devices = merged["devices"]
    if not isinstance(devices, int) or isinstance(devices, bool) or devices < 1:
        raise SpecValidationError([(f"instances.{name}.devices", "must be a positive integer")], source=source)
    return InstanceType(name=name, **merged)


@cache
def _catalog(user_file: str | None) -> dict[str, InstanceType]:
    raw = _load("instances.json")["instances"]
    catalog = {name: InstanceType(name=name, **{k: v for k, v in f.items() if k in _FIELDS}) for name, f in raw.items()}
    for name, fields in (_user_data(user_file).get("instances") or {}).items():
        catalog[name] = _entry(name, fields, str(user_file))
    return catalog


def instance_catalog() -> dict[str, InstanceType]:
    return _catalog(_user_file())


def lookup_instance(name: str) -> InstanceType | None:
    return instance_catalog().get(name)


def assumed_instance(name: str) -> InstanceType:
    """What an unknown type probably is: the catalog's row of the same family and size ratio, else a
    guess from the family letter (GPU families: 1 GPU; Trainium: 2 NeuronCores; others: CPU)."""
    family = instance_family(name)
    size = _size_units(name)
    rows = [t for t in _catalog(None).values() if t.family == family and _size_units(t.name)]
    if rows and size:
        # devices grow with the size within a family (g5.12xlarge: 4, g5.48xlarge: 8); take the
        # nearest known size at or below, else the smallest
        below = [t for t in rows if (_size_units(t.name) or 0) <= size]
        ref = max(below, key=lambda t: _size_units(t.name) or 0) if below else min(rows, key=lambda t: _size_units(t.name) or 0)
        return InstanceType(name, ref.accelerator, ref.accelerators, ref.devices, 0, 0, ref.efa, ref.accelerator_model)
    if is_trainium(name):
        return InstanceType(name, "trainium", 1, 2, 0, 0, False, None)
    if is_gpu_family(name):
        return InstanceType(name, "gpu", 1, 1, 0, 0, False, None)
    return InstanceType(name, "cpu", 0, 1, 0, 0, False, None)


def _size_units(name: str) -> float | None:
    """``xlarge`` = 1, ``12xlarge`` = 12, ``large`` = 0.5 (``metal`` and others: unknown)."""
    size = name.rsplit(".", 1)[-1]
    if size == "large":
        return 0.5
    if size == "medium":
        return 0.25
    match = re.fullmatch(r"(\d*)xlarge", size)
    if not match:
        return None
    return float(match.group(1) or 1)


# The shape of every TrainingInstanceType in botocore's SageMaker model: ml.<family>.<size>.
_INSTANCE_SHAPE = re.compile(r"^ml\.[a-z][a-z0-9\-]*\.(nano|micro|small|medium|large|\d*xlarge|metal[a-z0-9\-]*)$")


def is_instance_name(name: str) -> bool:
    """Shaped like a SageMaker instance type (``ml.<family>.<size>``), known to the catalog or not."""
    return bool(_INSTANCE_SHAPE.match(name))


def malformed_instance_message(name: str) -> str:
    close = difflib.get_close_matches(name, list(instance_catalog()), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"{name!r} is not a SageMaker instance type name (ml.<family>.<size>, e.g. ml.g5.xlarge{hint})"


def unknown_instance_message(name: str) -> str:
    close = difflib.get_close_matches(name, list(instance_catalog()), n=3, cutoff=0.8)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    assumed = assumed_instance(name)
    return (
        f"{name} is not in the catalog: cost bound unknown, device count assumed from the family "
        f"({assumed.devices} per instance){hint}; add it to ${USER_CATALOG_ENV} to be exact"
    )


@cache
def price_table() -> dict[str, Any]:
    return _load("prices.json")


def prices_for(region: str) -> dict[str, float]:
    """Known on-demand training prices (USD per hour) in ``region``: shipped, then the user's file."""
    prices = dict(price_table()["regions"].get(region, {}))
    prices.update((_user_data(_user_file()).get("prices") or {}).get(region, {}))
    return prices


def hourly_price(name: str, region: str = PRICE_REGION) -> float | None:
    value = prices_for(region).get(name)
    return float(value) if value is not None else None


@cache
def image_config() -> dict[str, Any]:
    return _load("images.json")


@cache
def sdk_version_lists() -> dict[str, Any]:
    """The SDK's distribution version lists (``sagemaker.fw_utils``), generated into ``sdk_versions.json``."""
    return _load("sdk_versions.json")


@cache
def known_regions() -> frozenset[str]:
    """Regions with SageMaker training images (the DLC registry sets in ``images.json``)."""
    return frozenset(r for registries in image_config()["registry_sets"].values() for r in registries)
