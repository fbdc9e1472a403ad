"""The Airflow 3 UI plugin: the Training view (a FastAPI app + external views: a tab on DAG run and
task instance pages, an entry in the top navigation).

Registered through the ``airflow.plugins`` entry point (pyproject), because Airflow loads
provider-info plugins only with ``lazy_discover_providers=False``. The app is built on its first
request (``_LazyApp``): every Airflow process loads plugins, only the api-server serves this one.
"""

from __future__ import annotations

from typing import Any

from airflow_dist_training.compat import AirflowPlugin
from airflow_dist_training.ui.urls import APP_PREFIX, URL_ROUTE

_VIEW = APP_PREFIX.lstrip("/") + "/view"  # relative hrefs: the UI may be served under a base path


class _LazyApp:
    """An ASGI app that builds the real FastAPI app on first use."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from airflow_dist_training.ui.app import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


def _view(destination: str, url_route: str, query: str = "", **extra: Any) -> dict[str, Any]:
    fields = {"name": "Training", "href": _VIEW + query, "destination": destination, "url_route": url_route}
    return fields | extra


class DistTrainingPlugin(AirflowPlugin):
    name = "airflow_dist_training"
    fastapi_apps = [{"app": _LazyApp(), "url_prefix": APP_PREFIX, "name": "Training view"}]
    external_views = [
        _view("nav", URL_ROUTE, nav_top_level=True),
        _view("dag_run", URL_ROUTE + "-run", "?dag_id={DAG_ID}&run_id={RUN_ID}"),
        _view("task_instance", URL_ROUTE + "-task", "?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}"),
    ]
