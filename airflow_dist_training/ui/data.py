"""What the Training view shows for one DAG run, built from the run's XComs and the jobs themselves.

No store of its own: everything comes from what the tasks already publish and from the jobs (the
sources are listed in ``docs/training-view.md``, "How it works"). :func:`build_run_view` is pure
apart from reading a local job's files and calling the ``sagemaker`` source it is given, so it is
unit-tested without Airflow services.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from airflow_dist_training.job_states import ACTIVE_STATES, TERMINAL_STATES
from airflow_dist_training.spec.backends import runs_on_aws

LINK_KEY = "sagemaker_training_job"  # links.sagemaker.XCOM_KEY (not imported: no Airflow here)
PLAN_KEYS = ("cost_bound_usd", "request", "spec", "backend", "job_name", "dry_run")
MAX_POINTS = 2000  # per metric, to keep the page light on long jobs

XComMap = Mapping[tuple[str, str], Any]  # (task_id, key) -> value
SageMakerSource = Callable[[str, str | None], dict[str, Any]]  # (job name, region) -> job view


def _iso_to_epoch(value: Any) -> float | None:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, str) and value:
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def member_task_id(task_id: str, map_index: int | None) -> str:
    """A mapped task instance's id in the view: ``<group>[<map index>].<task>``, so each member of a
    mapped group (``stage_train_evaluate(members=...)``) is a group of its own, its job card and
    after-training card side by side with the other members'."""
    if map_index is None or map_index < 0:
        return task_id
    group, _, name = task_id.rpartition(".")
    return f"{group}[{map_index}].{name}" if group else f"[{map_index}].{name}"


def _group(task_id: str) -> str:
    return task_id.rsplit(".", 1)[0] if "." in task_id else ""


def _in_group(group: str, name: str) -> str:
    return f"{group}.{name}" if group else name


def read_jsonl(path: Path, limit: int = 200_000) -> list[dict[str, Any]]:
    """The complete lines of a JSON-lines file (a line being written is skipped)."""
    out: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i >= limit or not line.endswith("\n"):
                    break
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except OSError:
        return []
    return out


def metric_curves(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-metric series with an epoch axis when an ``*epoch*`` metric is defined, else seconds.

    A metric point gets the epoch of the latest epoch point of the same host seen at (about) the
    same time: the demo's ``train:epoch`` is read from the same line as ``train:loss``.
    """
    points = sorted(points, key=lambda p: (float(p.get("timestamp", 0)), str(p.get("name"))))
    epoch_names = {str(p["name"]) for p in points if "epoch" in str(p.get("name", "")).lower()}
    t0 = float(points[0]["timestamp"]) if points else 0.0
    last_epoch: dict[str, float] = {}
    series: dict[str, list[dict[str, Any]]] = {}
    pending: list[dict[str, Any]] = []
    for p in points:
        name, host = str(p.get("name")), str(p.get("host", "algo-1"))
        if name in epoch_names:
            last_epoch[host] = float(p["value"])
            # points of the same line were seen a few microseconds before their epoch point
            for q in pending:
                if q["host"] == host and abs(q["t"] - float(p["timestamp"])) < 0.5:
                    q["epoch"] = float(p["value"])
            continue
        entry = {
            "t": float(p["timestamp"]),
            "seconds": round(float(p["timestamp"]) - t0, 3),
            "value": float(p["value"]),
            "host": host,
            "epoch": last_epoch.get(host),
        }
        pending = [q for q in pending if abs(q["t"] - entry["t"]) < 0.5] + [entry]
        series.setdefault(name, []).append(entry)
    axis = "epoch" if epoch_names else "seconds"
    curves = {
        name: [
            {"x": e[axis], "value": e["value"], "host": e["host"]}
            for e in entries[-MAX_POINTS:]
            if axis != "epoch" or e["epoch"] is not None
        ]
        for name, entries in series.items()
    }
    return {
        "axis": axis,
        "series": curves,
        "epochs": max(last_epoch.values()) if last_epoch else None,
    }


def local_job_view(job_dir: str | Path) -> dict[str, Any]:
    """A local job's live state from its directory (status.json, metrics.jsonl or metrics.json)."""
    root = Path(job_dir)
    try:
        status: dict[str, Any] = json.loads((root / "status.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        status = {}
    points = read_jsonl(root / "metrics.jsonl")
    if not points:
        try:
            points = list(json.loads((root / "metrics.json").read_text(encoding="utf-8")).get("series", []))
        except (OSError, ValueError, AttributeError):
            points = []
    timeline = list(status.get("timeline") or [])
    last = timeline[-1]["status"] if timeline else None
    primary = last if last in TERMINAL_STATES else ("InProgress" if timeline else None)
    return {
        "status": primary,
        "secondary_status": timeline[-1]["status"] if timeline else None,
        "timeline": timeline,
        "hosts": list(status.get("hosts") or []),
        "processes_per_host": status.get("processes_per_host"),
        "metric_definitions": [d[0] for d in status.get("metric_definitions") or []],
        "metrics": metric_curves(points),
    }


def _elapsed(timeline: list[dict[str, Any]], status: str | None, now: float) -> float | None:
    starts = [s for s in (_iso_to_epoch(t.get("start")) for t in timeline) if s is not None]
    if not starts:
        return None
    end = now
    if status in TERMINAL_STATES and timeline:
        end = _iso_to_epoch(timeline[-1].get("end") or timeline[-1].get("start")) or now
    return max(0.0, end - min(starts))


def _compute(plan: Mapping[str, Any]) -> tuple[str | None, int | None]:
    request = plan.get("request") or {}
    if isinstance(request, Mapping) and isinstance(request.get("ResourceConfig"), Mapping):
        rc = request["ResourceConfig"]
        return rc.get("InstanceType"), rc.get("InstanceCount")
    spec = plan.get("spec") or {}
    compute = spec.get("compute") if isinstance(spec, Mapping) else None
    if isinstance(compute, Mapping):
        return compute.get("instance_type"), compute.get("instance_count")
    return None, None


def build_run_view(
    dag_id: str,
    run_id: str,
    *,
    run_state: str | None,
    task_instances: list[dict[str, Any]],
    xcoms: XComMap,
    sagemaker: SageMakerSource | None = None,
    hourly_price: Callable[[str], float | None] | None = None,
    render_plot: Callable[[Mapping[str, Any]], str] | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The Training view's JSON for one run (see the module docstring for the sources)."""
    now = time.time() if now is None else now
    states = {ti["task_id"]: ti for ti in task_instances}
    jobs = [
        _job_view(task_id, info, xcoms, states, sagemaker, hourly_price, now)
        for (task_id, key), info in sorted(xcoms.items())
        if key == LINK_KEY and isinstance(info, Mapping)
    ]
    job_groups = {_group(j["task_id"]) for j in jobs}
    # a sweep gates and registers its winner outside the members' groups
    gated = {_group(task) for task, key in xcoms if key == "selection" or task.endswith(".gate")}
    sections = [
        section
        for group in sorted(job_groups | gated or {""})
        if (section := _section(group, xcoms, states, render_plot, has_jobs=group in job_groups)) is not None
    ]
    running = [j for j in jobs if j["status"] in ACTIVE_STATES]
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "run_state": run_state,
        "generated_at": now,
        "live": bool(running) or run_state in ("running", "queued"),
        "tasks": task_instances,
        "jobs": jobs,
        "sections": sections,
    }


def _live_job(info: Mapping[str, Any], sagemaker: SageMakerSource | None) -> tuple[dict[str, Any], str | None]:
    """The job's live view (local files or SageMaker) and the error that kept it from loading."""
    on_aws = runs_on_aws(info.get("backend") or "sagemaker")
    if on_aws is False and info.get("job_dir"):
        return local_job_view(str(info["job_dir"])), None
    if on_aws and sagemaker is not None:
        try:
            return sagemaker(str(info.get("job_name")), info.get("region")), None
        except Exception as exc:  # a view must render even when AWS is unreachable
            return {}, f"{type(exc).__name__}: {exc}"
    return {}, None


def _job_view(
    task_id: str,
    info: Mapping[str, Any],
    xcoms: XComMap,
    states: Mapping[str, Mapping[str, Any]],
    sagemaker: SageMakerSource | None,
    hourly_price: Callable[[str], float | None] | None,
    now: float,
) -> dict[str, Any]:
    """One training job's card: status, timeline, hosts, cost so far, curves and results."""
    plan = {k: xcoms.get((_in_group(_group(task_id), "plan"), k)) for k in PLAN_KEYS}
    found = xcoms.get((task_id, "return_value"))
    result: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    backend = str(info.get("backend") or "sagemaker")
    on_aws = runs_on_aws(backend)
    live, error = _live_job(info, sagemaker)
    status = str(result.get("status") or live.get("status") or "InProgress")
    timeline = list(live.get("timeline") or result.get("timeline") or [])
    instance_type, count = _compute(plan)
    hosts = list(live.get("hosts") or []) or ([f"algo-{i + 1}" for i in range(int(count))] if count else [])
    elapsed = _elapsed(timeline, status, now)
    price = hourly_price(instance_type) if (hourly_price and instance_type) else None
    cost_so_far = (
        round(price * (count or 1) * elapsed / 3600, 4)
        if price is not None and elapsed is not None and on_aws
        else (0.0 if on_aws is False else None)
    )
    return {
        "task_id": task_id,
        "task_state": states.get(task_id, {}).get("state"),
        "backend": backend,
        "job_name": info.get("job_name"),
        "status": status,
        "secondary_status": live.get("secondary_status") or (timeline[-1]["status"] if timeline else None),
        "timeline": timeline,
        "hosts": hosts,
        "processes_per_host": live.get("processes_per_host"),
        "instance_type": instance_type,
        "instance_count": count,
        "elapsed_seconds": None if elapsed is None else round(elapsed, 1),
        "cost_so_far_usd": cost_so_far,
        "cost_bound_usd": plan.get("cost_bound_usd"),
        "metric_definitions": live.get("metric_definitions") or [],
        "metrics": live.get("metrics") or {"axis": "seconds", "series": {}},
        "final_metrics": result.get("final_metrics") or {},
        "model_artifact_uri": result.get("model_artifact_uri"),
        "checkpoint_uri": result.get("checkpoint_uri") or info.get("checkpoint_uri"),
        "error": error,
    }


def _section(
    group: str,
    xcoms: XComMap,
    states: Mapping[str, Mapping[str, Any]],
    render_plot: Callable[[Mapping[str, Any]], str] | None,
    *,
    has_jobs: bool,
) -> dict[str, Any] | None:
    """A group's after-training card (checkpoints, evaluation, gate, registration), or None if empty."""

    def get(name: str) -> Any:
        return xcoms.get((_in_group(group, name), "return_value"))

    found = get("gate")
    decision = found if isinstance(found, Mapping) else None
    evaluation = get("evaluate")
    registration = get("register")
    promoted = get("promote_checkpoint")
    retention = get("checkpoint_retention")
    if not any((decision, evaluation, registration, promoted, retention)) and not has_jobs:
        return None
    plot = ""
    if decision is not None and render_plot is not None:
        with contextlib.suppress(Exception):  # the card shows without its plot
            plot = render_plot(decision)
    return {
        "group": group,
        "checkpoints": _checkpoints(retention, promoted),
        "evaluation": evaluation if isinstance(evaluation, Mapping) else None,
        "gate": decision,
        "gate_state": states.get(_in_group(group, "gate"), {}).get("state"),
        "report_uri": (decision or {}).get("report_uri"),
        "plot_svg": plot,
        "registration": registration if isinstance(registration, Mapping) else None,
        "register_state": states.get(_in_group(group, "register"), {}).get("state"),
        # a sweep's pick (sweep_groups.best_of_sweep): the winner, and every member's standing
        "sweep": xcoms.get((_in_group(group, "best_of_sweep"), "selection")),
    }


def _checkpoints(retention: Any, promoted: Any) -> dict[str, Any]:
    """Checkpoints: what retention kept (and why) or deleted, and which one was promoted."""
    out: dict[str, Any] = {"root": None, "items": [], "promoted": None}
    if isinstance(promoted, Mapping):
        out["promoted"] = dict(promoted)
    if not isinstance(retention, Mapping):
        return out
    out["root"] = retention.get("root")
    promoted_step = promoted.get("step") if isinstance(promoted, Mapping) else None
    items = [
        {"step": step, "complete": True, "retained": True, "reasons": list(reasons)}
        | {"promoted": str(step) == str(promoted_step)}
        for step, reasons in (retention.get("kept") or {}).items()
    ]
    dropped: list[tuple[Any, list[str]]] = [(entry, []) for entry in retention.get("deleted") or []]
    dropped += [(entry, ["incomplete"]) for entry in retention.get("incomplete") or []]
    for entry, reasons in dropped:
        found = entry if isinstance(entry, Mapping) else {"step": entry}
        complete = not reasons and found.get("complete", True)
        row = {"step": found.get("step"), "complete": complete, "retained": False, "reasons": reasons}
        items.append(row | {"promoted": False})
    out["items"] = sorted(items, key=lambda i: (str(i["step"]).isdigit(), _int(i["step"])), reverse=True)
    return out


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1
