"""Pre-flight checks without an AWS call: every API limit broken is reported at once, by field."""

from __future__ import annotations

from airflow_dist_training.sagemaker.preflight import check_spec, errors_only, warnings_only
from tests.unit.sagemaker.specs import example


def _fields(problems: list) -> dict[str, str]:
    return {p.path: p.message for p in problems}


def test_a_valid_example_spec_has_no_error() -> None:
    assert errors_only(check_spec(example("smddp_p4d"))) == []


def test_every_network_and_tag_problem_is_reported_with_its_field() -> None:
    spec = example(
        "smddp_p4d",
        network__subnets=["subnet-0abc", "vpc-123"],
        network__security_group_ids=[f"sg-{i}" for i in range(6)],
        tags={"aws:team": "ml", "owner": "x" * 300},
    )
    problems = _fields(errors_only(check_spec(spec)))
    assert problems["network.subnets[1]"] == "'vpc-123' is not a subnet ID (subnet-...)"
    assert problems["network.security_group_ids"] == "has 6 security groups; the API allows 1 to 5"
    assert problems["tags.aws:team"] == "keys starting with 'aws:' are reserved"
    assert problems["tags.owner"] == "value must be at most 256 characters"


def test_subnets_without_security_groups_name_the_missing_field() -> None:
    spec = example("smddp_p4d", network__subnets=["subnet-0abc"], network__security_group_ids=None)
    problems = _fields(check_spec(spec))
    assert problems["network.security_group_ids"] == (
        "When setting up custom VPC, both subnets and security_group_ids must be set"
    )


def test_warnings_and_errors_split_the_same_list() -> None:
    problems = check_spec(example("smddp_p4d", tags={"aws:x": "y"}))
    assert len(errors_only(problems)) + len(warnings_only(problems)) == len(problems)
    assert all(p.severity != "error" for p in warnings_only(problems))
