"""Property: any malformed spec yields field-path errors, never a traceback, and no AWS call."""

from __future__ import annotations

import copy
import socket
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.spec.loading import load_spec
from tests.unit.sagemaker.test_validation_errors import BASE

# Values that are wrong for most fields: wrong types, empty, negative, huge, nested junk.
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
)
FIELD_PATHS = [
    ("name",), ("image",), ("image", "uri"), ("image", "framework"), ("image", "framework_version"),
    ("source",), ("source", "entry_point"), ("source", "source_dir"), ("role_arn",),
    ("compute",), ("compute", "instance_type"), ("compute", "instance_count"), ("compute", "volume_size_gb"),
    ("compute", "instance_groups"), ("compute", "keep_alive_seconds"),
    ("distribution",), ("distribution", "strategy"), ("distribution", "processes_per_host"),
    ("distribution", "smp"), ("distribution", "custom_mpi_options"), ("hyperparameters",), ("environment",),
    ("channels",), ("channels", "train"), ("output",), ("output", "s3_path"), ("checkpoint",), ("spot",),
    ("spot", "max_wait_seconds"), ("stopping", "max_runtime_seconds"), ("network",), ("network", "subnets"),
    ("metric_definitions",), ("max_retry_attempts",), ("tags",), ("batch",), ("unknown_field",),
]  # fmt: skip


def _mutate(data: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    target = out
    for part in path[:-1]:
        if not isinstance(target.get(part), dict):
            target[part] = {}
        target = target[part]
    target[path[-1]] = value
    return out


class _NoNetwork:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("validation must not open a network connection")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(st.tuples(st.sampled_from(FIELD_PATHS), junk), min_size=1, max_size=4))
def test_malformed_specs_yield_field_path_errors_only(mutations):
    data: Any = BASE
    for path, value in mutations:
        data = _mutate(data, path, value)
    original = socket.socket
    socket.socket = _NoNetwork  # type: ignore[misc,assignment]
    try:
        try:
            spec = load_spec(data)
            plan_training_job(spec, job_name="job-1", region="us-east-1")
        except SpecValidationError as exc:
            assert exc.problems, "an error must list its problems"
            for problem in exc.problems:
                assert problem.message and "Traceback" not in problem.message
                # every problem names a field path (or the whole spec for type errors at the root)
                assert problem.path or "mapping" in problem.message
    finally:
        socket.socket = original  # type: ignore[misc]


@given(
    st.one_of(
        st.none(),
        st.integers(),
        st.text(max_size=20).filter(lambda t: not t.strip().endswith((".yaml", ".yml", ".json"))),
    )
)
def test_non_mapping_input_is_a_clear_error(value):
    try:
        load_spec(value)
    except SpecValidationError as exc:
        assert exc.problems and all(p.message for p in exc.problems)
