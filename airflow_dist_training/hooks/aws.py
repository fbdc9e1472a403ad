"""One way to reach AWS: the connection settings, the Amazon-provider hook built from them, one region rule.

Every hook, trigger, sensor and task that talks to AWS builds its boto3 clients here, through the
Amazon provider's ``AwsBaseHook`` (so connection extras, role assumption, endpoint URLs and botocore
config behave as in every other AWS task). Importing this module imports neither boto3 nor the
Amazon provider (DAG-parse lightness, ruff TID253): the provider is imported when a hook is built.

Why not ``AwsBaseOperator``/``AwsBaseSensor``: importing ``airflow.providers.amazon.aws.operators.base_aws``
at module level costs about 145 ms and pulls boto3 into every DAG parse (our operators' modules
import in about 21 ms; ``bench/parse.py``). So operators keep ``aws_conn_id``/``region_name``/
``verify``/``botocore_config`` through :class:`AwsConnectionMixin` and the same templated fields as the
provider's ``aws_template_fields`` (:func:`aws_template_fields`).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

#: The connection fields every AWS task templates (as the Amazon provider's ``aws_template_fields``).
AWS_TEMPLATE_FIELDS = ("aws_conn_id", "region_name", "verify")


def aws_template_fields(*fields: str) -> tuple[str, ...]:
    """``fields`` plus the AWS connection fields, sorted and unique (the Amazon provider's helper)."""
    return tuple(sorted({*AWS_TEMPLATE_FIELDS, *fields}))


def environment_region() -> str | None:
    """The region named by the environment when the connection names none: ``AWS_REGION``
    (set by AWS runtimes and other SDKs), then ``AWS_DEFAULT_REGION``. botocore itself only reads
    ``AWS_DEFAULT_REGION``, and that already reaches us through the connection's region."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


def local_region(region_name: str | None = None) -> str:
    """The local backend's region, for its plan and its run alike (its request's image URI and
    ``sagemaker_region``): ``region_name``, else the environment's, else ``us-east-1``; no AWS call."""
    return region_name or environment_region() or "us-east-1"


def _operator_class_name(target_function_name: str) -> str | None:
    """``AwsGenericHook._find_operator_class_name`` without ``inspect.stack()``: the class of the
    newest frame running ``target_function_name``. The provider's version reads every frame's source
    line and searches ``sys.modules`` for its module: about 0.26 s of CPU per client built, which was
    most of a training task's submit path (``bench/submit_path.py``)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == target_function_name:
            return type(frame.f_locals["self"]).__name__  # a KeyError is the provider's "Unknown" too
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _executor_class_name() -> str | None:
    """``AwsGenericHook._find_executor_class_name`` without ``inspect.stack()``: the last class named
    in the globals of the newest frame whose module has ``BaseExecutor``."""
    frame = sys._getframe(1)
    while frame is not None:
        names = frame.f_globals
        if isinstance(names.get("BaseExecutor"), type):
            return [name for name, value in names.items() if isinstance(value, type)][-1]
        frame = frame.f_back  # type: ignore[assignment]
    return None


@functools.cache
def aws_base_hook_class() -> type[AwsBaseHook]:
    """The Amazon provider's ``AwsBaseHook`` with a cheap caller lookup for its user agent (the same
    answer); every hook of this package is one."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    return type(
        "AwsBaseHook",
        (AwsBaseHook,),
        {
            "__module__": __name__,
            "_find_operator_class_name": staticmethod(_operator_class_name),
            "_find_executor_class_name": staticmethod(_executor_class_name),
        },
    )


def aws_hook(client_type: str, **settings: Any) -> AwsBaseHook:
    """The Amazon provider's ``AwsBaseHook`` for ``client_type``; ``settings``: its ``aws_conn_id`` (default
    ``aws_default``), ``region_name``, ``verify`` and ``config`` (a botocore ``Config`` or its kwargs)."""
    return aws_base_hook_class()(client_type=client_type, **settings)


def cached_aws_hook(owner: Any, client_type: str, **settings: Any) -> AwsBaseHook:
    """``aws_hook(client_type, **settings)``, built once per ``owner`` (kept in its ``__dict__``)."""
    cache: dict[str, AwsBaseHook] = owner.__dict__.setdefault("_aws_hooks", {})
    if client_type not in cache:
        cache[client_type] = aws_hook(client_type, **settings)
    return cache[client_type]


def task_region(aws_conn_id: str | None, region_name: str | None = None, *, hook: Any = None) -> str:
    """The one region rule, for the plan task and the training task alike: ``region_name``, else
    the connection's region, else ``AWS_REGION``/``AWS_DEFAULT_REGION``, else ``us-east-1``.

    ``hook``: an already built hook of the connection (saves building one).
    """
    if region_name:
        return region_name
    from botocore.exceptions import NoRegionError

    try:
        region = (
            hook if hook is not None else aws_hook("sagemaker", aws_conn_id=aws_conn_id)
        ).conn_region_name
    except NoRegionError:  # neither the connection nor AWS_DEFAULT_REGION/config names one
        region = None
    return str(region or environment_region() or "us-east-1")


class AwsConnectionMixin:
    """``aws_conn_id``, ``region_name``, ``verify``, ``botocore_config`` and one hook per client type.

    Mixed into our hooks and operators instead of hand-writing the four settings and building
    ``AwsBaseHook`` in each. Hooks and clients are built on first use and kept (``aws_hook``/``aws_client``);
    ``aws_settings`` hands the four settings on to another hook or a trigger.
    """

    aws_conn_id: str | None = "aws_default"
    region_name: str | None = None
    verify: bool | str | None = None
    botocore_config: dict[str, Any] | None = None

    def _set_aws_connection(
        self,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
    ) -> None:
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.verify = verify
        self.botocore_config = botocore_config

    @property
    def aws_settings(self) -> dict[str, Any]:
        """The four settings as keyword arguments, to build a hook or a trigger of the same connection."""
        return {name: getattr(self, name) for name in ("aws_conn_id", "region_name", "verify", "botocore_config")}

    def aws_hook(self, client_type: str) -> AwsBaseHook:
        """The Amazon provider hook for ``client_type``, built once per instance."""
        return cached_aws_hook(
            self,
            client_type,
            aws_conn_id=self.aws_conn_id,
            region_name=self.region_name,
            verify=self.verify,
            config=dict(self.botocore_config) if self.botocore_config else None,
        )

    def aws_client(self, client_type: str) -> Any:
        """A boto3 client for ``client_type``, built once per instance."""
        cache: dict[str, Any] = self.__dict__.setdefault("_aws_clients", {})
        if client_type not in cache:
            cache[client_type] = self.aws_hook(client_type).get_conn()
        return cache[client_type]
