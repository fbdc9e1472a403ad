"""A backend defined only here, registered by name, runs the shipped retraining DAG on the backend
protocol alone (``hooks/backends.TrainingBackend``).

Nothing else is edited to add it: its record goes into the registry (``spec/backends.py``), and
the shipped DAG, which builds one ``stage_train_evaluate`` group per registered backend, gets a
``toy`` group. The toy is durable (its jobs outlive the operator that created them: the training
task finds them again by name) and not on AWS; it subclasses nothing of the project. Its jobs run
on this machine's request executor, and it reports their states in its own terms as a
``JobStatus``: the operator, the task group and the checkpoint watcher read nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.hooks.sagemaker_jobs import JobRef
from airflow_dist_training.job_states import AttemptOutcome, JobPhase, JobStatus
from airflow_dist_training.spec.backends import BackendRecord, forget_backend, register_backend
from tests.datasets import make_dataset
from tests.paths import REPO

DAG_FILE = REPO / "dags" / "distributed_retraining.py"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("retraining-dag")]

#: the toy service's books: the jobs it created, in order, and those it reports as reclaimed
TOY_JOBS: list[str] = []
RECLAIMED: set[str] = set()
#: how many of the next jobs the toy's capacity reclaims (the job ends; the toy says why)
RECLAIM_NEXT = {"jobs": 0}


class ToyBackend:
    """Jobs on a toy service: this machine's request executor, found again by name (durable),
    reported as ``JobStatus``. A job it reclaims ends with an interruption, as spot capacity does."""

    def __init__(self, hook_kwargs: dict[str, Any] | None = None, *, record: BackendRecord, **_: Any) -> None:
        from airflow_dist_training.hooks.local_training import LocalTrainingHook

        self.record = record
        self.hook_kwargs = dict(hook_kwargs or {})
        self.hook = LocalTrainingHook(**self.hook_kwargs)

    def plan(
        self, spec: Any, *, job_name: str, region: str, run_identity: str | None = None
    ) -> dict[str, Any]:
        from airflow_dist_training.hooks.backends import get_backend

        # the toy runs the request the local executor runs: planned the same way
        local = get_backend("local", local_hook_kwargs=self.hook_kwargs)
        return local.plan(spec, job_name=job_name, region=region, run_identity=run_identity)

    def region(self) -> str:
        from airflow_dist_training.hooks.aws import local_region

        return local_region()  # the region its requests are planned for, as the plan task planned them

    def _job(self, name: str) -> Any:
        return self.hook.executor().get(name) if name in TOY_JOBS else None

    def status(self, job_name: str) -> JobStatus | None:
        job = self._job(job_name)
        if job is None:
            return None
        if not job.done:
            return JobStatus(job_name, JobPhase.RUNNING, "busy")
        try:
            job.result()
        except TrainingJobError as exc:
            if job_name in RECLAIMED:
                return JobStatus(
                    job_name,
                    JobPhase.STOPPED,
                    "reclaimed",
                    AttemptOutcome.INTERRUPTED,
                    "capacity reclaimed",
                    spot=True,
                )
            return JobStatus(job_name, JobPhase.FAILED, "broken", AttemptOutcome.FAILED, exc.failure_reason)
        return JobStatus(job_name, JobPhase.COMPLETED, "done", AttemptOutcome.SUCCEEDED)

    def find_or_create(
        self,
        names: Iterable[str],
        request_for: Callable[..., Any],
        *,
        exhausted: Callable[[], Exception],
        on_ended: Callable[[JobStatus, int], None] | None = None,
    ) -> JobRef:
        ended: list[JobStatus] = []
        for generation, name in enumerate(names, start=1):
            status = self.status(name)
            if status is None:
                launch = request_for(name, tuple(ended))
                self.hook.start_job(
                    launch.spec,
                    name,
                    request=launch.request,
                    uploads=launch.uploads,
                    run_identity=launch.run_identity,
                    region=self.region(),
                )
                TOY_JOBS.append(name)
                if RECLAIM_NEXT["jobs"]:
                    RECLAIM_NEXT["jobs"] -= 1
                    RECLAIMED.add(name)
                return JobRef(name, None)
            if status.active or status.phase is JobPhase.COMPLETED:
                return JobRef(name, {"status": status.state})
            ended.append(status)
            if on_ended is not None:
                on_ended(status, generation + 1)
        raise exhausted()

    def preflight(self, spec: Any, *, log: Callable[..., None]) -> None:
        return None

    def trigger(self, job_name: str, **settings: Any) -> None:
        return None  # no triggerer of its own: the task waits

    def wait(self, job_name: str, **_: Any) -> JobStatus:
        self._job(job_name).wait()  # its lines reach the task log as they come (the hook's log)
        status = self.status(job_name)
        assert status is not None
        return status

    def result_of(self, status: JobStatus) -> Any:
        if status.phase is not JobPhase.COMPLETED:
            raise TrainingJobError(
                f"toy job {status.name} ended {status.state}: {status.reason}",
                job_name=status.name,
                status=status.state,
                failure_reason=status.reason,
            )
        return self._job(status.name).result()

    def links(self, status: JobStatus) -> dict[str, Any]:
        return {"region": self.region(), "job_name": status.name, "backend": self.record.name}

    def stop(self, job_name: str, *, reason: str = "airflow", cause: str | None = None) -> bool:
        return bool(self._job(job_name) and self.hook.stop(job_name))

    def stop_run_jobs(self, run_hash: str, *, reason: str) -> list[str]:
        return [name for name in TOY_JOBS if run_hash in name and self.stop(name, reason=reason)]

    def checkpoint_location(self, spec: Any, uri: str) -> str:
        from airflow_dist_training.storage.location import uri_scheme

        # the toy's jobs read this machine's store
        return str(self.hook.object_store(spec).local_uri(uri)) if uri_scheme(uri) == "s3" else uri


TOY = BackendRecord(
    name="toy",
    factory=ToyBackend,
    staging="directory",
    evaluation="process",
    default_registry="local",
    durable=True,
    on_aws=False,
    description="a test's backend: a toy service on this machine",
)


@pytest.fixture
def toy_backend() -> Iterator[BackendRecord]:
    register_backend(TOY)
    TOY_JOBS.clear()
    RECLAIMED.clear()
    yield TOY
    forget_backend(TOY.name)


@pytest.fixture
def retraining_dag(
    toy_backend: BackendRecord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path
) -> Any:
    from airflow_dist_training.compat import DagBag

    make_dataset(tmp_path / "source")
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["distributed_retraining"]


def test_the_shipped_dag_runs_end_to_end_on_a_backend_registered_in_a_test(
    retraining_dag, tmp_path, capfd, monkeypatch
):
    dag = retraining_dag
    assert dag.params["backend"] == "local"  # the form offers every registered backend
    assert "toy" in dag.params.get_param("backend").schema["enum"]
    assert {"toy.plan", "toy.stage", "toy.train", "toy.evaluate", "toy.gate", "toy.register"} <= set(
        dag.task_dict
    )
    # the run's first job dies at epoch 1 and the toy reports it reclaimed, as spot capacity is:
    # the training task goes on with the run's next job, which resumes from the run's checkpoint
    monkeypatch.setenv("ADT_DEMO_KILL_AT_EPOCH", "1")
    RECLAIM_NEXT["jobs"] = 1

    run = dag.test(run_conf={"backend": "toy", "epochs": 2})

    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    for task in (
        "toy.plan",
        "toy.stage",
        "toy.check_changes",
        "toy.train",
        "toy.evaluate",
        "toy.gate",
        "toy.register",
    ):
        assert states[task] == "success", (task, states)
    assert states["local.plan"] == states["sagemaker.plan"] == "skipped"
    [train] = [ti for ti in run.get_task_instances() if ti.task_id == "toy.train"]
    assert train.try_number == 1  # an interruption does not use up the task's retries
    first, second = TOY_JOBS  # the run's two generations, created once each
    assert RECLAIMED == {first}
    out = capfd.readouterr().out
    assert "killing this job at epoch=1" in out
    assert (
        f"This run's earlier job {first} ended reclaimed (capacity reclaimed) (interrupted); starting generation 2."
        in out
    )
    assert "resumed from this run's checkpoint step-" in out and "(epoch=0), starting at epoch=1" in out
    summary = (tmp_path / "last-run-summary.txt").read_text()
    assert f"after a spot interruption of job {first}" in summary
    assert "Registered          adt-demo/1 (Approved)" in summary
    index = json.loads((tmp_path / "registry" / "adt-demo" / "index.json").read_text())
    [version] = index["versions"]  # its default registry (local) holds the approved model
    assert version["training_job_name"] == second
    audit = json.loads(Path(version["audit_uri"]).read_text())
    assert audit["training_job"]["backend"] == "toy"  # the result names the backend that ran it
