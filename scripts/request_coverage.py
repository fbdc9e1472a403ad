"""Every field of the ``CreateTrainingJob`` request: where the spec sets it, or why it is left out.

Pure data. ``scripts/gen_request_coverage.py`` renders it into ``docs/request-coverage.md``
with the field list taken from botocore's service model, and ``tests/unit/sagemaker/test_coverage.py``
fails when botocore has a field this table does not mention (so a new API field is a decision, not
a silent gap). Paths use the API's names; ``[]`` is a list item. An entry for a structure covers
everything below it unless a deeper entry says more.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Status = Literal["spec", "planner", "unsupported"]


class Coverage(NamedTuple):
    status: Status  # spec: a spec field sets it; planner: derived by the planner; unsupported: left out
    detail: str  # the spec field (status spec), how it is derived (planner), or why not (unsupported)
    covers_children: bool = False


def _s(field: str) -> Coverage:
    return Coverage("spec", field)


def _p(how: str, children: bool = False) -> Coverage:
    return Coverage("planner", how, children)


def _u(reason: str) -> Coverage:
    return Coverage("unsupported", reason, True)


COVERAGE: dict[str, Coverage] = {
    "TrainingJobName": _p("job name from `name` + a hash of the Airflow run identity (`sagemaker/naming.py`)"),
    "HyperParameters": _s("`hyperparameters` (each value `json.dumps`-ed, `null` for None) + strategy keys"),
    "AlgorithmSpecification": _p("always sent"),
    "AlgorithmSpecification.TrainingImage": _s(
        "`image.uri`, or resolved from `image.framework`/`framework_version` (Hugging Face: "
        "`transformers_version` + `pytorch_version`/`tensorflow_version`)"
    ),
    "AlgorithmSpecification.AlgorithmName": _u(
        "built-in and Marketplace algorithms are not script-mode training: this provider runs your code"
    ),
    "AlgorithmSpecification.TrainingInputMode": _s("`input_mode`"),
    "AlgorithmSpecification.MetricDefinitions": _s("`metric_definitions`"),
    "AlgorithmSpecification.MetricDefinitions[].Name": _s("`metric_definitions[].name`"),
    "AlgorithmSpecification.MetricDefinitions[].Regex": _s("`metric_definitions[].regex`"),
    "AlgorithmSpecification.EnableSageMakerMetricsTimeSeries": _p("true for framework images, as the SDK"),
    "AlgorithmSpecification.ContainerEntrypoint": Coverage(
        "spec", "`image.container_entry_point` (with `image.uri`); the `launcher` strategy sets its own", True
    ),
    "AlgorithmSpecification.ContainerArguments": Coverage("spec", "`image.container_arguments`", True),
    "AlgorithmSpecification.TrainingImageConfig": _s("`image.repository_access_mode`"),
    "AlgorithmSpecification.TrainingImageConfig.TrainingRepositoryAccessMode": _s("`image.repository_access_mode`"),
    "AlgorithmSpecification.TrainingImageConfig.TrainingRepositoryAuthConfig": _s(
        "`image.repository_credentials_provider_arn`"
    ),
    "AlgorithmSpecification.TrainingImageConfig.TrainingRepositoryAuthConfig.TrainingRepositoryCredentialsProviderArn": _s(
        "`image.repository_credentials_provider_arn`"
    ),
    "RoleArn": _s("`role_arn`"),
    "InputDataConfig": _s("`channels` (+ the `code` channel under network isolation, the launcher's channel)"),
    "InputDataConfig[].ChannelName": _s("the key of `channels`"),
    "InputDataConfig[].DataSource": _s("`channels.<name>.type`"),
    "InputDataConfig[].DataSource.S3DataSource": _s("`type: s3`"),
    "InputDataConfig[].DataSource.S3DataSource.S3DataType": _s("`channels.<name>.data_type`"),
    "InputDataConfig[].DataSource.S3DataSource.S3Uri": _s("`channels.<name>.uri`"),
    "InputDataConfig[].DataSource.S3DataSource.S3DataDistributionType": _s("`channels.<name>.distribution`"),
    "InputDataConfig[].DataSource.S3DataSource.AttributeNames": _s("`channels.<name>.attribute_names`"),
    "InputDataConfig[].DataSource.S3DataSource.InstanceGroupNames": _s("`channels.<name>.instance_groups`"),
    "InputDataConfig[].DataSource.S3DataSource.ModelAccessConfig": _u(
        "JumpStart gated-model EULA acceptance: use the SDK's JumpStart estimators for hub models"
    ),
    "InputDataConfig[].DataSource.S3DataSource.HubAccessConfig": _u(
        "SageMaker JumpStart private hub content: use the SDK's JumpStart estimators"
    ),
    "InputDataConfig[].DataSource.FileSystemDataSource": _s("`type: fsx` / `type: efs`"),
    "InputDataConfig[].DataSource.FileSystemDataSource.FileSystemId": _s("`channels.<name>.file_system_id`"),
    "InputDataConfig[].DataSource.FileSystemDataSource.FileSystemAccessMode": _s("`channels.<name>.access_mode`"),
    "InputDataConfig[].DataSource.FileSystemDataSource.FileSystemType": _s("`type` (FSxLustre for fsx, EFS for efs)"),
    "InputDataConfig[].DataSource.FileSystemDataSource.DirectoryPath": _s("`channels.<name>.directory_path`"),
    "InputDataConfig[].DataSource.DatasetSource": _u(
        "Amazon SageMaker dataset ARNs (the Unified Studio data catalog): not in SDK v2; stage the data to S3 or FSx"
    ),
    "InputDataConfig[].ContentType": _s("`channels.<name>.content_type`"),
    "InputDataConfig[].CompressionType": _s("`channels.<name>.compression`"),
    "InputDataConfig[].RecordWrapperType": _s("`channels.<name>.record_wrapping`"),
    "InputDataConfig[].InputMode": _s("`channels.<name>.input_mode`"),
    "InputDataConfig[].ShuffleConfig": _s("`channels.<name>.shuffle_seed`"),
    "InputDataConfig[].ShuffleConfig.Seed": _s("`channels.<name>.shuffle_seed`"),
    "OutputDataConfig": _s("`output`"),
    "OutputDataConfig.KmsKeyId": _s("`output.kms_key`"),
    "OutputDataConfig.S3OutputPath": _s("`output.s3_path`"),
    "OutputDataConfig.CompressionType": _s("`output.compression`"),
    "ResourceConfig": _s("`compute`"),
    "ResourceConfig.InstanceType": _s("`compute.instance_type`"),
    "ResourceConfig.InstanceCount": _s("`compute.instance_count`"),
    "ResourceConfig.VolumeSizeInGB": _s("`compute.volume_size_gb`"),
    "ResourceConfig.VolumeKmsKeyId": _s("`compute.volume_kms_key`"),
    "ResourceConfig.KeepAlivePeriodInSeconds": _s("`compute.keep_alive_seconds`"),
    "ResourceConfig.InstanceGroups": _s("`compute.instance_groups`"),
    "ResourceConfig.InstanceGroups[].InstanceType": _s("`compute.instance_groups[].instance_type`"),
    "ResourceConfig.InstanceGroups[].InstanceCount": _s("`compute.instance_groups[].instance_count`"),
    "ResourceConfig.InstanceGroups[].InstanceGroupName": _s("`compute.instance_groups[].name`"),
    "ResourceConfig.TrainingPlanArn": _s("`compute.training_plan_arn`"),
    "ResourceConfig.InstancePlacementConfig": _u(
        "UltraServer placement (p6e-gb200): the cluster facts and cost bound assume independent instances; "
        "not modelled yet"
    ),
    "ResourceConfig.InstancePreferences": _u(
        "flexible instance types: the plan (devices, processes, cost bound, hardware rules) needs one known type"
    ),
    "ResourceConfig.SelectedInstanceType": _u("set by SageMaker from InstancePreferences, which are not supported"),
    "ResourceConfig.SelectedInstanceCount": _u("set by SageMaker from InstancePreferences, which are not supported"),
    "VpcConfig": _s("`network.subnets` + `network.security_group_ids`"),
    "VpcConfig.SecurityGroupIds": _s("`network.security_group_ids`"),
    "VpcConfig.Subnets": _s("`network.subnets`"),
    "StoppingCondition": _s("`stopping`"),
    "StoppingCondition.MaxRuntimeInSeconds": _s("`stopping.max_runtime_seconds`"),
    "StoppingCondition.MaxWaitTimeInSeconds": _s("`spot.max_wait_seconds`"),
    "StoppingCondition.MaxPendingTimeInSeconds": _s("`stopping.max_pending_seconds` (no SDK v2 argument)"),
    "Tags": _s("`tags` (+ the run-identity tag)"),
    "Tags[].Key": _s("the key of `tags`"),
    "Tags[].Value": _s("the value of `tags`"),
    "EnableNetworkIsolation": _s("`network.network_isolation`"),
    "EnableInterContainerTrafficEncryption": _s("`network.inter_container_encryption`"),
    "EnableManagedSpotTraining": _s("`spot.enabled`"),
    "CheckpointConfig": _s("`checkpoint`"),
    "CheckpointConfig.S3Uri": _s("`checkpoint.s3_uri`"),
    "CheckpointConfig.LocalPath": _s("`checkpoint.local_path`"),
    "DebugHookConfig": _s("`debugger.hook` (the SDK's default hook, with its exclusions)"),
    "DebugHookConfig.S3OutputPath": _p("`output.s3_path`, as the SDK's default hook"),
    "DebugHookConfig.CollectionConfigurations": _p("empty, as the SDK's default hook", children=True),
    "DebugHookConfig.LocalPath": _u("Debugger tensor collections are not configurable (SMDebug is deprecated)"),
    "DebugHookConfig.HookParameters": _u("Debugger tensor collections are not configurable (SMDebug is deprecated)"),
    "DebugRuleConfigurations": _u(
        "Debugger rules run extra processing jobs with per-region rule images; SMDebug is deprecated"
    ),
    "TensorBoardOutputConfig": _s("`tensorboard`"),
    "TensorBoardOutputConfig.LocalPath": _s("`tensorboard.local_path`"),
    "TensorBoardOutputConfig.S3OutputPath": _s("`tensorboard.s3_path`"),
    "ExperimentConfig": _u(
        "SageMaker Experiments is superseded by managed MLflow; the Airflow run (and OpenLineage) records the run"
    ),
    "ProfilerConfig": _s("`debugger.profiler` (the SDK's default, off on Trainium and unsupported regions)"),
    "ProfilerConfig.S3OutputPath": _p("`output.s3_path`, as the SDK's default profiler"),
    "ProfilerConfig.DisableProfiler": _s("`debugger.profiler`"),
    "ProfilerConfig.ProfilingIntervalInMilliseconds": _u("profiler tuning is not exposed (the SDK's defaults)"),
    "ProfilerConfig.ProfilingParameters": _u("profiler tuning is not exposed (the SDK's defaults)"),
    "ProfilerRuleConfigurations": _u("profiler rules run extra processing jobs with per-region rule images"),
    "Environment": _s("`environment`"),
    "RetryStrategy": _s("`max_retry_attempts`"),
    "RetryStrategy.MaximumRetryAttempts": _s("`max_retry_attempts`"),
    "RemoteDebugConfig": _s("`remote_debug`"),
    "RemoteDebugConfig.EnableRemoteDebug": _s("`remote_debug`"),
    "InfraCheckConfig": _s("`infra_check`"),
    "InfraCheckConfig.EnableInfraCheck": _s("`infra_check`"),
    "SessionChainingConfig": _s("`session_tag_chaining`"),
    "SessionChainingConfig.EnableSessionTagChaining": _s("`session_tag_chaining`"),
    "ServerlessJobConfig": _u(
        "serverless model customization (fine-tuning a hub base model) is not distributed training of your code"
    ),
    "MlflowConfig": _s("`mlflow` (encoded as the SDK v3 trainers do)"),
    "MlflowConfig.MlflowResourceArn": _s("`mlflow.resource_arn`"),
    "MlflowConfig.MlflowExperimentName": _s("`mlflow.experiment_name`"),
    "MlflowConfig.MlflowRunName": _s("`mlflow.run_name`"),
    "ModelPackageConfig": _u(
        "registration is the pipeline's gated `register` step (after evaluation), not part of the training job"
    ),
}

# SDK v2 arguments (EstimatorBase / Framework / TrainingInput / FileSystemInput) with no spec field.
SDK_ARGUMENTS_LEFT_OUT: dict[str, str] = {
    "EstimatorBase.sagemaker_session / Framework.code_location / git_config": (
        "the operator packs and uploads `source.source_dir` itself; use an s3:// tarball for anything else"
    ),
    "Framework.dependencies": (
        "`source.dependencies`: packed with a local `source_dir` at the archive root, as the SDK does"
    ),
    "EstimatorBase.output_kms_key / volume_kms_key / ...": "all mapped (see the table)",
    "EstimatorBase.model_uri / model_channel_name": "add a channel named `model` instead",
    "EstimatorBase.rules / debugger_hook_config collections / profiler_config parameters": (
        "see DebugRuleConfigurations and ProfilerConfig above"
    ),
    "EstimatorBase.environment from the SageMaker config file / sagemaker_config": (
        "the spec is the only source: no hidden defaults"
    ),
    "EstimatorBase.instance_placement_config": "see ResourceConfig.InstancePlacementConfig",
    "EstimatorBase.container_entry_point / container_arguments": (
        "mapped: `image.container_entry_point` / `image.container_arguments`"
    ),
    "Framework.image_uri / framework_version / py_version": "`image`",
    "HuggingFace transformers_version / pytorch_version / tensorflow_version": (
        "mapped: `image.framework: huggingface` with `image.transformers_version` and "
        "`image.pytorch_version` or `image.tensorflow_version`"
    ),
    "HuggingFace.compiler_config (SageMaker Training Compiler), distribution pytorchxla": (
        "left out: the SDK's `huggingface-training-compiler` images stop at transformers 4.21.1 / PyTorch "
        "1.11.0 / TensorFlow 2.6.3 (2022) and AWS publishes no newer Training Compiler images, so it cannot "
        "run with any version the HuggingFace GPU images still get; `pytorchxla` needs it. Use `torch.compile` "
        "in the training script"
    ),
    "TrainingInput.target_attribute_name": "not a CreateTrainingJob field (AutoML only)",
    "TrainingInput.hub_access_config / model_access_config": "see S3DataSource.HubAccessConfig / ModelAccessConfig",
    "fit(experiment_config=...)": "see ExperimentConfig",
}


def lookup(path: str) -> Coverage | None:
    """The entry for ``path``, or the nearest ancestor entry that covers its children."""
    if path in COVERAGE:
        return COVERAGE[path]
    parts = path.split(".")
    for end in range(len(parts) - 1, 0, -1):
        ancestor = ".".join(parts[:end])
        entry = COVERAGE.get(ancestor) or COVERAGE.get(ancestor.removesuffix("[]"))
        if entry is not None and entry.covers_children:
            return entry
    return None
