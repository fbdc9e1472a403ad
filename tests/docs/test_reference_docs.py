"""The committed API reference (docs/reference/*.md) is what the docstrings give: compared, never
rewritten by a test; ``scripts/gen_reference.py`` updates it."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
import gen_reference as gen

sys.path.pop(0)


def test_the_committed_reference_pages_are_current() -> None:
    outdated = [str(path.relative_to(REPO)) for path in gen.stale()]
    assert outdated == [], "run scripts/gen_reference.py"


def test_check_names_a_stale_page_and_writes_nothing(tmp_path: Path) -> None:
    pages = gen.render_all()
    for name, text in pages.items():
        (tmp_path / name).write_text(text)
    assert gen.stale(tmp_path) == []
    (tmp_path / "operators.md").write_text(pages["operators.md"].replace("EvaluationOperator", "Renamed"))
    assert gen.stale(tmp_path) == [tmp_path / "operators.md"]
    assert "Renamed" in (tmp_path / "operators.md").read_text()
