"""The Training view's page in headless Chromium, fed by :func:`build_run_view` (no Airflow services).

A sweep of three local members, first running (progress, ETA), then finished (the winner): what
the page draws from the view's JSON, read from its DOM as the e2e tests read it. The e2e test
(tests/e2e/test_training_view_e2e.py) shows the same on a real run on the SageMaker test endpoint;
this one pins the drawing rules of issue 36 item 5 in a few seconds: integer ticks on the epoch
axis, a metric with one value shown as a number, "1 process each".
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.ui.data import build_run_view, member_task_id

pytestmark = pytest.mark.integration

STATIC = Path(__file__).resolve().parents[3] / "airflow_dist_training" / "ui" / "static"
NAMES = ["trial-00", "trial-01", "trial-02"]
EPOCHS = 8  # the spec's total; 3 epochs logged, 2 s apart


def _sweep_view(root: Path, *, finished: bool) -> dict[str, Any]:
    xcoms: dict[tuple[str, str], Any] = {}
    for index, name in enumerate(NAMES):
        job_dir = root / name
        job_dir.mkdir(exist_ok=True)
        lines = []
        for epoch in range(3):
            t = 1000.0 + 2 * epoch
            lines.append({"name": "train:loss", "value": (index + 1) / (epoch + 1), "timestamp": t})
            lines.append({"name": "train:epoch", "value": float(epoch), "timestamp": t + 1e-5})
        lines.append({"name": "train:steps_trained", "value": 256.0, "timestamp": 1005.0})  # once, at the end
        (job_dir / "metrics.jsonl").write_text(
            "".join(json.dumps({**p, "host": "algo-1"}) + "\n" for p in lines)
        )
        (job_dir / "status.json").write_text(json.dumps({"hosts": ["algo-1"], "processes_per_host": 1}))
        train = member_task_id("sweep.members.train", index)
        xcoms[(train, "sagemaker_training_job")] = {
            "backend": "local",
            "job_name": f"mlp-{name}",
            "job_dir": str(job_dir),
        }
        xcoms[(member_task_id("sweep.members.plan", index), "spec")] = {"hyperparameters": {"epochs": EPOCHS}}
        if finished:
            xcoms[(train, "return_value")] = {
                "status": "Completed",
                "final_metrics": {"train:loss": 0.3 * (index + 1)},
            }
    if finished:
        xcoms[("sweep.best_of_sweep", "members")] = [{"member": n} for n in NAMES]
        xcoms[("sweep.best_of_sweep", "selection")] = {
            "winner": "trial-00",
            "metric": "train:loss",
            "ranking": [],
        }
    state = "success" if finished else "running"
    return build_run_view("sweep_dag", "r1", run_state=state, task_instances=[], xcoms=xcoms, now=1005.0)


def _tuning_view(root: Path) -> dict[str, Any]:
    """A local tuning step's run: its three training jobs' metric files side by side under the
    executor's root, the second the best (local/tuning.py; ui/data.tuning_members)."""
    names = ["tuned-001-aa", "tuned-002-bb", "tuned-003-cc"]
    for index, name in enumerate(names):
        (root / name).mkdir()
        lines = [
            {
                "name": "train:loss",
                "value": (index + 1) / (epoch + 1),
                "timestamp": 1000.0 + epoch,
                "host": "algo-1",
            }
            for epoch in range(4)
        ]
        (root / name / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in lines))
    rows = [
        {"job_name": n, "status": "Completed", "objective_value": 0.5 + i / 10} for i, n in enumerate(names)
    ]
    result = {
        "backend": "local",
        "status": "Completed",
        "job_name": names[1],
        "job_arn": f"local://{root / names[1]}",
        "tuning": {"job_name": "tuned", "objective_metric": "train:accuracy", "training_jobs": rows},
    }
    xcoms = {("stage_train_evaluate.train", "return_value"): result}
    return build_run_view("tuning_dag", "r2", run_state="success", task_instances=[], xcoms=xcoms, now=1005.0)


@pytest.fixture
def page_server(tmp_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The page, its script and ``api/run`` (whatever ``served["view"]`` holds) under /dist-training."""
    served: dict[str, Any] = {"view": _sweep_view(tmp_path, finished=False)}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path == "/dist-training/view":
                body, kind = (STATIC / "training.html").read_bytes(), "text/html"
            elif path == "/dist-training/static/training.js":
                body, kind = (STATIC / "training.js").read_bytes(), "text/javascript"
            elif path == "/dist-training/api/run":
                body, kind = json.dumps(served["view"]).encode(), "application/json"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()


def test_members_side_by_side_progress_eta_and_the_winner_in_chromium(
    page_server: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    if shutil.which("chromium") is None:
        pytest.skip("Debian chromium is not installed (scripts/setup.sh --test installs it)")
    from scripts.screenshot_training_view import TrainingViewBrowser

    base_url, served = page_server

    async def look() -> tuple[dict[str, Any], dict[str, Any]]:
        async with TrainingViewBrowser(base_url, "no-token") as browser:
            await browser.open_view("sweep_dag", "r1")
            await browser.wait_for(
                "document.querySelectorAll('.job').length === 3", 30, "the three job cards"
            )
            running = await browser.state()
            await browser.screenshot(tmp_path / "running.png")
            served["view"] = _sweep_view(tmp_path, finished=True)  # the page polls every 2 s
            await browser.wait_for("!!document.getElementById('members-winner')", 30, "the winner")
            finished = await browser.state()
            (tmp_path / "tuning").mkdir()
            served["view"] = _tuning_view(tmp_path / "tuning")
            await browser.open_view("tuning_dag", "r2")
            await browser.wait_for(
                "document.querySelectorAll('.card.members polyline[data-member]').length === 3",
                30,
                "the tuning job's three curves",
            )
            tuned.update(await browser.state())
            return running, finished

    tuned: dict[str, Any] = {}
    running, finished = asyncio.run(look())
    (members,) = running["members"]
    assert members["group"] == "sweep.members" and members["winner"] is None
    loss = members["charts"]["train:loss"]
    assert {m: c["points"] for m, c in loss["curves"].items()} == {f"mlp-{n}": 3 for n in NAMES}
    assert all(re.fullmatch(r"\d+", tick) for tick in loss["x_ticks"]), loss["x_ticks"]  # epochs 0, 1, 2
    assert loss["x_ticks"] == ["0", "1", "2"]
    # a metric with one value: a number, not a chart whose y axis reads "256, 256, 256, 255"
    assert (
        "train:steps_trained" not in members["charts"] and "256" in members["values"]["train:steps_trained"]
    )
    assert [row["cells"][2] for row in members["rows"]] == [f"epoch 3 of {EPOCHS}"] * 3
    for job in running["jobs"]:
        assert job["status"] == "InProgress" and job["progress"]["text"].startswith(
            f"Progressepoch 3 of {EPOCHS} (38%)"
        )
        # 0.5 epoch/s: 5 more epochs take 10 s, 1 s of which has passed since epoch 2 ended
        assert job["eta"]["seconds"] == "9" and job["eta"]["text"].startswith("ETA9s"), job
        assert job["hosts"].endswith("algo-1 (1 process each)"), job["hosts"]
        assert job["progress"] and "train:steps_trained" not in running["charts"]
    assert running["values"]["train:steps_trained"] == "256"
    assert (tmp_path / "running.png").stat().st_size > 10_000

    (members,) = finished["members"]
    assert members["winner"] == "trial-00"
    curves = members["charts"]["train:loss"]["curves"]
    assert {m: c["winner"] for m, c in curves.items()} == {
        "trial-00": True,
        "trial-01": False,
        "trial-02": False,
    }
    assert [(r["member"], r["winner"]) for r in members["rows"]] == [
        ("trial-00", True),
        ("trial-01", False),
        ("trial-02", False),
    ]
    assert [j["member"] for j in finished["jobs"]] == [
        "member ★ trial-00 (winner)",
        "member trial-01",
        "member trial-02",
    ]
    assert all(j["eta"]["text"].startswith("ETAdone") for j in finished["jobs"]), finished["jobs"]

    # a tuning step: its training jobs side by side, one chart per metric, the best marked
    (members,) = tuned["members"]
    assert (
        members["title"].startswith("Training jobs of tuning job tuned")
        and members["winner"] == "tuned-002-bb"
    )
    assert {m: (c["points"], c["winner"]) for m, c in members["charts"]["train:loss"]["curves"].items()} == {
        "tuned-001-aa": (4, False),
        "tuned-002-bb": (4, True),
        "tuned-003-cc": (4, False),
    }
    assert [(r["member"], r["winner"]) for r in members["rows"]] == [
        ("tuned-001-aa", False),
        ("tuned-002-bb", True),
        ("tuned-003-cc", False),
    ]
