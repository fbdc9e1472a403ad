"""The demo's upstream: new training data arrives, and the retraining DAG runs because of it.

It regenerates the demo dataset (``examples/make_dataset.py`` with the ``seed`` you give) and
updates the ``s3://adt-demo-bucket/data/train/`` asset, which schedules ``distributed_retraining``
(besides its Monday cron). The same seed gives the same data: that retraining run is skipped
("no new data or code since champion ..."); another seed trains.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Asset, Param, task

REPO = Path(__file__).resolve().parent.parent
DEMO = Path(os.environ.get("ADT_DEMO_DIR") or REPO / ".adt-demo")
TRAINING_DATA = Asset("s3://adt-demo-bucket/data/train/")

with DAG(
    dag_id="demo_new_training_data",
    description="Write a new demo dataset and update the training-data asset",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow-dist-training", "demo"],
    params={"seed": Param(1, type="integer", minimum=0, title="Dataset seed")},
    doc_md=__doc__,
) as dag:

    @task(outlets=[TRAINING_DATA])
    def write_dataset(**context: Any) -> str:
        seed = int(context["params"]["seed"])
        out = DEMO / "source"
        subprocess.run(
            [
                sys.executable,
                str(REPO / "examples" / "make_dataset.py"),
                "--out",
                str(out),
                "--seed",
                str(seed),
            ],
            check=True,
        )
        context["outlet_events"][TRAINING_DATA].extra = {"seed": seed, "path": str(out)}
        return str(out)

    write_dataset()
