"""Evaluate -> gate -> register, as three Airflow operators (``docs/evaluation.md``).

Constructors validate their own arguments and do no I/O; every rule lives in
``airflow_dist_training.evaluation``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from airflow.providers.standard.utils.skipmixin import SkipMixin
from airflow.sdk import BaseOperator

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.evaluation.gate import (
    ChampionUnreadableError,
    check_thresholds_apply,
    evaluate_gate,
    parse_gate_spec,
    summary,
)
from airflow_dist_training.evaluation.schema import EVALUATION_FILE_NAME, EvaluationResult, parse_evaluation
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.lineage import evaluation_lineage, registration_lineage
from airflow_dist_training.links.evaluation import EvaluationReportLink, RegistrationAuditLink
from airflow_dist_training.operators import default_deferrable
from airflow_dist_training.storage.location import uri_scheme

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_dist_training.hooks.evaluation import ArtifactStore

_XCOM_RETURN_KEY = "return_value"
_EXTRA_EVALUATION_KEYS = {"evaluation_uri", "backend", "job_name", "job_arn"}


class Evaluated(NamedTuple):
    result: EvaluationResult
    uri: str  # where its evaluation.json is
    job: dict[str, Any]  # what the task's result adds: the job's name and ARN (none for a process)


class EvaluationRunner(Protocol):
    """How an evaluation kind (``spec/evaluations.py``) runs the operator's script over its model.

    The kind's factory is called with the ``EvaluationOperator``, its templates rendered."""

    def evaluate(self, context: Context) -> Evaluated:
        """Run the evaluation to its end, or defer the task (``execute_complete`` then resumes)."""
        ...

    def resume(self, event: dict[str, Any], evaluation_uri: str) -> Evaluated:
        """After a deferral: the evaluation, or the failure the trigger reported, raised."""
        ...

    def on_kill(self) -> None:
        """The task was killed: stop what runs outside the task process, when it must stop."""
        ...


def _run_identity(context: Context) -> str:
    from airflow_dist_training.sagemaker.naming import identity_from_context

    return identity_from_context(context, context["ti"].task_id)


def _store(aws_conn_id: str | None, region_name: str | None) -> ArtifactStore:
    from airflow_dist_training.hooks.evaluation import ArtifactStore

    return ArtifactStore(aws_conn_id, region_name)


def coerce_evaluation(
    value: Any, store: ArtifactStore, field: str = "evaluation"
) -> tuple[EvaluationResult, str]:
    """Accept an ``EvaluationOperator`` XCom dict, an ``evaluation.json`` URI/path, or a raw dict."""
    if isinstance(value, (str, os.PathLike)):
        uri = str(value)
        if uri.endswith("/") or not uri.endswith(".json"):
            uri = uri.rstrip("/") + "/" + EVALUATION_FILE_NAME
        return store.load_evaluation(uri), uri
    if isinstance(value, Mapping):
        uri = str(value.get("evaluation_uri") or f"<{field}>")
        data = {k: v for k, v in value.items() if k not in _EXTRA_EVALUATION_KEYS}
        return parse_evaluation(data, source=uri), uri
    why = f"must be an evaluation dict (EvaluationOperator output) or a URI, got {type(value).__name__}"
    raise SpecValidationError([(field, why)])


class EvaluationOperator(AwsConnectionMixin, BaseOperator):
    """Run an evaluation script over a model and return its parsed ``evaluation.json``.

    The script is called as ``python <script> --model-dir <dir> --output-dir <dir> [arguments]``
    and must write ``<output-dir>/evaluation.json`` (schema: ``docs/evaluation.md``). A
    ``model.tar.gz`` is extracted first; a checkpoint directory is used as it is.

    :param script: the evaluation script: a local path (local backend) or ``s3://.../evaluate.py``
        (SageMaker; its folder is shipped so helper modules can sit next to it).
    :param model_uri: ``model.tar.gz`` (path, ``file://`` or ``s3://``) or a checkpoint directory /
        S3 prefix. Typically ``"{{ ti.xcom_pull('train')['model_artifact_uri'] }}"``.
    :param backend: a registered backend; its evaluation kind (``spec/evaluations.py``) decides how
        this runs: a process on the worker (``local``) or a SageMaker processing job (``sagemaker``).
    :param output_uri: where ``evaluation.json`` goes: a local directory or an ``s3://`` prefix.
        Local default: ``$AIRFLOW_HOME/evaluation/<dag>/<run>/<task>``. Required for SageMaker.
    :param data_uri: optional evaluation data (local dir or ``s3://`` prefix), exposed to the
        script as ``ADT_DATA_DIR``.
    :param arguments: extra command-line arguments for the script.
    :param dependencies: local files or directories shipped with the script, beside it under
        their own names (the SageMaker SDK's processing ``dependencies``), e.g. a helper module the
        image lacks. Packed the same way on both backends; needs a local ``script``.
    :param env: extra environment variables for the script.
    :param python: interpreter for the local backend (default: the worker's).
    :param timeout: seconds before the evaluation is abandoned (local: killed).
    :param image_uri: SageMaker: the image to run in (use the training image).
    :param role_arn: SageMaker: execution role of the processing job.
    :param instance_type: SageMaker: processing instance type.
    :param instance_count: SageMaker: processing instance count.
    :param volume_size_gb: SageMaker: EBS volume size.
    :param max_runtime_seconds: SageMaker: ``StoppingCondition.MaxRuntimeInSeconds``.
    :param job_name: SageMaker: processing job name; default is deterministic per task run, so a
        retry re-attaches to the same job instead of starting a second one.
    :param network_config: SageMaker: ``NetworkConfig`` of the processing job.
    :param tags: SageMaker: tags of the processing job.
    :param poll_interval: SageMaker: seconds between status checks.
    :param deferrable: SageMaker: wait for the processing job in the triggerer (no worker slot held),
        streaming its CloudWatch logs into the task log.
    :param aws_conn_id: Airflow AWS connection.
    :param region_name: AWS region.

    The script runs with the code it ships and nothing else of its folder: the ``*.py`` beside it
    and its ``dependencies``. On SageMaker they (and a local ``data_uri`` directory) are uploaded
    to ``<output_uri>/inputs/`` before the job starts, as the processing job's code input; locally
    they are copied into the run's own code folder. A script that fails (non-zero exit, a missing
    module) fails the task at once: a retry would run the same code on the same model.
    """

    template_fields: Sequence[str] = (
        "script",
        "model_uri",
        "output_uri",
        "data_uri",
        "arguments",
        "dependencies",
        "env",
        "image_uri",
        "role_arn",
        "job_name",
        "tags",
    )
    ui_color = "#dbeafe"

    def __init__(
        self,
        *,
        script: str,
        model_uri: str,
        backend: str = "local",
        output_uri: str | None = None,
        data_uri: str | None = None,
        arguments: Sequence[str] = (),
        dependencies: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        python: str | None = None,
        timeout: float | None = None,
        image_uri: str | None = None,
        role_arn: str | None = None,
        instance_type: str = "ml.m5.xlarge",
        instance_count: int = 1,
        volume_size_gb: int = 30,
        max_runtime_seconds: int = 3600,
        job_name: str | None = None,
        network_config: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        poll_interval: float = 30,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deferrable = default_deferrable(deferrable)
        from airflow_dist_training.spec.backends import backend_record
        from airflow_dist_training.spec.evaluations import evaluation_record

        # how the evaluation runs is the backend's evaluation kind: a job in the account, or on this machine
        if evaluation_record(backend_record(backend).evaluation).on_aws:
            required = {"image_uri": image_uri, "role_arn": role_arn, "output_uri": output_uri}
            missing = [name for name, value in required.items() if not value]
            if missing:
                raise SpecValidationError([(m, f"is required for backend={backend!r}") for m in missing])
        if isinstance(dependencies, list | tuple | str):  # else resolved at run time (the plan task's XCom)
            _check_dependencies(script, dependencies)
            dependencies = [str(d) for d in dependencies]
        self.script = script
        self.model_uri = model_uri
        self.backend = backend
        self.output_uri = output_uri
        self.data_uri = data_uri
        self.arguments = list(arguments)
        self.dependencies = dependencies
        self.env = dict(env or {})
        self.python = python
        self.timeout = timeout
        self.image_uri = image_uri
        self.role_arn = role_arn
        self.instance_type = instance_type
        self.instance_count = instance_count
        self.volume_size_gb = volume_size_gb
        self.max_runtime_seconds = max_runtime_seconds
        self.job_name = job_name
        self.network_config = dict(network_config) if network_config else None
        self.tags = dict(tags or {})
        self.poll_interval = poll_interval
        self._set_aws_connection(aws_conn_id, region_name)
        self._runner: EvaluationRunner | None = None
        self._try: Any = None  # this try's task instance: on_kill reads its state

    def _new_runner(self) -> EvaluationRunner:
        from airflow_dist_training.spec.backends import backend_record
        from airflow_dist_training.spec.evaluations import evaluation_record

        runner: EvaluationRunner = evaluation_record(backend_record(self.backend).evaluation).load_factory()(self)
        return runner

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_dist_training.retry import failing_fast_without_retry_policy

        self._try = context.get("ti")
        self._runner = self._new_runner()
        with failing_fast_without_retry_policy():
            result, uri, job = self._runner.evaluate(context)
        self._lineage_result = {"evaluation_uri": uri}
        return self._result(result, uri, job)

    def _result(self, result: EvaluationResult, uri: str, job: Mapping[str, Any]) -> dict[str, Any]:
        self.log.info("Evaluation metrics: %s", result.metrics)
        return {**result.model_dump(mode="json"), "evaluation_uri": uri, "backend": self.backend, **job}

    def execute_complete(
        self, context: Context, event: dict[str, Any] | None = None, evaluation_uri: str = ""
    ) -> dict[str, Any]:
        """Resume after the deferred evaluation ended: its ``evaluation.json``, or the failure as an error."""
        event = event or {"status": "error", "message": "no event from the trigger"}
        result, uri, job = self._new_runner().resume(event, evaluation_uri)
        return self._result(result, uri, job)

    def on_kill(self) -> None:
        """Stop what the evaluation runs outside the task process (a local script dies with it)."""
        if self._runner is not None:
            self._runner.on_kill()

    get_openlineage_facets_on_complete = evaluation_lineage  # the model in, evaluation.json out


class QualityGateOperator(AwsConnectionMixin, BaseOperator, SkipMixin):
    """Decide whether a challenger model may be registered; skip (or fail) downstream when not.

    Short-circuit semantics (as ``ShortCircuitOperator``): on rejection every downstream task is
    skipped (``ignore_downstream_trigger_rules=True``), or only the direct ones (``False``; later
    tasks then follow their own trigger rules, e.g. a ``notify`` task with ``all_done``). With
    ``fail_on_reject=True`` the task fails instead, failing the run. The decision (``passed``,
    ``reasons``, ``challenger``, ``champion``, ``thresholds``, ``report_uri``) is the task's XCom
    in every case.

    :param evaluation: the ``EvaluationOperator`` output (``evaluate.output``), or the URI/path of
        an ``evaluation.json`` (or of its folder).
    :param thresholds: metric -> checks, e.g. ``{"accuracy": {"min": 0.9, "no_regression": True},
        "loss": {"direction": "lower_is_better", "max": 0.3}}``. Validated at parse time.
    :param require_same_evaluation_set: reject when the champion was evaluated on another set.
    :param registry: where the champion lives: a registered registry kind (``sagemaker``,
        ``local``, ...; ``spec/registries.py``), or ``None`` (absolute thresholds only).
    :param model_package_group_name: the model package group (both registries).
    :param local_registry_dir: directory of the local registry.
    :param fail_on_reject: fail the task instead of skipping downstream.
    :param ignore_downstream_trigger_rules: skip all downstream tasks (True) or only direct ones.
    :param report_uri: folder or ``s3://`` prefix for the report; default: next to evaluation.json.
    :param write_report: write ``evaluation_report.md`` / ``.html`` and link them.
    :param training: the training task's result (``train.output``): the gate then also refuses a
        model that did not learn (zero epochs/steps trained, or the champion's model bytes).
    :param aws_conn_id: Airflow AWS connection.
    :param region_name: AWS region.
    """

    template_fields: Sequence[str] = (
        "evaluation",
        "model_package_group_name",
        "local_registry_dir",
        "report_uri",
        "training",
    )
    operator_extra_links = (EvaluationReportLink(),)
    ui_color = "#fef3c7"
    inherits_from_skipmixin = True

    def __init__(
        self,
        *,
        evaluation: Any,
        thresholds: Mapping[str, Any],
        require_same_evaluation_set: bool = False,
        registry: str | None = None,
        model_package_group_name: str | None = None,
        local_registry_dir: str | None = None,
        fail_on_reject: bool = False,
        ignore_downstream_trigger_rules: bool = True,
        report_uri: str | None = None,
        write_report: bool = True,
        training: Any = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.training = training
        # Parse-time validation: a typo in a threshold is a DAG import error naming the field.
        spec = parse_gate_spec(thresholds, require_same_evaluation_set=require_same_evaluation_set)
        _check_registry_args(registry, model_package_group_name, local_registry_dir, allow_none=True)
        self.evaluation = evaluation
        self.thresholds = {k: v.model_dump(exclude_defaults=True) for k, v in spec.thresholds.items()}
        self.require_same_evaluation_set = require_same_evaluation_set
        self.registry = registry
        self.model_package_group_name = model_package_group_name
        self.local_registry_dir = local_registry_dir
        self.fail_on_reject = fail_on_reject
        self.ignore_downstream_trigger_rules = ignore_downstream_trigger_rules
        self.report_uri = report_uri
        self.write_report = write_report
        self._set_aws_connection(aws_conn_id, region_name)

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_dist_training.compat import AirflowFailException

        store = _store(self.aws_conn_id, self.region_name)
        spec = parse_gate_spec(self.thresholds, require_same_evaluation_set=self.require_same_evaluation_set)
        challenger, uri = coerce_evaluation(self.evaluation, store)
        check_thresholds_apply(challenger, spec, uri)  # before any registry call
        champion = None
        if self.registry:
            try:
                champion = _registry(self).get_champion()
            except ChampionUnreadableError as exc:
                if any(t.needs_champion for t in spec.thresholds.values()):
                    raise
                self.log.warning("Ignoring the champion (no threshold compares with it): %s", exc)
        training = dict(self.training) if isinstance(self.training, Mapping) else None
        decision = evaluate_gate(
            challenger,
            spec,
            champion,
            challenger_uri=uri,
            training=training,
            same_model_as_champion=self._same_model(training, champion),
        )
        decision["report_uri"] = None
        if self.write_report and not uri.startswith("<"):
            decision["report_uri"] = self._write_reports(store, decision, uri)
            EvaluationReportLink.persist(context, decision["report_uri"], self.region_name)
        self.log.info("%s", summary(decision))
        ti = context["ti"]
        ti.xcom_push(key=_XCOM_RETURN_KEY, value=decision)  # also when skipping or failing
        if decision["passed"]:
            return decision
        if self.fail_on_reject:
            raise AirflowFailException(summary(decision))
        self._skip_downstream(context)
        return decision

    def _same_model(self, training: Mapping[str, Any] | None, champion: Any) -> bool | None:
        """Whether the challenger's model artifact holds the champion's bytes (None: cannot tell)."""
        mine = (training or {}).get("model_artifact_uri")
        theirs = getattr(champion, "model_data_uri", None)
        if not mine or not theirs:
            return None
        from airflow_dist_training.hooks.fingerprint import FingerprintHook

        try:
            return FingerprintHook(self.aws_conn_id, self.region_name).same_model(str(mine), str(theirs))
        except Exception as exc:  # a missing/unreadable champion artifact must not fail the gate
            self.log.warning("Could not compare the model with the champion's (%s): %s", theirs, exc)
            return None

    def _write_reports(self, store: ArtifactStore, decision: dict[str, Any], evaluation_uri: str) -> str:
        # the renderer loads with the first report, not at DAG parse
        from airflow_dist_training.evaluation.report import (
            REPORT_HTML,
            REPORT_MD,
            render_html,
            render_markdown,
        )
        from airflow_dist_training.hooks.evaluation import join_uri, parent_uri

        folder = self.report_uri or parent_uri(evaluation_uri)
        title = f"Model evaluation: {self.dag_id}.{self.task_id}"
        store.write_text(
            join_uri(folder, REPORT_MD), render_markdown(decision, title), "text/markdown; charset=utf-8"
        )
        return store.write_text(
            join_uri(folder, REPORT_HTML), render_html(decision, title), "text/html; charset=utf-8"
        )

    def _skip_downstream(self, context: Context) -> None:
        task = context["task"]
        tasks = (
            task.get_flat_relatives(upstream=False)
            if self.ignore_downstream_trigger_rules
            else task.get_direct_relatives(upstream=False)
        )
        to_skip = [t for t in tasks if not getattr(t, "is_teardown", False)]
        if not to_skip:
            return
        self.log.info("Gate rejected the model: skipping %s", sorted(t.task_id for t in to_skip))
        self.skip(ti=context["ti"], tasks=to_skip)  # raises DownstreamTasksSkipped


def _registry(operator: Any) -> Any:
    """The registry a gate or register task was configured with (``hooks/registry.get_registry``)."""
    from airflow_dist_training.hooks.registry import get_registry

    return get_registry(
        operator.registry,
        group=operator.model_package_group_name or "",
        local_registry_dir=operator.local_registry_dir,
        aws_conn_id=operator.aws_conn_id,
        region_name=operator.region_name,
    )


def _check_dependencies(script: str, dependencies: Sequence[str]) -> None:
    """Parse-time checks of ``dependencies`` (local entries, one archive path each, a local script)."""
    from airflow_dist_training.spec.training import dependencies_problem

    if isinstance(dependencies, str):
        raise SpecValidationError([("dependencies", "must be a list of local paths, not one string")])
    problem = dependencies_problem([str(d) for d in dependencies])
    if problem:
        raise SpecValidationError([("dependencies", problem)])
    if dependencies and uri_scheme(str(script)) == "s3":
        raise SpecValidationError(
            [("dependencies", "are shipped with a local script; with an s3:// script, put them in its folder")]
        )


def _check_registry_args(
    registry: str | None, group: str | None, local_dir: str | None, *, allow_none: bool
) -> None:
    from airflow_dist_training.spec.registries import find_registry, registry_kinds

    problems: list[tuple[str, str]] = []
    kinds = " or ".join(map(repr, registry_kinds()))
    record = find_registry(registry)
    if registry is None:
        if not allow_none:
            problems.append(("registry", f"is required: {kinds}"))
    elif record is None:
        problems.append(("registry", f"must be {kinds}, got {registry!r}"))
    else:
        if not group:
            problems.append(("model_package_group_name", f"is required when registry={registry!r}"))
        if record.local_dir and not local_dir:
            problems.append(("local_registry_dir", f"is required when registry={registry!r}"))
    if problems:
        raise SpecValidationError(problems)


class RegisterModelOperator(AwsConnectionMixin, BaseOperator):
    """Register a model version in a SageMaker model package group or the local registry.

    Approval status: ``Approved`` only when the gate passed **and** ``auto_approve=True``;
    ``PendingManualApproval`` otherwise. An audit record (evaluation-set hash, thresholds,
    challenger and champion metrics, gate reasons, training job) is written next to the report.
    The group is created when it is missing. A retry of this task does not create a second
    version (SageMaker ``ClientToken`` / local token derived from the task run).

    :param evaluation: ``evaluate.output`` or the URI of ``evaluation.json`` (SageMaker: ``s3://``,
        since the package's ``ModelMetrics`` points at it).
    :param decision: the gate's output (``gate.output``); ``None`` registers as pending.
    :param training: the training task's result (``TrainingResult``): lineage and default model.
    :param model_data_uri: the model artifact; default ``training["model_artifact_uri"]``.
    :param image_uri: inference image (required by kinds that serve one, such as ``sagemaker``).
    :param registry: a registered registry kind: ``sagemaker``, ``local``, ... (``spec/registries.py``).
    :param model_package_group_name: the group.
    :param local_registry_dir: directory of the local registry.
    :param auto_approve: approve automatically when the gate passed.
    :param description: package description.
    :param tags: extra tags (SageMaker) / labels (local).
    :param lineage: what the run trained on (the ``check_changes`` task's ``lineage`` XCom:
        data fingerprint, code hash, spec hash); recorded with the training job name, the run id,
        the champion compared with and the gate decision.
    :param aws_conn_id: Airflow AWS connection.
    :param region_name: AWS region.
    """

    template_fields: Sequence[str] = (
        "evaluation",
        "decision",
        "training",
        "lineage",
        "model_data_uri",
        "image_uri",
        "model_package_group_name",
        "local_registry_dir",
        "description",
        "tags",
    )
    operator_extra_links = (RegistrationAuditLink(),)
    ui_color = "#dcfce7"

    def __init__(
        self,
        *,
        evaluation: Any,
        model_package_group_name: str,
        registry: str = "sagemaker",
        decision: Mapping[str, Any] | None = None,
        training: Mapping[str, Any] | None = None,
        model_data_uri: str | None = None,
        image_uri: str | None = None,
        local_registry_dir: str | None = None,
        auto_approve: bool = False,
        description: str | None = None,
        tags: Mapping[str, str] | None = None,
        lineage: Any = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lineage = lineage
        _check_registry_args(registry, model_package_group_name, local_registry_dir, allow_none=False)
        from airflow_dist_training.spec.registries import registry_record

        if registry_record(registry).needs_image and not image_uri:
            raise SpecValidationError([("image_uri", f"is required when registry={registry!r}")])
        if model_data_uri is None and training is None:
            raise SpecValidationError(
                [("model_data_uri", "give model_data_uri, or training (its model_artifact_uri)")]
            )
        self.evaluation = evaluation
        self.decision = decision
        self.training = training
        self.model_data_uri = model_data_uri
        self.image_uri = image_uri
        self.registry = registry
        self.model_package_group_name = model_package_group_name
        self.local_registry_dir = local_registry_dir
        self.auto_approve = auto_approve
        self.description = description
        self.tags = dict(tags or {})
        self._set_aws_connection(aws_conn_id, region_name)

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_dist_training.evaluation.registration import build_lineage

        store = _store(self.aws_conn_id, self.region_name)
        _, evaluation_uri = coerce_evaluation(self.evaluation, store)
        if evaluation_uri.startswith("<"):
            raise SpecValidationError([("evaluation", "needs an evaluation_uri (the stored evaluation.json)")])
        model = self.model_data_uri or (self.training or {}).get("model_artifact_uri")
        if not model:
            why = "is empty and the training result has no model_artifact_uri"
            raise SpecValidationError([("model_data_uri", why)])
        decision = dict(self.decision) if isinstance(self.decision, Mapping) else None
        if self.decision is not None and decision is None:
            why = f"must be the gate's output dict, got {type(self.decision).__name__}"
            raise SpecValidationError([("decision", why)])
        reg = _registry(self)

        lineage = build_lineage(
            self.lineage if isinstance(self.lineage, Mapping) else None,
            training=self.training,
            decision=decision,
            run_id=str(context.get("run_id") or ""),
            dag_id=self.dag_id if self.has_dag() else None,
        )
        # one version per run: a retried task sends the same token and gets the same version back
        token = hashlib.sha256(_run_identity(context).encode()).hexdigest()[:32]
        result = reg.register(
            model_data_uri=str(model),
            image_uri=self.image_uri,
            evaluation_uri=evaluation_uri,
            decision=decision,
            auto_approve=self.auto_approve,
            training=self.training,
            description=self.description,
            report_uri=(decision or {}).get("report_uri"),
            tags=self.tags,
            client_token=token,
            lineage=lineage,
        )
        RegistrationAuditLink.persist(context, result.get("audit_uri"), self.region_name)
        self.log.info("Registered %s (%s)", result["package_id"], result["approval_status"])
        self._lineage_result = result
        return result

    get_openlineage_facets_on_complete = registration_lineage  # the model in, the package version out
