"""``source.dependencies``: files and directories packed with the code at the archive's root, as
the SageMaker SDK's ``dependencies`` (e.g. the checkpoint helper AWS's stock images lack)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.fingerprint import FingerprintHook
from airflow_dist_training.planning import uploads_from_xcom, uploads_to_xcom
from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.source_archive import pack_source_dir
from airflow_dist_training.spec.loading import load_spec

BASE: dict[str, Any] = {
    "name": "deps",
    "role_arn": "arn:aws:iam::123456789012:role/R",
    "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
    "compute": {"instance_type": "ml.g5.xlarge", "instance_count": 1},
    "output": {"s3_path": "s3://bucket/out"},
}


@pytest.fixture
def code(tmp_path: Path) -> dict[str, Path]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("import helper\n")
    (tmp_path / "helper.py").write_text("X = 1\n")
    lib = tmp_path / "lib" / "mylib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("Y = 2\n")
    return {"src": src, "helper": tmp_path / "helper.py", "lib": lib}


def _names(archive: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return sorted(m.name for m in tar.getmembers() if m.isfile())


def test_dependencies_land_at_the_archive_root_under_their_names(code: dict[str, Path]) -> None:
    archive = pack_source_dir(code["src"], [str(code["helper"]), str(code["lib"])])
    assert _names(archive) == ["helper.py", "mylib/__init__.py", "train.py"]
    # reproducible: a retry uploads the same bytes
    assert pack_source_dir(code["src"], [str(code["helper"]), str(code["lib"])]) == archive
    # without dependencies the archive is what it always was
    assert _names(pack_source_dir(code["src"])) == ["train.py"]


def test_a_missing_or_shadowing_dependency_is_the_fields_error(code: dict[str, Path]) -> None:
    with pytest.raises(SpecValidationError) as missing:
        pack_source_dir(code["src"], [str(code["helper"]), str(code["src"] / "nope.py")])
    assert str(missing.value.problems[0]) == f"source.dependencies[1]: {code['src'] / 'nope.py'} does not exist"
    (code["src"] / "helper.py").write_text("# the source_dir's own helper\n")
    with pytest.raises(SpecValidationError) as clash:
        pack_source_dir(code["src"], [str(code["helper"])])
    assert "source.dependencies[0]: helper.py is in source_dir" in str(clash.value.problems[0])


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"source_dir": "s3://bucket/code/sourcedir.tar.gz", "dependencies": ["helper.py"]},
         "dependencies are packed with a local source_dir"),
        ({"source_dir": "src", "dependencies": ["s3://bucket/helper.py"]},
         "'s3://bucket/helper.py': each entry must be a local file or directory"),
        ({"source_dir": "src", "dependencies": ["a/helper.py", "b/helper.py"]},
         "two entries would land at the same archive path: helper.py"),
    ],
)  # fmt: skip
def test_bad_dependencies_are_refused_when_the_spec_loads(source: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecValidationError) as err:
        load_spec({**BASE, "source": {"entry_point": "train.py", **source}})
    assert message in str(err.value)


def test_the_plan_carries_them_to_the_upload_and_through_xcom(code: dict[str, Path]) -> None:
    spec = load_spec(
        {**BASE, "source": {"entry_point": "train.py", "source_dir": str(code["src"]),
                            "dependencies": [str(code["helper"])]}}
    )  # fmt: skip
    plan = plan_training_job(spec, job_name="deps-1", region="us-east-1")
    (upload,) = [u for u in plan.uploads if u.kind == "source"]
    assert upload.dependencies == (str(code["helper"]),)
    assert uploads_from_xcom(uploads_to_xcom(plan.uploads)) == plan.uploads
    # the request itself is the SDK's: dependencies only change the tarball
    assert "dependencies" not in str(plan.request)


def test_the_code_hash_covers_the_dependencies(code: dict[str, Path]) -> None:
    hook = FingerprintHook()
    without = hook.code_hash(str(code["src"]), "train.py")
    with_helper = hook.code_hash(str(code["src"]), "train.py", ".", [str(code["helper"])])
    assert with_helper != without
    code["helper"].write_text("X = 2  # a change in the shipped helper is a change in the code\n")
    assert hook.code_hash(str(code["src"]), "train.py", ".", [str(code["helper"])]) != with_helper
    assert hook.code_hash(str(code["src"]), "train.py", ".", [str(code["src"] / "gone.py")]) is None
