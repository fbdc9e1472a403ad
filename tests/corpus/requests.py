"""The recorded request corpus: every CreateTrainingJob request the provider builds for the example
specs and the parity cases, as canonical JSON (``requests.json`` beside this file).

Recorded before the redesign of issue 23, so a refactoring that changes a request byte by byte
fails ``test_request_corpus.py``. A deliberate change re-records it:

    .venv/bin/python -m tests.corpus.requests          # rewrites tests/corpus/requests.json

and the diff of ``requests.json`` is the review of what the change sends differently.

Four views of one request:

* ``plan/<example>``: ``plan_training_job`` on the example spec (the planner alone);
* ``parity/<case>``: the parity cases (``tests/parity/cases.py``), planned as the parity test does;
* ``plan_task/<example>`` and ``sent/<example>``: the plan task (``planning.plan_run`` on the
  SageMaker backend, checkpoint policy ``latest``) and what the training task then sends for the
  run's first job (``DistributedTrainingOperator`` with a recording SageMaker stand-in);
* ``local/<example>``: the request the local backend runs, for specs with local stand-ins
  (the repository path written as ``<repo>``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.paths import REPO

CORPUS = Path(__file__).with_name("requests.json")
EXAMPLES = sorted((REPO / "examples" / "specs").glob("*.yaml"))
REGION = "us-east-1"
RUN_ID = "manual__2026-01-01T00:00:00+00:00"


def canonical(value: Any) -> str:
    """The bytes compared: sorted keys, one space indent, non-ASCII kept."""
    return json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False)


def _repo_relative(value: Any) -> Any:
    """``value`` with this checkout's path written as ``<repo>`` (the corpus holds for any checkout)."""
    return json.loads(json.dumps(value).replace(str(REPO), "<repo>"))


class _TaskInstance:
    dag_id = "corpus_dag"
    map_index = -1

    def __init__(self) -> None:
        self.xcom: dict[tuple[str, str], Any] = {}

    def xcom_pull(self, task_ids: str, key: str) -> Any:
        return self.xcom.get((task_ids, key))


class _RecordingClient:
    """The SageMaker client the training task's hook calls: no job of the run exists yet; a create is recorded."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def describe_training_job(self, TrainingJobName: str) -> None:
        from botocore.exceptions import ClientError

        error = {"Code": "ValidationException", "Message": f"Could not find job {TrainingJobName}"}
        raise ClientError({"Error": error}, "DescribeTrainingJob")

    def create_training_job(self, **request: Any) -> dict[str, str]:
        self.created.append(request)
        return {"TrainingJobArn": f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{request['TrainingJobName']}"}


class RecordingSageMaker:
    """The training hook as the task uses it (its ``DurableJob``), over the recording client: what it sends."""

    aws_conn_id = None
    region_name = REGION

    def __init__(self) -> None:
        import logging

        from airflow_dist_training.hooks.sagemaker_jobs import DurableJob, SageMakerApi

        class Api(SageMakerApi):
            log = logging.getLogger("corpus")
            aws_conn_id = None
            region_name = REGION
            sagemaker_client = _RecordingClient()

        self.api = Api()
        self.jobs = DurableJob(self.api, "training")
        self.created = self.api.sagemaker_client.created
        self.put: list[str] = []

    def put_uploads(self, uploads: Any) -> None:
        self.put += [u.s3_uri for u in uploads]


class _NoCheckpoints:
    def latest_complete(self, uri: str) -> None:
        return None

    def move_aside_incomplete(self, uri: str) -> list[dict[str, object]]:
        return []


def plan_requests() -> dict[str, Any]:
    from airflow_dist_training.sagemaker.request import plan_training_job
    from airflow_dist_training.spec.loading import load_spec

    return {
        f"plan/{path.stem}": plan_training_job(load_spec(path), job_name="example-1", region=REGION).request
        for path in EXAMPLES
    }


def parity_requests() -> dict[str, Any]:
    from tests.parity.cases import REQUEST_CASES
    from tests.parity.test_request_parity import our_request

    return {f"parity/{case.id}": our_request(case) for case in REQUEST_CASES}


def _plan_then_send(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The plan task's request and the request the training task sends for the run's first job."""
    from airflow.sdk import DAG

    from airflow_dist_training.hooks.backends import SageMakerBackend
    from airflow_dist_training.operators.training import DistributedTrainingOperator
    from airflow_dist_training.planning import plan_run
    from airflow_dist_training.spec.loading import load_spec

    ti = _TaskInstance()
    context: Any = {"run_id": RUN_ID, "params": {}, "ti": ti}
    planned = plan_run(
        load_spec(path),
        backend=SageMakerBackend(aws_conn_id=None),
        region=REGION,
        overrides={},
        train_task_id="train",
        context=context,
        checkpoint_resume="latest",
    )
    ti.xcom.update({("plan", key): value for key, value in planned.xcoms(dry_run=False).items()})
    with DAG("corpus_dag", schedule=None):
        op = DistributedTrainingOperator(
            task_id="train",
            spec=planned.spec,
            plan_task_id="plan",
            checkpoint_resume="latest",
            aws_conn_id=None,
            region_name=REGION,
        )
    sagemaker = RecordingSageMaker()
    # the FSx pre-flight reads the file system on AWS; it adds nothing to the request
    op.__dict__.update(hook=sagemaker, checkpoint_hook=_NoCheckpoints(), _fsx_preflight=lambda: None)
    op.submit_job(context)
    (sent,) = sagemaker.created
    assert planned.request is not None
    return planned.request, sent


def plan_task_requests() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in EXAMPLES:
        planned, sent = _plan_then_send(path)
        out[f"plan_task/{path.stem}"] = planned
        out[f"sent/{path.stem}"] = sent
    return out


def _has_local_stand_ins(data: Any) -> bool:
    if isinstance(data, dict):
        return any(
            (k.startswith("local_") and k != "local_path") or _has_local_stand_ins(v) for k, v in data.items()
        )
    if isinstance(data, list):
        return any(_has_local_stand_ins(v) for v in data)
    return False


def local_requests() -> dict[str, Any]:
    from airflow_dist_training.hooks.local_training import LocalTrainingHook
    from airflow_dist_training.spec.loading import load_spec, read_yaml_file

    hook = LocalTrainingHook(base_dir=REPO)
    out: dict[str, Any] = {}
    for path in EXAMPLES:
        data = read_yaml_file(path)
        # a local channel but code on S3 (own_entry_point): runnable locally only with AWS credentials
        if not _has_local_stand_ins(data) or str(data["source"].get("source_dir", "")).startswith("s3://"):
            continue
        sub = hook.submission(load_spec(path), "example-1", check_paths=False, region=REGION, stage=False)
        out[f"local/{path.stem}"] = _repo_relative(sub.request)
    return out


def all_requests() -> dict[str, Any]:
    """Every request of the corpus, by key (computed now, from the code as it is)."""
    return {**plan_requests(), **parity_requests(), **plan_task_requests(), **local_requests()}


def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CORPUS.read_text(encoding="utf-8"))
    return data


def record() -> int:
    import logging

    logging.disable(logging.INFO)  # the training task logs every request it sends
    requests = all_requests()
    CORPUS.write_text(canonical(requests) + "\n", encoding="utf-8")
    print(f"recorded {len(requests)} requests in {CORPUS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(record())
