"""OpenLineage datasets of each step (naming, and the OperatorLineage the listener receives)."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from airflow_dist_training.lineage import (
    evaluation_lineage,
    model_package_dataset,
    promotion_lineage,
    registration_lineage,
    staging_lineage,
    uri_dataset,
)


def names(datasets: list) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]


def test_uri_naming() -> None:
    assert uri_dataset("s3://bucket/data/train/") == ("s3://bucket", "data/train/")
    assert uri_dataset("file:///tmp/x/model.tar.gz") == ("file", "/tmp/x/model.tar.gz")
    assert uri_dataset("/tmp/a/../b") == ("file", "/tmp/b")
    assert uri_dataset(None) is None


def test_fsx_staging_names_the_file_system_and_the_mounted_path() -> None:
    op = SimpleNamespace(
        s3_uri="s3://bucket/datasets/train/",
        _lineage_result={
            "type": "fsx",
            "file_system_id": "fs-0123456789abcdef0",
            "directory_path": "/abcdefgh/train",
        },
    )
    lineage = staging_lineage(op, None)
    assert names(lineage.inputs) == [("s3://bucket", "datasets/train/")]
    assert names(lineage.outputs) == [("fsx://fs-0123456789abcdef0", "/abcdefgh/train")]


def test_promotion_evaluation_and_sagemaker_registration() -> None:
    promoted = promotion_lineage(
        SimpleNamespace(_lineage_result={"source_uri": "s3://b/ck/step-30/", "target_uri": "s3://b/best/"}),
        None,
    )
    assert names(promoted.inputs) == [("s3://b", "ck/step-30/")] and names(promoted.outputs) == [
        ("s3://b", "best/")
    ]
    evaluated = evaluation_lineage(
        SimpleNamespace(
            model_uri="s3://b/out/model.tar.gz",
            data_uri="s3://b/test/",
            _lineage_result={"evaluation_uri": "s3://b/eval/evaluation.json"},
        ),
        None,
    )
    assert names(evaluated.inputs) == [("s3://b", "out/model.tar.gz"), ("s3://b", "test/")]
    assert names(evaluated.outputs) == [("s3://b", "eval/evaluation.json")]
    arn = "arn:aws:sagemaker:us-east-1:123456789012:model-package/adt-demo/3"
    registered = registration_lineage(
        SimpleNamespace(
            _lineage_result={
                "package_id": arn,
                "model_data_uri": "s3://b/out/model.tar.gz",
                "evaluation_uri": "s3://b/eval/evaluation.json",
            }
        ),
        None,
    )
    assert names(registered.inputs)[0] == ("s3://b", "out/model.tar.gz")
    assert names(registered.outputs) == [
        ("arn:aws:sagemaker:us-east-1:123456789012", "model-package/adt-demo/3")
    ]
    assert model_package_dataset({"package_id": "g/2"}, "/reg") == ("file", "/reg/g/2")


def test_lineage_module_imports_neither_airflow_nor_openlineage() -> None:
    code = "import sys, airflow_dist_training.lineage; print(sorted(m for m in sys.modules if m.startswith(('airflow.', 'openlineage'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
