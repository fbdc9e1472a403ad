"""A ``stage_train_evaluate`` group mapped over members: its shape at parse time, what each member's
tasks render and pull, and the per-member skip of short circuits (no I/O, no Airflow DB)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import jinja2
import pytest
from airflow.sdk import DAG

from airflow_dist_training.compat import AirflowSkipException
from airflow_dist_training.dag_factory import dag_from_yaml
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.backends import plan_on_backend
from airflow_dist_training.mapped_groups import pull_own
from airflow_dist_training.sagemaker.naming import identity_from_context
from airflow_dist_training.spec.pipeline import EvaluationStep, RegistryStep
from airflow_dist_training.task_groups import stage_train_evaluate
from tests.paths import REPO
from tests.unit.sagemaker.specs import example

G = "markets"
MEMBERS = [{"name": "emea"}, {"name": "apac", "hyperparameters": {"lr": 0.1}}, {"name": "amer"}]


def _build(**kwargs: Any) -> DAG:
    with DAG(dag_id="mapped_shape", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
        stage_train_evaluate(group_id=G, base_dir="/tmp", spec=example("local_demo"), **kwargs)
    return dag


class FakeTI:
    """What a task instance's XCom pulls answer: ``{(task_id, key, map_index): value}``."""

    def __init__(self, map_index: int, xcoms: dict[tuple[str, str, int], Any], task_id: str = "t") -> None:
        self.map_index = map_index
        self.task_id = task_id
        self.dag_id = "mapped_shape"
        self.run_id = "manual__1"
        self.xcoms = xcoms

    def xcom_pull(self, task_ids: str, key: str = "return_value", **kwargs: Any) -> Any:
        if "map_indexes" not in kwargs:  # Airflow: every map index's values
            values = [v for (t, k, _), v in self.xcoms.items() if (t, k) == (task_ids, key)]
            return values[0] if len(values) == 1 else values
        if isinstance(kwargs["map_indexes"], list):
            return [self.xcoms.get((task_ids, key, i)) for i in kwargs["map_indexes"]]
        return self.xcoms.get((task_ids, key, kwargs["map_indexes"]))

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[(self.task_id, key, self.map_index)] = value


def test_members_make_the_group_an_airflow_mapped_task_group_one_map_index_each() -> None:
    from airflow.sdk.definitions.taskgroup import MappedTaskGroup

    dag = _build(
        members=MEMBERS,
        evaluation=EvaluationStep(script="examples/evaluate.py"),
        gate={"thresholds": {"accuracy": {"min": 0.5}}},
        registry=RegistryStep(local_dir="/tmp/registry"),
    )
    group = dag.task_group_dict[G]
    assert isinstance(group, MappedTaskGroup)
    assert group._expand_input.value == {"member": ["emea", "apac", "amer"]}
    assert {t.task_group.group_id for t in dag.tasks if t.task_group is not None} == {G}
    assert {t.removeprefix(f"{G}.") for t in dag.task_ids} >= {
        "plan",
        "check_changes",
        "train",
        "evaluate",
        "gate",
        "register",
    }


def test_each_member_renders_its_own_model_package_group_and_pulls_its_own_results() -> None:
    dag = _build(
        members=MEMBERS,
        evaluation=EvaluationStep(script="examples/evaluate.py"),
        gate={"thresholds": {"accuracy": {"min": 0.5}}},
        registry=RegistryStep(local_dir="/tmp/registry"),
    )
    gate: Any = dag.get_task(f"{G}.gate")
    evaluate: Any = dag.get_task(f"{G}.evaluate")
    xcoms = {(f"{G}.train", "return_value", i): {"model_artifact_uri": f"file:///m/{i}"} for i in range(3)}
    for index, member in enumerate(["emea", "apac", "amer"]):
        ti = FakeTI(index, xcoms)
        assert jinja2.Template(gate.model_package_group_name).render(ti=ti) == f"local-demo-{member}"
        assert jinja2.Template(evaluate.model_uri).render(ti=ti) == f"file:///m/{index}"


def test_a_short_circuit_skips_only_its_own_members_downstream_task() -> None:
    dag = _build(members=MEMBERS)
    train: Any = dag.get_task(f"{G}.train")
    decisions = {(f"{G}.check_changes", "skipmixin_key", 1): {"skipped": [f"{G}.train"]}}
    with pytest.raises(AirflowSkipException, match=f"{G}.check_changes short-circuited this member"):
        train.pre_execute({"ti": FakeTI(1, decisions, task_id=f"{G}.train"), "task": train})
    for other in (0, 2):  # the members whose short circuit let them through
        train.pre_execute({"ti": FakeTI(other, decisions, task_id=f"{G}.train"), "task": train})


def test_each_member_follows_its_own_branch_train_or_reevaluate_its_own_champion() -> None:
    dag = _build(
        members=MEMBERS,
        evaluation=EvaluationStep(script="examples/evaluate.py"),
        gate={"thresholds": {"accuracy": {"min": 0.5}}},
        registry=RegistryStep(local_dir="/tmp/registry"),
    )
    train: Any = dag.get_task(f"{G}.train")
    reevaluate: Any = dag.get_task(f"{G}.reevaluate")
    assert dag.get_task(f"{G}.record_evaluation").upstream_task_ids == {f"{G}.reevaluate"}
    # member 1 re-evaluates its champion, members 0 and 2 train (check_changes' "followed" per map index)
    decisions: dict[Any, Any] = {
        (f"{G}.check_changes", "skipmixin_key", i): {
            "followed": [f"{G}.reevaluate" if i == 1 else f"{G}.train"]
        }
        for i in range(3)
    }
    decisions[(f"{G}.check_changes", "reevaluate", 1)] = {
        "model_data_uri": "file:///models/apac/model.tar.gz"
    }
    for index in range(3):
        task, other = (reevaluate, train) if index == 1 else (train, reevaluate)
        task.pre_execute({"ti": FakeTI(index, decisions, task_id=task.task_id), "task": task})
        with pytest.raises(AirflowSkipException, match=f"{G}.check_changes short-circuited this member"):
            other.pre_execute({"ti": FakeTI(index, decisions, task_id=other.task_id), "task": other})
    # the member's own champion model, from its own check_changes
    assert (
        jinja2.Template(reevaluate.model_uri).render(ti=FakeTI(1, decisions))
        == "file:///models/apac/model.tar.gz"
    )
    # a member that trains has no re-evaluation XCom: the template renders (before pre_execute
    # skips the task) instead of failing the task on "'None' has no attribute 'model_data_uri'"
    strict = jinja2.Environment(undefined=jinja2.StrictUndefined)  # as Airflow renders
    assert strict.from_string(reevaluate.model_uri).render(ti=FakeTI(0, decisions)) == ""


def test_an_unmapped_group_keeps_airflows_own_short_circuit() -> None:
    train: Any = _build().get_task(f"{G}.train")
    assert train.pre_execute.__func__.__qualname__ == "BaseOperator.pre_execute"


def test_skip_hook_reads_every_short_circuit_upstream() -> None:
    train: Any = _build(members=MEMBERS).get_task(f"{G}.train")
    ti = FakeTI(0, {(f"{G}.plan", "skipmixin_key", 0): {"skipped": [f"{G}.train"]}}, task_id=f"{G}.train")
    with pytest.raises(AirflowSkipException, match=rf"{G}\.plan short-circuited"):
        train.pre_execute({"ti": ti, "task": train})


def test_a_branch_outside_the_group_skips_every_member_it_did_not_follow() -> None:
    """Airflow 3.1 reads an unmapped branch's decision at the member's map index, finds none and runs
    the group; its first task reads it where the branch wrote it, at map index -1."""
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.providers.standard.operators.python import BranchPythonOperator

    with DAG(dag_id="branch_shape", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
        choose_backend = BranchPythonOperator(task_id="choose_backend", python_callable=lambda: "other")
        group = stage_train_evaluate(group_id=G, base_dir="/tmp", spec=example("local_demo"), members=MEMBERS)
        choose_backend >> [group, EmptyOperator(task_id="other")]
    plan: Any = dag.get_task(f"{G}.plan")
    not_followed = {("choose_backend", "skipmixin_key", -1): {"followed": ["other"]}}
    for index in range(3):
        with pytest.raises(AirflowSkipException, match="choose_backend short-circuited this member"):
            plan.pre_execute({"ti": FakeTI(index, not_followed, task_id=f"{G}.plan"), "task": plan})
        followed = {("choose_backend", "skipmixin_key", -1): {"followed": [f"{G}.plan"]}}
        plan.pre_execute({"ti": FakeTI(index, followed, task_id=f"{G}.plan"), "task": plan})


def test_an_unmapped_task_pulls_as_before_a_mapped_one_its_own_member() -> None:
    xcoms = {("g.plan", "spec", 0): "a", ("g.plan", "spec", 1): "b"}
    assert pull_own(FakeTI(1, xcoms), "g.plan", "spec") == "b"
    assert pull_own(FakeTI(-1, {("g.plan", "spec", -1): "x"}), "g.plan", "spec") == "x"


def test_the_plan_task_plans_the_job_name_its_members_training_task_computes() -> None:
    """Issue 26: the plan task used map index -1, the training task its own: names differed."""
    names = set()
    for index in range(3):
        context = {"ti": FakeTI(index, {}), "run_id": "manual__1"}
        plan = plan_on_backend(
            example("local_demo"),
            backend="local",
            base_dir=str(REPO),
            overrides=None,
            train_task_id=f"{G}.train",
            context=context,
        )
        assert plan.identity == identity_from_context(context, f"{G}.train", dag_id="mapped_shape")
        assert plan.identity.endswith(f":{index}")
        names.add(plan.job_name())
    assert len(names) == 3


def _pipeline(tmp_path: Path, for_each: str) -> Path:
    text = (REPO / "dags" / "pipelines" / "markets_local.yaml").read_text()
    head = text[: text.index("for_each:")]
    tail = text[text.index("checkpoints:") :]
    path = tmp_path / "markets.yaml"
    path.write_text(head.replace("../../", f"{REPO}/") + for_each + tail.replace("../../", f"{REPO}/"))
    (tmp_path / "markets.py").write_text("")
    return path


@pytest.mark.parametrize(
    ("for_each", "field", "message"),
    [
        (
            "for_each:\n  - {name: a}\n  - {name: b, compute: {instance_count: 0}}\n",
            "for_each[1].compute.instance_count",
            "greater than or equal to 1",
        ),
        ("for_each:\n  - {name: a}\n  - {name: A}\n", "for_each", "'A' is used twice"),
        ("for_each:\n  - {name: a_b}\n", "for_each[0].name", "does not match the required pattern"),
        (
            "for_each:\n  - {name: a, channels: {train: {uri: 'http://x'}}}\n",
            "for_each[0].channels.train.uri",
            "does not match",
        ),
        ("for_each: []\n", "for_each", "at least 1 item"),
    ],
)
def test_a_bad_member_in_yaml_is_the_files_import_error_naming_the_field(
    tmp_path: Path, for_each: str, field: str, message: str
) -> None:
    path = _pipeline(tmp_path, for_each)
    with pytest.raises(SpecValidationError) as exc:
        dag_from_yaml(str(tmp_path / "markets.py"), str(path))
    found = {p.path: p.message for p in exc.value.problems}
    assert field in found, found
    assert message in found[field]
    assert str(path) in str(exc.value)


SWEEP = (
    "sweep:\n"
    "  strategy: grid\n"
    "  ranges: {lr: [0.01, 0.1], hidden: [8, 32]}\n"
    "  objective: {metric: accuracy, type: Maximize}\n"
)


def test_a_yaml_sweep_trains_each_set_as_a_member_and_gates_and_registers_the_best_only(
    tmp_path: Path,
) -> None:
    from airflow.sdk.definitions.taskgroup import MappedTaskGroup

    dag = dag_from_yaml(str(tmp_path / "markets.py"), str(_pipeline(tmp_path, SWEEP)))
    members = dag.task_group_dict["stage_train_evaluate.members"]
    assert isinstance(members, MappedTaskGroup)
    assert members._expand_input.value == {"member": ["trial-00", "trial-01", "trial-02", "trial-03"]}
    tasks = set(dag.task_ids)
    assert {
        "stage_train_evaluate.best_of_sweep",
        "stage_train_evaluate.gate",
        "stage_train_evaluate.register",
    } <= tasks
    assert not {"stage_train_evaluate.members.gate", "stage_train_evaluate.members.register"} & tasks
    gate: Any = dag.get_task("stage_train_evaluate.gate")
    assert gate.model_package_group_name == "local-markets"  # one group: the sweep's
    assert dag.get_task("stage_train_evaluate.best_of_sweep").trigger_rule == "all_done"


def test_for_each_and_sweep_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecValidationError, match=r"give for_each .* or sweep .*, not both"):
        dag_from_yaml(
            str(tmp_path / "markets.py"), str(_pipeline(tmp_path, "for_each:\n  - {name: a}\n" + SWEEP))
        )


def test_the_run_summary_lists_every_member_the_one_whose_plan_failed_too(tmp_path: Path) -> None:
    from airflow_dist_training.reporting import run_summary

    xcoms: dict[tuple[str, str, int], Any] = {}
    for index in (1, 2):
        xcoms[("m.plan", "summary", index)] = "plan"
        xcoms[("m.plan", "job_name", index)] = f"job-{index}"
        xcoms[("m.plan", "backend", index)] = "local"
    xcoms[("m.check_changes", "skipped", 2)] = True
    xcoms[("m.check_changes", "skip_reason", 2)] = "no new data or code since champion g-amer/1"
    xcoms[("m.train", "return_value", 1)] = {"job_name": "job-1", "final_metrics": {"loss": 0.5}}
    result = run_summary(
        {"ti": FakeTI(-1, xcoms)}, ["m"], tmp_path / "s.txt", members=["emea", "apac", "amer"]
    )
    assert [(r["member"], r["planned"], r["skipped"]) for r in result["members"]] == [
        ("emea", False, False),
        ("apac", True, False),
        ("amer", True, True),
    ]
    text = (tmp_path / "s.txt").read_text()
    assert "Member emea\n" in text and "FAILED before planning" in text
    assert "Member apac: retraining run summary" in text and "Training job        job-1" in text
    assert "SKIPPED: no new data or code since champion g-amer/1" in text


SETS = {"trial-00": {"lr": 0.01}, "trial-01": {"lr": 0.1}, "trial-02": {"lr": 1.0}}
SWEEP_SPEC = {"ranges": {"lr": [0.01, 0.1, 1.0]}, "objective": {"metric": "accuracy", "type": "Maximize"}}


def test_best_of_sweep_hands_on_the_winners_results_and_lists_a_failed_member() -> None:
    from airflow_dist_training.spec.sweep import load_sweep
    from airflow_dist_training.sweep_groups import pick_winner

    xcoms: dict[tuple[str, str, int], Any] = {}
    for index, accuracy in ((0, 0.7), (2, 0.9)):
        xcoms[("s.members.train", "return_value", index)] = {"job_name": f"job-{index}", "final_metrics": {}}
        xcoms[("s.members.evaluate", "return_value", index)] = {"metrics": {"accuracy": accuracy}}
        xcoms[("s.members.check_changes", "lineage", index)] = {"run": index}
        xcoms[("s.members.plan", "request", index)] = {"TrainingJobName": f"job-{index}"}
    ti = FakeTI(-1, xcoms, task_id="s.best_of_sweep")
    evaluation = pick_winner({"ti": ti}, "s.members.", SETS, load_sweep(SWEEP_SPEC))
    assert evaluation == {"metrics": {"accuracy": 0.9}}
    pushed = {k: v for (t, k, _), v in xcoms.items() if t == "s.best_of_sweep"}
    assert pushed["winner"] == "trial-02" and pushed["training"]["job_name"] == "job-2"
    assert pushed["lineage"] == {"run": 2} and pushed["request"] == {"TrainingJobName": "job-2"}
    assert [(m["member"], m["status"], m["hyperparameters"]) for m in pushed["members"]] == [
        ("trial-00", "succeeded", {"lr": 0.01}),
        ("trial-01", "failed", {"lr": 0.1}),
        ("trial-02", "succeeded", {"lr": 1.0}),
    ]


def test_best_of_sweep_fails_saying_why_when_no_member_finished() -> None:
    from airflow_dist_training.compat import AirflowFailException
    from airflow_dist_training.spec.sweep import load_sweep
    from airflow_dist_training.sweep_groups import pick_winner

    ti = FakeTI(-1, {}, task_id="s.best_of_sweep")
    with pytest.raises(AirflowFailException, match="no member of the sweep finished"):
        pick_winner({"ti": ti}, "s.members.", SETS, load_sweep(SWEEP_SPEC))


def test_without_an_evaluation_step_the_training_jobs_final_metrics_rank_the_members() -> None:
    from airflow_dist_training.spec.sweep import load_sweep
    from airflow_dist_training.sweep_groups import pick_winner

    xcoms = {
        ("s.members.train", "return_value", i): {"job_name": f"job-{i}", "final_metrics": {"accuracy": a}}
        for i, a in enumerate((0.5, 0.8, 0.6))
    }
    ti = FakeTI(-1, dict(xcoms), task_id="s.best_of_sweep")
    pick_winner({"ti": ti}, "s.members.", SETS, load_sweep(SWEEP_SPEC), evaluated=False)
    assert ti.xcoms[("s.best_of_sweep", "winner", -1)] == "trial-01"
