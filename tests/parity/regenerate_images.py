"""Regenerate the SDK-derived data files in airflow_dist_training/sagemaker/data/ from the SageMaker SDK.

``images.json``: DATA only from the SDK's image_uri_config (the ``training`` scope of pytorch.json,
tensorflow.json, pytorch-smp.json, pytorch-neuron.json, huggingface.json and huggingface-neuronx.json:
versions, aliases, py_versions, repositories, per-version registries per region, processors, neuron
container/sdk versions; Hugging Face versions are nested per base framework, as in the SDK).
Identical registry maps are stored once (``registry_sets``) to keep the file small. The resolution
logic lives in ``images.py``.

``sdk_versions.json``: the SDK's distribution version lists (``sagemaker.fw_utils``: SMDDP,
torch_distributed on GPU and Trainium), read from the installed SDK so they cannot drift.

Usage (creates the SDK venv of the parity suite if needed):

    .venv/bin/python tests/parity/regenerate_images.py            # write both files
    .venv/bin/python tests/parity/regenerate_images.py --check    # exit 1 if either is stale
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.paths import REPO

DATA = REPO / "airflow_dist_training" / "sagemaker" / "data"
TARGET = DATA / "images.json"
VERSIONS_TARGET = DATA / "sdk_versions.json"
# our framework key -> the SDK's image_uri_config file
FILES = {
    "pytorch": "pytorch.json",
    "pytorch-neuron": "pytorch-neuron.json",
    "pytorch-smp": "pytorch-smp.json",
    "tensorflow": "tensorflow.json",
}
# Hugging Face: versions are transformers versions, each with one config per base framework
HF_FILES = {"huggingface": "huggingface.json", "huggingface-neuronx": "huggingface-neuronx.json"}
# sdk_versions.json key -> the sagemaker.fw_utils constant
FW_UTILS_LISTS = {
    "smddp": "SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS",
    "torch_distributed_gpu": "TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS",
    "torch_distributed_trainium": "TRAINIUM_SUPPORTED_TORCH_DISTRIBUTED_FRAMEWORK_VERSIONS",
    "trainium_strategies": "TRAINIUM_SUPPORTED_DISTRIBUTION_STRATEGIES",
}
KEEP = ("py_versions", "repository", "container_version", "sdk_versions")


def sdk_config_dir(python: Path) -> tuple[Path, str]:
    out = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, importlib.util as u, pathlib; "
            "print(pathlib.Path(u.find_spec('sagemaker').origin).parent / 'image_uri_config'); "
            "print(m.version('sagemaker'))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return Path(out[0]), out[1]


class _Registries:
    """Identical registry maps stored once, named r1, r2, ..."""

    def __init__(self) -> None:
        self.sets: dict[str, dict[str, str]] = {}
        self._by_content: dict[str, str] = {}

    def intern(self, registries: dict[str, str]) -> str:
        registries = dict(sorted(registries.items()))
        content = json.dumps(registries, sort_keys=True)
        if content not in self._by_content:
            self._by_content[content] = f"r{len(self._by_content) + 1}"
            self.sets[self._by_content[content]] = registries
        return self._by_content[content]


def _huggingface(raw: dict[str, Any], registries: _Registries) -> dict[str, Any]:
    training = raw["training"]
    versions: dict[str, Any] = {}
    for version, vconf in training["versions"].items():
        bases = {}
        for base, bconf in vconf.items():
            if base == "version_aliases":
                continue
            entry = {k: bconf[k] for k in KEEP if k in bconf}
            entry["registries"] = registries.intern(bconf["registries"])
            bases[base] = entry
        versions[version] = {"version_aliases": vconf.get("version_aliases", {}), "bases": bases}
    return {
        "processors": training.get("processors", []),
        "version_aliases": training.get("version_aliases", {}),
        "versions": versions,
    }


def build(config_dir: Path, sdk_version: str) -> dict[str, Any]:
    registry_store = _Registries()
    frameworks: dict[str, Any] = {}
    skipped: list[str] = []
    for key, filename in FILES.items():
        raw = json.loads((config_dir / filename).read_text())
        training = raw["training"] if "training" in raw else raw
        versions: dict[str, Any] = {}
        for version, vconf in training["versions"].items():
            if "repository" not in vconf:  # old py2/py3 split configs (TensorFlow 1.x): out of scope
                skipped.append(f"{key} {version}")
                continue
            entry = {k: vconf[k] for k in KEEP if k in vconf}
            entry["registries"] = registry_store.intern(vconf["registries"])
            versions[version] = entry
        frameworks[key] = {
            "processors": training.get("processors", []),
            "version_aliases": training.get("version_aliases", {}),
            "versions": versions,
        }
    for key, filename in HF_FILES.items():
        frameworks[key] = _huggingface(json.loads((config_dir / filename).read_text()), registry_store)
    return {
        "_comment": (
            f"Generated by tests/parity/regenerate_images.py from sagemaker=={sdk_version} "
            "image_uri_config (training scope). Do not edit by hand."
        ),
        "sdk_version": sdk_version,
        "skipped_versions": skipped,
        "registry_sets": registry_store.sets,
        "frameworks": frameworks,
    }


def sdk_version_lists(python: Path, sdk_version: str) -> dict[str, Any]:
    """The fw_utils version lists, as the installed SDK has them."""
    names = json.dumps(FW_UTILS_LISTS)
    out = subprocess.run(
        [
            str(python),
            "-c",
            "import json, sys; from sagemaker import fw_utils; "
            f"print(json.dumps({{k: getattr(fw_utils, v) for k, v in json.loads({names!r}).items()}}))",
        ],
        check=True,
        capture_output=True,
        text=True,
        env={"SAGEMAKER_SUPPRESS_V2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    ).stdout.strip().splitlines()[-1]
    return {
        "_comment": (
            f"Generated by tests/parity/regenerate_images.py from sagemaker=={sdk_version} "
            "sagemaker.fw_utils. Do not edit by hand."
        ),
        "sdk_version": sdk_version,
        "fw_utils": {k: FW_UTILS_LISTS[k] for k in FW_UTILS_LISTS},
        **json.loads(out),
    }


def _write_or_check(target: Path, text: str, version: str, check: bool) -> bool:
    """Write ``text`` to ``target`` (or, with ``check``, report whether it is stale)."""
    if check:
        stale = not target.exists() or target.read_text() != text
        print(f"{target} is {'STALE' if stale else 'up to date'} (sagemaker=={version})")
        return stale
    target.write_text(text)
    print(f"wrote {target} from sagemaker=={version} ({len(text)} bytes)")
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if images.json differs")
    parser.add_argument("--python", type=Path, help="python of a venv with sagemaker installed")
    args = parser.parse_args()
    if args.python is None:
        sys.path.insert(0, str(REPO))
        from tests.parity.conftest import ensure_sdk_venv

        args.python = ensure_sdk_venv()
    config_dir, version = sdk_config_dir(args.python)
    images = json.dumps(build(config_dir, version), indent=1) + "\n"
    lists = json.dumps(sdk_version_lists(args.python, version), indent=1) + "\n"
    stale = _write_or_check(TARGET, images, version, args.check)
    stale |= _write_or_check(VERSIONS_TARGET, lists, version, args.check)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
