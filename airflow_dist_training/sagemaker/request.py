"""Plan a SageMaker training job: spec -> the exact ``CreateTrainingJob`` request, plus what to know.

Pure: no AWS call, no Airflow import. ``plan_training_job`` validates (collecting every problem),
resolves the image, encodes the distribution strategy the way the SageMaker Python SDK v2 does,
and reports the cluster size, global batch, warnings and an on-demand cost upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.sagemaker import launcher
from airflow_dist_training.sagemaker.catalog import (
    PRICE_REGION,
    assumed_instance,
    hourly_price,
    is_gpu_family,
    is_trainium,
    lookup_instance,
    prices_for,
)
from airflow_dist_training.sagemaker.hardware import scaling_advice
from airflow_dist_training.sagemaker.hyperparameters import encode_hyperparameters, encode_script_mode
from airflow_dist_training.sagemaker.images import ImageResolutionError, resolve_image_uri
from airflow_dist_training.sagemaker.naming import job_name_problems
from airflow_dist_training.sagemaker.preflight import (
    check_hyperparameters,
    check_spec,
    errors_only,
    warnings_only,
)
from airflow_dist_training.sagemaker.strategies import (
    StrategyContext,
    StrategyRecord,
    check_distribution,
    distribution_hyperparameters,
    model_parallel_degree,
    record_for,
)
from airflow_dist_training.sagemaker.uploads import Upload
from airflow_dist_training.spec.training import (
    MAX_RUN_JOBS,
    EFSChannel,
    FSxChannel,
    S3Channel,
    TrainingJobSpec,
)
from airflow_dist_training.storage.location import split_uri, uri_scheme

# The SDK leaves DebugHookConfig/ProfilerConfig out in these regions (fw_utils.DEBUGGER_UNSUPPORTED_REGIONS).
DEBUGGER_UNSUPPORTED_REGIONS = (
    "us-iso-east-1",
    "us-isob-east-1",
    "ap-southeast-3",
    "ap-southeast-4",
    "eu-south-2",
    "me-central-1",
    "ap-south-2",
    "eu-central-2",
    "us-gov-east-1",
)
# Framework._validate_and_set_debugger_configs: the estimators whose hook checkpointing drops (an
# explicit image without a framework is planned as the SDK's PyTorch estimator would plan it)
CHECKPOINT_DROPS_DEBUG_HOOK = (None, "pytorch", "tensorflow")
RUN_IDENTITY_TAG = "airflow-dist-training:run-identity"
SOURCE_TARBALL = "sourcedir.tar.gz"


@dataclass(frozen=True)
class ClusterFacts:
    """The scaling facts of the SageMaker distributed-training guide."""

    instances: int
    devices_per_instance: dict[str, int]  # instance type -> devices (GPUs / NeuronCores / 1)
    cluster_size: int  # instances x devices per instance
    processes: int  # processes the launcher starts in total
    model_parallel_degree: int
    replicas: int  # data-parallel replicas = processes / model-parallel degree
    per_device_batch_size: int | None
    global_batch_size: int | None


@dataclass(frozen=True)
class TrainingPlan:
    job_name: str
    region: str
    request: dict[str, Any]
    cluster: ClusterFacts
    uploads: list[Upload] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    cost_bound_usd: float | None = None
    cost_note: str = ""
    advice: list[str] = field(default_factory=list)  # e.g. the guide's scale-up-before-scale-out
    stop_signal: str = ""  # whether the script sees a stop's SIGTERM on AWS (launcher.stop_signal_delivery)


def _s3_join(*parts: str) -> str:
    """The SDK's ``s3_path_join``: join with single slashes, keep the ``s3://`` scheme."""
    cleaned = [p.strip("/") for p in parts if p and p.strip("/")]
    joined = "/".join(cleaned)
    return (
        joined.replace("s3:/", "s3://", 1)
        if joined.startswith("s3:/") and uri_scheme(joined) != "s3"
        else joined
    )


def plan_training_job(
    spec: TrainingJobSpec,
    *,
    job_name: str,
    region: str,
    run_identity: str | None = None,
) -> TrainingPlan:
    """Validate ``spec`` and build the exact ``CreateTrainingJob`` request.

    Raises ``SpecValidationError`` listing every error (warnings go to ``plan.warnings``).
    """
    record = record_for(spec.distribution.strategy)
    problems, ctx = _validate(spec, record, job_name=job_name, region=region)
    _raise_errors(spec, problems)
    uploads: list[Upload] = []
    request: dict[str, Any] = {"TrainingJobName": job_name}
    algorithm = _algorithm_specification(spec, record, ctx.image_uri)
    request["AlgorithmSpecification"] = algorithm
    request["RoleArn"] = spec.role_arn
    request["OutputDataConfig"] = _output_config(spec)
    request["ResourceConfig"] = _resource_config(spec)
    request["StoppingCondition"] = _stopping_condition(spec)
    hyperparameters, channels = _code_and_channels(spec, record, ctx, job_name, region, algorithm, uploads)
    problems += check_hyperparameters(spec, hyperparameters)
    _raise_errors(spec, problems)
    if hyperparameters:
        request["HyperParameters"] = hyperparameters
    if channels:
        request["InputDataConfig"] = channels
    request.update(_job_settings(spec, region, run_identity))
    cluster = cluster_facts(spec, ctx.training_group)
    problems += _plan_warnings(spec, record, cluster)
    cost, note = cost_bound(spec, region)
    return TrainingPlan(
        job_name=job_name,
        region=region,
        request=request,
        cluster=cluster,
        uploads=uploads,
        warnings=warnings_only(problems),
        cost_bound_usd=cost,
        cost_note=note,
        advice=scaling_advice(spec, region, distributed=record.distributed),
        stop_signal=launcher.stop_signal_delivery(spec, script_mode=record.script_mode),
    )


def _raise_errors(spec: TrainingJobSpec, problems: list[Problem]) -> None:
    if errors_only(problems):
        raise SpecValidationError(errors_only(problems), source=spec.source_file)


def _validate(
    spec: TrainingJobSpec, record: StrategyRecord, *, job_name: str, region: str
) -> tuple[list[Problem], StrategyContext]:
    """Every problem of the spec for SageMaker (errors and warnings), and the strategy context."""
    problems: list[Problem] = []
    problems += [Problem("name", f"job name {job_name!r} {m}") for m in job_name_problems(job_name)]
    problems += check_spec(spec)
    required = (
        (spec.output, "output.s3_path", " (where model.tar.gz goes)"),
        (spec.role_arn, "role_arn", " (the execution role SageMaker assumes)"),
        (spec.source.source_dir, "source.source_dir", ": a local directory or an s3:// tarball"),
    )
    problems += [
        Problem(path, f"is required for SageMaker jobs{why}") for value, path, why in required if value is None
    ]
    # Heterogeneous clusters: like the SDK's ``EstimatorBase._get_instance_type``, the image follows the
    # first GPU (ml.p*/ml.g*) group, else the first group.
    group_types = [g.instance_type for g in spec.compute.groups]
    first_type = next((t for t in group_types if is_gpu_family(t)), group_types[0])
    image_uri = ""
    try:
        image_uri = resolve_image_uri(
            spec.image, region=region, instance_type=first_type, smp_v2=record.smp_v2_image
        )
    except ImageResolutionError as exc:
        field = "transformers_version" if spec.image.framework == "huggingface" else "framework_version"
        problems.append(Problem(f"image.{field}", str(exc)))
    if spec.image.container_entry_point and not record.script_mode:
        problems.append(
            Problem(
                "image.container_entry_point",
                f"strategy {record.strategy.value!r} sets its own container entry point; "
                "leave container_entry_point out, or use another strategy",
            )
        )
    if spec.stopping.forward_sigterm and spec.image.container_entry_point:
        problems.append(
            Problem(
                "stopping.forward_sigterm",
                "wraps AWS's toolkit entrypoint; with image.container_entry_point your own entrypoint is "
                "PID 1 and gets the SIGTERM itself: handle (or forward) it there and leave this out",
            )
        )
    ctx = StrategyContext(spec=spec, image_uri=image_uri)
    check_distribution(ctx)
    problems += ctx.problems
    return problems, ctx


def _algorithm_specification(spec: TrainingJobSpec, record: StrategyRecord, image_uri: str) -> dict[str, Any]:
    algorithm: dict[str, Any] = {"TrainingInputMode": spec.input_mode.value, "TrainingImage": image_uri}
    if spec.image.container_entry_point:  # the SDK's container_entry_point / container_arguments
        algorithm["ContainerEntrypoint"] = list(spec.image.container_entry_point)
        if spec.image.container_arguments:
            algorithm["ContainerArguments"] = list(spec.image.container_arguments)
    if spec.metric_definitions:
        algorithm["MetricDefinitions"] = [{"Name": m.name, "Regex": m.regex} for m in spec.metric_definitions]
    # PyTorch/TensorFlow estimators enable metrics for a framework version; HuggingFace always does
    if (spec.image.framework_version is not None or spec.image.framework == "huggingface") and record.script_mode:
        algorithm["EnableSageMakerMetricsTimeSeries"] = True
    if spec.image.repository_access_mode is not None:
        image_config: dict[str, Any] = {"TrainingRepositoryAccessMode": spec.image.repository_access_mode}
        if spec.image.repository_credentials_provider_arn:
            image_config["TrainingRepositoryAuthConfig"] = {
                "TrainingRepositoryCredentialsProviderArn": spec.image.repository_credentials_provider_arn
            }
        algorithm["TrainingImageConfig"] = image_config
    return algorithm


def _output_config(spec: TrainingJobSpec) -> dict[str, Any]:
    assert spec.output is not None  # checked by _validate
    output: dict[str, Any] = {"S3OutputPath": spec.output.s3_path}
    if spec.output.kms_key:
        output["KmsKeyId"] = spec.output.kms_key
    if spec.output.compression == "NONE":
        output["CompressionType"] = "NONE"
    return output


def _stopping_condition(spec: TrainingJobSpec) -> dict[str, Any]:
    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": spec.stopping.max_runtime_seconds}
    if spec.spot.enabled and spec.spot.max_wait_seconds is not None:
        stopping["MaxWaitTimeInSeconds"] = spec.spot.max_wait_seconds
    if spec.stopping.max_pending_seconds is not None:
        stopping["MaxPendingTimeInSeconds"] = spec.stopping.max_pending_seconds
    return stopping


def _code_and_channels(
    spec: TrainingJobSpec,
    record: StrategyRecord,
    ctx: StrategyContext,
    job_name: str,
    region: str,
    algorithm: dict[str, Any],
    uploads: list[Upload],
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """HyperParameters and channels: script mode (the toolkit) or our launcher's entrypoint override."""
    channels = [_channel(name, ch) for name, ch in spec.channels.items()]
    source_uri = _source_uri(spec, job_name, uploads)
    if not record.script_mode:
        launch = launcher.plan_launch(spec, job_name=job_name, source_uri=source_uri)
        algorithm.update(launch.algorithm)
        uploads += launch.uploads
        return encode_hyperparameters(spec.hyperparameters, script_mode=False), channels + launch.channels
    if spec.network.network_isolation:
        channels.append(_code_channel(source_uri))
    if spec.stopping.forward_sigterm:  # AWS's toolkit under our shim, which forwards SIGTERM
        shim = launcher.plan_toolkit_shim(spec, job_name=job_name)
        algorithm.update(shim.algorithm)
        uploads += shim.uploads
        channels += shim.channels
    return _script_mode_hyperparameters(spec, ctx, job_name, region, source_uri), channels


def _job_settings(spec: TrainingJobSpec, region: str, run_identity: str | None) -> dict[str, Any]:
    """The request's fields after the inputs: environment, network, spot, checkpoints, debugger, tags."""
    settings: dict[str, Any] = {}
    if spec.environment:
        settings["Environment"] = dict(spec.environment)
    settings.update(_network_settings(spec))
    if spec.spot.enabled:
        settings["EnableManagedSpotTraining"] = True
    if spec.checkpoint is not None:
        checkpoint: dict[str, Any] = {"S3Uri": spec.checkpoint.s3_uri}
        if spec.checkpoint.local_path:
            checkpoint["LocalPath"] = spec.checkpoint.local_path
        settings["CheckpointConfig"] = checkpoint
    settings.update(_debugger_configs(spec, region))
    if spec.tensorboard is not None:
        tensorboard: dict[str, Any] = {"S3OutputPath": spec.tensorboard.s3_path}
        if spec.tensorboard.local_path:
            tensorboard["LocalPath"] = spec.tensorboard.local_path
        settings["TensorBoardOutputConfig"] = tensorboard
    if spec.max_retry_attempts is not None:
        settings["RetryStrategy"] = {"MaximumRetryAttempts": spec.max_retry_attempts}
    settings.update(_optional_configs(spec))
    tags = dict(spec.tags)
    if run_identity is not None:
        tags[RUN_IDENTITY_TAG] = run_identity
    if tags:
        settings["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    return settings


def _network_settings(spec: TrainingJobSpec) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    if spec.network.subnets and spec.network.security_group_ids:
        settings["VpcConfig"] = {
            "Subnets": list(spec.network.subnets),
            "SecurityGroupIds": list(spec.network.security_group_ids),
        }
    if spec.network.network_isolation:
        settings["EnableNetworkIsolation"] = True
    if spec.network.inter_container_encryption:
        settings["EnableInterContainerTrafficEncryption"] = True
    return settings


def _plan_warnings(spec: TrainingJobSpec, record: StrategyRecord, cluster: ClusterFacts) -> list[Problem]:
    problems = scaling_warnings(spec, cluster) + _efa_warnings(spec)
    if spec.distribution.processes_per_host and record.processes == "per_device":
        problems.append(
            Problem(
                "distribution.processes_per_host",
                f"is used by the local backend only: on SageMaker, {record.strategy.value} starts one process "
                "per device",
                severity="warning",
            )
        )
    return problems


def _optional_configs(spec: TrainingJobSpec) -> dict[str, Any]:
    """Request fields the SDK sets from optional estimator arguments, encoded as ``_get_train_args`` does."""
    configs: dict[str, Any] = {}
    if spec.infra_check is not None:
        configs["InfraCheckConfig"] = {"EnableInfraCheck": spec.infra_check}
    if spec.remote_debug is not None:
        configs["RemoteDebugConfig"] = {"EnableRemoteDebug": spec.remote_debug}
    if spec.session_tag_chaining is not None:
        configs["SessionChainingConfig"] = {"EnableSessionTagChaining": spec.session_tag_chaining}
    if spec.mlflow is not None:  # as the SDK v3 trainers' _build_mlflow_config: only the fields given
        mlflow = {"MlflowResourceArn": spec.mlflow.resource_arn}
        if spec.mlflow.experiment_name:
            mlflow["MlflowExperimentName"] = spec.mlflow.experiment_name
        if spec.mlflow.run_name:
            mlflow["MlflowRunName"] = spec.mlflow.run_name
        configs["MlflowConfig"] = mlflow
    return configs


def _resource_config(spec: TrainingJobSpec) -> dict[str, Any]:
    compute = spec.compute
    resource: dict[str, Any] = {"VolumeSizeInGB": compute.volume_size_gb}
    if compute.volume_kms_key:
        resource["VolumeKmsKeyId"] = compute.volume_kms_key
    if compute.keep_alive_seconds is not None:
        resource["KeepAlivePeriodInSeconds"] = compute.keep_alive_seconds
    if compute.training_plan_arn is not None:
        resource["TrainingPlanArn"] = compute.training_plan_arn
    if compute.instance_groups:
        resource["InstanceGroups"] = [
            {"InstanceGroupName": g.name, "InstanceType": g.instance_type, "InstanceCount": g.instance_count}
            for g in compute.instance_groups
        ]
    else:
        resource["InstanceCount"] = compute.count
        resource["InstanceType"] = compute.instance_type
    return resource


def _channel(name: str, channel: S3Channel | FSxChannel | EFSChannel) -> dict[str, Any]:
    if isinstance(channel, S3Channel):
        source: dict[str, Any] = {
            "S3DataType": channel.data_type,
            "S3Uri": channel.uri,
            "S3DataDistributionType": channel.distribution,
        }
        if channel.instance_groups:
            source["InstanceGroupNames"] = list(channel.instance_groups)
        entry: dict[str, Any] = {"ChannelName": name, "DataSource": {"S3DataSource": source}}
        if channel.compression:
            entry["CompressionType"] = channel.compression
        if channel.content_type:
            entry["ContentType"] = channel.content_type
        if channel.input_mode is not None:
            entry["InputMode"] = channel.input_mode.value
        entry.update(_channel_extras(channel, source))
        return entry
    fs_type = "FSxLustre" if isinstance(channel, FSxChannel) else "EFS"
    entry = {
        "ChannelName": name,
        "DataSource": {
            "FileSystemDataSource": {
                "FileSystemId": channel.file_system_id,
                "FileSystemType": fs_type,
                "DirectoryPath": channel.directory_path,
                "FileSystemAccessMode": channel.access_mode,
            }
        },
    }
    if channel.content_type:
        entry["ContentType"] = channel.content_type
    return entry


def _channel_extras(channel: S3Channel, source: dict[str, Any]) -> dict[str, Any]:
    """RecordWrapperType, ShuffleConfig and AttributeNames, as the SDK's ``TrainingInput`` sets them."""
    extras: dict[str, Any] = {}
    if channel.attribute_names:
        source["AttributeNames"] = list(channel.attribute_names)
    if channel.record_wrapping is not None:
        extras["RecordWrapperType"] = channel.record_wrapping
    if channel.shuffle_seed is not None:
        extras["ShuffleConfig"] = {"Seed": channel.shuffle_seed}
    return extras


def _source_uri(spec: TrainingJobSpec, job_name: str, uploads: list[Upload]) -> str:
    """Where the code tarball is: the user's s3:// tarball, or where we upload the packed directory.

    Same place as the SDK: ``s3://<output bucket>/<job name>/source/sourcedir.tar.gz``.
    """
    source_dir = spec.source.source_dir
    assert source_dir is not None and spec.output is not None
    if uri_scheme(source_dir) == "s3":
        return source_dir
    uri = f"s3://{split_uri(spec.output.s3_path)[1]}/{job_name}/source/{SOURCE_TARBALL}"
    local = split_uri(source_dir)[2]
    uploads.append(
        Upload(
            s3_uri=uri,
            kind="source",
            local_path=local,
            kms_key=spec.output.kms_key,
            dependencies=tuple(split_uri(d)[2] for d in spec.source.dependencies),
        )
    )
    return uri


def _code_channel(source_uri: str) -> dict[str, Any]:
    return {
        "ChannelName": "code",
        "DataSource": {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": source_uri,
                "S3DataDistributionType": "FullyReplicated",
            }
        },
    }


def _script_mode_hyperparameters(
    spec: TrainingJobSpec, ctx: StrategyContext, job_name: str, region: str, source_uri: str
) -> dict[str, str]:
    submit = "/opt/ml/input/data/code/sourcedir.tar.gz" if spec.network.network_isolation else source_uri
    encoded = encode_hyperparameters(spec.hyperparameters)
    encoded.update(
        encode_hyperparameters(
            {
                "sagemaker_submit_directory": submit,
                "sagemaker_program": spec.source.entry_point,
                "sagemaker_container_log_level": spec.container_log_level,
                "sagemaker_job_name": job_name,
                "sagemaker_region": region,
            }
        )
    )
    encoded.update(distribution_hyperparameters(ctx))
    if spec.image.framework == "tensorflow" and "model_dir" not in spec.hyperparameters:
        assert spec.output is not None
        model_dir = (
            "/opt/ml/model"
            if record_for(spec.distribution.strategy).uses_mpi
            else _s3_join(spec.output.s3_path, job_name, "model")
        )
        encoded["model_dir"] = encode_script_mode(model_dir)
    return encoded


def _debugger_configs(spec: TrainingJobSpec, region: str) -> dict[str, Any]:
    """DebugHookConfig and ProfilerConfig, with the SDK's defaults and exclusions."""
    record = record_for(spec.distribution.strategy)
    if not record.script_mode:
        return {}  # like ModelTrainer: no Debugger or Profiler configs
    assert spec.output is not None
    configs: dict[str, Any] = {}
    supported_region = region not in DEBUGGER_UNSUPPORTED_REGIONS
    hook = spec.debugger.hook and supported_region
    if (
        hook
        and spec.checkpoint is not None
        and spec.checkpoint.local_path
        and spec.image.framework in CHECKPOINT_DROPS_DEBUG_HOOK
    ):
        # SMDebug does not support distributed jobs with checkpointing (SDK rule: ``instance_count > 1 or
        # distribution is not None``). The PyTorch and TensorFlow estimators carry ``distribution or {}``,
        # never None, so with both checkpoint paths they always drop the hook; HuggingFace never does.
        hook = False
    if hook and spec.image.framework == "tensorflow" and not record.tensorflow_debug_hook:
        hook = False
    if hook:
        configs["DebugHookConfig"] = {"S3OutputPath": spec.output.s3_path, "CollectionConfigurations": []}
    trainium = any(is_trainium(g.instance_type) for g in spec.compute.groups)
    if not spec.debugger.profiler or trainium or not supported_region:
        configs["ProfilerConfig"] = {"DisableProfiler": True}
    else:
        configs["ProfilerConfig"] = {"S3OutputPath": spec.output.s3_path, "DisableProfiler": False}
    return configs


def cluster_facts(spec: TrainingJobSpec, training_group: str | None = None) -> ClusterFacts:
    """Cluster size and batch facts; on a heterogeneous cluster only ``training_group`` runs training processes."""
    devices: dict[str, int] = {}
    cluster_size = 0
    processes = 0
    record = record_for(spec.distribution.strategy)
    # torchrun and SMDDP start one process per device on SageMaker whatever processes_per_host says
    per_host = spec.distribution.processes_per_host if record.processes == "per_host" else None
    for group in spec.compute.groups:
        info = lookup_instance(group.instance_type) or assumed_instance(group.instance_type)
        count = info.devices
        devices[group.instance_type] = count
        cluster_size += group.instance_count * count
        if training_group is None or group.name == training_group:
            processes += group.instance_count * (per_host or count)
    if record.processes_from_hosts:
        processes = spec.compute.count  # one process (worker) per host
    mp = model_parallel_degree(spec)
    replicas = max(processes // mp, 1)
    per_device = global_batch = None
    if spec.batch is not None:
        if spec.batch.per_device_batch_size is not None:
            per_device = spec.batch.per_device_batch_size
            global_batch = per_device * replicas
        elif spec.batch.global_batch_size is not None:
            global_batch = spec.batch.global_batch_size
            per_device = global_batch // replicas
    return ClusterFacts(
        instances=spec.compute.count,
        devices_per_instance=devices,
        cluster_size=cluster_size,
        processes=processes,
        model_parallel_degree=mp,
        replicas=replicas,
        per_device_batch_size=per_device,
        global_batch_size=global_batch,
    )


def scaling_warnings(spec: TrainingJobSpec, cluster: ClusterFacts) -> list[Problem]:
    batch = spec.batch
    if batch is None:
        return []
    problems = []
    if batch.global_batch_size is not None and batch.global_batch_size % cluster.replicas:
        problems.append(
            Problem(
                "batch.global_batch_size",
                f"{batch.global_batch_size} is not divisible by the {cluster.replicas} data-parallel replicas",
                severity="warning",
            )
        )
    if (
        batch.min_per_device_batch_size is not None
        and cluster.per_device_batch_size is not None
        and cluster.per_device_batch_size < batch.min_per_device_batch_size
    ):
        problems.append(
            Problem(
                "batch.min_per_device_batch_size",
                f"the per-device batch drops to {cluster.per_device_batch_size} on {cluster.replicas} replicas "
                f"(global batch {cluster.global_batch_size}), below your minimum of {batch.min_per_device_batch_size}; "
                "convergence may break: raise the global batch (and learning rate) or use fewer devices",
                severity="warning",
            )
        )
    return problems


def _efa_warnings(spec: TrainingJobSpec) -> list[Problem]:
    if spec.compute.count < 2 or not record_for(spec.distribution.strategy).distributed:
        return []
    problems = []
    for group in spec.compute.groups:
        info = lookup_instance(group.instance_type)
        if info is not None and info.accelerator != "cpu" and not info.efa:
            problems.append(
                Problem(
                    "compute.instance_type",
                    f"{group.instance_type} has no EFA: multi-node gradient exchange runs over TCP and may dominate step time",
                    severity="warning",
                )
            )
    return problems


def cost_bound(spec: TrainingJobSpec, region: str) -> tuple[float | None, str]:
    """Upper bound of what a run of ``spec`` pays for instances: instances x hourly on-demand price x
    MaxRuntime, per job. Managed spot is billed at most the on-demand price, but each interruption
    starts another job of up to MaxRuntime, so a spot run's bound counts ``max_interruptions + 1``
    jobs. A training plan's capacity is paid for up front, when the plan is bought: its jobs add $0.

    Uses ``region``'s prices where the price table has them, else us-east-1's with a note.
    """
    if spec.compute.training_plan_arn is not None:
        return 0.0, (
            f"runs on training plan {spec.compute.training_plan_arn.rsplit('/', 1)[-1]}: "
            "its reserved capacity was paid for up front, not per job"
        )
    hours = spec.stopping.max_runtime_seconds / 3600
    total = 0.0
    price_region = region if prices_for(region) else PRICE_REGION
    for group in spec.compute.groups:
        price = hourly_price(group.instance_type, price_region)
        if price is None:
            known = "not in the catalog" if lookup_instance(group.instance_type) is None else "no price"
            return None, f"{group.instance_type}: {known} for {price_region} in the price table"
        total += group.instance_count * price * hours
    note = f"on-demand list prices ({price_region}) x max runtime {hours:g} h"
    if spec.spot.enabled:
        total = round(total, 2)  # the per-job figure the note shows, times the jobs
        budget = spec.spot.max_interruptions
        jobs = MAX_RUN_JOBS if budget is None else budget + 1
        limit = (
            f"up to the run's limit of {jobs} (set spot.max_interruptions)"
            if budget is None
            else f"spot.max_interruptions={budget}"
        )
        note += (
            f" x {jobs} jobs (${total:,.2f} each): spot bills at most on-demand prices, and each "
            f"interruption starts another job ({limit})"
        )
        total *= jobs
    if region != price_region:
        note += f"; no prices for {region} in the table, so {price_region}'s (they may differ)"
    if spec.compute.keep_alive_seconds:
        note += "; warm-pool keep-alive time is billed on top"
    return round(total, 2), note


def request_changes(planned: Any, sent: Any, path: str = "") -> list[str]:
    """What differs between the plan task's request and the one sent (``path: before -> after``).

    Empty when the request sent is the one planned; a resume or a spot replacement shows up here
    (e.g. ``TrainingJobName``, ``CheckpointConfig``), so the training task can log why it differs.
    """
    if isinstance(planned, dict) and isinstance(sent, dict):
        changes: list[str] = []
        for key in list(planned) + [k for k in sent if k not in planned]:
            where = f"{path}.{key}" if path else str(key)
            if key not in sent:
                changes.append(f"{where}: removed (was {planned[key]!r})")
            elif key not in planned:
                changes.append(f"{where}: added {sent[key]!r}")
            else:
                changes += request_changes(planned[key], sent[key], where)
        return changes
    if planned != sent:
        return [f"{path or 'request'}: {planned!r} -> {sent!r}"]
    return []
