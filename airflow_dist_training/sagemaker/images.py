"""Resolve framework + version + py_version to the AWS Deep Learning Container image URI.

Follows the SageMaker SDK's ``image_uris.retrieve``: ``{account}.dkr.ecr.{region}.{domain}/{repo}:{tag}``
with the short tag ``<version>-<processor>-<py_version>[-<container version>]`` (the version as the user
wrote it, alias included). SMP v2 switches to the ``smdistributed-modelparallel`` image; Trainium to the
neuron image. Registries are per version and region, as in the SDK's image_uri_config.

Hugging Face (``get_training_image_uri`` with ``pytorch_version``/``tensorflow_version``): the
transformers version picks a config, the base framework version (``pytorch2.8.0``) an image in it;
the tag is ``<base version>-transformers<version>-<processor>-<py>[-<container version>]``. On
Trainium the SDK refuses Hugging Face; we resolve the ``huggingface-pytorch-training-neuronx``
image from the SDK's own training data for it (docs/parity.md).
"""

from __future__ import annotations

from typing import Any

from airflow_dist_training.sagemaker.catalog import image_config, instance_family, is_gpu_family, is_trainium
from airflow_dist_training.spec.training import ImageSpec


class ImageResolutionError(ValueError):
    """The image cannot be resolved; the message names the problem (the caller adds the field path)."""


# the region prefix of each partition whose ECR domain is not amazonaws.com
_ECR_DOMAINS = {
    "cn-": "amazonaws.com.cn", "us-iso-": "c2s.ic.gov", "us-isob-": "sc2s.sgov.gov", "us-isof-": "csp.hci.ic.gov"
}  # fmt: skip


def ecr_domain(region: str) -> str:
    return next((d for prefix, d in _ECR_DOMAINS.items() if region.startswith(prefix)), "amazonaws.com")


def processor_for(instance_type: str, available: list[str] | None = None) -> str:
    """The SDK's ``image_uris._processor``: a family named in the config, else trn / gpu / cpu."""
    family = instance_family(instance_type)
    if available and family in available:
        return family
    if is_trainium(instance_type):
        return "trn"
    return "gpu" if is_gpu_family(instance_type) else "cpu"


def _resolve_version(framework: str, version: str) -> tuple[dict[str, Any], str]:
    config = image_config()["frameworks"][framework]
    full = config["version_aliases"].get(version, version)
    if full not in config["versions"]:
        known = sorted(set(config["versions"]) | set(config["version_aliases"]))
        raise ImageResolutionError(
            f"framework_version {version!r} has no default {framework} training image; "
            f"known versions: {', '.join(known)} (or give image.uri)"
        )
    return config, full


def _image_framework(framework: str, instance: str, *, smp_v2: bool) -> str:
    """The image_uri_config entry: the SMP v2 image, the Neuron image on Trainium, else the framework's."""
    if smp_v2:
        return "pytorch-smp"
    if is_trainium(instance):
        if framework != "pytorch":
            raise ImageResolutionError(
                f"there is no {framework} training image for Trainium ({instance}); only pytorch"
            )
        return "pytorch-neuron"
    return framework


def _registry_account(entry: dict[str, Any], region: str, version: str) -> str:
    """The account of ``entry``'s image registry in ``region`` (the SDK's registry sets)."""
    registries: dict[str, str] = image_config()["registry_sets"][entry["registries"]]
    if region not in registries:
        raise ImageResolutionError(
            f"Unsupported region: {region}: no {entry['repository']}:{version} image there; "
            f"supported regions: {', '.join(registries)} (or give image.uri)"
        )
    return registries[region]


def _py_version(image: ImageSpec, py_versions: list[str]) -> str:
    py_version = image.py_version
    if py_version is None:
        if len(py_versions) != 1:
            raise ImageResolutionError(
                f"py_version is required for {image.framework} {image.version}: one of "
                f"{', '.join(py_versions)}"
            )
        py_version = py_versions[0]
    if py_version not in py_versions:
        raise ImageResolutionError(
            f"py_version {py_version!r} is not available for {image.framework} {image.version}; "
            f"available: {', '.join(py_versions)}"
        )
    return py_version


def resolve_image_uri(
    image: ImageSpec, *, region: str, instance_type: str | None, smp_v2: bool = False
) -> str:
    """The training image URI for ``image`` (an explicit ``uri`` is returned unchanged).

    Mirrors ``sagemaker.image_uris.retrieve`` / ``get_training_image_uri`` (SDK v2.257.x) over the
    data in ``data/images.json`` (regenerated from the SDK's image_uri_config by
    ``tests/parity/regenerate_images.py``). One deliberate difference: where the SDK silently swaps
    in its only Trainium image (PyTorch 1.11.0) for any requested version, we refuse.
    """
    if image.uri:
        return image.uri
    if image.framework == "huggingface":
        return _huggingface_uri(image, region=region, instance_type=instance_type or "", smp_v2=smp_v2)
    assert image.framework and image.framework_version
    version = image.framework_version
    instance = instance_type or ""
    framework = _image_framework(image.framework, instance, smp_v2=smp_v2)
    config, full = _resolve_version(framework, version)
    version_config = config["versions"][full]
    py_version = _py_version(image, version_config["py_versions"])
    account = _registry_account(version_config, region, version)
    processor = processor_for(instance, config["processors"])
    if processor not in config["processors"]:
        raise ImageResolutionError(
            f"{version_config['repository']} images exist for {', '.join(config['processors'])} only, "
            f"not for {instance or 'no instance type'}"
        )
    container_version = version_config.get("container_version", {}).get(processor)
    if "sdk_versions" in version_config:  # neuron images carry the Neuron SDK version in the tag
        container_version = f"{_latest(version_config['sdk_versions'])}-{container_version}"
    if framework == "pytorch-smp":
        container_version = _smp_cuda(version, instance)
    middle = "neuron" if framework == "pytorch-neuron" else processor  # the SDK's inference_tool for trn
    tag = "-".join(x for x in (version, middle, py_version, container_version) if x)
    return f"{account}.dkr.ecr.{region}.{ecr_domain(region)}/{version_config['repository']}:{tag}"


def _latest(versions: list[str]) -> str:
    return max(versions, key=lambda v: [int(p) if p.isdigit() else p for p in v.lstrip("sdk").split(".")])


def _smp_cuda(version: str, instance_type: str) -> str:
    """The SMP image's CUDA suffix (``get_training_image_uri``): cu124 for 2.5, cu121 for 2.1-2.4 or p5, else cu118.

    Substring tests, exactly as the SDK does them.
    """
    if "2.5" in version:
        return "cu124"
    if "p5" in instance_type or any(v in version for v in ("2.1", "2.2", "2.3", "2.4")):
        return "cu121"
    return "cu118"


def _huggingface_uri(image: ImageSpec, *, region: str, instance_type: str, smp_v2: bool) -> str:
    """``get_training_image_uri("huggingface", ...)``; on Trainium the neuronx training image."""
    assert image.transformers_version and image.base_framework and image.base_framework_version
    if smp_v2:
        raise ImageResolutionError(
            f"Unsupported pytorch-smp version: {image.transformers_version}: smp_v2 switches to the SMP "
            "image, which has no Hugging Face variant (give image.uri, or use framework: pytorch)"
        )
    trainium = is_trainium(instance_type)
    framework = "huggingface-neuronx" if trainium else "huggingface"
    version = image.transformers_version
    config, full = _resolve_version(framework, version)
    if not trainium:  # get_training_image_uri's own processor check, before the config's
        processor = processor_for(instance_type, ["cpu", "gpu"])
        if processor not in config["processors"]:
            raise ImageResolutionError(
                f"Unsupported processor: {processor}. Hugging Face training images exist for "
                f"{', '.join(config['processors'])} instances only, not {instance_type or 'no instance type'}"
            )
    else:
        processor = "trn"
    versions = config["versions"][full]
    base = f"{image.base_framework}{image.base_framework_version}"
    base_full = versions["version_aliases"].get(base, base)
    if base_full not in versions["bases"]:
        raise ImageResolutionError(
            f"Unsupported base framework: {base}. transformers {version} images have: "
            f"{', '.join(sorted(versions['bases']))} (or give image.uri)"
        )
    entry = versions["bases"][base_full]
    py_version = _py_version(image, entry["py_versions"])
    account = _registry_account(entry, region, version)
    containers: dict[str, str] = entry.get("container_version", {})
    if not trainium:  # get_training_image_uri's default for GPU images whose config names none
        container = containers.get(processor, "cu110-ubuntu18.04")
    else:  # the neuronx training data keys its one container version "inf" for most versions
        container = containers.get(processor) or next(iter(containers.values()))
        container = f"{_latest(entry['sdk_versions'])}-{container}"  # as the SDK tags neuron images
    middle = "neuronx" if trainium else processor
    tag = "-".join(
        x for x in (f"{image.base_framework_version}-transformers{version}", middle, py_version, container) if x
    )
    return f"{account}.dkr.ecr.{region}.{ecr_domain(region)}/{entry['repository']}:{tag}"
