"""A tiny DAG that proves the e2e harness: a validated trigger form and a task that defers.

``check_params`` returns the params the run got (so a test reads them back from XCom);
``wait_in_triggerer`` defers to the standard provider's ``DateTimeTrigger`` for ``wait_seconds``,
so the run only succeeds if the triggerer is up and hands the task back to a worker.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import DAG, BaseOperator, Param, task


class WaitInTriggererOperator(BaseOperator):
    """Defer for ``seconds`` to ``DateTimeTrigger``; resume and report that it came back.

    :param seconds: how long the triggerer waits (templated).
    """

    template_fields = ("seconds",)

    def __init__(self, *, seconds: int | str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seconds = seconds

    def execute(self, context: Any) -> None:
        moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=int(self.seconds))
        self.defer(trigger=DateTimeTrigger(moment=moment), method_name="execute_complete")

    def execute_complete(self, context: Any, event: Any = None) -> dict[str, Any]:
        return {"resumed_from_trigger": True, "waited_seconds": int(self.seconds)}


with DAG(
    dag_id="adt_e2e_params",
    schedule=None,
    catchup=False,
    tags=["airflow-dist-training", "e2e"],
    doc_md=__doc__,
    params={
        "instance_type": Param(
            "ml.p4d.24xlarge",
            type="string",
            enum=["ml.g5.2xlarge", "ml.g5.12xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.trn1.32xlarge"],
            title="Instance type",
            description="SageMaker instance type of every node.",
        ),
        "instance_count": Param(
            2, type="integer", minimum=1, maximum=16, title="Instance count", description="Nodes (1-16)."
        ),
        "strategy": Param(
            "torch_distributed",
            type="string",
            enum=["smddp", "pytorchddp", "torch_distributed", "smp_v2", "mpi"],
            title="Strategy",
            description="Distribution strategy.",
        ),
        "learning_rate": Param(0.0001, type="number", exclusiveMinimum=0, maximum=1, title="Learning rate"),
        "spot": Param(False, type="boolean", title="Managed spot training"),
        "dry_run": Param(True, type="boolean", title="Dry run (plan only)"),
        "wait_seconds": Param(
            3, type="integer", minimum=0, maximum=60, title="Seconds in the triggerer", section="Advanced"
        ),
    },
) as dag:

    @task
    def check_params(**context: Any) -> dict[str, Any]:
        return dict(context["params"])

    check_params() >> WaitInTriggererOperator(
        task_id="wait_in_triggerer", seconds="{{ params.wait_seconds }}"
    )
