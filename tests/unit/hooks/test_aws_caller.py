"""The hooks' cheap caller lookup gives the Amazon provider's answer (the user agent's ``Caller/``)."""

from __future__ import annotations

from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

from airflow_dist_training.hooks.aws import aws_hook


class TrainingLikeOperator:
    def execute(self) -> tuple[str, str | None, str | None]:
        hook = aws_hook("s3", aws_conn_id=None, region_name="us-east-1")
        return hook._get_caller(), AwsBaseHook._find_operator_class_name("execute"), _nested()


def _nested() -> str | None:
    return aws_hook("s3", aws_conn_id=None)._find_operator_class_name("execute")


class BaseExecutor:  # a module that names BaseExecutor: the provider takes its last class
    pass


class LocalLikeExecutor(BaseExecutor):
    pass


def test_the_caller_is_the_operator_the_provider_finds() -> None:
    ours, providers, nested = TrainingLikeOperator().execute()
    assert ours == providers == nested == "TrainingLikeOperator"


def test_without_an_operator_the_executor_is_found_as_the_provider_finds_it() -> None:
    hook = aws_hook("s3", aws_conn_id=None)
    assert hook._find_operator_class_name("execute") is None
    assert hook._find_executor_class_name() == AwsBaseHook._find_executor_class_name() == "LocalLikeExecutor"
    assert f"Caller/{hook._get_caller()}" in hook._get_config().user_agent_extra
