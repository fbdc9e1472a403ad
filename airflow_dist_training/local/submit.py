"""From a spec to the exact ``CreateTrainingJob`` request, staged for the local executor.

:func:`local_request` keeps the SageMaker planner's request unchanged; the local backend's additions
live *around* it (store mounts, the planner's uploads put into the store, local stand-ins for
what SageMaker requires; rules of SageMaker's fleet only become warnings). No Airflow, no boto3
unless the store uses a client.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.local.contract import local_path, validate_local
from airflow_dist_training.local.executor import JobOptions
from airflow_dist_training.local.request_plan import request_channels
from airflow_dist_training.local.store import RequestStore
from airflow_dist_training.sagemaker.hyperparameters import encode_script_mode
from airflow_dist_training.source_archive import pack_source_dir
from airflow_dist_training.spec.training import OutputSpec, TrainingJobSpec
from airflow_dist_training.storage.location import split_uri, uri_scheme

if TYPE_CHECKING:
    from airflow_dist_training.sagemaker.request import TrainingPlan
    from airflow_dist_training.sagemaker.uploads import Upload

LOCAL_ROLE_ARN = "arn:aws:iam::000000000000:role/adt-local-backend"
LOCAL_BUCKET = "adt-local"  # the stand-in output bucket of a spec without `output`
LOCAL_OUTPUT = f"s3://{LOCAL_BUCKET}"
_GPU_STAND_IN = "ml.g5.xlarge"


@dataclass
class LocalSubmission:
    request: dict[str, Any]
    store: RequestStore
    options: JobOptions
    warnings: list[str] = field(default_factory=list)
    uploads: list[Upload] = field(default_factory=list)  # what the request reads from the store


def _fill_local_defaults(
    spec: TrainingJobSpec, job_name: str, jobs_root: Path, base: Path
) -> tuple[TrainingJobSpec, dict[str, Path]]:
    """Local stand-ins for what SageMaker requires; the spec is validated already, so the filled
    copy is not validated again (the values set here are constants and resolved paths)."""
    update: dict[str, Any] = {}
    mounts: dict[str, Path] = {}
    if spec.role_arn is None:
        update["role_arn"] = LOCAL_ROLE_ARN
    if spec.output is None:
        update["output"] = OutputSpec(s3_path=f"{LOCAL_OUTPUT}/{spec.name.lower()}")
        mounts[update["output"].s3_path] = jobs_root / "_artifacts"
        # the stand-in bucket (the code tarball goes to <bucket>/<job>/source) never reaches S3
        mounts[LOCAL_OUTPUT] = jobs_root / "_s3" / LOCAL_BUCKET
    if spec.source.source_dir is None:
        # like the SDK without source_dir: only the entry point is shipped
        staged = jobs_root / job_name / ".source"
        if staged.exists():
            shutil.rmtree(staged)
        staged.mkdir(parents=True)
        entry = base / spec.source.entry_point
        if entry.is_file():
            shutil.copy2(entry, staged / Path(spec.source.entry_point).name)
        update["source"] = spec.source.model_copy(
            update={"source_dir": str(staged), "entry_point": Path(spec.source.entry_point).name}
        )
    elif uri_scheme(spec.source.source_dir) != "s3":
        update["source"] = spec.source.model_copy(
            update={"source_dir": str(local_path(spec.source.source_dir, base))}
        )
    return (spec.model_copy(update=update) if update else spec), mounts


def local_request(
    spec: TrainingJobSpec,
    job_name: str,
    *,
    jobs_root: Path,
    base_dir: Path,
    store: RequestStore,
    region: str = "us-east-1",
    run_identity: str | None = None,
    cpu_count: int = 1,
    allow_oversubscribe: bool = False,
    check_paths: bool = True,
    s3_available: bool = False,
    stage: bool = True,
    request: Mapping[str, Any] | None = None,
    uploads: Iterable[Upload] = (),
) -> LocalSubmission:
    """Validate for this machine, plan with the SageMaker planner, stage into the store.

    ``request`` (with its ``uploads``): the request already planned for ``spec`` (the plan
    task's, planned with these settings): checked for this machine and staged, not planned again.
    """
    problems, warnings = validate_local(
        spec,
        cpu_count=cpu_count,
        allow_oversubscribe=allow_oversubscribe,
        s3_available=s3_available,
        base_dir=base_dir,
        check_paths=check_paths,
    )
    if problems:
        raise SpecValidationError(problems, source="local backend")
    filled, mounts = _fill_local_defaults(spec, job_name, jobs_root, base_dir)
    if request is None:
        plan, sagemaker_only = _plan_sagemaker_request(filled, job_name, region, run_identity)
        warnings = list(warnings) + [
            str(w) for w in plan.warnings if "is used by the local backend only" not in str(w)
        ]
        warnings += [f"SageMaker would refuse this spec: {p}; it runs locally as planned" for p in sagemaker_only]
        request, uploads = plan.request, plan.uploads
    else:  # the plan task's warnings were shown there
        request = copy.deepcopy(dict(request))
    uploads = list(uploads)
    staged = store.with_mounts({**mounts, **_local_mounts(filled, request, base_dir, store)})
    for upload in uploads if stage else []:
        if upload.content is not None:
            staged.put_bytes(upload.content, upload.s3_uri)
        elif upload.local_path:
            source = local_path(upload.local_path, base_dir)
            assert source is not None
            deps = [str(local_path(d, base_dir)) for d in upload.dependencies]
            staged.put_bytes(pack_source_dir(source, deps), upload.s3_uri)
    options = JobOptions(processes_per_host=filled.distribution.processes_per_host)
    return LocalSubmission(request, staged, options, warnings=list(warnings), uploads=uploads)


def _plan_sagemaker_request(
    filled: TrainingJobSpec, job_name: str, region: str, run_identity: str | None
) -> tuple[TrainingPlan, list[Problem]]:
    """The SageMaker planner's request; rules about SageMaker's fleet only are planned on a GPU stand-in."""
    from airflow_dist_training.sagemaker.request import plan_training_job

    try:
        return plan_training_job(filled, job_name=job_name, region=region, run_identity=run_identity), []
    except SpecValidationError as exc:
        if not exc.problems or not all(p.path.startswith("compute.instance") for p in exc.problems):
            raise
        sagemaker_only = list(exc.problems)
    stand_in = filled.model_copy(
        update={"compute": filled.compute.model_copy(update={"instance_type": _GPU_STAND_IN})}
    )
    plan = plan_training_job(stand_in, job_name=job_name, region=region, run_identity=run_identity)
    plan.request["ResourceConfig"]["InstanceType"] = filled.compute.instance_type
    hps = plan.request.get("HyperParameters") or {}
    if "sagemaker_instance_type" in hps:
        hps["sagemaker_instance_type"] = encode_script_mode(filled.compute.instance_type)
    return plan, sagemaker_only


def _local_mounts(
    filled: TrainingJobSpec, request: dict[str, Any], base_dir: Path, store: RequestStore
) -> dict[str, Path | str]:
    """The spec's local conveniences as store mounts under the URIs the request names."""
    mounts: dict[str, Path | str] = {}
    channel_uris, _ = request_channels(request, request["AlgorithmSpecification"])  # fsx:// efs:// keys too
    for name, channel in filled.channels.items():
        src = getattr(channel, "local_source", None)
        if not src:
            continue
        lp = local_path(src, base_dir)
        if lp is not None:
            mounts[channel_uris[name].rstrip("/")] = lp
        elif store.s3 is not None and split_uri(src)[0] == "s3":
            request_channel = next(c for c in request["InputDataConfig"] if c["ChannelName"] == name)
            request_channel["DataSource"]["S3DataSource"]["S3Uri"] = src  # the data is in real S3 there
    # a local_uri in another store (any registered scheme) is mounted as is: the run reaches it
    if filled.checkpoint is not None and (uri := filled.checkpoint.local_uri):
        mounts[filled.checkpoint.s3_uri.rstrip("/")] = local_path(uri, base_dir) or uri
    if filled.output is not None and (uri := filled.output.local_uri):
        mounts[filled.output.s3_path.rstrip("/")] = local_path(uri, base_dir) or uri
    return mounts
