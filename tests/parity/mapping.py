"""Map our spec onto the SageMaker SDK v2 estimator settings a user would write for the same job.

Runs in OUR venv. The result is plain JSON that ``sdk_driver.py`` (in the SDK venv) turns into
``PyTorch``/``TensorFlow`` estimators, ``TrainingInput``/``FileSystemInput`` channels, ``InstanceGroup``s
and a ``TensorBoardOutputConfig``. The distribution dicts are the ones the SDK documents for each
strategy (see /work/shared/reference/sagemaker-request-encoding.md, section 1.3).
"""

from __future__ import annotations

from typing import Any

from airflow_dist_training.spec.training import (
    EFSChannel,
    FSxChannel,
    S3Channel,
    Strategy,
    TrainingJobSpec,
)


def sdk_distribution(spec: TrainingJobSpec) -> dict[str, Any] | None:
    """The ``distribution=`` argument of the SDK estimator for our strategy."""
    dist = spec.distribution
    strategy = dist.strategy
    out: dict[str, Any]
    if strategy == Strategy.NONE:
        return None
    if strategy == Strategy.SMDDP:
        dataparallel: dict[str, Any] = {"enabled": True}
        if dist.custom_mpi_options:
            dataparallel["custom_mpi_options"] = dist.custom_mpi_options
        out = {"smdistributed": {"dataparallel": dataparallel}}
        if dist.torch_distributed:
            out["torch_distributed"] = {"enabled": True}
    elif strategy == Strategy.PYTORCHDDP:
        out = {"pytorchddp": {"enabled": True}}
        if dist.torch_distributed:
            out["torch_distributed"] = {"enabled": True}
    elif strategy == Strategy.TORCH_DISTRIBUTED:
        out = {"torch_distributed": {"enabled": True}}
    elif strategy == Strategy.SMP_V1:
        mpi: dict[str, Any] = {"enabled": True}
        if dist.processes_per_host:
            mpi["processes_per_host"] = dist.processes_per_host
        if dist.custom_mpi_options:
            mpi["custom_mpi_options"] = dist.custom_mpi_options
        parameters = dict(dist.smp.parameters) if dist.smp else {}
        out = {"smdistributed": {"modelparallel": {"enabled": True, "parameters": parameters}}, "mpi": mpi}
    elif strategy == Strategy.SMP_V2:
        parameters = dict(dist.smp.parameters) if dist.smp else {}
        out = {
            "torch_distributed": {"enabled": True},
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": parameters}},
        }
    elif strategy == Strategy.MPI:
        mpi = {"enabled": True}
        if dist.processes_per_host:
            mpi["processes_per_host"] = dist.processes_per_host
        if dist.custom_mpi_options:
            mpi["custom_mpi_options"] = dist.custom_mpi_options
        out = {"mpi": mpi}
    elif strategy == Strategy.PARAMETER_SERVER:
        out = {"parameter_server": {"enabled": True}}
    elif strategy == Strategy.MULTI_WORKER_MIRRORED:
        out = {"multi_worker_mirrored_strategy": {"enabled": True}}
    else:  # pragma: no cover - the launcher has no v2 estimator equivalent
        raise ValueError(f"no SDK v2 distribution for {strategy}")
    if dist.instance_group:
        out["instance_groups"] = [dist.instance_group]  # the driver swaps names for InstanceGroup objects
    return out


def _channel(channel: S3Channel | FSxChannel | EFSChannel) -> dict[str, Any]:
    if isinstance(channel, S3Channel):
        kwargs: dict[str, Any] = {
            "s3_data": channel.uri,
            "distribution": channel.distribution,
            "s3_data_type": channel.data_type,
        }
        if channel.content_type:
            kwargs["content_type"] = channel.content_type
        if channel.compression:
            kwargs["compression"] = channel.compression
        if channel.input_mode is not None:
            kwargs["input_mode"] = channel.input_mode.value
        if channel.instance_groups:
            kwargs["instance_groups"] = list(channel.instance_groups)
        if channel.record_wrapping is not None:
            kwargs["record_wrapping"] = channel.record_wrapping
        if channel.attribute_names:
            kwargs["attribute_names"] = list(channel.attribute_names)
        if channel.shuffle_seed is not None:
            kwargs["shuffle_seed"] = channel.shuffle_seed  # the driver makes a ShuffleConfig of it
        return {"type": "s3", "kwargs": kwargs}
    kwargs = {
        "file_system_id": channel.file_system_id,
        "file_system_type": "FSxLustre" if isinstance(channel, FSxChannel) else "EFS",
        "directory_path": channel.directory_path,
        "file_system_access_mode": channel.access_mode,
    }
    if channel.content_type:
        kwargs["content_type"] = channel.content_type
    return {"type": "fs", "kwargs": kwargs}


ESTIMATORS = {"pytorch": "PyTorch", "tensorflow": "TensorFlow", "huggingface": "HuggingFace"}


def _image_kwargs(spec: TrainingJobSpec) -> dict[str, Any]:
    """image_uri / framework_version / py_version (HuggingFace: transformers_version + base version)."""
    image = spec.image
    kwargs: dict[str, Any] = {}
    if image.uri:
        kwargs["image_uri"] = image.uri
    if image.framework_version:
        kwargs["framework_version"] = image.framework_version
    for name in ("transformers_version", "pytorch_version", "tensorflow_version", "py_version"):
        if getattr(image, name):
            kwargs[name] = getattr(image, name)
    if image.container_entry_point:
        kwargs["container_entry_point"] = list(image.container_entry_point)
    if image.container_arguments:
        kwargs["container_arguments"] = list(image.container_arguments)
    return kwargs


def sdk_estimator_case(case_id: str, spec: TrainingJobSpec, *, job_name: str, region: str) -> dict[str, Any]:
    """A ``request`` case for the driver: estimator class, kwargs, inputs, job name."""
    image = spec.image
    framework = image.framework or "pytorch"  # explicit-image specs here are all PyTorch jobs
    kwargs: dict[str, Any] = {
        "entry_point": spec.source.entry_point,
        "source_dir": spec.source.source_dir if spec.source.is_s3 else "@local",
        "role": spec.role_arn,
    }
    kwargs.update(_image_kwargs(spec))
    compute = spec.compute
    if compute.instance_groups:
        kwargs["instance_groups"] = [
            {
                "instance_group_name": g.name,
                "instance_type": g.instance_type,
                "instance_count": g.instance_count,
            }
            for g in compute.instance_groups
        ]
    else:
        kwargs["instance_type"] = compute.instance_type
        kwargs["instance_count"] = compute.count
    kwargs["volume_size"] = compute.volume_size_gb
    if compute.volume_kms_key:
        kwargs["volume_kms_key"] = compute.volume_kms_key
    if compute.keep_alive_seconds is not None:
        kwargs["keep_alive_period_in_seconds"] = compute.keep_alive_seconds
    distribution = sdk_distribution(spec)
    if distribution is not None:
        kwargs["distribution"] = distribution
    if spec.hyperparameters:
        kwargs["hyperparameters"] = dict(spec.hyperparameters)
    if spec.environment:
        kwargs["environment"] = dict(spec.environment)
    if spec.input_mode.value != "File":
        kwargs["input_mode"] = spec.input_mode.value
    if spec.output is not None:
        kwargs["output_path"] = spec.output.s3_path
        if spec.output.kms_key:
            kwargs["output_kms_key"] = spec.output.kms_key
        if spec.output.compression == "NONE":
            kwargs["disable_output_compression"] = True
    if spec.checkpoint is not None:
        kwargs["checkpoint_s3_uri"] = spec.checkpoint.s3_uri
        if spec.checkpoint.local_path:
            kwargs["checkpoint_local_path"] = spec.checkpoint.local_path
    if spec.spot.enabled:
        kwargs["use_spot_instances"] = True
        if spec.spot.max_wait_seconds is not None:
            kwargs["max_wait"] = spec.spot.max_wait_seconds
    kwargs["max_run"] = spec.stopping.max_runtime_seconds
    net = spec.network
    if net.subnets:
        kwargs["subnets"] = list(net.subnets)
    if net.security_group_ids:
        kwargs["security_group_ids"] = list(net.security_group_ids)
    if net.network_isolation:
        kwargs["enable_network_isolation"] = True
    if net.inter_container_encryption:
        kwargs["encrypt_inter_container_traffic"] = True
    if spec.metric_definitions:
        kwargs["metric_definitions"] = [{"Name": m.name, "Regex": m.regex} for m in spec.metric_definitions]
    if spec.max_retry_attempts is not None:
        kwargs["max_retry_attempts"] = spec.max_retry_attempts
    if spec.tags:
        kwargs["tags"] = [{"Key": k, "Value": v} for k, v in spec.tags.items()]
    if spec.tensorboard is not None:
        tensorboard: dict[str, Any] = {"s3_output_path": spec.tensorboard.s3_path}
        if spec.tensorboard.local_path:
            tensorboard["container_local_output_path"] = spec.tensorboard.local_path
        kwargs["tensorboard_output_config"] = tensorboard
    if not spec.debugger.profiler:
        kwargs["disable_profiler"] = True
    if not spec.debugger.hook:
        kwargs["debugger_hook_config"] = False
    if spec.container_log_level != 20:
        kwargs["container_log_level"] = spec.container_log_level
    if image.repository_access_mode is not None:
        kwargs["training_repository_access_mode"] = image.repository_access_mode
    if image.repository_credentials_provider_arn is not None:
        kwargs["training_repository_credentials_provider_arn"] = image.repository_credentials_provider_arn
    if compute.training_plan_arn is not None:
        kwargs["training_plan"] = compute.training_plan_arn
    for ours, sdk in (
        ("infra_check", "enable_infra_check"),
        ("remote_debug", "enable_remote_debug"),
        ("session_tag_chaining", "enable_session_tag_chaining"),
    ):
        if getattr(spec, ours) is not None:
            kwargs[sdk] = getattr(spec, ours)
    inputs = {name: _channel(ch) for name, ch in spec.channels.items()} or None
    return {
        "id": case_id,
        "kind": "request",
        "estimator": ESTIMATORS.get(framework, "PyTorch"),
        "region": region,
        "job_name": job_name,
        "kwargs": kwargs,
        "inputs": inputs,
    }
