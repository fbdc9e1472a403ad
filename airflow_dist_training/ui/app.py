"""The Training view's FastAPI app, mounted by the plugin at ``/dist-training`` in the api-server.

Every route is behind Airflow's auth (``docs/training-view.md``): ``view`` (the page),
``api/run`` (the run's JSON, :func:`ui.data.build_run_view`, polled every 2 s while the run is
live), ``api/runs`` (recent runs with training jobs of the readable DAGs) and the page's script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from airflow_dist_training.ui.data import LINK_KEY, build_run_view, member_task_id

STATIC = Path(__file__).resolve().parent / "static"


def _dag_access() -> Any:
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return requires_access_dag("GET", DagAccessEntity.RUN)


def _session() -> Any:
    from airflow.api_fastapi.common.db.common import _get_session

    yield from _get_session()


def _user_dep() -> Any:
    from airflow.api_fastapi.core_api.security import get_user

    return get_user


def run_view(session: Any, dag_id: str, run_id: str) -> dict[str, Any]:
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    from airflow_dist_training.evaluation.report import render_svg
    from airflow_dist_training.sagemaker.catalog import hourly_price
    from airflow_dist_training.ui.sagemaker_source import sagemaker_job_view  # describe + CloudWatch metrics

    dag_run = session.scalar(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
    if dag_run is None:
        raise HTTPException(404, f"DAG run {dag_id}/{run_id} not found")
    tis = session.scalars(
        select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id)
    ).all()
    task_instances = [
        {
            "task_id": member_task_id(ti.task_id, ti.map_index),
            "map_index": ti.map_index,
            "state": str(ti.state.value if hasattr(ti.state, "value") else ti.state) if ti.state else None,
            "start": ti.start_date.isoformat() if ti.start_date else None,
            "end": ti.end_date.isoformat() if ti.end_date else None,
            "try_number": ti.try_number,
        }
        for ti in sorted(tis, key=lambda t: (t.start_date is None, t.start_date, t.task_id))
    ]
    xcoms: dict[tuple[str, str], Any] = {}
    for row in session.scalars(XComModel.get_many(run_id=run_id, dag_ids=dag_id)):
        # a mapped group's member is a group of its own in the view (members side by side)
        xcoms.setdefault(
            (member_task_id(row.task_id, row.map_index), row.key), XComModel.deserialize_value(row)
        )
    state = dag_run.state
    return build_run_view(
        dag_id,
        run_id,
        run_state=str(state.value if hasattr(state, "value") else state) if state else None,
        task_instances=task_instances,
        xcoms=xcoms,
        sagemaker=sagemaker_job_view,
        hourly_price=hourly_price,
        render_plot=render_svg,
    )


def recent_runs(session: Any, dag_ids: set[str] | None, limit: int = 30) -> list[dict[str, Any]]:
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    query = select(XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.timestamp).where(
        XComModel.key == LINK_KEY
    )
    if dag_ids is not None:
        query = query.where(XComModel.dag_id.in_(dag_ids))
    rows = session.execute(query.order_by(XComModel.timestamp.desc()).limit(limit)).all()
    return [
        {"dag_id": r.dag_id, "run_id": r.run_id, "task_id": r.task_id, "at": r.timestamp.isoformat()}
        for r in rows
    ]


def create_app() -> FastAPI:
    app = FastAPI(title="airflow-dist-training Training view", docs_url=None, redoc_url=None)
    access = Depends(_dag_access())
    session_dep = Depends(_session)
    user_dep = Depends(_user_dep())

    @app.get("/view", response_class=HTMLResponse, dependencies=[access])
    def view(
        dag_id: Annotated[str | None, Query()] = None,
        run_id: Annotated[str | None, Query()] = None,
        task_id: Annotated[str | None, Query()] = None,
    ) -> HTMLResponse:
        html = (STATIC / "training.html").read_text(encoding="utf-8")
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    @app.get("/api/run", dependencies=[access])
    def api_run(
        dag_id: Annotated[str, Query()],
        run_id: Annotated[str, Query()],
        session: Any = session_dep,
    ) -> JSONResponse:
        return JSONResponse(run_view(session, dag_id, run_id), headers={"Cache-Control": "no-store"})

    @app.get("/api/runs")
    def api_runs(request: Request, user: Any = user_dep, session: Any = session_dep) -> JSONResponse:
        from airflow.api_fastapi.app import get_auth_manager

        allowed = get_auth_manager().get_authorized_dag_ids(user=user, method="GET", session=session)
        return JSONResponse({"runs": recent_runs(session, set(allowed))})

    @app.get("/static/training.js", dependencies=[user_dep])
    def script() -> Response:
        return Response((STATIC / "training.js").read_text(encoding="utf-8"), media_type="text/javascript")

    return app
