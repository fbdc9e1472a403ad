"""OpenLineage datasets of the pipeline's steps (pure naming, plus a lazy ``OperatorLineage`` builder).

The chain and its namespaces (``s3://<bucket>``, ``fsx://``/``efs://<fs id>``, ``file``, a model
package ARN) are in ``docs/lineage.md``. Nothing here imports Airflow or OpenLineage at module
level: :func:`operator_lineage` imports the provider only when the listener asks, and returns
``None`` when it is not installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_dist_training.storage.location import split_uri, uri_scheme

DatasetName = tuple[str, str]  # (namespace, name)


def uri_dataset(uri: str | None) -> DatasetName | None:
    """``s3://b/k`` -> (``s3://b``, ``k``); ``file:///p`` or ``/p`` -> (``file``, ``/p``)."""
    if not uri:
        return None
    scheme, host, path = split_uri(str(uri))
    if scheme == "s3":
        return (f"s3://{host}", path or "/")  # as the training operator names S3 channels
    if scheme == "file":
        return ("file", _norm_path(path))
    return (f"{scheme}://{host}", "/" + path)


def _norm_path(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


def fsx_dataset(file_system_id: str, directory_path: str, file_system_type: str = "FSxLustre") -> DatasetName:
    scheme = "fsx" if file_system_type in ("FSxLustre", "fsx") else "efs"
    return (f"{scheme}://{file_system_id}", "/" + str(directory_path or "/").strip("/"))


def channel_dataset(channel: Mapping[str, Any], *, local: bool) -> DatasetName | None:
    """A spec channel (dict): the local stand-in when running locally, else what SageMaker reads."""
    if local and channel.get("local_source"):
        return uri_dataset(str(channel["local_source"]))
    kind = channel.get("type")
    if kind in ("fsx", "efs") or channel.get("file_system_id"):
        return fsx_dataset(
            str(channel.get("file_system_id")),
            str(channel.get("directory_path") or "/"),
            "FSxLustre" if kind != "efs" else "EFS",
        )
    return uri_dataset(channel.get("uri") or channel.get("s3_uri"))


def model_package_dataset(
    registration: Mapping[str, Any], local_registry_dir: str | None = None
) -> DatasetName | None:
    """The registered model package version."""
    package = str(registration.get("package_id") or "")
    if package.startswith("arn:aws:sagemaker:"):
        prefix, _, resource = package.partition(":model-package/")
        return (prefix, f"model-package/{resource}")
    if package:
        root = _norm_path(local_registry_dir) if local_registry_dir else "registry"
        return ("file", f"{root}/{package}")
    return None


def local_training_datasets(
    spec: Any, result: Mapping[str, Any] | None, base_dir: str | None = None
) -> tuple[list[DatasetName], list[DatasetName]]:
    """A local job: its channels' local sources in, the model artifact out."""
    inputs = []
    data = spec.model_dump(mode="json") if hasattr(spec, "model_dump") else dict(spec or {})
    for channel in (data.get("channels") or {}).values():
        source = channel.get("local_source")
        relative = source and "://" not in str(source) and not os.path.isabs(str(source))
        if base_dir and relative:
            source = os.path.join(base_dir, str(source))
        inputs.append(channel_dataset({**channel, "local_source": source}, local=True))
    outputs = [uri_dataset((result or {}).get("model_artifact_uri"))]
    return [d for d in inputs if d is not None], [d for d in outputs if d is not None]


def operator_lineage(
    inputs: Iterable[DatasetName | None],
    outputs: Iterable[DatasetName | None],
    *,
    job_facets: Mapping[str, Any] | None = None,
) -> Any:
    """An ``OperatorLineage`` (None when the OpenLineage provider is not installed)."""
    try:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:
        return None

    def unique(items: Iterable[DatasetName | None]) -> list[Any]:
        seen = dict.fromkeys(d for d in items if d is not None)
        return [Dataset(namespace=ns, name=name) for ns, name in seen]

    return OperatorLineage(inputs=unique(inputs), outputs=unique(outputs), job_facets=dict(job_facets or {}))


def _result(operator: Any) -> Mapping[str, Any]:
    """The task's result, kept on the operator by ``execute`` (``_lineage_result``); {} without one.

    Not ``xcom_pull``: the OpenLineage listener calls us in a forked child of the task process,
    where a call to the supervisor hangs until the listener's timeout kills the child (no event).
    """
    found = getattr(operator, "_lineage_result", None)
    return found if isinstance(found, Mapping) else {}


def training_lineage(operator: Any, task_instance: Any) -> Any:
    """A training task's: its S3, FSx and EFS channels in, the model artifact out (as the request
    and the job's description say); a job on this machine: its channels' local sources in, its
    local model artifact out."""
    launch, status = operator._launch, operator._status
    if operator.training_backend.record.durable:
        detail = status.detail if status is not None else {}
        inputs, outputs = lineage_datasets((launch.request if launch is not None else None) or detail, detail)
    else:
        base = operator.local_hook_kwargs.get("base_dir")
        spec = launch.spec if launch is not None else None
        inputs, outputs = local_training_datasets(spec, operator._result, str(base) if base else None)
    return operator_lineage(inputs, outputs)


def staging_lineage(operator: Any, task_instance: Any) -> Any:
    """FSx (or local) staging: the source prefix in, the staged channel out."""
    channel = _result(operator)
    source = getattr(operator, "s3_uri", None) or getattr(operator, "source", None)
    local = bool(channel.get("local_source"))
    staged = [channel_dataset(channel, local=local)] if local or channel.get("file_system_id") else []
    return operator_lineage([uri_dataset(source)], staged)


def promotion_lineage(operator: Any, task_instance: Any) -> Any:
    """Checkpoint promotion: the chosen checkpoint in, its stable target location out."""
    entry = _result(operator)
    return operator_lineage(
        [uri_dataset(entry.get("source_uri"))],
        [uri_dataset(entry.get("target_uri") or getattr(operator, "target_uri", None))],
    )


def evaluation_lineage(operator: Any, task_instance: Any) -> Any:
    """Evaluation: the model (and the evaluation data) in, ``evaluation.json`` out."""
    model = getattr(operator, "model_uri", None)
    data = getattr(operator, "data_uri", None)
    return operator_lineage(
        [
            uri_dataset(str(model)) if isinstance(model, str) else None,
            uri_dataset(data) if isinstance(data, str) else None,
        ],
        [uri_dataset(_result(operator).get("evaluation_uri"))],
    )


def registration_lineage(operator: Any, task_instance: Any) -> Any:
    """Registration: the model artifact and ``evaluation.json`` in, the model package version out."""
    result = _result(operator)
    return operator_lineage(
        [uri_dataset(result.get("model_data_uri")), uri_dataset(result.get("evaluation_uri"))],
        [model_package_dataset(result, getattr(operator, "local_registry_dir", None))],
    )


def lineage_datasets(
    request: Mapping[str, Any], description: Mapping[str, Any]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(namespace, name) pairs of a job's inputs and outputs, OpenLineage naming.

    S3: ``s3://<bucket>`` + key. FSx for Lustre / EFS: ``fsx://<file system id>`` /
    ``efs://<file system id>`` + directory path. The code channel is not a data input.
    """
    inputs: list[tuple[str, str]] = []
    for channel in request.get("InputDataConfig") or description.get("InputDataConfig") or []:
        if channel.get("ChannelName") == "code":
            continue
        source = channel.get("DataSource") or {}
        if "S3DataSource" in source:
            _, bucket, key = split_uri(str(source["S3DataSource"]["S3Uri"]))
            inputs.append((f"s3://{bucket}", key or "/"))
        elif "FileSystemDataSource" in source:
            fs = source["FileSystemDataSource"]
            scheme = "fsx" if fs.get("FileSystemType") == "FSxLustre" else "efs"
            inputs.append((f"{scheme}://{fs.get('FileSystemId')}", str(fs.get("DirectoryPath", "/"))))
    outputs: list[tuple[str, str]] = []
    artifact = (description.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
    if artifact and uri_scheme(str(artifact)) == "s3":
        _, bucket, key = split_uri(str(artifact))
        outputs.append((f"s3://{bucket}", key))
    return inputs, outputs
