"""Members of a mapped run: named, unique, each a re-validated spec whose errors name the member's field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.naming import NAME_PATTERN, job_name, run_identity
from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.members import (
    MAX_MEMBER_NAME_LENGTH,
    MEMBER_NAME_PATTERN,
    Member,
    load_members,
    member_spec,
    member_spec_name,
    member_specs,
)
from airflow_dist_training.spec.training import TrainingJobSpec

SPEC: dict[str, Any] = {
    "name": "churn-model",
    "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
    "source": {"entry_point": "train.py", "source_dir": "s3://bucket/code/sourcedir.tar.gz"},
    "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
    "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
    "hyperparameters": {"epochs": 3, "lr": 0.05},
    "environment": {"LOG": "info"},
    "channels": {
        "train": {"type": "s3", "uri": "s3://bucket/data/all", "local_source": "data/all"},
    },
    "output": {"s3_path": "s3://bucket/models"},
}


def spec() -> TrainingJobSpec:
    return load_spec(SPEC)


def problems(exc: pytest.ExceptionInfo[SpecValidationError]) -> dict[str, str]:
    return {p.path: p.message for p in exc.value.problems}


def test_member_overrides_land_in_its_own_spec_and_the_rest_is_kept() -> None:
    member = Member(
        name="emea",
        hyperparameters={"lr": 0.01, "hidden": 64},
        channels={"train": {"local_source": "data/emea", "uri": "s3://bucket/data/emea"}},
        environment={"MARKET": "emea"},
        compute={"instance_type": "ml.c5.2xlarge", "instance_count": 2},  # type: ignore[arg-type]
    )
    result = member_spec(spec(), member)
    assert result.name == "churn-model-emea"
    assert result.hyperparameters == {"epochs": 3, "lr": 0.01, "hidden": 64}
    assert result.environment == {"LOG": "info", "MARKET": "emea"}
    channel = result.channels["train"]
    assert (channel.uri, channel.local_source) == ("s3://bucket/data/emea", "data/emea")  # type: ignore[union-attr]
    assert (result.compute.instance_type, result.compute.instance_count) == ("ml.c5.2xlarge", 2)
    assert result.output == spec().output


def test_a_member_without_overrides_differs_only_in_its_name() -> None:
    base = spec()
    result = member_spec(base, Member(name="apac"))
    assert result.model_dump() == {**base.model_dump(), "name": "churn-model-apac"}


def test_a_bad_override_names_the_members_field() -> None:
    with pytest.raises(SpecValidationError) as exc:
        load_members([{"name": "ok"}, {"name": "bad", "compute": {"instance_count": 0}}])
    assert "greater than or equal to 1" in problems(exc)["for_each[1].compute.instance_count"]
    members = load_members(
        [
            {"name": "ok"},
            {"name": "bad", "channels": {"train": {"uri": "http://not-s3"}}},
            {"name": "worse", "channels": {"valid": {"local_source": "data/v"}}},  # new channel, no uri
        ]
    )
    with pytest.raises(SpecValidationError) as exc:
        member_specs(spec(), members)
    found = problems(exc)
    assert "does not match the required pattern" in found["for_each[1].channels.train.uri"]
    assert "give it in full, with its type" in found["for_each[2].channels.valid"]
    with pytest.raises(SpecValidationError) as exc:
        member_spec(spec(), Member(name="w", channels={"valid": {"type": "s3"}}), field="for_each[2]")
    assert problems(exc) == {"for_each[2].channels.valid.uri": "is required"}


def test_a_member_cannot_change_the_instance_type_of_instance_groups() -> None:
    groups = {
        **SPEC,
        "compute": {"instance_groups": [{"name": "g", "instance_type": "ml.m5.xlarge", "instance_count": 1}]},
    }
    with pytest.raises(SpecValidationError) as exc:
        member_spec(
            load_spec(groups),
            Member(name="a", compute={"instance_type": "ml.c5.xlarge"}),  # type: ignore[arg-type]
            field="for_each[3]",
        )
    assert list(problems(exc)) == ["for_each[3].compute"]
    assert "instance_groups" in str(exc.value)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "pattern"),
        ("emea_west", "pattern"),  # "_" is not in a job name
        ("-emea", "pattern"),
        ("em--ea", "pattern"),  # a job name's hyphens are single
        ("emea-", "pattern"),
        ("x" * (MAX_MEMBER_NAME_LENGTH + 1), "at most 24 characters"),
    ],
)
def test_a_name_that_is_no_job_name_part_is_refused_naming_the_field(name: str, why: str) -> None:
    with pytest.raises(SpecValidationError) as exc:
        load_members([{"name": "fine"}, {"name": name}])
    assert list(problems(exc)) == ["for_each[1].name"]
    assert why in problems(exc)["for_each[1].name"]


def test_member_names_must_be_unique_ignoring_case() -> None:
    with pytest.raises(SpecValidationError) as exc:
        load_members([{"name": "EMEA"}, {"name": "apac"}, {"name": "emea"}])
    assert "'emea' is used twice (as 'EMEA'" in str(exc.value)


def test_an_empty_list_and_a_non_list_are_refused() -> None:
    with pytest.raises(SpecValidationError, match="for_each"):
        load_members([])
    with pytest.raises(SpecValidationError, match="for_each: must be a list of members, got str"):
        load_members("emea")  # type: ignore[arg-type]


def test_an_unknown_member_field_is_named() -> None:
    with pytest.raises(SpecValidationError) as exc:
        load_members([{"name": "a", "hyperparams": {"lr": 1}}])
    assert "unknown field" in problems(exc)["for_each[0].hyperparams"]


def test_a_long_spec_name_is_shortened_so_the_member_survives_in_the_job_name() -> None:
    base = "a-very-long-spec-name-that-alone-nearly-fills-the-sixty-three-limit"
    name = job_name(member_spec_name(base, "market-emea-west"), run_identity("d", "g.train", "r", 2))
    assert NAME_PATTERN.match(name) and len(name) <= 63
    assert "-market-emea-west-" in name


member_names = st.from_regex(MEMBER_NAME_PATTERN, fullmatch=True).filter(
    lambda n: len(n) <= MAX_MEMBER_NAME_LENGTH
)


@settings(max_examples=200, deadline=None, database=None)
@given(
    spec_name=st.text(min_size=1, max_size=120),
    names=st.lists(member_names, min_size=1, max_size=8, unique_by=str.lower),
)
def test_every_member_gets_a_valid_job_name_of_its_own(spec_name: str, names: list[str]) -> None:
    """Per map index: valid names that keep the member's name and differ from each other's."""
    members = load_members([{"name": n} for n in names])
    jobs = []
    for index, member in enumerate(members.members):
        base = member_spec_name(spec_name, member.name)
        name = job_name(base, run_identity("dag", "group.train", "run-1", index))
        assert NAME_PATTERN.match(name), name
        assert f"-{member.name}-" in name
        jobs.append(name.lower())
    assert len(set(jobs)) == len(jobs)
