"""Members of a mapped training run: one spec, many models (one per market, customer, trial, ...).

Pure: the standard library and pydantic. A member is a name plus overrides of the spec's
hyperparameters, channels, environment and instance settings, with the spec's field names, so an
error names the member's field: ``for_each[1].compute.instance_count: ...`` (YAML: docs/mapped.md).

A member's name is part of its job name, checkpoint prefix and model package group, so it must be
a valid job-name part, unique in the list case-insensitively (SageMaker names are, and so are some
file systems).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, model_validator

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.sagemaker.naming import MAX_NAME_LENGTH
from airflow_dist_training.spec.training import HyperparameterValue, TrainingJobSpec, _Model

MAX_MEMBER_NAME_LENGTH = 24
MAX_MEMBERS = 100  # a DAG run's mapped instances; Airflow's max_map_length default is 1024
# single inner hyphens: a job name collapses "a--b" to "a-b"
MEMBER_NAME_PATTERN = r"^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$"
# a job name ends "-<10 hex run hash>"; what is left holds "<spec name>-<member>"
_BASE_ROOM = MAX_NAME_LENGTH - 11


class MemberCompute(_Model):
    """The instance settings a member may change (``None`` keeps the spec's)."""

    instance_type: str | None = None
    instance_count: int | None = Field(default=None, ge=1)
    volume_size_gb: int | None = Field(default=None, ge=1, le=16384)


class Member(_Model):
    """One member of a mapped run: its name and what it changes in the training spec."""

    name: str = Field(
        pattern=MEMBER_NAME_PATTERN,
        max_length=MAX_MEMBER_NAME_LENGTH,
        description=f"Part of the member's job name: letters, digits and single inner hyphens, at most {MAX_MEMBER_NAME_LENGTH}",
    )
    hyperparameters: dict[str, HyperparameterValue] = Field(
        default_factory=dict, description="Set on top of the spec's hyperparameters."
    )
    channels: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per channel, the fields that differ from the spec's channel (e.g. local_source or uri); "
        "a channel the spec lacks is given in full.",
    )
    environment: dict[str, str] = Field(
        default_factory=dict, description="Set on top of the spec's environment."
    )
    compute: MemberCompute = Field(default_factory=MemberCompute)


class MemberList(_Model):
    """The members of one run, in map-index order."""

    members: list[Member] = Field(min_length=1, max_length=MAX_MEMBERS)

    @model_validator(mode="after")
    def _unique_names(self) -> MemberList:
        seen: dict[str, str] = {}
        for member in self.members:
            key = member.name.lower()
            if key in seen:
                same = (
                    ""
                    if seen[key] == member.name
                    else f" (as {seen[key]!r}: names are compared ignoring case)"
                )
                raise ValueError(
                    f"member name {member.name!r} is used twice{same}; each member needs its own name"
                )
            seen[key] = member.name
        return self

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.members]


def load_members(
    source: MemberList | Sequence[Member | Mapping[str, Any]], *, field: str = "for_each"
) -> MemberList:
    """The member list from members or dicts; ``SpecValidationError`` names each field (``for_each[2].name``)."""
    from airflow_dist_training.spec.loading import validate_model

    if isinstance(source, MemberList):
        return source
    if isinstance(source, (str, bytes)) or not isinstance(source, Sequence):
        raise SpecValidationError([Problem(field, f"must be a list of members, got {type(source).__name__}")])
    items = [m.model_dump(mode="json", exclude_unset=True) if isinstance(m, Member) else m for m in source]
    try:
        return validate_model(MemberList, {"members": items})
    except SpecValidationError as exc:  # "members[1].name" -> "for_each[1].name"
        raise SpecValidationError(
            [Problem(re.sub(r"^members", field, p.path), p.message, p.severity) for p in exc.problems],
            source=exc.source,
        ) from None


def member_spec_name(spec_name: str, member: str) -> str:
    """``<spec name>-<member>``, the spec name shortened so the member survives in the job name."""
    from airflow_dist_training.sagemaker.naming import sanitise_base

    head = sanitise_base(spec_name)[: max(1, _BASE_ROOM - len(member) - 1)].rstrip("-") or "job"
    return f"{head}-{member}"


def member_spec(spec: TrainingJobSpec, member: Member, *, field: str = "for_each[0]") -> TrainingJobSpec:
    """``spec`` as ``member`` trains it: named ``<spec name>-<member>`` (so its job names, checkpoint
    prefix and default model package group are the member's own), with the member's overrides,
    re-validated. Problems name the member's fields under ``field``."""
    from airflow_dist_training.spec.loading import validate_model

    problems: list[Problem] = []
    data = spec.model_dump(mode="json", exclude_unset=True)
    data["name"] = member_spec_name(spec.name, member.name)
    for section in ("hyperparameters", "environment"):  # set on top of the spec's
        if changes := getattr(member, section):
            data[section] = {**data.get(section, {}), **changes}
    if member.channels:
        channels = dict(data.get("channels", {}))
        for name, changes in member.channels.items():
            if name not in channels and "type" not in changes:
                why = "the spec has no such channel: give it in full, with its type (s3, fsx or efs)"
                problems.append(Problem(f"{field}.channels.{name}", why))
            channels[name] = {**channels.get(name, {}), **changes}
        data["channels"] = channels
    compute_changes = member.compute.model_dump(exclude_none=True)
    if compute_changes:
        compute = dict(data.get("compute", {}))
        if compute.get("instance_groups") and {"instance_type", "instance_count"} & set(compute_changes):
            why = "the spec runs instance_groups: a member cannot set instance_type or instance_count"
            problems.append(Problem(f"{field}.compute", why))
        data["compute"] = {**compute, **compute_changes}
    if problems:
        raise SpecValidationError(problems, source=f"member {member.name!r}")
    result = validate_model(TrainingJobSpec, data, source=f"member {member.name!r}", prefix=field)
    result._source_file = spec.source_file
    return result


def member_problems(spec: TrainingJobSpec, members: Sequence[Member] | None) -> list[Problem]:
    """What is wrong with each member's spec (empty when nothing), each naming ``for_each[i]``'s field."""
    if not members:
        return []
    try:
        member_specs(spec, MemberList(members=list(members)))
    except SpecValidationError as exc:
        return list(exc.problems)
    return []


def member_specs(
    spec: TrainingJobSpec, members: MemberList, *, field: str = "for_each"
) -> list[TrainingJobSpec]:
    """Every member's spec, in map-index order; one ``SpecValidationError`` with every member's problems."""
    specs: list[TrainingJobSpec] = []
    problems: list[Problem] = []
    for index, member in enumerate(members.members):
        try:
            specs.append(member_spec(spec, member, field=f"{field}[{index}]"))
        except SpecValidationError as exc:
            problems.extend(exc.problems)
    if problems:
        raise SpecValidationError(problems)
    return specs
