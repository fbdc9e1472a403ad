"""Where the Training view lives (pure: no Airflow import unless the base URL must be read).

The plugin mounts its FastAPI app at :data:`APP_PREFIX` and registers an external view with
``url_route`` :data:`URL_ROUTE`, which the Airflow 3 UI shows as a tab of the DAG run page
(``/dags/<dag>/runs/<run>/plugin/training-run``) rendering ``<APP_PREFIX>/view?...`` in an iframe.
"""

from __future__ import annotations

from urllib.parse import quote

APP_PREFIX = "/dist-training"
URL_ROUTE = "training"


def base_url() -> str:
    """``[api] base_url`` without a trailing slash ('' if unset: links are then site-relative)."""
    try:
        from airflow_dist_training.compat import conf

        value = conf.get("api", "base_url", fallback="") or ""
    except Exception:  # pragma: no cover - outside Airflow
        value = ""
    return value.rstrip("/")


def training_view_url(dag_id: str | None, run_id: str | None, base: str | None = None) -> str:
    """The UI page of a DAG run's Training view ('' without a run)."""
    if not dag_id or not run_id:
        return ""
    root = base_url() if base is None else base.rstrip("/")
    return f"{root}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}/plugin/{URL_ROUTE}-run"
