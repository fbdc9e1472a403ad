"""The ``check_changes`` step of a retraining run: fingerprint the inputs, skip when nothing changed.

A branch between staging and training (``docs/retraining.md``) with three outcomes: when the data
fingerprint, code hash, spec hash and evaluation fingerprint (the evaluation's script, held-out data
and arguments) all equal the registry champion's, train, evaluate, gate and register are skipped;
when only the evaluation changed and the champion's model is still there, the champion is
re-evaluated instead of training (``reevaluate`` and ``record_evaluation``); otherwise the run
trains. The reason is in its log, its XCom and the run's summary (``force`` trains anyway). It also
resolves the run's warm start. XCom keys: ``lineage``, ``skip_reason``, ``skipped``, ``action``,
``reevaluate``, ``warm_start_uri``, ``champion``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from airflow_dist_training.errors import SpecValidationError

_log = logging.getLogger("airflow.task")


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def check_changes(
    context: Mapping[str, Any],
    *,
    plan_task_id: str,
    backend: str,
    base_dir: str,
    registry: str | None,
    group: str,
    local_registry_dir: str | None,
    force: bool | str = False,
    warm_start: str = "none",
    promoted_uri: str | None = None,
    staged_sources: Mapping[str, str] | None = None,
    evaluation: Mapping[str, Any] | None = None,
    aws_conn_id: str | None = "aws_default",
    region_name: str | None = None,
    can_reevaluate: bool = False,
) -> str:
    """Return what the run does, ``train``, ``skip`` or ``reevaluate``; push the facts.

    :param evaluation: the run's evaluation inputs (``script``, ``data_uri``, ``arguments``,
        ``dependencies``), so that a new held-out set or evaluation script is a change.
    :param can_reevaluate: the group can re-evaluate the champion and record it (it has an
        evaluation, a gate and a registry); otherwise an evaluation change trains.
    """
    from airflow_dist_training.hooks.fingerprint import FingerprintHook
    from airflow_dist_training.retraining.warm_start import parse_warm_start, warm_start_source
    from airflow_dist_training.spec.loading import load_spec

    ti = context["ti"]
    params = dict(context.get("params") or {})
    forced = _truthy(force) or _truthy(params.get("force", False))
    choice = parse_warm_start(params.get("warm_start") or warm_start, "params.warm_start")
    from airflow_dist_training.mapped_groups import pull_own

    spec = load_spec(pull_own(ti, plan_task_id, "spec"))  # this member's plan in a mapped group
    champion = _champion(registry, group, local_registry_dir, aws_conn_id, region_name)
    hook = FingerprintHook(aws_conn_id, region_name)
    lineage = hook.lineage(
        spec,
        backend=backend,
        base_dir=base_dir,
        staged_sources=staged_sources,
        settings={"warm_start": choice},
    )
    if evaluation is not None:
        lineage = replace(
            lineage,
            evaluation_fingerprint=hook.evaluation_fingerprint(
                str(evaluation["script"]),
                evaluation.get("data_uri"),
                evaluation.get("arguments") or {},
                base_dir,
                evaluation.get("dependencies") or (),
            ),
        )
    decision, reevaluation = _decide(hook, lineage, champion, forced, can_reevaluate)
    promoted = _promoted_checkpoint(promoted_uri, aws_conn_id, region_name) if choice == "promoted" else None
    uri, warm_text = warm_start_source(
        choice,
        champion_model_uri=champion.model_data_uri if champion is not None else None,
        promoted_uri=promoted,
    )
    _log_lineage(lineage)
    print(decision.reason, flush=True)
    if decision.action == "train":
        print(warm_text.capitalize(), flush=True)
    ti.xcom_push(key="lineage", value=lineage.to_dict())
    ti.xcom_push(key="skip_reason", value=decision.reason)
    ti.xcom_push(key="skipped", value=decision.skip)
    ti.xcom_push(key="warm_start_uri", value=uri or "")
    ti.xcom_push(key="champion", value=champion.label if champion is not None else None)
    ti.xcom_push(key="action", value=decision.action)
    ti.xcom_push(key="reevaluate", value=reevaluation)
    return decision.action


def _decide(hook: Any, lineage: Any, champion: Any, forced: bool, can_reevaluate: bool) -> tuple[Any, dict[str, Any] | None]:
    """The skip decision, and what to re-evaluate when only the evaluation changed and the
    champion's model is still there (its listing is read only then)."""
    from airflow_dist_training.retraining.fingerprint import decide_skip

    decide = partial(
        decide_skip,
        lineage,
        champion.label if champion is not None else None,
        champion.lineage if champion is not None else None,
        force=forced,
    )
    decision = decide()
    if decision.changed != ("evaluation",) or not can_reevaluate or champion is None:
        return decision, None
    model = champion.model_data_uri
    decision = decide(champion_model_uri=model, champion_model_present=bool(model) and _model_listed(hook, str(model)))
    if not decision.reevaluate:
        return decision, None
    return decision, {
        "champion_id": champion.id,
        "champion": champion.label,
        "version": champion.version,
        "model_data_uri": model,
        "evaluation_fingerprint": lineage.evaluation_fingerprint,
    }


def _model_listed(hook: Any, uri: str) -> bool:
    """Whether the champion's model is still there; a listing that fails counts as gone (the run
    trains, and the log says why)."""
    try:
        return bool(hook.model_exists(uri))
    except Exception as exc:  # any store's error (permissions, unknown bucket): training is safe
        _log.warning("Cannot list the champion's model %s (training instead): %s", uri, exc)
        return False


def _champion(
    registry: str | None,
    group: str,
    local_registry_dir: str | None,
    aws_conn_id: str | None,
    region_name: str | None,
) -> Any:
    """The registry's champion, or None (no registry, no champion, or unreadable lineage: train)."""
    if not registry:
        return None
    from airflow_dist_training.evaluation.gate import ChampionUnreadableError
    from airflow_dist_training.hooks.registry import get_registry

    try:
        return get_registry(
            registry,
            group=group,
            local_registry_dir=local_registry_dir,
            aws_conn_id=aws_conn_id,
            region_name=region_name,
        ).get_champion()
    except ChampionUnreadableError as exc:
        _log.warning("Cannot read the champion's lineage (training anyway): %s", exc)
        return None


def _log_lineage(lineage: Any) -> None:
    for name, channel in lineage.channels.items():
        _log.info(
            "Channel %s: %s object(s), %s bytes, fingerprint %s (%s)",
            name,
            channel.get("objects", "?"),
            channel.get("bytes", "?"),
            channel.get("fingerprint"),
            channel.get("source"),
        )
    _log.info(
        "Data fingerprint %s, code hash %s, spec hash %s, evaluation fingerprint %s",
        lineage.data_fingerprint,
        lineage.code_hash,
        lineage.spec_hash,
        lineage.evaluation_fingerprint,
    )


def _promoted_checkpoint(uri: str | None, aws_conn_id: str | None, region_name: str | None) -> str | None:
    """The stable promotion location, when it holds a complete checkpoint."""
    if not uri:
        return None
    from airflow_dist_training.hooks.checkpoints import CheckpointHook

    try:
        held = CheckpointHook(aws_conn_id=aws_conn_id, region_name=region_name).holds_checkpoint(uri)
    except (SpecValidationError, OSError):
        return None
    return uri if held else None


def data_asset_emitter(
    asset: Any,
    source: str,
    *,
    base_dir: str = ".",
    aws_conn_id: str | None = "aws_default",
    region_name: str | None = None,
) -> Any:
    """A ``post_execute`` hook for the staging task: its asset event carries the data fingerprint.

    ``source`` is what the training channel reads after staging (the local channel directory, or
    the S3 prefix staged into FSx). The extra is ``{"fingerprint", "objects", "bytes", "source"}``;
    a consumer (another DAG, the UI) sees which data this event stands for.
    """

    def emit(context: Mapping[str, Any], result: Any = None) -> None:
        from airflow_dist_training.hooks.fingerprint import FingerprintHook

        fingerprint = FingerprintHook(aws_conn_id, region_name).channel_fingerprint(source, base_dir)
        context["outlet_events"][asset].extra.update(fingerprint)

    return emit
