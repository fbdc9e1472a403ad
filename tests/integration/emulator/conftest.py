"""Fixtures of the emulator tests: demo data and a tiny trained model, made once per session."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
BUCKET = "adt-emulator-tests"


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo-data")
    subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "make_dataset.py"),
            "--out",
            str(out),
            "--train",
            "400",
            "--test",
            "200",
        ],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="session")
def model_tarball() -> bytes:
    """A model.tar.gz the demo's evaluate.py can load (untrained weights of the demo MLP)."""
    import torch

    sys.path.insert(0, str(REPO / "examples"))
    from train import build_model

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (
            ("model_config.json", json.dumps({"in_features": 8, "hidden": 16, "classes": 4}).encode()),
            ("model.pt", _state_bytes(torch, build_model(8, 16, 4))),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _state_bytes(torch: Any, model: Any) -> bytes:
    torch.manual_seed(0)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getvalue()
