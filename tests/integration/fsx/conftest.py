"""Integration FSx fixtures: the shared moto server with the FSx fake installed in-process."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "fsx"))

from fake_fsx import FakeFSx


@pytest.fixture
def server_fsx(moto_reset: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeFSx]:
    yield FakeFSx().install(monkeypatch)
