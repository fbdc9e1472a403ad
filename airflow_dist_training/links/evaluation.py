"""Extra links for evaluation tasks: the evaluation report and the registration audit record.

The operator ``persist``s a small dict to XCom and onto itself during ``execute``; ``get_link``
only formats it, reading it from the operator (why: ``links/sagemaker.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

from airflow_dist_training.storage.location import split_uri, uri_scheme

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator, Context
    from airflow.sdk.types import TaskInstanceKey


def uri_to_url(uri: str, region_name: str | None = None) -> str:
    """A browser URL for an artifact URI: the S3 console for ``s3://``, ``file://`` for a path."""
    if uri_scheme(uri) == "s3":
        _, bucket, key = split_uri(uri)
        region = f"region={quote(region_name)}&" if region_name else ""
        return f"https://s3.console.aws.amazon.com/s3/object/{quote(bucket)}?{region}prefix={quote(key)}"
    if uri.startswith(("http://", "https://", "file://")):
        return uri
    return "file://" + quote(uri)


class _UriLink(BaseOperatorLink):
    name: ClassVar[str]  # type: ignore[misc]
    key: ClassVar[str]  # the XCom key and the operator's ``_adt_links`` key

    def __init_subclass__(cls, name: str = "", key: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = name
        cls.key = key

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        value: Any = (getattr(operator, "_adt_links", None) or {}).get(self.key) or {}
        return uri_to_url(str(value["uri"]), value.get("region_name")) if value.get("uri") else ""

    @classmethod
    def persist(cls, context: Context, uri: str | None, region_name: str | None = None) -> None:
        if uri:
            value = {"uri": uri, "region_name": region_name}
            task = context.get("task")
            if task is not None:
                vars(task).setdefault("_adt_links", {})[cls.key] = value
            context["ti"].xcom_push(key=cls.key, value=value)


class EvaluationReportLink(_UriLink, name="Evaluation report", key="evaluation_report_link"):
    """The HTML evaluation report (challenger vs champion, gate reasons, plot)."""


class RegistrationAuditLink(_UriLink, name="Registration audit record", key="registration_audit_link"):
    """The audit record written when a model version is registered."""
