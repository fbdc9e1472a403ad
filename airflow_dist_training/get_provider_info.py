"""Provider metadata for Airflow's ``apache_airflow_provider`` entry point. No Airflow imports here."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    from airflow_dist_training import __version__

    return {
        "package-name": "airflow-dist-training",
        "name": "Distributed Training (SageMaker)",
        "description": "Distributed SageMaker training, FSx for Lustre staging, checkpoint handling and "
        "evaluation gates for Airflow 3, with a local torchrun backend.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Amazon SageMaker distributed training",
                "external-doc-url": "https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-training.html",
                "tags": ["aws"],
            },
            {
                "integration-name": "Amazon FSx for Lustre",
                "external-doc-url": "https://docs.aws.amazon.com/fsx/latest/LustreGuide/what-is.html",
                "tags": ["aws"],
            },
        ],
        "operators": [
            {
                "integration-name": "Amazon SageMaker distributed training",
                "python-modules": [
                    "airflow_dist_training.operators.training",
                    "airflow_dist_training.operators.checkpoints",
                    "airflow_dist_training.operators.evaluation",
                ],
            },
            {
                "integration-name": "Amazon FSx for Lustre",
                "python-modules": ["airflow_dist_training.operators.fsx"],
            },
        ],
        "sensors": [
            {
                "integration-name": "Amazon SageMaker distributed training",
                "python-modules": [
                    "airflow_dist_training.sensors.training",
                    "airflow_dist_training.sensors.checkpoints",
                ],
            },
            {
                "integration-name": "Amazon FSx for Lustre",
                "python-modules": ["airflow_dist_training.sensors.fsx"],
            },
        ],
        "hooks": [
            {
                "integration-name": "Amazon SageMaker distributed training",
                "python-modules": [
                    "airflow_dist_training.hooks.training",
                    "airflow_dist_training.hooks.checkpoints",
                    "airflow_dist_training.hooks.registry",
                    "airflow_dist_training.hooks.evaluation",
                ],
            },
            {
                "integration-name": "Amazon FSx for Lustre",
                "python-modules": ["airflow_dist_training.hooks.fsx"],
            },
        ],
        "triggers": [
            {
                "integration-name": "Amazon SageMaker distributed training",
                "python-modules": ["airflow_dist_training.triggers.training"],
            },
            {
                "integration-name": "Amazon FSx for Lustre",
                "python-modules": ["airflow_dist_training.triggers.fsx"],
            },
        ],
        "extra-links": [
            "airflow_dist_training.links.sagemaker.SageMakerTrainingJobLink",
            "airflow_dist_training.links.sagemaker.TrainingLogsLink",
            "airflow_dist_training.links.sagemaker.TrainingOutputLink",
            "airflow_dist_training.links.sagemaker.TrainingCheckpointLink",
            "airflow_dist_training.links.evaluation.EvaluationReportLink",
            "airflow_dist_training.links.evaluation.RegistrationAuditLink",
        ],
    }
