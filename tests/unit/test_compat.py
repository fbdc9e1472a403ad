"""The compat module: version flags, moved names, and each fallback (the missing feature simulated)."""

from __future__ import annotations

import logging
import re
import tomllib
from pathlib import Path
from typing import Any

import airflow
import pytest
from packaging.version import Version

from airflow_dist_training import compat
from tests.paths import REPO


@pytest.fixture(autouse=True)
def _fresh_fallback_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "_noted", set())


def test_version_flags_follow_the_installed_airflow() -> None:
    installed = Version(Version(airflow.__version__).base_version)
    assert compat.AIRFLOW_V_3_2_PLUS == (installed >= Version("3.2"))
    assert installed >= Version(compat.MIN_AIRFLOW), "this Airflow is below the supported floor"


def test_exceptions_come_from_their_home_on_this_airflow() -> None:
    import airflow.exceptions
    import airflow.sdk.exceptions

    home = airflow.sdk.exceptions if compat.AIRFLOW_V_3_2_PLUS else airflow.exceptions
    for name in ("AirflowException", "AirflowFailException", "AirflowSkipException", "TaskDeferred"):
        assert getattr(compat, name) is getattr(home, name), name


def test_a_deferring_operator_raises_the_compat_task_deferred() -> None:
    """What the operators and tests catch is what Airflow's ``defer`` raises."""

    class Wait(compat.BaseTrigger):
        def serialize(self) -> tuple[str, dict[str, Any]]:
            return (f"{__name__}.Wait", {})

        async def run(self) -> Any:
            yield compat.TriggerEvent({"status": "done"})

    op = compat.BaseOperator(task_id="defer_me")
    with pytest.raises(compat.TaskDeferred) as info:
        op.defer(trigger=Wait(), method_name="execute_complete")
    assert info.value.method_name == "execute_complete"


def test_conf_reads_airflow_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    assert compat.conf.getboolean("operators", "default_deferrable", fallback=False) is True


def test_lazy_names_resolve_and_unknown_names_fail() -> None:
    assert compat.CronTriggerTimetable.__name__ == "CronTriggerTimetable"
    assert compat.AssetOrTimeSchedule.__name__ == "AssetOrTimeSchedule"
    assert compat.DagBag.__name__ == "DagBag"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        compat.Nope  # noqa: B018


def test_resumable_mixin_is_airflows_when_it_has_one() -> None:
    try:
        from airflow.sdk import ResumableJobMixin
    except ImportError:
        assert compat.ResumableJobMixin is compat.ResumableJobFallback
        assert not compat.HAS_RESUMABLE_JOBS
    else:
        assert compat.ResumableJobMixin is ResumableJobMixin
        assert compat.HAS_RESUMABLE_JOBS


# --- retry_policy -------------------------------------------------------------------------------------


def test_without_retry_policy_the_group_gets_none_and_the_log_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow_dist_training.retry import training_retry_policy

    monkeypatch.setattr(compat, "retry_policy_supported", lambda: False)
    with caplog.at_level(logging.WARNING):
        assert training_retry_policy() is None
        assert training_retry_policy() is None
    lines = [r.getMessage() for r in caplog.records if "Compatibility fallback [retry-policy]" in r.getMessage()]
    assert len(lines) == 1
    assert "follow the task's retries" in lines[0] and airflow.__version__ in lines[0]


@pytest.mark.parametrize("supported", [False, True])
def test_bad_input_fails_without_a_retry_on_every_airflow(monkeypatch: pytest.MonkeyPatch, supported: bool) -> None:
    """Without retry_policy, an invalid spec or a missing permission becomes AirflowFailException (no
    retry on any Airflow 3); with it, the error is left to the policy's FAIL rule. Others pass through."""
    from airflow_dist_training.errors import AwsPermissionError, CapacityError, Problem, SpecValidationError
    from airflow_dist_training.retry import failing_fast_without_retry_policy

    monkeypatch.setattr(compat, "retry_policy_supported", lambda: supported)
    bad_spec = SpecValidationError([Problem("resources.instance_count", "must be <= 16, got 40")], source="run conf")
    for error in (bad_spec, AwsPermissionError("sagemaker:CreateTrainingJob is not allowed")):
        with pytest.raises(type(error)) as raised:  # still the error callers catch
            with failing_fast_without_retry_policy():
                raise error
        assert isinstance(raised.value, compat.AirflowFailException) is not supported
        assert str(raised.value) == str(error)
        assert raised.value.__dict__ == error.__dict__  # e.g. the problems and the source
    with pytest.raises(CapacityError):
        with failing_fast_without_retry_policy():
            raise CapacityError("ResourceLimitExceeded", job_name="j", status="Failed")


def test_with_retry_policy_the_group_gets_the_rules() -> None:
    if not compat.retry_policy_supported():
        pytest.skip(f"Airflow {airflow.__version__} has no retry_policy")
    from airflow_dist_training.retry import training_retry_policy

    assert type(training_retry_policy()).__name__ == "ExceptionRetryPolicy"


def test_the_task_group_builds_on_an_airflow_without_retry_policy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The group's default_args carry ``retry_policy=None``: every operator in it still builds."""
    from airflow_dist_training.task_groups import stage_train_evaluate

    monkeypatch.setattr(compat, "retry_policy_supported", lambda: False)
    spec = REPO / "examples" / "specs" / "local_demo.yaml"
    with compat.DAG("compat_group", schedule=None) as dag:
        stage_train_evaluate(spec=str(spec), backend="local", base_dir=str(REPO / "examples"))
    assert any(t.endswith(".train") for t in dag.task_ids)
    assert all(getattr(t, "retry_policy", None) is None for t in dag.tasks)


# --- plugin views --------------------------------------------------------------------------------------


def _plugin(**attrs: Any) -> type:
    return type("P", (), {"react_apps": [], "external_views": [], **attrs})


def test_react_app_becomes_an_external_view_without_react_apps(caplog: pytest.LogCaptureFixture) -> None:
    app = {
        "name": "Training",
        "bundle_url": "/dist-training/static/main.js",
        "destination": "dag_run",
        "url_route": "training-run",
        "fallback_href": "dist-training/view?dag_id={DAG_ID}&run_id={RUN_ID}",
    }
    cls = _plugin(react_apps=[app])
    with caplog.at_level(logging.WARNING):
        compat.adapt_plugin_views(cls, react_apps=False, external_views=True)
    assert cls.react_apps == []
    assert cls.external_views == [
        {
            "name": "Training",
            "destination": "dag_run",
            "url_route": "training-run",
            "href": "dist-training/view?dag_id={DAG_ID}&run_id={RUN_ID}",
        }
    ]
    assert "Compatibility fallback [react-apps]" in caplog.text


def test_react_apps_stay_when_supported_without_the_fallback_key() -> None:
    app = {"name": "T", "bundle_url": "/x.js", "destination": "nav", "fallback_href": "x"}
    cls = _plugin(react_apps=[app])
    compat.adapt_plugin_views(cls, react_apps=True, external_views=True)
    assert cls.react_apps == [{"name": "T", "bundle_url": "/x.js", "destination": "nav"}]
    assert cls.external_views == []


def test_external_views_are_dropped_where_airflow_has_none(caplog: pytest.LogCaptureFixture) -> None:
    cls = _plugin(external_views=[{"name": "Training", "href": "dist-training/view"}])
    with caplog.at_level(logging.WARNING):
        compat.adapt_plugin_views(cls, react_apps=False, external_views=False)
    assert cls.external_views == []
    assert "no UI tab; open it at its URL (dist-training/view)" in caplog.text


def test_the_training_plugin_keeps_its_views_on_this_airflow() -> None:
    from airflow.plugins_manager import AirflowPlugin

    from airflow_dist_training.ui.plugin import DistTrainingPlugin

    assert issubclass(DistTrainingPlugin, AirflowPlugin)
    assert [v["destination"] for v in DistTrainingPlugin.external_views] == ["nav", "dag_run", "task_instance"]
    assert DistTrainingPlugin.fastapi_apps[0]["url_prefix"] == "/dist-training"


# --- metadata --------------------------------------------------------------------------------------------


def test_pyproject_has_ranges_and_the_floor_has_a_constraints_file() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    pinned = [r for r in requirements if "==" in r or "===" in r]
    assert pinned == [], "exact pins belong in constraints*.txt, not in the package metadata"
    airflow_req = next(r for r in project["dependencies"] if r.startswith("apache-airflow>"))
    assert airflow_req == f"apache-airflow>={compat.MIN_AIRFLOW},<3.4"
    low = (REPO / f"constraints-airflow-{compat.MIN_AIRFLOW}.txt").read_text()
    assert re.search(rf"^apache-airflow=={re.escape(compat.MIN_AIRFLOW)}\.\d+$", low, re.M)
    assert re.search(r"^torch==2\.13\.0", low, re.M)
