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
CloudWatch, >= 2 one-minute points per host. The same run stops checkpointing after epoch 1: its
checkpoint-stall alarm fails ``watch_checkpoints`` with the reason while the job runs on.

And one run of ``adt_e2e_sagemaker_members`` (a sweep of three members on the same endpoint),
triggered with it: a second Chromium page watches it while it trains (each member's progress and
ETA) and after (one chart per metric with the three members' curves, the sweep's winner marked).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import threading
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
MEMBERS_DAG_ID = "adt_e2e_sagemaker_members"  # a sweep of three demo jobs on SageMaker


def _shots_dir(tmp_path_factory: Any) -> Path:
    """scripts/screenshot_training_view.py names a folder (outside the repository) to keep them."""
    if os.environ.get("ADT_SCREENSHOTS_DIR"):
        return Path(os.environ["ADT_SCREENSHOTS_DIR"])
    return Path(tmp_path_factory.mktemp("training-view"))


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
def members_run(
    airflow_services: AirflowServices,
    airflow_api: AirflowApi,
    sagemaker_run: dict[str, Any],  # its bucket holds the training data
    tmp_path_factory: Any,
) -> Iterator[dict[str, Any]]:
    """Trigger the sweep of three SageMaker members and watch it in its own Chromium page while
    it trains (beside the other two runs): ``seen["during"]`` is the first state in which a
    member, still InProgress, shows its progress and an ETA."""
    if shutil.which("chromium") is None:
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it)")
    from scripts.screenshot_training_view import TrainingViewBrowser

    airflow_api.wait_for_dag(MEMBERS_DAG_ID)
    airflow_api.unpause(MEMBERS_DAG_ID)
    run_id = airflow_api.trigger_run(MEMBERS_DAG_ID, {})
    seen: dict[str, Any] = {
        "run_id": run_id,
        "shots": _shots_dir(tmp_path_factory),
        "triggered_at": time.monotonic(),
    }

    async def watch() -> None:
        # the jobs start after plan and check_changes, and an ETA needs 2 CloudWatch minutes: no
        # page polls the one api-server worker before then (the other runs' tasks start meanwhile)
        await asyncio.sleep(45)
        async with TrainingViewBrowser(airflow_services.base_url, airflow_api.token) as browser:
            await browser.open_view(MEMBERS_DAG_ID, run_id)
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                state = await browser.state()
                seen["last"] = state
                if any(
                    j["status"] == "InProgress"
                    and j["progress"]
                    and j["progress"]["done"]
                    and j["eta"]["seconds"]
                    for j in state.get("jobs", [])
                ):
                    seen["during"] = state
                    await browser.screenshot(seen["shots"] / "training-view-members-running.png")
                    return
                if state.get("run_state") in ("success", "failed"):
                    return  # missed the window: the test says so
                await asyncio.sleep(1)

    def run() -> None:
        try:
            asyncio.run(watch())
        except Exception as exc:  # the test reports it
            seen["error"] = repr(exc)

    watcher = threading.Thread(target=run, daemon=True)
    watcher.start()
    seen["watcher"] = watcher
    yield seen
    watcher.join(timeout=60)


@pytest.fixture(scope="module")
def watched_run(
    airflow_services: AirflowServices,
    airflow_api: AirflowApi,
    tmp_path_factory: Any,
    sagemaker_run: dict[str, Any],  # triggered first: the runs train at once
    members_run: dict[str, Any],
) -> Iterator[dict[str, Any]]:
    """Trigger the run and watch it in Chromium; yields what was seen (the tests assert on it)."""
    if shutil.which("chromium") is None:
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it)")
    from scripts.screenshot_training_view import TrainingViewBrowser

    airflow_api.wait_for_dag(DAG_ID)
    # The repo's scheduled DAGs start runs as soon as they are parsed; on a small box they starve
    # the api-server this run needs. Pause them (the tests that need one unpause it).
    for dag in airflow_api.get("/dags", params={"limit": 100})["dags"]:
        if dag["dag_id"] not in (DAG_ID, SAGEMAKER_DAG_ID, MEMBERS_DAG_ID) and not dag["is_paused"]:
            airflow_api.request("PATCH", f"/dags/{dag['dag_id']}", json={"is_paused": True})
    airflow_api.unpause(DAG_ID)
    run_id = airflow_api.trigger_run(DAG_ID, {})
    shots = _shots_dir(tmp_path_factory)
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
    # progress of the spec's 8 epochs and an ETA from the rate so far, while the job runs
    (job,) = during["jobs"]
    assert job["progress"]["unit"] == "epoch" and job["progress"]["total"] == "8", job
    assert int(job["progress"]["done"]) >= 2 and job["eta"]["seconds"], job
    assert (watched_run["shots"] / "training-view-running.png").stat().st_size > 10_000
    assert watched_run["run"]["state"] == "success"
    after = watched_run["after"]
    assert after["updated"] != during["updated"]  # the page updated itself
    assert after["job_status"] == "Completed"
    assert after["charts"]["train:loss"]["epochs"] > during["charts"]["train:loss"]["epochs"]
    (job,) = after["jobs"]
    assert job["progress"]["text"].startswith("Progressepoch 8 of 8 (100%)") and job["eta"][
        "text"
    ].startswith("ETAdone")
    assert re.fullmatch(r"Hostsalgo-1 \((1 process|[2-9] processes) each\)", job["hosts"]), job
    assert after["charts"]["train:loss"]["x_ticks"] and all(
        t.isdigit() for t in after["charts"]["train:loss"]["x_ticks"]
    )
    # the run summary's one value is a number, not a chart
    assert "train:steps_trained" not in after["charts"] and after["values"]["train:steps_trained"].isdigit()
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
    airflow_api.wait_for_run(SAGEMAKER_DAG_ID, run_id, timeout=900, expect=None)
    print(f"SageMaker run: {time.monotonic() - sagemaker_run['triggered_at']:.0f} s from trigger to its end")
    # the run fails by its checkpoint-stall alarm alone (the next test); the job trained to the end
    trained = {ti["task_id"]: ti["state"] for ti in airflow_api.task_instances(SAGEMAKER_DAG_ID, run_id)}
    assert trained["sagemaker.train"] == "success", airflow_api.failure_report(SAGEMAKER_DAG_ID, run_id)

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


def test_a_sweeps_three_sagemaker_members_side_by_side_with_progress_eta_and_winner(
    airflow_services: AirflowServices, airflow_api: AirflowApi, members_run: dict[str, Any]
) -> None:
    """Issue 36 item 5 on the endpoint: while the members train, each card shows its progress
    (``epoch N of 12``) and an ETA; after the run, the members card has one chart per metric with
    the three members' CloudWatch curves (>= 2 points each), the sweep's winner marked, and each
    job card reads "epoch 12 of 12"."""
    from scripts.screenshot_training_view import TrainingViewBrowser
    from tests.e2e.dags.adt_e2e_sagemaker_members import EPOCHS, LEARNING_RATES

    run_id = members_run["run_id"]
    run = airflow_api.wait_for_run(MEMBERS_DAG_ID, run_id, timeout=900, expect=None)
    print(f"members run: {time.monotonic() - members_run['triggered_at']:.0f} s from trigger to its end")
    assert run["state"] == "success", airflow_api.failure_report(MEMBERS_DAG_ID, run_id)
    members_run["watcher"].join(timeout=60)
    during = members_run.get("during")
    assert during, (
        f"no member was seen running with an ETA: {members_run.get('error')} {members_run.get('last')}"
    )
    running = [j for j in during["jobs"] if j["status"] == "InProgress" and j["eta"]["seconds"]]
    for job in running:
        assert job["progress"]["unit"] == "epoch" and job["progress"]["total"] == str(EPOCHS), job
        assert 1 <= int(job["progress"]["done"]) < EPOCHS and float(job["eta"]["seconds"]) >= 0, job
        assert job["progress"]["text"].startswith(f"Progressepoch {job['progress']['done']} of {EPOCHS} ("), (
            job
        )
    assert (members_run["shots"] / "training-view-members-running.png").stat().st_size > 10_000
    winner = airflow_api.xcom(MEMBERS_DAG_ID, run_id, "sweep.best_of_sweep", key="winner")

    async def look() -> dict[str, Any]:
        async with TrainingViewBrowser(airflow_services.base_url, airflow_api.token) as browser:
            await browser.open_view(MEMBERS_DAG_ID, run_id)
            deadline = time.monotonic() + 60
            while True:
                state = await browser.state()
                cards = state.get("members") or [{}]
                curves = (cards[0].get("charts") or {}).get("train:loss", {}).get("curves", {})
                if (
                    len(curves) == len(LEARNING_RATES) and all(c["points"] >= 2 for c in curves.values())
                ) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(1)
            await browser.screenshot(members_run["shots"] / "training-view-members.png")
            return state

    state = asyncio.run(look())
    (members,) = state["members"]
    assert members["group"] == "sweep.members" and members["winner"] == winner, members
    assert [r["member"] for r in members["rows"]] == ["trial-00", "trial-01", "trial-02"]
    assert [r["member"] for r in members["rows"] if r["winner"]] == [winner]
    loss = members["charts"]["train:loss"]
    assert {m: c["winner"] for m, c in loss["curves"].items()} == {
        r["member"]: r["member"] == winner for r in members["rows"]
    }, loss
    assert all(c["points"] >= 2 for c in loss["curves"].values()), loss  # >= 2 one-minute points each
    assert all(t.lstrip("-").isdigit() for t in loss["x_ticks"]), loss["x_ticks"]  # whole seconds
    for job in state["jobs"]:
        assert job["status"] == "Completed" and job["progress"]["text"].startswith(
            f"Progressepoch {EPOCHS} of {EPOCHS} (100%)"
        ), job
        assert job["eta"]["text"].startswith("ETAdone") and job["hosts"] == "Hostsalgo-1", job
    assert (members_run["shots"] / "training-view-members.png").stat().st_size > 10_000


def test_a_checkpoint_stall_alarms_while_the_sagemaker_job_runs_on(
    airflow_api: AirflowApi, sagemaker_run: dict[str, Any], sagemaker_emulator: EmulatorProcess
) -> None:
    """The same SageMaker run writes no checkpoint after its epoch 1 and trains on for ~90 s:
    ``watch_checkpoints``, deferred beside ``train`` by the real scheduler and triggerer, fails with
    the reason (job, age, threshold, checkpoint location) while the job is still training, its
    ``on_failure_callback`` fires, and the job, left running (``on_stall: alarm``), completes."""
    from datetime import datetime

    from tests.e2e.dags.adt_e2e_sagemaker_view import ALARM_CALLBACK_LINE, CHECKPOINT_UNTIL_EPOCH, MAX_AGE

    run_id = sagemaker_run["run_id"]
    run = airflow_api.wait_for_run(SAGEMAKER_DAG_ID, run_id, timeout=900, expect=None)
    tis = {ti["task_id"]: ti for ti in airflow_api.task_instances(SAGEMAKER_DAG_ID, run_id)}
    states = {task: ti["state"] for task, ti in tis.items()}
    report = airflow_api.failure_report(SAGEMAKER_DAG_ID, run_id)
    assert run["state"] == "failed", report
    assert states["sagemaker.train"] == "success" and states["sagemaker.watch_checkpoints"] == "failed", (
        report
    )
    assert [t for t, state in states.items() if state == "failed"] == ["sagemaker.watch_checkpoints"], states

    job_name = airflow_api.xcom(SAGEMAKER_DAG_ID, run_id, "sagemaker.train")["job_name"]
    job = sagemaker_emulator.client("sagemaker").describe_training_job(TrainingJobName=job_name)
    assert job["TrainingJobStatus"] == "Completed"  # not stopped: on_stall is alarm
    # the alarm came while the job was still training
    alarmed_at = datetime.fromisoformat(tis["sagemaker.watch_checkpoints"]["end_date"])
    assert alarmed_at < job["TrainingEndTime"], (alarmed_at, job["TrainingEndTime"])

    log = airflow_api.task_log(SAGEMAKER_DAG_ID, run_id, "sagemaker.watch_checkpoints")
    root = job["CheckpointConfig"]["S3Uri"]
    assert f"Checkpoint stall: training job {job_name} has written no new complete checkpoint for" in log, log
    assert f"max_age_seconds={MAX_AGE:g}" in log and "on_stall=alarm: the job is left running" in log, log
    bucket, key = _newest_manifest(sagemaker_emulator, root)
    last = json.loads(sagemaker_emulator.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())
    assert last["epoch"] == CHECKPOINT_UNTIL_EPOCH, (
        last
    )  # the job's last checkpoint: the stall began after it
    newest = f"s3://{bucket}/{key.rsplit('/', 1)[0]}"
    assert f"its newest complete checkpoint is step {last['step']} ({newest}" in log and root in log, log
    assert f"{ALARM_CALLBACK_LINE}: sagemaker.watch_checkpoints: Checkpoint stall" in log, log


def _newest_manifest(endpoint: EmulatorProcess, root: str) -> tuple[str, str]:
    """(bucket, key) of the newest checkpoint's manifest under ``root`` (step-<zero padded>/)."""
    bucket, _, prefix = root.removeprefix("s3://").partition("/")
    listed = endpoint.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]
    return bucket, max(
        o["Key"] for o in listed if "/step-" in o["Key"] and o["Key"].endswith("/_MANIFEST.json")
    )


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
