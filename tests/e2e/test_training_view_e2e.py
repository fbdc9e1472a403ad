"""The Training view and OpenLineage through Airflow's real services, during and after a local run.

One run of ``adt_e2e_training_view`` (the demo pipeline's local group, paced so that the job can
be watched while it trains):

* headless Chromium keeps the Training view open (no reload) while the job runs: the loss curve
  has points from >= 2 epochs while the job is InProgress; after the run the gate verdict, its
  plot and the registered version appear; screenshots of both moments, in a temporary folder (the
  docs' copies in docs/img come from scripts/, never from a test);
* the view's routes refuse requests without Airflow auth (401) and with a bad token (403);
* the run's OpenLineage events (file transport, configured in conftest) chain
  source data -> staged data -> training -> model -> model package version.

And one run of ``adt_e2e_sagemaker_view`` (the demo job on the SageMaker backend, against the
session's SageMaker test endpoint), triggered first so that it trains while the local run is
watched: its Training view shows the job's status and the loss curve the endpoint published to
CloudWatch, >= 2 one-minute points per host.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_dist_training.emulator.pytest_plugin import EmulatorProcess
from tests.e2e.airflow_services import AirflowApi, AirflowServices

# the module fixture starts the services (if first) and watches one whole run
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.xdist_group("airflow-e2e"),
    pytest.mark.timeout(1800),
]
DAG_ID = "adt_e2e_training_view"  # the demo's local group, 8 epochs of >= 1.5 s (tests/e2e/dags)
SAGEMAKER_DAG_ID = "adt_e2e_sagemaker_view"  # the demo job on SageMaker, > 60 s of epochs


@pytest.fixture(scope="module")
def sagemaker_run(
    airflow_services: AirflowServices, airflow_api: AirflowApi, sagemaker_emulator: EmulatorProcess
) -> dict[str, Any]:
    """Upload the demo's training data to the endpoint and trigger the SageMaker run (it trains
    while ``watched_run`` watches the local one)."""
    from tests.e2e.dags.adt_e2e_sagemaker_view import BUCKET

    demo = Path(airflow_services.extra_env["ADT_DEMO_DIR"])
    s3 = sagemaker_emulator.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.upload_file(str(demo / "source" / "train" / "data.csv"), BUCKET, "data/train/data.csv")
    airflow_api.wait_for_dag(SAGEMAKER_DAG_ID)
    airflow_api.unpause(SAGEMAKER_DAG_ID)
    return {"run_id": airflow_api.trigger_run(SAGEMAKER_DAG_ID, {}), "triggered_at": time.monotonic()}


@pytest.fixture(scope="module")
def watched_run(
    airflow_services: AirflowServices,
    airflow_api: AirflowApi,
    tmp_path_factory: Any,
    sagemaker_run: dict[str, Any],  # triggered first: both runs train at once
) -> Iterator[dict[str, Any]]:
    """Trigger the run and watch it in Chromium; yields what was seen (the tests assert on it)."""
    if shutil.which("chromium") is None:
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it)")
    from scripts.screenshot_training_view import TrainingViewBrowser

    airflow_api.wait_for_dag(DAG_ID)
    # The repo's scheduled DAGs start runs as soon as they are parsed; on a small box they starve
    # the api-server this run needs. Pause them (the tests that need one unpause it).
    for dag in airflow_api.get("/dags", params={"limit": 100})["dags"]:
        if dag["dag_id"] not in (DAG_ID, SAGEMAKER_DAG_ID) and not dag["is_paused"]:
            airflow_api.request("PATCH", f"/dags/{dag['dag_id']}", json={"is_paused": True})
    airflow_api.unpause(DAG_ID)
    run_id = airflow_api.trigger_run(DAG_ID, {})
    # scripts/screenshot_training_view.py names a folder (outside the repository) to keep them from
    shots = (
        Path(os.environ["ADT_SCREENSHOTS_DIR"])
        if os.environ.get("ADT_SCREENSHOTS_DIR")
        else tmp_path_factory.mktemp("training-view")
    )
    seen: dict[str, Any] = {"run_id": run_id, "shots": shots}

    async def watch() -> None:
        async with TrainingViewBrowser(airflow_services.base_url, airflow_api.token) as browser:
            await browser.open_view(DAG_ID, run_id)
            # During: the job is running and its loss curve already spans >= 2 epochs.
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                state = await browser.state()
                loss = state.get("charts", {}).get("train:loss", {})
                if state.get("job_status") == "InProgress" and loss.get("epochs", 0) >= 2:
                    seen["during"] = state
                    await browser.screenshot(shots / "training-view-running.png")
                    break
                if state.get("job_status") in ("Completed", "Failed") or state.get("run_state") == "failed":
                    seen["during"] = state  # missed the window: the assertion says so
                    break
                await asyncio.sleep(0.5)
            # After: the same page (never reloaded) shows the gate verdict and the version.
            run = await asyncio.to_thread(airflow_api.wait_for_run, DAG_ID, run_id, 900)
            seen["run"] = run
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                state = await browser.state()
                if state.get("verdict") and (
                    state.get("version") or "gate rejected" in state.get("text", "")
                ):
                    break
                await asyncio.sleep(1)
            seen["after"] = state
            await browser.screenshot(shots / "training-view-finished.png")
            # The same view as a tab of the DAG run page in the Airflow UI (an iframe).
            from urllib.parse import quote

            await browser.navigate(f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/plugin/training-run")
            seen["tab"] = await browser.wait_for(
                "(() => { const f = document.querySelector('iframe'); return f ? f.src : null; })()",
                90,
                "the Training tab's iframe",
            )
            await asyncio.sleep(4)  # let the iframe render
            await browser.screenshot(shots / "training-view-dag-run-tab.png", full_page=False)

    asyncio.run(watch())
    yield seen


def test_training_view_shows_live_curves_then_gate_and_version(watched_run: dict[str, Any]) -> None:
    during = watched_run["during"]
    assert during["job_status"] == "InProgress", f"the job was never seen running: {during}"
    assert during["charts"]["train:loss"]["epochs"] >= 2
    assert (watched_run["shots"] / "training-view-running.png").stat().st_size > 10_000
    assert watched_run["run"]["state"] == "success"
    after = watched_run["after"]
    assert after["updated"] != during["updated"]  # the page updated itself
    assert after["job_status"] == "Completed"
    assert after["charts"]["train:loss"]["epochs"] > during["charts"]["train:loss"]["epochs"]
    assert after["verdict"] and ("PASSED" in after["verdict"] or "REJECTED" in after["verdict"])
    assert after["plot"], "the evaluation report's plot is shown"
    if "PASSED" in after["verdict"]:
        assert after["version"] and after["version"].startswith("Version "), after["text"]
    else:  # a champion from an earlier run may win the no-regression check
        assert "Not registered (gate rejected)" in after["text"]
    assert f"/dist-training/view?dag_id={DAG_ID}" in watched_run["tab"]


def test_training_view_shows_the_cloudwatch_curves_of_a_sagemaker_job(
    airflow_services: AirflowServices,
    airflow_api: AirflowApi,
    sagemaker_run: dict[str, Any],
    tmp_path: Path,
) -> None:
    """The SageMaker backend's curves come from CloudWatch (one point per host and minute): the
    view of the finished job shows its status and a loss curve of >= 2 points on its host."""
    if shutil.which("chromium") is None:
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it)")
    from scripts.screenshot_training_view import TrainingViewBrowser

    run_id = sagemaker_run["run_id"]
    run = airflow_api.wait_for_run(SAGEMAKER_DAG_ID, run_id, timeout=900)
    print(f"SageMaker run: {time.monotonic() - sagemaker_run['triggered_at']:.0f} s from trigger to success")
    assert run["state"] == "success"

    async def look() -> dict[str, Any]:
        async with TrainingViewBrowser(airflow_services.base_url, airflow_api.token) as browser:
            await browser.open_view(SAGEMAKER_DAG_ID, run_id)
            deadline = time.monotonic() + 60
            while True:
                state = await browser.state()
                loss = state.get("charts", {}).get("train:loss", {})
                if (
                    state.get("job_status") == "Completed" and loss.get("hosts")
                ) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(1)
            await browser.screenshot(tmp_path / "training-view-sagemaker.png")
            return state

    state = asyncio.run(look())
    assert state["job_status"] == "Completed", state["text"]
    loss = state["charts"]["train:loss"]
    print(f"SageMaker job's loss chart: {loss}")
    assert list(loss["hosts"]) == ["algo-1"], loss  # the demo job: 1 instance
    assert loss["hosts"]["algo-1"] >= 2 and loss["epochs"] >= 2, loss  # >= 2 one-minute points
    assert (tmp_path / "training-view-sagemaker.png").stat().st_size > 10_000
    # the card is the SageMaker job the task ran, read through the endpoint
    (job,) = airflow_api.client.get(
        "/dist-training/api/run",
        params={"dag_id": SAGEMAKER_DAG_ID, "run_id": run_id},
        headers={"Authorization": f"Bearer {airflow_api.token}"},
    ).json()["jobs"]
    assert job["backend"] == "sagemaker" and job["task_id"] == "sagemaker.train", job
    assert job["error"] is None and job["metrics"]["axis"] == "seconds"  # CloudWatch has no epoch
    assert "train:loss" in job["metric_definitions"]
    assert job["job_name"] == airflow_api.xcom(SAGEMAKER_DAG_ID, run_id, "sagemaker.train")["job_name"]


def test_training_view_requires_airflow_auth(
    airflow_services: AirflowServices, watched_run: dict[str, Any]
) -> None:
    run_id = watched_run["run_id"]
    for path in (
        "/dist-training/view",
        "/dist-training/api/run",
        "/dist-training/api/runs",
        "/dist-training/static/training.js",
    ):
        params = {"dag_id": DAG_ID, "run_id": run_id}
        anonymous = httpx.get(airflow_services.base_url + path, params=params, timeout=30)
        assert anonymous.status_code == 401, (path, anonymous.status_code, anonymous.text)
        forged = httpx.get(
            airflow_services.base_url + path,
            params=params,
            headers={"Authorization": "Bearer not-a-jwt"},
            timeout=30,
        )
        assert forged.status_code == 403, (path, forged.status_code, forged.text)


def test_training_view_api_returns_the_run(airflow_api: AirflowApi, watched_run: dict[str, Any]) -> None:
    response = airflow_api.client.get(
        "/dist-training/api/run",
        params={"dag_id": DAG_ID, "run_id": watched_run["run_id"]},
        headers={"Authorization": f"Bearer {airflow_api.token}"},
    )
    assert response.status_code == 200
    view = response.json()
    (job,) = view["jobs"]
    assert job["backend"] == "local" and job["status"] == "Completed" and job["task_id"] == "local.train"
    assert job["hosts"] == ["algo-1"] and job["cost_bound_usd"] is not None
    assert [t["status"] for t in job["timeline"]][-1] == "Completed"
    (section,) = view["sections"]
    assert section["gate"]["checks"] and section["checkpoints"]["items"]


def _chain(
    events: list[dict[str, Any]], run_id: str
) -> dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]]:
    """task -> (inputs, outputs) from the COMPLETE events of one DAG run."""
    out = {}
    for e in events:
        facets = e.get("run", {}).get("facets", {})
        dag_run = (facets.get("airflow") or {}).get("dagRun") or {}
        if e.get("eventType") != "COMPLETE" or dag_run.get("run_id") != run_id:
            continue
        task = e["job"]["name"].removeprefix(f"{DAG_ID}.")
        out[task] = (
            [(d["namespace"], d["name"]) for d in e.get("inputs", [])],
            [(d["namespace"], d["name"]) for d in e.get("outputs", [])],
        )
    return out


def test_openlineage_chain_source_to_model_package(
    airflow_services: AirflowServices, watched_run: dict[str, Any]
) -> None:
    demo = Path(airflow_services.extra_env["ADT_DEMO_DIR"])
    path = demo / "openlineage.jsonl"
    deadline = time.monotonic() + 30  # the listener emits from a forked child, just after the task
    while True:
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        chain = _chain(events, watched_run["run_id"])
        if {"local.stage", "local.train", "local.evaluate", "local.register"} <= set(
            chain
        ) or time.monotonic() > deadline:
            break
        time.sleep(1)
    stage_in, stage_out = chain["local.stage"]
    train_in, train_out = chain["local.train"]
    eval_in, eval_out = chain["local.evaluate"]
    assert stage_in == [("file", str(demo / "source" / "train"))]
    assert stage_out and set(stage_out) <= set(train_in), (stage_out, train_in)  # staged data -> training
    (model,) = train_out
    assert model[0] == "file" and model[1].endswith("/output/model.tar.gz")
    assert model in eval_in and eval_out[0][1].endswith("evaluation.json")
    if "local.register" in chain:  # the gate passed
        register_in, register_out = chain["local.register"]
        assert model in register_in
        (package,) = register_out
        assert package[0] == "file" and package[1].startswith(str(demo / "view-registry" / "adt-e2e-view")), (
            package
        )
        assert package[1].rsplit("/", 1)[-1].isdigit()  # the version
    else:
        assert "REJECTED" in (watched_run["after"]["verdict"] or "")
