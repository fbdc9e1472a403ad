"""The checks of a pipeline and of a run's steps that need I/O: everything a run would refuse,
found before anything runs. The step rules themselves, pure, have one home,
``spec.pipeline.step_problems``, which the DAG factory's parse, the CLI's ``validate
<pipeline.yaml>`` (through ``check_pipeline``) and the ``plan`` task (through ``check_steps``) call.

At parse time a mistake found cheaply is the file's import error naming the file and the field
path. The ``plan`` task adds what only the run's own moment can answer, with the same field path:
the evaluation's files exist (an earlier task may write them), the buckets and input prefixes
(an S3 client given), and SageMaker's planning rules. No Airflow; boto3 only through the client.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.spec.backends import backend_record, runs_on_aws
from airflow_dist_training.storage.location import split_uri, uri_scheme

if TYPE_CHECKING:
    from airflow_dist_training.sagemaker.request import TrainingPlan
    from airflow_dist_training.spec.gate import GateSpec
    from airflow_dist_training.spec.pipeline import (
        EvaluationStep,
        PipelineSpec,
        RegistryStep,
        S3Location,
        StagingStep,
        TypedRegistry,
        TypedStaging,
    )
    from airflow_dist_training.spec.training import TrainingJobSpec

# A top-level ``dag_id:`` line: enough to find duplicates among sibling pipeline files cheaply.
_DAG_ID_LINE = re.compile(r"^dag_id:\s*['\"]?([A-Za-z0-9_.\-]+)['\"]?\s*(#.*)?$", re.MULTILINE)
DEFAULT_REGION = "us-east-1"


@dataclass
class PipelineCheck:
    pipeline: PipelineSpec
    warnings: list[Problem] = field(default_factory=list)
    plan: TrainingPlan | None = None


def local_workspace(dag_id: str) -> Path:
    """Where a pipeline's local data goes by default: under the local backend's root
    (``$ADT_LOCAL_ROOT``, else ``$AIRFLOW_HOME/dist-training-local``, as ``LocalTrainingHook``),
    never inside the DAGs folder (the DAG processor scans it, and deploys replace it)."""
    if os.environ.get("ADT_LOCAL_ROOT"):
        root = Path(os.environ["ADT_LOCAL_ROOT"]).expanduser()
    else:
        root = Path(os.environ.get("AIRFLOW_HOME") or Path("~/airflow").expanduser()) / "dist-training-local"
    return (root / "pipelines" / dag_id).absolute()


def _dags_folder_holding(folder: Path) -> Path:
    """The DAGs folder holding ``folder``: Airflow's configured one when it is inside, else ``folder``."""
    configured = os.environ.get("AIRFLOW__CORE__DAGS_FOLDER")
    if configured:
        root = Path(configured).expanduser().resolve()
        if folder == root or root in folder.parents:
            return root
    return folder


def local_path_problems(pipeline: PipelineSpec, base_dir: Path, dags_folder: Path) -> list[Problem]:
    """Local data locations that resolve inside the DAGs folder."""
    spec = pipeline.training
    candidates: list[tuple[str, str | None]] = [
        ("training.output.local_uri", spec.output.local_uri if spec.output else None),
        ("training.checkpoint.local_uri", spec.checkpoint.local_uri if spec.checkpoint else None),
        ("registry.local_dir", getattr(pipeline.registry, "local_dir", None)),
    ]
    candidates += [
        (f"training.channels.{name}.local_source", getattr(ch, "local_source", None))
        for name, ch in spec.channels.items()
    ]
    problems = []
    folder = str(dags_folder)
    for path, value in candidates:
        if not value or uri_scheme(value) != "file":
            continue
        # os.path on strings: a DAG parse does this for every local location (pathlib costs twice as much)
        resolved = os.path.realpath(os.path.join(base_dir, split_uri(value)[2]))
        if resolved == folder or resolved.startswith(folder.rstrip(os.sep) + os.sep):
            problems.append(
                Problem(
                    path,
                    f"{value!r} resolves to {resolved}, inside the DAGs folder {dags_folder}: keep local data "
                    "outside it (the DAG processor scans that folder and a deploy replaces it)",
                )
            )
    return problems


def check_steps(
    spec: TrainingJobSpec,
    *,
    backend: str,
    evaluation: EvaluationStep | None = None,
    gate: GateSpec | Mapping[str, Any] | None = None,
    registry: RegistryStep | TypedRegistry | None = None,
    inference_image: str | None = None,
    base_dir: str | Path | None = None,
    staging: StagingStep | TypedStaging | None = None,
    s3: Any = None,
    conn_id: str | None = None,
) -> list[Problem]:
    """Every problem of the staging, evaluation, gate and registry steps (errors and warnings) on
    ``backend``: the rules (``step_problems``), the local files they name, and with an ``s3`` client
    every bucket the run uses and every input prefix (``conn_id`` names the connection in a refusal)."""
    from airflow_dist_training.spec.pipeline import s3_locations, step_problems

    record = backend_record(backend)
    problems = step_problems(
        spec,
        record,
        staging=staging,
        evaluation=evaluation,
        gate=gate,
        registry=registry,
        inference_image=inference_image,
    )
    if evaluation is not None:
        problems += _evaluation_file_problems(evaluation, base_dir)
    if s3 is not None:
        problems += check_s3_locations(s3, s3_locations(spec, evaluation=evaluation, staging=staging), conn_id=conn_id)
    return problems


def _resolve_local(path: str, base_dir: str | Path | None) -> Path:
    p = Path(split_uri(path)[2])
    return p if p.is_absolute() or base_dir is None else Path(base_dir) / p


def _evaluation_file_problems(step: EvaluationStep, base_dir: str | Path | None) -> list[Problem]:
    """The local script, the dependencies it ships and its local data exist (uploaded on SageMaker)."""
    problems: list[Problem] = []
    if uri_scheme(step.script) in (None, "file"):
        script = _resolve_local(step.script, base_dir)
        if not script.is_file():
            problems.append(Problem("evaluation.script", f"{script} does not exist (or is not a file)"))
        elif step.dependencies and step.script.endswith(".py"):
            from airflow_dist_training.evaluation.code import evaluation_code_files

            deps = [str(_resolve_local(d, base_dir)) for d in step.dependencies]
            try:  # what the evaluation ships: every missing or shadowing entry, before training is paid for
                evaluation_code_files(script, deps, field_prefix="evaluation.")
            except SpecValidationError as exc:
                problems += exc.problems
    data = step.channel_source
    if data and uri_scheme(data) == "file" and not (path := _resolve_local(data, base_dir)).exists():
        problems.append(Problem("evaluation.channel_source", f"{path} does not exist"))
    return problems


def check_s3_locations(s3: Any, locations: Iterable[S3Location], *, conn_id: str | None = None) -> list[Problem]:
    """Every bucket of ``locations`` exists and every input prefix holds objects: errors, and warnings
    where a permission hides the answer. Reads only (``HeadBucket``, ``ListObjectsV2`` with
    ``MaxKeys=1``), so the plan task fails with one clear message instead of a later task retrying a
    ``NoSuchBucket`` as if it were transient."""
    from airflow_dist_training.aws_errors import error_code

    problems: list[Problem] = []
    buckets: dict[str, str | None] = {}  # bucket -> None (exists) or the problem text
    for loc in locations:
        _, bucket, key = split_uri(loc.uri)
        if bucket not in buckets:
            buckets[bucket] = _head_bucket(s3, bucket, conn_id)
            if buckets[bucket] is not None:
                severity = "warning" if "access denied" in str(buckets[bucket]) else "error"
                problems.append(Problem(loc.field, f"{loc.uri}: {buckets[bucket]}", severity))
        if buckets[bucket] is not None or not loc.is_input:
            continue
        try:
            page = s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        except Exception as exc:
            if error_code(exc) in {"AccessDenied", "403"}:
                problems.append(Problem(loc.field, f"{loc.uri}: not checked (s3:ListBucket is denied)", "warning"))
                continue
            raise
        if not page.get("KeyCount") and not page.get("Contents"):
            problems.append(Problem(loc.field, f"{loc.uri}: no objects under this prefix"))
    return problems


def _head_bucket(s3: Any, bucket: str, conn_id: str | None) -> str | None:
    from airflow_dist_training.aws_errors import error_code

    try:
        s3.head_bucket(Bucket=bucket)
    except Exception as exc:
        code = error_code(exc)
        if code in {"404", "NoSuchBucket", "NotFound"}:
            return f"bucket {bucket} does not exist"
        if code in {"403", "AccessDenied", "Forbidden"}:
            return f"access denied to bucket {bucket} (s3:ListBucket) for connection {conn_id!r}; not checked"
        raise
    return None


def check_pipeline(
    pipeline: PipelineSpec,
    *,
    path: Path,
    region: str | None = None,
    plan_job: bool = True,
) -> tuple[list[Problem], TrainingPlan | None]:
    """All errors and warnings of a loaded pipeline; with ``plan_job`` SageMaker pipelines are planned too.

    The step rules are ``step_problems``, as at plan time; whether the files and S3 objects the steps
    read exist is the plan task's (``check_steps``): an earlier task may write them. The DAG factory
    passes ``plan_job=False``: a DAG parse stays cheap and plans nothing (the CLI's ``validate`` plans)."""
    from airflow_dist_training.spec.members import member_problems  # pydantic models: not at import
    from airflow_dist_training.spec.pipeline import step_problems

    record = backend_record(pipeline.backend)
    me = path.resolve()
    duplicate = duplicate_dag_id_problem(me, pipeline.dag_id)
    problems = [duplicate] if duplicate else []
    problems += step_problems(
        pipeline.training,
        record,
        staging=pipeline.staging,
        evaluation=pipeline.evaluation,
        gate=pipeline.gate,
        registry=pipeline.registry,
    )
    problems += member_problems(pipeline.training, pipeline.for_each)
    if pipeline.tuning is not None:
        from airflow_dist_training.spec.pipeline import staging_record
        from airflow_dist_training.spec.tuning import tuning_step_problems

        problems += tuning_step_problems(
            pipeline.training,
            pipeline.tuning,
            staged_channel=pipeline.staging is not None and staging_record(pipeline.staging.kind).returns_channel,
            freshness=pipeline.checkpoints.freshness is not None,
            warm_start=pipeline.warm_start,
        )
    plan = None
    if record.on_aws:
        if plan_job:
            plan, planned = _planned(pipeline, region)
            problems += planned
    else:
        problems += local_path_problems(pipeline, me.parent, _dags_folder_holding(me.parent))
    return problems, plan


def _planned(pipeline: PipelineSpec, region: str | None) -> tuple[TrainingPlan | None, list[Problem]]:
    """The training spec planned for SageMaker: (the plan or None, its errors and warnings)."""
    from airflow_dist_training.sagemaker.naming import job_name
    from airflow_dist_training.sagemaker.request import plan_training_job

    spec = pipeline.training
    try:
        plan = plan_training_job(
            spec,
            job_name=job_name(spec.name, f"validate:{pipeline.dag_id}"),
            region=region or pipeline.region_name or DEFAULT_REGION,
        )
    except SpecValidationError as exc:
        return None, [Problem(_prefixed(p.path), p.message, p.severity) for p in exc.problems]
    return plan, [Problem(_prefixed(w.path), w.message, severity="warning") for w in plan.warnings]


def _prefixed(path: str) -> str:
    return f"training.{path}" if path else "training"


def check_pipeline_file(path: str | Path, *, region: str | None = None) -> PipelineCheck:
    """Load, validate and check a pipeline file; raises ``SpecValidationError`` naming the file."""
    p = Path(path)
    pipeline = load_pipeline(p)
    problems, plan = check_pipeline(pipeline, path=p, region=region)
    errors = [x for x in problems if x.severity == "error"]
    if errors:
        raise SpecValidationError(errors, source=str(p))
    return PipelineCheck(pipeline=pipeline, warnings=[x for x in problems if x.severity != "error"], plan=plan)


# file path -> (mtime_ns, size, dag_id): a folder of N pipeline files is read once per process, not N
# times; os.scandir (one stat per entry, plain strings) keeps the per-parse check to microseconds a file
_DAG_IDS: dict[str, tuple[int, int, str | None]] = {}


def _dag_id_of(path: str, mtime_ns: int, size: int) -> str | None:
    cached = _DAG_IDS.get(path)
    if cached is not None and cached[:2] == (mtime_ns, size):
        return cached[2]
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return None
    match = _DAG_ID_LINE.search(head)
    dag_id = match.group(1) if match else None
    _DAG_IDS[path] = (mtime_ns, size, dag_id)
    return dag_id


# folder -> (folder mtime_ns, when scanned, {pipeline file: dag_id}). A DagBag fill parses every file of
# a folder within seconds: one scan serves them all while the folder is unchanged (at most FOLDER_SCAN_TTL).
_FOLDER_SCANS: dict[str, tuple[int, float, dict[str, str | None]]] = {}
FOLDER_SCAN_TTL = 30.0


def _pipeline_dag_ids(folder: str) -> dict[str, str | None]:
    import time

    try:
        folder_mtime = os.stat(folder).st_mtime_ns
    except OSError:
        return {}
    cached = _FOLDER_SCANS.get(folder)
    now = time.monotonic()
    if cached is not None and cached[0] == folder_mtime and now - cached[1] < FOLDER_SCAN_TTL:
        return cached[2]
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return {}
    names = {e.name for e in entries}
    found: dict[str, str | None] = {}
    for entry in sorted(entries, key=lambda e: e.name):
        stem, dot, suffix = entry.name.rpartition(".")
        if not dot or suffix not in ("yaml", "yml") or f"{stem}.py" not in names:
            continue
        try:
            stat = entry.stat()
        except OSError:
            continue
        found[entry.path] = _dag_id_of(entry.path, stat.st_mtime_ns, stat.st_size)
    _FOLDER_SCANS[folder] = (folder_mtime, now, found)
    return found


def duplicate_dag_id_problem(me: Path, dag_id: str) -> Problem | None:
    """Another pipeline file (one with its ``.py`` stub) in the folder of ``me`` (resolved) with the same ``dag_id``."""
    for other, other_id in _pipeline_dag_ids(str(me.parent)).items():
        if other_id == dag_id and other != str(me):
            return Problem(
                "dag_id",
                f"{dag_id!r} is also the dag_id of {other}: one would silently replace the other; "
                "give each pipeline file its own dag_id",
            )
    return None


def looks_like_pipeline(data: Any) -> bool:
    """A pipeline file has ``dag_id`` or ``training`` at the top; a training spec has neither."""
    return isinstance(data, dict) and ("dag_id" in data or "training" in data)


def load_pipeline(path: str | Path) -> PipelineSpec:
    """Read and validate a pipeline YAML file (errors name the file and the field path)."""
    path = Path(path)
    # the spec models are imported on use: importing this module stays cheap at DAG parse time
    from airflow_dist_training.spec.loading import read_yaml_file, validate_model
    from airflow_dist_training.spec.pipeline import PipelineSpec, resolve_training_reference

    data = read_yaml_file(path, kind="pipeline")
    if isinstance(data, dict):
        data = resolve_training_reference(data, path.parent)
        data = _default_local_workspace(data)
    return validate_model(PipelineSpec, data, source=str(path), pipeline=True)


def _default_local_workspace(data: dict[str, Any]) -> dict[str, Any]:
    """Local pipelines: the staged channel and the registry default to the pipeline's workspace
    (outside the DAGs folder), not to a folder next to the pipeline file."""
    dag_id, training = data.get("dag_id"), data.get("training")
    if runs_on_aws(data.get("backend", "local")) is not False or not isinstance(dag_id, str) or not isinstance(training, dict):
        return data
    workspace = local_workspace(dag_id)
    staging = data.get("staging")
    channels = training.get("channels")
    if isinstance(staging, dict) and isinstance(channels, dict):
        name = staging.get("channel", "train")
        channel = channels.get(name)
        if isinstance(channel, dict) and not channel.get("local_source"):
            channel = {**channel, "local_source": str(workspace / "channels" / str(name))}
            data = {**data, "training": {**training, "channels": {**channels, name: channel}}}
    registry = data.get("registry")
    if isinstance(registry, dict) and not registry.get("local_dir") and _local_registry(registry, data):
        data = {**data, "registry": {**registry, "local_dir": str(workspace / "registry")}}
    return data


def _local_registry(registry: dict[str, Any], data: dict[str, Any]) -> bool:
    """The registry step's kind (written, else the backend's default) keeps a local directory."""
    from airflow_dist_training.spec.registries import find_registry

    record = find_registry(registry.get("kind") or backend_record(data.get("backend", "local")).default_registry)
    return record is not None and record.local_dir
