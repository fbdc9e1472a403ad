"""Where the repository is, for tests that read its files (examples, docs, dags, scripts)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
