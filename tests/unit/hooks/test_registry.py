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


def test_a_re_evaluation_is_recorded_on_the_champion_not_as_a_new_version(tmp_path: Path) -> None:
    reg = LocalModelRegistry(tmp_path / "reg", "churn")
    lineage = {"data_fingerprint": "sha256:d", "evaluation_fingerprint": "sha256:old"}
    reg.register(
        model_data_uri="/m1.tar.gz",
        image_uri=None,
        evaluation_uri=write_eval(tmp_path, "e1", {"accuracy": 0.8}),
        decision=decision(True),
        auto_approve=True,
        lineage=lineage,
    )
    champion = reg.get_champion()
    assert champion is not None
    new = tmp_path / "e2" / "evaluation.json"
    new.parent.mkdir()
    new.write_text(json.dumps({"metrics": {"accuracy": 0.7}, "evaluation_set_hash": "sha256:" + "e" * 64}))
    record = reg.record_evaluation(
        champion, evaluation_uri=str(new), evaluation_fingerprint="sha256:new", run_id="r2"
    )
    assert (record["package_id"], record["metrics"], record["run_id"]) == ("churn/1", {"accuracy": 0.7}, "r2")
    [entry] = reg.versions()
    assert entry["lineage"] == {**lineage, "evaluation_fingerprint": "sha256:new"}
    assert entry["evaluation_set_hash"] == "sha256:" + "e" * 64
    assert entry["reevaluations"][0]["previous_evaluation_uri"] == champion.evaluation_uri
    assert entry["reevaluations"][0]["source_evaluation_uri"] == str(new)
    # the champion now reads the new evaluation: the next run's check and the next gate compare with it
    again = reg.get_champion()
    assert again is not None and again.id == "churn/1" and again.evaluation.metrics == {"accuracy": 0.7}
    assert again.lineage is not None and again.lineage["evaluation_fingerprint"] == "sha256:new"
    assert again.evaluation_uri == record["evaluation_uri"] != champion.evaluation_uri


@pytest.mark.parametrize(("new_accuracy", "fails"), [(0.7, False), (0.4, True)])
def test_a_re_evaluated_champion_below_the_gates_floor_fails_the_task_once_recorded(
    tmp_path: Path, new_accuracy: float, fails: bool
) -> None:
    """The champion is not gated against itself, but the gate's ``min``/``max`` still bind it: a
    champion that misses them on the new evaluation set fails ``record_evaluation`` (after recording)."""
    from types import SimpleNamespace

    from airflow_dist_training.compat import AirflowFailException
    from airflow_dist_training.reevaluation import record_reevaluation

    reg = LocalModelRegistry(tmp_path / "reg", "churn")
    reg.register(
        model_data_uri="/m1.tar.gz",
        image_uri=None,
        evaluation_uri=write_eval(tmp_path, "e1", {"accuracy": 0.8}),
        decision=decision(True),
        auto_approve=True,
        lineage={"data_fingerprint": "sha256:d", "evaluation_fingerprint": "sha256:old"},
    )

    def record() -> dict:
        return record_reevaluation(
            {"ti": SimpleNamespace(run_id="r2")},
            evaluation={"evaluation_uri": write_eval(tmp_path, "e2", {"accuracy": new_accuracy})},
            planned={"champion_id": "churn/1", "champion": "churn/1", "evaluation_fingerprint": "sha256:new"},
            registry="local",
            group="churn",
            local_registry_dir=str(tmp_path / "reg"),
            thresholds={"accuracy": {"min": 0.5, "no_regression": True}},
        )

    if fails:
        with pytest.raises(AirflowFailException) as failed:
            record()
        assert str(failed.value) == (
            "Champion churn/1 no longer meets the quality gate on the new evaluation set (recorded on it): "
            "FAIL accuracy: 0.4 >= 0.5 (min). Retrain on new data or change the gate."
        )
    else:
        assert record()["metrics"] == {"accuracy": 0.7}  # no_regression: the champion is not gated against itself
    champion = reg.get_champion()
    assert champion is not None and champion.evaluation.metrics == {"accuracy": new_accuracy}  # recorded either way
