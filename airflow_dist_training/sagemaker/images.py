"""Resolve framework + version + py_version to the AWS Deep Learning Container image URI.

Follows the SageMaker SDK's ``image_uris.retrieve``: ``{account}.dkr.ecr.{region}.{domain}/{repo}:{tag}``
with the short tag ``<version>-<processor>-<py_version>`` (the version as the user wrote it, alias
included). SMP v2 switches to the ``smdistributed-modelparallel`` image; Trainium to the neuron image.
"""

from __future__ import annotations

from airflow_dist_training.sagemaker.catalog import image_config, instance_family, is_gpu_family, is_trainium
from airflow_dist_training.spec.training import ImageSpec


class ImageResolutionError(ValueError):
    """The image cannot be resolved; the message names the problem (the caller adds the field path)."""


def ecr_domain(region: str) -> str:
    if region.startswith("cn-"):
        return "amazonaws.com.cn"
    if region.startswith("us-iso-"):
        return "c2s.ic.gov"
    if region.startswith("us-isob-"):
        return "sc2s.sgov.gov"
    return "amazonaws.com"


def processor_for(instance_type: str) -> str:
    if is_trainium(instance_type):
        return "neuron"
    return "gpu" if is_gpu_family(instance_type) else "cpu"


def _resolve_version(framework: str, version: str) -> tuple[dict, str]:
    config = image_config()["frameworks"][framework]
    full = config["version_aliases"].get(version, version)
    if full not in config["versions"]:
        known = sorted(set(config["versions"]) | set(config["version_aliases"]))
        raise ImageResolutionError(
            f"framework_version {version!r} has no default {framework} training image; "
            f"known versions: {', '.join(known)} (or give image.uri)"
        )
    return config, full


def _registry(config: dict, region: str) -> str:
    if config["registry"] == "smp":
        return str(config["account"])
    registries = image_config()["dlc_registries"]
    return str(registries["exceptions"].get(region, registries["default"]))


def resolve_image_uri(
    image: ImageSpec, *, region: str, instance_type: str | None, smp_v2: bool = False
) -> str:
    """The training image URI for ``image`` (an explicit ``uri`` is returned unchanged)."""
    if image.uri:
        return image.uri
    assert image.framework and image.framework_version
    version = image.framework_version
    framework: str = image.framework
    instance = instance_type or ""
    if smp_v2:
        framework = "pytorch-smp"
    elif framework == "pytorch" and is_trainium(instance):
        framework = "pytorch-neuron"
    config, full = _resolve_version(framework, version)
    py_versions = config["versions"][full]
    py_version = image.py_version or py_versions[-1]
    if py_version not in py_versions:
        raise ImageResolutionError(
            f"py_version {py_version!r} is not available for {image.framework} {version}; "
            f"available: {', '.join(py_versions)}"
        )
    processor = processor_for(instance)
    if framework == "pytorch-smp":
        if processor != "gpu":
            raise ImageResolutionError("SMP v2 images are GPU only; use a ml.p* or ml.g* instance type")
        tag = f"{version}-gpu-{py_version}-{_smp_cuda(version, instance)}"
    else:
        tag = f"{version}-{processor}-{py_version}{config.get('tag_suffix', '')}"
    return f"{_registry(config, region)}.dkr.ecr.{region}.{ecr_domain(region)}/{config['repository']}:{tag}"


def _smp_cuda(version: str, instance_type: str) -> str:
    """The SMP image's CUDA suffix: cu124 for 2.5, cu121 for 2.1-2.4 or p5, else cu118."""
    if version.startswith("2.5"):
        return "cu124"
    if version.startswith(("2.1", "2.2", "2.3", "2.4")) or instance_family(instance_type).startswith("p5"):
        return "cu121"
    return "cu118"
