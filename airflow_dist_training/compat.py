"""The one home of every Airflow name that moved between the supported minors (3.1 to 3.3).

Modules of this package import such names from here, never from their Airflow location, so a new
minor (or a dropped one) changes this file only (as the official providers' ``version_compat.py``).
Where a feature is missing (``ResumableJobMixin``, ``retry_policy``, plugin ``react_apps`` /
``external_views``) the package degrades instead of failing, and names each fallback once per
process with :func:`note_fallback` (``docs/compatibility.md``).
"""

# ruff: noqa: F401  (every name imported here is re-exported to the package)
from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any, ClassVar

from airflow import __version__ as AIRFLOW_VERSION
from packaging.version import Version

_BASE = Version(Version(AIRFLOW_VERSION).base_version)

AIRFLOW_V_3_2_PLUS = _BASE >= Version("3.2.0")

#: the lowest Airflow this package supports (pyproject ``apache-airflow>=``; CI tests its last patch)
MIN_AIRFLOW = "3.1"

log = logging.getLogger(__name__)

from airflow.sdk import (  # noqa: E402
    DAG,
    Asset,
    BaseOperator,
    BaseSensorOperator,
    Param,
    PokeReturnValue,
    task,
)
from airflow.sdk.bases.operator import BaseOperatorMeta  # noqa: E402

if TYPE_CHECKING:  # mypy reads the newest homes (the dev venv runs the newest supported Airflow)
    from airflow.dag_processing.dagbag import DagBag
    from airflow.plugins_manager import AirflowPlugin
    from airflow.sdk import AssetOrTimeSchedule, Context, CronTriggerTimetable, conf
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowRescheduleException,
        AirflowSkipException,
        AirflowTaskTimeout,
        ParamValidationError,
        TaskDeferred,
    )
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.triggers.base import BaseTrigger, TriggerEvent
else:
    # configuration: ``airflow.sdk.conf`` since 3.2
    try:
        from airflow.sdk import conf
    except ImportError:
        from airflow.configuration import conf

    # exceptions: ``airflow.sdk.exceptions`` since 3.2 (``airflow.exceptions`` warns there)
    _exceptions = importlib.import_module(
        "airflow.sdk.exceptions" if AIRFLOW_V_3_2_PLUS else "airflow.exceptions"
    )
    AirflowException = _exceptions.AirflowException
    AirflowFailException = _exceptions.AirflowFailException
    AirflowRescheduleException = _exceptions.AirflowRescheduleException
    AirflowSkipException = _exceptions.AirflowSkipException
    AirflowTaskTimeout = _exceptions.AirflowTaskTimeout
    ParamValidationError = _exceptions.ParamValidationError
    TaskDeferred = _exceptions.TaskDeferred

_noted: set[str] = set()

FALLBACK_DURABLE = "durable-reattach"
FALLBACK_RETRY_POLICY = "retry-policy"
FALLBACK_REACT_APPS = "react-apps"
FALLBACK_EXTERNAL_VIEWS = "external-views"

FALLBACK_MESSAGES = {
    FALLBACK_DURABLE: (
        "Airflow {version} has no task_state_store/ResumableJobMixin (3.3+): durable reattach falls "
        "back to the deterministic job name plus describe-before-create (a retry still finds this "
        "run's job by name; it is never created twice)."
    ),
    FALLBACK_RETRY_POLICY: (
        "Airflow {version} has no retry_policy (3.3+): invalid specs, missing permissions and failing "
        "scripts still fail at once (AirflowFailException); capacity errors follow the task's retries and retry_delay "
        "instead of a 30-minute delay."
    ),
    FALLBACK_REACT_APPS: (
        "Airflow {version} has no react_apps in plugins: the Training view is served as an external "
        "view (iframe) instead."
    ),
    FALLBACK_EXTERNAL_VIEWS: (
        "Airflow {version} has no external_views in plugins: the Training view has no UI tab; open "
        "it at its URL ({url})."
    ),
}


def note_fallback(name: str, logger: Any = None, **fields: Any) -> bool:
    """Log the fallback ``name`` once per process (True the first time)."""
    if name in _noted:
        return False
    _noted.add(name)
    message = FALLBACK_MESSAGES[name].format(version=AIRFLOW_VERSION, **fields)
    (logger or log).warning("Compatibility fallback [%s]: %s", name, message)
    return True


def retry_policy_supported() -> bool:
    """Whether operators accept ``retry_policy`` (Airflow 3.3's ``ExceptionRetryPolicy``)."""
    try:
        from airflow.sdk import ExceptionRetryPolicy
    except ImportError:
        return False
    return True


class ResumableJobFallback:
    """``ResumableJobMixin`` for Airflows without it (before 3.3): same interface, no state store.

    The operator's ``submit_job`` is already idempotent: it describes the run's deterministic job
    name before creating, and reattaches to an active or completed job. That is the whole of durable
    reattach here; what is lost is only the stored name (a shortcut, and the ``task_state_store`` rows
    Airflow 3.3 shows).
    """

    external_id_key: ClassVar[str] = "remote_job_id"
    if TYPE_CHECKING:  # BaseOperator's logger and the operator's part of the mixin's interface
        log: Any

        def submit_job(self, context: Context) -> Any: ...
        def poll_until_complete(self, external_id: Any, context: Context) -> Any: ...
        def get_job_result(self, external_id: Any, context: Context) -> Any: ...

    # as Airflow's mixin does: operator subclasses without their own __init__ get default_args
    @BaseOperatorMeta._apply_defaults  # type: ignore[type-var]
    def __init__(self, *, durable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.durable = durable

    def execute_resumable(self, context: Context) -> Any:
        if self.durable:
            note_fallback(FALLBACK_DURABLE, self.log)
        external_id = self.submit_job(context)
        self.poll_until_complete(external_id, context)
        return self.get_job_result(external_id, context)


try:
    from airflow.sdk import ResumableJobMixin as _ResumableJobMixin

    HAS_RESUMABLE_JOBS = True
except ImportError:
    _ResumableJobMixin = ResumableJobFallback  # type: ignore[assignment,misc]
    HAS_RESUMABLE_JOBS = False

if TYPE_CHECKING:
    from airflow.sdk import ResumableJobMixin
else:
    ResumableJobMixin = _ResumableJobMixin


def _plugin_supports(attribute: str) -> bool:
    from airflow.plugins_manager import AirflowPlugin as _AirflowPlugin

    return hasattr(_AirflowPlugin, attribute)


def _plugin_base() -> type:
    from airflow.plugins_manager import AirflowPlugin as _AirflowPlugin

    class AirflowPlugin(_AirflowPlugin):
        """``AirflowPlugin`` that adapts its UI entries to what the running Airflow renders.

        * ``react_apps`` without React-app support: each app with a ``fallback_href`` becomes an
          external view (same name, destination and ``url_route``), the rest are dropped.
        * ``external_views`` without support (Airflow 3.0): dropped; the FastAPI app still serves
          the view at its URL.
        """

        def __init_subclass__(cls, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            adapt_plugin_views(cls)

    return AirflowPlugin


_LAZY = {
    # trigger bases (``airflow.sdk`` on newer main, ``airflow.triggers.base`` up to 3.3): only
    # trigger modules need them, and importing them costs a DAG file as much as all our operators
    "BaseTrigger": ("airflow.sdk:BaseTrigger", "airflow.triggers.base:BaseTrigger"),
    "TriggerEvent": ("airflow.sdk:TriggerEvent", "airflow.triggers.base:TriggerEvent"),
    # core modules before 3.2: imported only by code that builds DAGs
    "AssetOrTimeSchedule": (
        "airflow.sdk:AssetOrTimeSchedule",
        "airflow.timetables.assets:AssetOrTimeSchedule",
    ),
    "CronTriggerTimetable": (
        "airflow.sdk:CronTriggerTimetable",
        "airflow.timetables.trigger:CronTriggerTimetable",
    ),
    # the DAG folder parser: ``airflow.dag_processing.dagbag`` since 3.2 (``models.dagbag`` warns)
    "DagBag": ("airflow.dag_processing.dagbag:DagBag", "airflow.models.dagbag:DagBag"),
    # DAG (de)serialization: ``DagSerialization`` since 3.2, ``SerializedDAG`` before
    "DagSerialization": (
        "airflow.serialization.serialized_objects:DagSerialization",
        "airflow.serialization.serialized_objects:SerializedDAG",
    ),
}


def __getattr__(name: str) -> Any:
    """Names loaded on first use: the plugin base (only plugin loaders need it) and timetables."""
    if name == "AirflowPlugin":
        value: Any = _plugin_base()
    elif name in _LAZY:
        for home in _LAZY[name]:
            module, attr = home.split(":")
            try:
                value = getattr(importlib.import_module(module), attr, None)
            except ImportError:
                value = None
            if value is not None:
                break
        else:  # pragma: no cover - every supported Airflow has one of the homes
            raise AttributeError(name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def adapt_plugin_views(
    cls: Any, *, react_apps: bool | None = None, external_views: bool | None = None
) -> None:
    """Rewrite ``cls.react_apps`` / ``cls.external_views`` for an Airflow without them."""
    has_react = _plugin_supports("react_apps") if react_apps is None else react_apps
    has_external = _plugin_supports("external_views") if external_views is None else external_views
    apps = list(cls.__dict__.get("react_apps") or [])
    views = list(cls.__dict__.get("external_views") or [])
    if apps and not has_react:
        note_fallback(FALLBACK_REACT_APPS)
        converted = [
            {k: v for k, v in app.items() if k in ("name", "destination", "url_route", "category")}
            | {"href": app["fallback_href"]}
            for app in apps
            if app.get("fallback_href")
        ]
        cls.react_apps = []
        views += converted
        cls.external_views = views
    if views and not has_external:
        note_fallback(FALLBACK_EXTERNAL_VIEWS, url=views[0].get("href", ""))
        cls.external_views = []
    # entries Airflow does not know are never handed to its UI
    for app in getattr(cls, "react_apps", None) or []:
        app.pop("fallback_href", None)
