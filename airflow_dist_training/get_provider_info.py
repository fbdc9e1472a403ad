"""Provider metadata for Airflow's ``apache_airflow_provider`` entry point. No Airflow imports here."""

from __future__ import annotations

from typing import Any

SAGEMAKER = "Amazon SageMaker distributed training"
FSX = "Amazon FSx for Lustre"
_P = "airflow_dist_training"

#: The integrations and their AWS documentation.
INTEGRATIONS = {
    SAGEMAKER: "https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-training.html",
    FSX: "https://docs.aws.amazon.com/fsx/latest/LustreGuide/what-is.html",
}

#: kind (``operators``, ``sensors``, ...) -> integration -> the modules that implement it.
MODULES: dict[str, dict[str, list[str]]] = {
    "operators": {
        SAGEMAKER: [
            f"{_P}.operators.training",
            f"{_P}.operators.orphaned_jobs",
            f"{_P}.operators.checkpoints",
            f"{_P}.operators.evaluation",
            f"{_P}.operators.tuning",
        ],
        FSX: [f"{_P}.operators.fsx"],
    },
    "sensors": {
        SAGEMAKER: [f"{_P}.sensors.training", f"{_P}.sensors.checkpoints"],
        FSX: [f"{_P}.sensors.fsx"],
    },
    "hooks": {
        SAGEMAKER: [
            f"{_P}.hooks.training",
            f"{_P}.hooks.checkpoints",
            f"{_P}.hooks.registry",
            f"{_P}.hooks.evaluation",
        ],
        FSX: [f"{_P}.hooks.fsx"],
    },
    "triggers": {
        SAGEMAKER: [f"{_P}.triggers.training", f"{_P}.triggers.processing", f"{_P}.triggers.tuning"],
        FSX: [f"{_P}.triggers.fsx"],
    },
}

EXTRA_LINKS = [
    f"{_P}.links.sagemaker.SageMakerTrainingJobLink",
    f"{_P}.links.sagemaker.TrainingLogsLink",
    f"{_P}.links.sagemaker.TrainingOutputLink",
    f"{_P}.links.sagemaker.TrainingCheckpointLink",
    f"{_P}.links.evaluation.EvaluationReportLink",
    f"{_P}.links.evaluation.RegistrationAuditLink",
]


def get_provider_info() -> dict[str, Any]:
    from airflow_dist_training import __version__

    return {
        "package-name": "airflow-dist-training",
        "name": "Distributed Training (SageMaker)",
        "description": "Distributed SageMaker training, FSx for Lustre staging, checkpoint handling and "
        "evaluation gates for Airflow 3, with a local torchrun backend.",
        "versions": [__version__],
        "integrations": [
            {"integration-name": name, "external-doc-url": url, "tags": ["aws"]}
            for name, url in INTEGRATIONS.items()
        ],
        **{
            kind: [{"integration-name": name, "python-modules": list(mods)} for name, mods in per.items()]
            for kind, per in MODULES.items()
        },
        "extra-links": list(EXTRA_LINKS),
    }
