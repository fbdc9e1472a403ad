"""docs/checkpoints.md shows the DCP example's checkpoint functions: each one there is the same code
as in examples/dcp_fsdp/train.py (which tests/integration/dags/test_dcp_fsdp_pipeline.py and the
killed-mid-save tests run), so the page cannot drift from the script."""

from __future__ import annotations

import ast
import re

from tests.paths import REPO

FENCE = re.compile(r"^```python\s*\n(.*?)^```", re.M | re.S)


def _functions(source: str) -> dict[str, str]:
    return {node.name: ast.dump(node) for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}


def test_the_dcp_section_shows_the_examples_functions_as_they_are() -> None:
    page = (REPO / "docs" / "checkpoints.md").read_text(encoding="utf-8")
    [shown] = [block for block in FENCE.findall(page) if "def newest_complete_step" in block]
    documented = _functions(shown)
    script = _functions((REPO / "examples" / "dcp_fsdp" / "train.py").read_text(encoding="utf-8"))
    assert set(documented) == {"newest_complete_step", "save", "resume"}
    for name, code in documented.items():
        assert code == script.get(name), (
            f"docs/checkpoints.md: {name}() differs from examples/dcp_fsdp/train.py"
        )
