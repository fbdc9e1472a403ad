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
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from airflow_dist_training.job_states import ACTIVE_STATES, TERMINAL_STATES
from airflow_dist_training.spec.backends import runs_on_aws

LINK_KEY = "sagemaker_training_job"  # links.sagemaker.XCOM_KEY (not imported: no Airflow here)
MLFLOW_RUN_KEY = "mlflow_run"  # hooks.mlflow.track_training_task pushes the job's run
PLAN_KEYS = ("cost_bound_usd", "request", "spec", "backend", "job_name", "dry_run")
MAX_POINTS = 2000  # per metric, to keep the page light on long jobs
SWEEP_TASK = "best_of_sweep"  # sweep_groups: its "selection" and "members" XComs
# A progress counter is a metric named for what it counts, e.g. "train:epoch", "global_step"
# (not "train:epochs_trained", a run's summary).
_COUNTER = re.compile(r"(?:^|[:/._ -])(?:global_)?(epoch|step|iteration)$", re.IGNORECASE)
# hyperparameters that give the run's total, by counter unit (both spellings of each)
TOTAL_KEYS = {
    "epoch": ("epochs", "num_epochs", "n_epochs", "num_train_epochs", "max_epochs"),
    "step": ("max_steps", "num_steps", "total_steps", "num_train_steps", "iterations"),
}

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


def counter_unit(name: str) -> str | None:
    """``"epoch"`` or ``"step"`` when the metric counts the run's progress (``train:epoch``,
    ``global_step``; ``iteration`` counts steps), else None."""
    found = _COUNTER.search(name)
    if found is None:
        return None
    return "epoch" if found.group(1).lower() == "epoch" else "step"


def counter_observations(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The progress counter's ``(time, value)`` observations: the epoch metric if there is one,
    else the step metric; the highest value of all hosts at each time. None without a counter."""
    by_unit: dict[str, dict[float, float]] = {}
    for p in points:
        unit = counter_unit(str(p.get("name", "")))
        if unit is None:
            continue
        seen = by_unit.setdefault(unit, {})
        t = float(p["timestamp"])
        seen[t] = max(seen.get(t, float("-inf")), float(p["value"]))
    for unit in ("epoch", "step"):
        if by_unit.get(unit):
            seen = by_unit[unit]
            return {"unit": unit, "points": sorted(seen.items()), "lowest": min(seen.values())}
    return None


def total_from_hyperparameters(hyperparameters: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's total (``{"unit": "epoch", "total": 8}``) from its hyperparameters (``epochs``,
    ``max_steps``, ... in ``-`` or ``_`` spelling), epochs first; None when none is set."""
    normalised = {str(k).replace("-", "_").lower(): v for k, v in hyperparameters.items()}
    for unit, keys in TOTAL_KEYS.items():
        for key in keys:
            try:
                total = float(normalised[key])
            except (KeyError, TypeError, ValueError):
                continue
            if total > 0 and total.is_integer():
                return {"unit": unit, "total": int(total)}
    return None


def progress_and_eta(
    counter: Mapping[str, Any] | None,
    total: Mapping[str, Any] | None,
    *,
    running: bool,
    now: float,
) -> dict[str, Any] | None:
    """How far the run is (``done`` of ``total`` epochs or steps) and, while it runs, its ETA.

    ``counter`` is :func:`counter_observations`' result, ``total`` that of
    :func:`total_from_hyperparameters`. A counter that starts at 0 (``for epoch in range(n)``,
    printed when the epoch ends) counts from 0, so value ``v`` means ``v + 1`` done; one whose
    lowest value (``counter["lowest"]``, else the lowest observed) is 1, or that reaches the total,
    counts from 1. The rate is what the counter
    gained over the time it was observed (>= 2 observations); the ETA is the rest at that rate,
    less the time since the last observation. A total in another unit than the counter is not
    used (no fraction, no ETA).
    """
    observed = list(counter.get("points") or []) if counter else []
    unit = str(counter["unit"]) if counter else (str(total["unit"]) if total else None)
    if unit is None:
        return None
    goal = int(total["total"]) if total and total.get("unit") == unit else None
    if not observed:
        return {
            "unit": unit,
            "done": None,
            "total": goal,
            "fraction": None,
            "rate_per_hour": None,
            "eta_seconds": None,
        }
    values = [v for _, v in observed]
    lowest = float(counter.get("lowest", min(values))) if counter else min(values)
    one_based = lowest != 0 and (lowest == 1 or (goal is not None and goal in values))
    offset = 0 if one_based else 1
    (t_first, v_first), (t_last, v_last) = observed[0], observed[-1]
    done = int(max(values)) + offset
    if goal is not None:
        done = min(done, goal)
    rate = (v_last - v_first) / (t_last - t_first) if t_last > t_first and v_last > v_first else None
    eta = None
    if running and rate is not None and goal is not None:
        eta = max(0.0, (goal - (v_last + offset)) / rate - max(0.0, now - t_last))
    return {
        "unit": unit,
        "done": done,
        "total": goal,
        "fraction": round(done / goal, 4) if goal else None,
        "rate_per_hour": None if rate is None else round(rate * 3600, 3),
        "eta_seconds": None if eta is None else round(eta, 1),
    }


def metric_curves(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-metric series with an epoch axis when an epoch counter (``train:epoch``) is defined,
    else seconds, and the progress counter's observations (:func:`counter_observations`).

    A metric point gets the epoch of the latest epoch point of the same host seen at (about) the
    same time: the demo's ``train:epoch`` is read from the same line as ``train:loss``.
    """
    points = sorted(points, key=lambda p: (float(p.get("timestamp", 0)), str(p.get("name"))))
    epoch_names = {str(p["name"]) for p in points if counter_unit(str(p.get("name", ""))) == "epoch"}
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
        "counter": counter_observations(points),
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


def _hyperparameters(plan: Mapping[str, Any]) -> Mapping[str, Any]:
    """The job's hyperparameters: the plan's spec, else its request (SageMaker's strings)."""
    spec = plan.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("hyperparameters"), Mapping):
        return spec["hyperparameters"]
    request = plan.get("request")
    if isinstance(request, Mapping) and isinstance(request.get("HyperParameters"), Mapping):
        return request["HyperParameters"]
    return {}


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
    gated |= {_group(task) for (task, key), value in xcoms.items() if _tuning(value) is not None}
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
        "members": members_side_by_side(jobs, xcoms) + tuning_members(xcoms, sagemaker, now),
        "sections": sections,
    }


_MEMBER_GROUP = re.compile(r"^(?P<family>.*)\[(?P<index>\d+)\]$")


def members_side_by_side(jobs: list[dict[str, Any]], xcoms: XComMap) -> list[dict[str, Any]]:
    """Per mapped group of >= 2 training jobs (``stage_train_evaluate(members=...)``, a sweep's
    trials): its members in map-index order and one set of curves per metric, a curve per member
    (its first host's: every host is on the member's own card), the sweep's winner marked.

    Members are named as the sweep names them (``best_of_sweep``'s ``members`` XCom, in map-index
    order), else by their spec's name, else their job's. Each member's job card gets its name and
    whether it won. Members whose curves have another x axis than most (epoch or seconds) are left
    out of the charts."""
    families: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for job in jobs:
        if found := _MEMBER_GROUP.match(_group(job["task_id"])):
            families.setdefault(found["family"], []).append((int(found["index"]), job))
    out = []
    for family, members in sorted(families.items()):
        if len(members) < 2:
            continue
        members.sort(key=lambda m: m[0])
        sweep_task = _in_group(_group(family), SWEEP_TASK)
        selection = xcoms.get((sweep_task, "selection"))
        winner = selection.get("winner") if isinstance(selection, Mapping) else None
        rows = xcoms.get((sweep_task, "members"))
        names = (
            [str(r.get("member")) for r in rows if isinstance(r, Mapping)] if isinstance(rows, list) else []
        )
        labelled = []
        for index, job in members:
            spec = xcoms.get((f"{family}[{index}].plan", "spec"))
            if index < len(names):
                label = names[index]
            elif isinstance(spec, Mapping) and spec.get("name"):
                label = str(spec["name"])
            else:
                label = str(job.get("job_name") or f"[{index}]")
            job["member"], job["winner"] = label, winner is not None and label == winner
            labelled.append((index, job))
        objective = selection.get("metric") if isinstance(selection, Mapping) else None
        out.append(_members_block(family, labelled, winner, objective))
    return out


def _members_block(
    group: str, members: list[tuple[int, dict[str, Any]]], winner: str | None, objective: str | None
) -> dict[str, Any]:
    """The "members side by side" block (``training.js``'s ``membersCard``) of ``members``: (index,
    job view with its ``member`` label and ``winner`` flag), one set of curves per metric, a curve
    per member (its first host's) on the x axis most members have."""
    axes = [j["metrics"].get("axis") for _, j in members if j["metrics"].get("series")]
    axis = max(sorted(set(axes)), key=axes.count) if axes else "seconds"
    listed: list[dict[str, Any]] = []
    metrics: dict[str, list[dict[str, Any]]] = {}
    for index, job in members:
        label, won = job["member"], job["winner"]
        listed.append(
            {
                "index": index,
                "member": label,
                "winner": won,
                "task_id": job["task_id"],
                "job_name": job["job_name"],
                "status": job["status"],
                "progress": job["progress"],
                "final_metrics": job["final_metrics"],
                "error": job.get("error"),  # why its curves did not load (SageMaker unreachable)
            }
        )
        if job["metrics"].get("axis") != axis:
            continue
        for name, points in (job["metrics"].get("series") or {}).items():
            hosts = sorted({p["host"] for p in points})
            first = (
                [{"x": p["x"], "value": p["value"]} for p in points if p["host"] == hosts[0]] if hosts else []
            )
            metrics.setdefault(name, []).append({"member": label, "winner": won, "points": first})
    return {
        "group": group,
        "axis": axis,
        "winner": winner,
        "objective": objective,
        "members": listed,
        "metrics": metrics,
    }


def tuning_members(xcoms: XComMap, sagemaker: SageMakerSource | None, now: float) -> list[dict[str, Any]]:
    """Per tuning step (a ``train`` task whose result has ``tuning``: ``operators/tuning.py``): its
    training jobs side by side as :func:`members_side_by_side` shows a sweep's, each named by its
    job name, the tuning job's best training job marked. Their curves come from where each job
    wrote them: on the local backend the job's directory, beside the winner's (the result's ARN is
    ``local://<job dir>``: one executor root runs them all), else SageMaker's CloudWatch metrics
    through ``sagemaker``, in the winner's region."""
    out = []
    for (task_id, key), result in sorted(xcoms.items()):
        card = _tuning(result) if key == "return_value" else None
        if card is None:
            continue
        backend = str(result.get("backend") or "sagemaker")
        arn = str(result.get("job_arn") or "")
        jobs_root = Path(arn.removeprefix("local://")).parent if arn.startswith("local://") else None
        region = arn.split(":")[3] if arn.startswith("arn:") and arn.count(":") >= 5 else None
        group = _group(task_id)
        plan = {k: xcoms.get((_in_group(group, "plan"), k)) for k in PLAN_KEYS}
        members = []
        charted = _charted_training_jobs(card)
        for index, row in enumerate(card["training_jobs"]):
            name = str(row.get("job_name") or f"[{index}]")
            job_dir = str(jobs_root / name) if jobs_root is not None else None
            info = {"backend": backend, "job_name": name, "job_dir": job_dir, "region": region}
            live, error = _live_job(info, sagemaker) if name in charted else ({}, None)
            metrics: dict[str, Any] = dict(live.get("metrics") or {"axis": "seconds", "series": {}})
            status = str(row.get("status") or live.get("status") or "InProgress")
            hyperparameters = {**_hyperparameters(plan), **dict(row.get("tuned_hyperparameters") or {})}
            objective = row.get("objective_value")
            job = {
                "task_id": task_id,
                "job_name": name,
                "member": name,
                "winner": bool(row["winner"]),
                "status": status,
                "progress": progress_and_eta(
                    metrics.get("counter"),
                    total_from_hyperparameters(hyperparameters),
                    running=status in ACTIVE_STATES,
                    now=now,
                ),
                "final_metrics": {} if objective is None else {card["objective_metric"]: objective},
                "metrics": metrics,
                "error": error,
            }
            members.append((index, job))
        block = _members_block(group or task_id, members, card["winner"], card["objective_metric"])
        shown = len(charted) < len(card["training_jobs"])
        note = (
            f"curves of the {len(charted)} best of {len(card['training_jobs'])} training jobs"
            if shown
            else None
        )
        out.append(block | {"tuning_job": card["job_name"], "curves_note": note})
    return out


#: training jobs of one tuning job whose curves a page load reads (each is a DescribeTrainingJob and
#: a GetMetricData on SageMaker): a 500-job tuning job must not cost 1,000 calls per refresh
MAX_CHARTED_TRAINING_JOBS = 12


def _charted_training_jobs(card: Mapping[str, Any]) -> set[str]:
    """The winner and the training jobs whose objective is nearest to it (the next best, whichever
    way the objective goes), up to ``MAX_CHARTED_TRAINING_JOBS``; every job keeps its table row."""
    best = card.get("winner_value")

    def distance(row: Mapping[str, Any]) -> float:
        value = row.get("objective_value")
        if row.get("winner"):
            return -1.0
        if value is None or best is None:
            return float("inf")
        return abs(float(value) - float(best))

    ranked = sorted(card["training_jobs"], key=distance)
    return {str(row.get("job_name")) for row in ranked[:MAX_CHARTED_TRAINING_JOBS]}


def _live_job(
    info: Mapping[str, Any], sagemaker: SageMakerSource | None
) -> tuple[dict[str, Any], str | None]:
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
    metrics: dict[str, Any] = dict(live.get("metrics") or {"axis": "seconds", "series": {}})
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
        "metrics": metrics,
        "progress": progress_and_eta(
            metrics.get("counter"),
            total_from_hyperparameters(_hyperparameters(plan)),
            running=status in ACTIVE_STATES,
            now=now,
        ),
        "final_metrics": result.get("final_metrics") or {},
        "model_artifact_uri": result.get("model_artifact_uri"),
        "checkpoint_uri": result.get("checkpoint_uri") or info.get("checkpoint_uri"),
        "mlflow_run_url": (xcoms.get((task_id, MLFLOW_RUN_KEY)) or {}).get("url"),
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
    tuning = _tuning(get("train"))
    if not any((decision, evaluation, registration, promoted, retention, tuning)) and not has_jobs:
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
        "tuning": tuning,
    }


def _tuning(result: Any) -> dict[str, Any] | None:
    """A tuning step's card (its ``train`` task's result, ``operators/tuning.py``): the tuning job,
    each of its training jobs with its objective value, and the winner; None for any other result."""
    tuning = result.get("tuning") if isinstance(result, Mapping) else None
    if not isinstance(tuning, Mapping):
        return None
    winner = result.get("job_name")
    return {
        "job_name": tuning.get("job_name"),
        "status": tuning.get("status"),
        "strategy": tuning.get("strategy"),
        "objective_metric": tuning.get("objective_metric"),
        "winner": winner,
        "winner_value": tuning.get("objective_value"),
        "training_job_counts": dict(tuning.get("training_job_counts") or {}),
        "training_jobs": [
            {**job, "winner": job.get("job_name") == winner}
            for job in tuning.get("training_jobs") or []
            if isinstance(job, Mapping)
        ],
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
