"""YAML pipelines: one DAG per file; a broken file is that file's import error, with the field path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.paths import REPO

STUB = "from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n"


def _dagbag(folder: Path):
    from airflow_dist_training.compat import DagBag

    return DagBag(dag_folder=str(folder), safe_mode=False)


def _pipeline(folder: Path, name: str, text: str) -> None:
    (folder / f"{name}.yaml").write_text(text)
    (folder / f"{name}.py").write_text(STUB)


_DEMO = (REPO / "dags" / "pipelines" / "demo_mlp_local.yaml").read_text().replace("../../", str(REPO) + "/")
# the demo pipeline with its inline training spec swapped for a reference to the example spec file
GOOD = (
    _DEMO[: _DEMO.index("training:")]
    + f"training: {REPO}/examples/specs/local_demo.yaml\n"
    + _DEMO[_DEMO.index("staging:") :]
)


def test_repo_dags_import_without_errors():
    bag = _dagbag(REPO / "dags")
    assert bag.import_errors == {}
    assert {"distributed_retraining", "demo_mlp_local_yaml", "llm_finetune_sagemaker"} <= set(bag.dags)


def test_broken_yaml_is_that_files_import_error_with_field_path(tmp_path):
    _pipeline(tmp_path, "good", GOOD)
    _pipeline(
        tmp_path,
        "typo",
        GOOD.replace("dag_id: demo_mlp_local_yaml", "dag_id: typo").replace("keep_last: 2", "keep_lats: 2"),
    )
    _pipeline(
        tmp_path,
        "badcron",
        GOOD.replace("dag_id: demo_mlp_local_yaml", "dag_id: badcron").replace(
            '"30 2 * * *"', '"every night"'
        ),
    )
    bag = _dagbag(tmp_path)
    assert set(bag.dags) == {"demo_mlp_local_yaml"}
    errors = {Path(k).name: v for k, v in bag.import_errors.items()}
    assert set(errors) == {"typo.py", "badcron.py"}
    assert f"{tmp_path}/typo.yaml: checkpoints.keep_lats: unknown field" in errors["typo.py"]
    assert (
        f"{tmp_path}/badcron.yaml: schedule: 'every night' is not a cron expression (5 fields: minute hour day "
        "month weekday)" in errors["badcron.py"]
    )


def test_training_spec_errors_carry_the_training_prefix(tmp_path):
    _pipeline(
        tmp_path,
        "p",
        GOOD.replace("dag_id: demo_mlp_local_yaml", "dag_id: p").replace(
            "training: " + str(REPO) + "/examples/specs/local_demo.yaml",
            "training: {name: x, image: {uri: img}, source: {entry_point: t.py}, compute: {instance_type: ml.m5.xlarge, instance_count: 0}}",
        ),
    )
    errors = list(_dagbag(tmp_path).import_errors.values())
    assert len(errors) == 1
    assert "training.compute.instance_count: Input should be greater than or equal to 1" in errors[0]


def test_pipeline_schedule_is_cron_in_its_time_zone_or_asset():
    from airflow_dist_training.dag_factory import dag_from_yaml

    dag = dag_from_yaml(str(REPO / "dags" / "pipelines" / "demo_mlp_local.py"))
    timetable = dag.timetable
    assert type(timetable).__name__ == "AssetOrTimeSchedule"
    cron = timetable.timetable  # Task SDK class since 3.2 (``expression``), core before (``_expression``)
    assert (getattr(cron, "expression", None) or cron._expression) == "30 2 * * *"
    assert "Europe/Amsterdam" in str(getattr(cron, "timezone", None) or cron._timezone)
    assert [t.task_id for t in dag.tasks] == [
        "stage_train_evaluate.plan",
        "stage_train_evaluate.stage",
        "stage_train_evaluate.check_changes",
        "stage_train_evaluate.train",
        "stage_train_evaluate.checkpoint_retention",
        "stage_train_evaluate.promote_checkpoint",
        "stage_train_evaluate.evaluate",
        "stage_train_evaluate.gate",
        "stage_train_evaluate.register",
        "stage_train_evaluate.reevaluate",  # a new evaluation set alone re-evaluates the champion
        "stage_train_evaluate.record_evaluation",
    ]
    branch = dag.get_task("stage_train_evaluate.check_changes")
    assert "stage_train_evaluate.reevaluate" in branch.downstream_task_ids
    assert dag.get_task("stage_train_evaluate.record_evaluation").upstream_task_ids == {"stage_train_evaluate.reevaluate"}


def test_force_and_warm_start_are_yaml_fields_and_trigger_form_params(tmp_path):
    from airflow_dist_training.dag_factory import dag_from_yaml, load_pipeline
    from airflow_dist_training.errors import SpecValidationError

    text = GOOD.replace("force: false", "force: true").replace("warm_start: none", "warm_start: champion")
    (tmp_path / "w.yaml").write_text(text)
    (tmp_path / "w.py").write_text(STUB)
    dag = dag_from_yaml(str(tmp_path / "w.py"))
    assert dag.params["force"] is True
    assert dag.params["warm_start"] == "champion"
    assert dag.params.get_param("warm_start").schema["enum"] == ["none", "champion", "promoted"]
    train = dag.get_task("stage_train_evaluate.train")
    assert "stage_train_evaluate.check_changes" in train.upstream_task_ids
    (tmp_path / "bad.yaml").write_text(GOOD.replace("warm_start: none", "warm_start: latest"))
    with pytest.raises(SpecValidationError) as info:
        load_pipeline(tmp_path / "bad.yaml")
    assert "warm_start: Input should be 'none', 'champion' or 'promoted'" in str(info.value)


@pytest.mark.parametrize("missing", ["training", "dag_id"])
def test_missing_required_section_is_named(tmp_path, missing):
    from airflow_dist_training.dag_factory import load_pipeline
    from airflow_dist_training.errors import SpecValidationError

    lines = [line for line in GOOD.splitlines() if not line.startswith(f"{missing}:")]
    path = tmp_path / "p.yaml"
    path.write_text("\n".join(lines))
    with pytest.raises(SpecValidationError) as info:
        load_pipeline(path)
    assert f"{missing}: is required" in str(info.value)


def test_dag_file_copies_are_independent(tmp_path):
    shutil.copy(REPO / "dags" / "pipelines" / "demo_mlp_local.py", tmp_path / "x.py")
    (tmp_path / "x.yaml").write_text(GOOD.replace("demo_mlp_local_yaml", "x_yaml"))
    assert set(_dagbag(tmp_path).dags) == {"x_yaml"}


def test_scratch_file_system_is_created_as_setup_and_deleted_as_teardown(tmp_path):
    from airflow_dist_training.dag_factory import dag_from_yaml

    text = (REPO / "dags" / "pipelines" / "llm_finetune_sagemaker.yaml").read_text()
    text = text.replace("../../", str(REPO) + "/").replace(
        "  file_system_id: fs-0123456789abcdef0\n",
        "  scratch_file_system: {subnet_id: subnet-0a1b2c3d, security_group_ids: [sg-0a1b2c3d]}\n",
    )
    (tmp_path / "scratch.yaml").write_text(text)
    (tmp_path / "scratch.py").write_text(STUB)
    dag = dag_from_yaml(str(tmp_path / "scratch.py"))
    create = dag.get_task("stage_train_evaluate.create_file_system")
    delete = dag.get_task("stage_train_evaluate.delete_file_system")
    stage = dag.get_task("stage_train_evaluate.stage")
    assert create.is_setup and delete.is_teardown
    assert stage.file_system_id == (
        "{{ ti.xcom_pull(task_ids='stage_train_evaluate.create_file_system', map_indexes=ti.map_index)['file_system_id'] }}"
    )
    # the delete waits for everything else in the group, even after a failure
    assert {"stage_train_evaluate.train", "stage_train_evaluate.register"} <= {
        t.task_id for t in delete.get_flat_relatives(upstream=True)
    }


def test_scratch_and_existing_file_system_are_exclusive(tmp_path):
    from airflow_dist_training.errors import SpecValidationError
    from airflow_dist_training.spec.loading import validate_model
    from airflow_dist_training.spec.pipeline import FSxStaging

    with pytest.raises(SpecValidationError) as info:
        validate_model(
            FSxStaging,
            {"source": "s3://b/x/", "file_system_path": "/x", "file_system_id": "fs-0123456789abcdef0",
             "scratch_file_system": {"subnet_id": "subnet-1", "security_group_ids": ["sg-1"]}},
        )  # fmt: skip
    assert "give file_system_id or scratch_file_system, not both" in str(info.value)


def test_a_dag_parse_plans_nothing_and_the_plan_task_refuses_what_only_planning_finds(tmp_path, monkeypatch):
    """SageMaker's instance rules are planning's: the DAG imports, its plan task refuses the run."""
    from airflow_dist_training.compat import AirflowFailException
    from airflow_dist_training.dag_factory import dag_from_yaml
    from airflow_dist_training.errors import SpecValidationError
    from airflow_dist_training.sagemaker import request

    spec = (REPO / "examples" / "specs" / "torch_distributed_p4d.yaml").read_text()
    (tmp_path / "spec.yaml").write_text(spec.replace("ml.p4d.24xlarge", "ml.c5.xlarge"))
    pipeline = (REPO / "dags" / "pipelines" / "llm_finetune_sagemaker.yaml").read_text()
    _pipeline(tmp_path, "p", pipeline.replace("../../examples/specs/torch_distributed_p4d.yaml", "spec.yaml"))
    plans: list[str] = []
    real_plan = request.plan_training_job
    monkeypatch.setattr(
        request, "plan_training_job", lambda spec, **kw: plans.append(kw["job_name"]) or real_plan(spec, **kw)
    )

    dag = dag_from_yaml(str(tmp_path / "p.py"))
    assert plans == []  # the parse planned nothing
    plan_task = dag.get_task("stage_train_evaluate.plan")
    context = {"params": {}, "run_id": "manual__2026-01-01", "ti": None}
    with pytest.raises((SpecValidationError, AirflowFailException)) as info:  # fails at once, not retried
        plan_task.python_callable(**context)
    assert len(plans) == 1
    assert (
        "compute.instance_type: Currently torch_distributed is supported only for GPU and Trainium instances."
        in str(info.value)
    )


def test_the_trigger_form_serializes_and_every_task_sees_its_values(tmp_path):
    """The form's Params are set on the DAG after its tasks (no per-operator copies at parse time):
    the DAG still serializes as the dag-processor does, and a run's tasks get the form's values."""
    from airflow.sdk.definitions.param import process_params

    from airflow_dist_training.compat import DagSerialization
    from airflow_dist_training.dag_factory import dag_from_yaml

    _pipeline(tmp_path, "w", GOOD.replace("force: false", "force: true"))
    dag = dag_from_yaml(str(tmp_path / "w.py"))
    form = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)).params
    assert form["force"] is True and form.get_param("warm_start").schema["title"] == "Warm start"
    train = dag.get_task("stage_train_evaluate.train")
    assert process_params(dag, train, None, suppress_exception=False) == {"force": True, "warm_start": "none"}
    assert process_params(dag, train, {"force": False}, suppress_exception=False)["force"] is False
    from airflow_dist_training.compat import ParamValidationError

    # the form's schema still holds for a run's conf (a ValueError on 3.3, an AirflowException on 3.1)
    with pytest.raises((ValueError, ParamValidationError), match="warm_start"):
        process_params(dag, train, {"warm_start": "latest"}, suppress_exception=False)
