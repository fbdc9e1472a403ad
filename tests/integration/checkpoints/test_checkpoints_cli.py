"""``airflow-dist-training checkpoints list|latest`` on a root holding one complete and one incomplete
checkpoint of each layout, on a local directory and on S3 (moto server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_dist_training.cli import main
from tests import checkpoint_layouts as w

from .conftest import BUCKET, backend_put

pytestmark = pytest.mark.integration

# name -> (layout, complete, the reason it is not)
EXPECTED = {
    "step-000000000001": ("manifest", True, None),
    "step-000000000002": ("manifest", False, "no _MANIFEST.json"),
    "step-000000000100": ("dcp", True, None),
    "step-000000000200": ("dcp", False, "__0_0.distcp: 100 bytes, .metadata references"),
    "checkpoint-500": ("hf-trainer", True, None),
    "checkpoint-1000": ("hf-trainer", False, "model-00002-of-00002.safetensors: missing (listed in"),
    "epoch=0-step=7.ckpt": ("single-file", True, None),
    "epoch=0-step=9.ckpt": ("single-file", False, "empty file"),
}


@pytest.fixture(scope="module", autouse=True)
def _airflow_configured(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Once, outside capture: Airflow prints its test configuration line to stdout when first loaded."""
    main(["checkpoints", "list", str(tmp_path_factory.mktemp("warm"))])


@pytest.fixture(scope="module")
def mixed_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli") / "root"
    w.write_manifest(root, 1)
    w.write_manifest(root, 2, complete=False)
    w.write_dcp(root, 100)
    w.write_dcp(root, 200, complete=False)
    w.write_hf(root, 500)
    w.write_hf(root, 1000, sharded=True, drop=("model-00002-of-00002.safetensors",))
    w.write_single(root, 7)
    w.write_single(root, 9, complete=False)
    return root


@pytest.fixture(params=["file", "s3"])
def root_uri(request: pytest.FixtureRequest, mixed_root: Path) -> str:
    if request.param == "file":
        return str(mixed_root)
    request.getfixturevalue("s3")
    for path in mixed_root.rglob("*"):
        if path.is_file():
            backend_put(BUCKET, f"mixed/{path.relative_to(mixed_root).as_posix()}", path.read_bytes())
    return f"s3://{BUCKET}/mixed/"


def test_list_marks_each_layouts_checkpoints_and_gives_reasons(
    root_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["checkpoints", "list", root_uri, "--json"]) == 0
    out, err = capsys.readouterr()
    listed = {item["name"]: item for item in json.loads(out)}
    assert set(listed) == set(EXPECTED)
    for name, (layout, complete, reason) in EXPECTED.items():
        item = listed[name]
        assert (item["layout"], item["complete"]) == (layout, complete), name
        assert (reason is None) == (item["reasons"] == []), name
        if reason:
            assert reason in item["reasons"][0], (name, item["reasons"])
        assert item["total_bytes"] > 0 or name == "epoch=0-step=9.ckpt"
    assert listed["checkpoint-500"]["metrics"]["eval_loss"] == 1.0
    assert "holds checkpoints of 4 layouts under 'auto'" in err  # a warning: the listing still shows them
    # the table: one line per checkpoint, the reason under an incomplete one
    assert main(["checkpoints", "list", root_uri, "--layout", "dcp"]) == 0
    out = capsys.readouterr().out
    assert "         200  dcp          INCOMPLETE" in out and "why: " in out


def test_latest_and_its_exit_codes(root_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    for layout, step in [("hf-trainer", 500), ("dcp", 100), ("single-file", 7), ("manifest", 1)]:
        assert main(["checkpoints", "latest", root_uri, "--layout", layout, "--json"]) == 0
        found = json.loads(capsys.readouterr().out)
        assert (found["layout"], found["step"], found["complete"]) == (layout, step, True)
    # mixed layouts under auto: which one would a script resume? a clear error, exit 2
    assert main(["checkpoints", "latest", root_uri]) == 2
    assert "set checkpoint.layout (or --layout)" in capsys.readouterr().err
    empty = root_uri.rstrip("/") + "-empty/"
    assert main(["checkpoints", "latest", empty]) == 1
    assert capsys.readouterr().err.endswith(f"no complete checkpoint under {empty}\n")
    assert main(["checkpoints", "list", root_uri, "--layout", "megatron"]) == 2
    assert (
        "registered checkpoint layouts: auto, manifest, dcp, hf-trainer, single-file"
        in capsys.readouterr().err
    )
