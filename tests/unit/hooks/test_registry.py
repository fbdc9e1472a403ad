from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.evaluation.gate import ChampionUnreadableError
from airflow_dist_training.hooks.registry import LocalModelRegistry


def write_eval(tmp_path: Path, name: str, metrics: dict[str, float]) -> str:
    path = tmp_path / name / "evaluation.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"metrics": metrics, "evaluation_set_hash": "sha256:" + "c" * 64}))
    return str(path)


def decision(passed: bool) -> dict:
    return {
        "passed": passed,
        "reasons": ["x"],
        "challenger": {"metrics": {"accuracy": 0.9}, "evaluation_set_hash": "sha256:" + "c" * 64},
        "champion": None,
        "thresholds": {"accuracy": {"min": 0.5}},
    }


def test_empty_registry_has_no_champion(tmp_path: Path) -> None:
    assert LocalModelRegistry(tmp_path, "g").get_champion() is None


def test_champion_is_latest_approved_and_read_from_stored_evaluation(tmp_path: Path) -> None:
    reg = LocalModelRegistry(tmp_path / "reg", "churn")
    r1 = reg.register(
        model_data_uri="/m1.tar.gz",
        image_uri=None,
        evaluation_uri=write_eval(tmp_path, "e1", {"accuracy": 0.8}),
        decision=decision(True),
        auto_approve=True,
    )
    r2 = reg.register(
        model_data_uri="/m2.tar.gz",
        image_uri=None,
        evaluation_uri=write_eval(tmp_path, "e2", {"accuracy": 0.85}),
        decision=decision(True),
        auto_approve=False,
    )
    r3 = reg.register(
        model_data_uri="/m3.tar.gz",
        image_uri=None,
        evaluation_uri=write_eval(tmp_path, "e3", {"accuracy": 0.7}),
        decision=decision(False),
        auto_approve=True,
    )
    assert [r["approval_status"] for r in (r1, r2, r3)] == [
        "Approved",
        "PendingManualApproval",
        "PendingManualApproval",
    ]
    assert [r["version"] for r in (r1, r2, r3)] == [1, 2, 3]
    champion = reg.get_champion()
    assert (
        champion is not None and champion.id == "churn/1" and champion.evaluation.metrics == {"accuracy": 0.8}
    )
    # A manual approval makes version 2 the champion.
    reg.set_approval("churn/2", "Approved", "looked fine")
    champion = reg.get_champion()
    assert champion is not None and champion.id == "churn/2" and champion.version == 2
    # The evaluation is a copy: deleting the source does not lose the champion's metrics.
    Path(tmp_path / "e2" / "evaluation.json").unlink()
    assert reg.get_champion().evaluation.metrics == {"accuracy": 0.85}  # type: ignore[union-attr]


def test_audit_record_next_to_stored_evaluation(tmp_path: Path) -> None:
    reg = LocalModelRegistry(tmp_path / "reg", "g")
    training = {"backend": "local", "job_name": "j1", "job_arn": "local:///jobs/j1"}
    r = reg.register(
        model_data_uri="/m.tar.gz",
        image_uri=None,
        evaluation_uri=write_eval(tmp_path, "e", {"accuracy": 0.9}),
        decision=decision(True),
        auto_approve=True,
        training=training,
    )
    audit = json.loads(Path(r["audit_uri"]).read_text())
    assert Path(r["audit_uri"]).parent == Path(r["evaluation_uri"]).parent
    assert audit["approval_status"] == "Approved"
    assert audit["evaluation_set_hash"] == "sha256:" + "c" * 64
    assert audit["gate"]["thresholds"] == {"accuracy": {"min": 0.5}}
    assert audit["training_job"] == training
    assert audit["package"] == "g/1"


def test_same_client_token_does_not_register_twice(tmp_path: Path) -> None:
    reg = LocalModelRegistry(tmp_path / "reg", "g")
    ev = write_eval(tmp_path, "e", {"accuracy": 0.9})
    a = reg.register(model_data_uri="/m", image_uri=None, evaluation_uri=ev, decision=None, client_token="t1")
    b = reg.register(model_data_uri="/m", image_uri=None, evaluation_uri=ev, decision=None, client_token="t1")
    assert a == b and len(reg.versions()) == 1


def test_concurrent_registrations_get_distinct_versions(tmp_path: Path) -> None:
    reg = LocalModelRegistry(tmp_path / "reg", "g")
    ev = write_eval(tmp_path, "e", {"accuracy": 0.9})
    with ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(
                lambda i: reg.register(
                    model_data_uri=f"/m{i}", image_uri=None, evaluation_uri=ev, decision=None
                ),
                range(8),
            )
        )
    assert sorted(r["version"] for r in results) == list(range(1, 9))
    assert not list((tmp_path / "reg" / "g").glob(".*.tmp"))  # no leftovers from atomic writes


def test_unreadable_champion_names_the_version_and_file(tmp_path: Path) -> None:
    reg = LocalModelRegistry(tmp_path / "reg", "g")
    r = reg.register(
        model_data_uri="/m",
        image_uri=None,
        evaluation_uri=write_eval(tmp_path, "e", {"accuracy": 0.9}),
        decision=decision(True),
        auto_approve=True,
    )
    Path(r["evaluation_uri"]).write_text('{"metrics": {"accuracy": "n/a"}}')
    with pytest.raises(ChampionUnreadableError) as exc:
        reg.get_champion()
    assert (
        str(exc.value)
        == f"champion g/1 ({r['evaluation_uri']}): metrics.accuracy: must be a number, got 'n/a'"
    )
    Path(r["evaluation_uri"]).write_text("{oops")
    with pytest.raises(ChampionUnreadableError) as exc:
        reg.get_champion()
    assert str(exc.value) == (
        f"champion g/1 ({r['evaluation_uri']}): malformed JSON at line 1, column 2: "
        "Expecting property name enclosed in double quotes"
    )


def test_bad_status_and_group_name(tmp_path: Path) -> None:
    with pytest.raises(SpecValidationError, match="'bad name' is not a valid model package group name"):
        LocalModelRegistry(tmp_path, "bad name")
    reg = LocalModelRegistry(tmp_path, "g")
    with pytest.raises(SpecValidationError, match="status: must be one of"):
        reg.set_approval("g/1", "Yes")
