"""Sweeps: grid and seeded random sets become named members; the best member is picked or the error says why not."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.spec.members import MemberList, load_members
from airflow_dist_training.spec.sweep import (
    MemberOutcome,
    SweepSelectionError,
    expand_sweep,
    load_sweep,
    pick_best_member,
    sweep_hyperparameter_sets,
)
from airflow_dist_training.spec.tuning import TuningObjective

MAXIMIZE = {"metric": "accuracy", "type": "Maximize"}
ACCURACY = TuningObjective(metric="accuracy", type="Maximize")
LOSS = TuningObjective(metric="loss", type="Minimize")


def problems(exc: pytest.ExceptionInfo[SpecValidationError]) -> dict[str, str]:
    return {p.path: p.message for p in exc.value.problems}


def test_a_grid_trains_every_combination_as_named_members() -> None:
    sweep = load_sweep({"ranges": {"lr": [0.01, 0.05], "hidden": [16, 32]}, "objective": MAXIMIZE})
    members = expand_sweep(sweep)
    assert members.names == ["trial-00", "trial-01", "trial-02", "trial-03"]
    assert [m.hyperparameters for m in members.members] == [
        {"lr": 0.01, "hidden": 16},
        {"lr": 0.01, "hidden": 32},
        {"lr": 0.05, "hidden": 16},
        {"lr": 0.05, "hidden": 32},
    ]
    assert sweep.size == 4


def test_a_random_sweep_draws_count_sets_in_range_and_the_same_seed_draws_the_same_sets() -> None:
    data = {
        "strategy": "random",
        "count": 5,
        "seed": 7,
        "name_prefix": "lr",
        "ranges": {
            "lr": {"type": "continuous", "min_value": 0.001, "max_value": 0.1, "scaling_type": "Logarithmic"},
            "hidden": {"type": "integer", "min_value": 8, "max_value": 64},
            "optimizer": {"type": "categorical", "values": ["sgd", "adam"]},
        },
        "objective": {"metric": "loss", "type": "Minimize"},
    }
    sets = sweep_hyperparameter_sets(load_sweep(data))
    assert len(sets) == 5
    for hp in sets:
        assert 0.001 <= hp["lr"] <= 0.1 and isinstance(hp["lr"], float)
        assert 8 <= hp["hidden"] <= 64 and isinstance(hp["hidden"], int)
        assert hp["optimizer"] in ("sgd", "adam")
    assert sets == sweep_hyperparameter_sets(load_sweep(data))
    assert sets != sweep_hyperparameter_sets(load_sweep({**data, "seed": 8}))
    assert expand_sweep(load_sweep(data)).names == ["lr-00", "lr-01", "lr-02", "lr-03", "lr-04"]


@pytest.mark.parametrize(
    ("data", "path", "text"),
    [
        ({"strategy": "random", "ranges": {"lr": [0.1]}}, "sweep", "strategy random needs count"),
        ({"ranges": {"lr": [0.1]}, "count": 2}, "sweep", "count is for strategy random"),
        (
            {"ranges": {"lr": {"type": "continuous", "min_value": 0.1, "max_value": 1}}},
            "sweep",
            "give lr as a list of values",
        ),
        ({"ranges": {"lr": [0.1, 0.1]}}, "sweep.ranges.lr.values", "values must be distinct"),
        ({"ranges": {"sagemaker_program": ["x"]}}, "sweep.ranges", "SageMaker's own"),
        ({"ranges": {}}, "sweep.ranges", "at least 1 item"),
        ({"ranges": {"a": list(range(11)), "b": list(range(10))}}, "sweep", "110 combinations; at most 100"),
        ({"ranges": {"lr": [0.1]}, "name_prefix": "a_b"}, "sweep.name_prefix", "does not match"),
        (
            {
                "strategy": "random",
                "count": 2,
                "ranges": {"n": {"type": "integer", "min_value": 3, "max_value": 1}},
            },
            "sweep.ranges.n",
            "min_value (3) must be less than max_value (1)",
        ),
    ],
)
def test_a_bad_sweep_names_its_field(data: dict[str, Any], path: str, text: str) -> None:
    with pytest.raises(SpecValidationError) as exc:
        load_sweep({"objective": MAXIMIZE, **data})
    found = problems(exc)
    assert path in found, found
    assert text in found[path]


def test_the_objective_is_required() -> None:
    with pytest.raises(SpecValidationError) as exc:
        load_sweep({"ranges": {"lr": [0.1]}})
    assert problems(exc) == {"sweep.objective": "is required"}


def outcome(member: str, **metrics: float) -> MemberOutcome:
    return MemberOutcome(member=member, status="succeeded", metrics=metrics)


def test_the_member_with_the_best_final_metric_wins() -> None:
    outcomes = [
        outcome("a", accuracy=0.7, loss=0.4),
        outcome("b", accuracy=0.9, loss=0.5),
        outcome("c", accuracy=0.8, loss=0.2),
    ]
    best = pick_best_member(outcomes, ACCURACY)
    assert (best.winner, best.value) == ("b", 0.9)
    assert [r["member"] for r in best.ranking] == ["b", "c", "a"]
    assert pick_best_member(outcomes, LOSS).winner == "c"


def test_members_that_did_not_finish_are_listed_not_ranked() -> None:
    outcomes = [
        MemberOutcome("a", "failed", reason="AlgorithmError: loss is NaN"),
        outcome("b", accuracy=0.6),
        MemberOutcome("c", "skipped", reason="data, code and spec equal the champion's"),
    ]
    best = pick_best_member(outcomes, ACCURACY)
    assert best.winner == "b"
    assert best.excluded == [
        {"member": "a", "status": "failed", "reason": "AlgorithmError: loss is NaN"},
        {"member": "c", "status": "skipped", "reason": "data, code and spec equal the champion's"},
    ]
    text = best.to_json()["summary"]
    assert "best of the sweep: b (accuracy = 0.6, highest wins)" in text
    assert "a" in text and "failed: AlgorithmError: loss is NaN" in text


def test_a_tie_goes_to_the_first_member_and_is_reported() -> None:
    best = pick_best_member(
        [outcome("a", accuracy=0.5), outcome("b", accuracy=0.9), outcome("c", accuracy=0.9)], ACCURACY
    )
    assert (best.winner, best.tied_with) == ("b", ["c"])
    assert "tied with c: the first member in list order wins" in best.summary()


def test_no_finished_member_is_an_error_listing_each_member() -> None:
    with pytest.raises(SweepSelectionError) as exc:
        pick_best_member(
            [MemberOutcome("a", "failed", reason="OOM"), MemberOutcome("b", "failed", reason="spot")],
            ACCURACY,
        )
    assert (
        str(exc.value)
        == "no member of the sweep finished, so none can be picked: a: failed (OOM); b: failed (spot)"
    )


@pytest.mark.parametrize(
    ("metrics", "says"),
    [
        ({"acc": 0.9}, "b has no value (its metrics: acc)"),
        ({"accuracy": math.nan}, "b has nan, not a finite number"),
        ({}, "b has no value (its metrics: no metrics)"),
    ],
)
def test_a_finished_member_without_the_objective_metric_is_an_error(
    metrics: dict[str, float], says: str
) -> None:
    with pytest.raises(SweepSelectionError) as exc:
        pick_best_member(
            [outcome("a", accuracy=0.5), MemberOutcome("b", "succeeded", metrics=metrics)], ACCURACY
        )
    assert "objective metric 'accuracy' is missing from finished members" in str(exc.value)
    assert says in str(exc.value)


def test_a_member_listed_twice_is_an_error() -> None:
    with pytest.raises(SweepSelectionError, match="members a are listed twice"):
        pick_best_member([outcome("a", accuracy=0.5), outcome("a", accuracy=0.6)], ACCURACY)


# ---- properties ---------------------------------------------------------------------------------

values = st.one_of(
    st.integers(-1000, 1000), st.floats(-10, 10, allow_nan=False), st.text("abc", min_size=1, max_size=3)
)
grid_ranges = st.dictionaries(
    st.sampled_from(["lr", "hidden", "depth", "optimizer"]),
    st.lists(values, min_size=1, max_size=4, unique_by=str),
    min_size=1,
    max_size=3,
)


@settings(max_examples=100, deadline=None, database=None)
@given(ranges=grid_ranges)
def test_a_grid_expands_to_each_combination_once_as_a_valid_member_list(ranges: dict[str, list[Any]]) -> None:
    sweep = load_sweep({"ranges": ranges, "objective": MAXIMIZE})
    members = expand_sweep(sweep)
    assert len(members.members) == math.prod(len(v) for v in ranges.values()) == sweep.size
    combos = [tuple(str(m.hyperparameters[k]) for k in ranges) for m in members.members]
    assert len(set(combos)) == len(combos)
    for m in members.members:
        assert all(m.hyperparameters[k] in ranges[k] for k in ranges)
    assert isinstance(load_members(members.members), MemberList)  # the names pass the member rules


@settings(max_examples=100, deadline=None, database=None)
@given(
    low=st.floats(1e-6, 100, allow_nan=False),
    width=st.floats(1e-3, 1000, allow_nan=False),
    ints=st.tuples(st.integers(-50, 50), st.integers(1, 100)),
    scaling=st.sampled_from(["Auto", "Linear", "Logarithmic"]),
    count=st.integers(1, 20),
    seed=st.integers(0, 2**32),
)
def test_random_draws_stay_in_range_and_repeat_with_the_seed(
    low: float, width: float, ints: tuple[int, int], scaling: str, count: int, seed: int
) -> None:
    data = {
        "strategy": "random",
        "count": count,
        "seed": seed,
        "objective": MAXIMIZE,
        "ranges": {
            "x": {"type": "continuous", "min_value": low, "max_value": low + width, "scaling_type": scaling},
            "n": {"type": "integer", "min_value": ints[0], "max_value": ints[0] + ints[1]},
        },
    }
    sets = sweep_hyperparameter_sets(load_sweep(data))
    assert len(sets) == count
    for hp in sets:
        assert low <= hp["x"] <= low + width
        assert ints[0] <= hp["n"] <= ints[0] + ints[1] and isinstance(hp["n"], int)
    assert sets == sweep_hyperparameter_sets(load_sweep(data))


@settings(max_examples=200, deadline=None, database=None)
@given(
    scores=st.lists(st.one_of(st.none(), st.floats(-5, 5, allow_nan=False)), min_size=1, max_size=8),
    maximize=st.booleans(),
)
def test_the_winner_is_a_finished_member_no_other_beats(scores: list[float | None], maximize: bool) -> None:
    """None: the member failed. Every pick is finished, unbeaten, and the first of its equals."""
    outcomes = [
        MemberOutcome(f"m{i}", "failed", reason="x") if s is None else outcome(f"m{i}", accuracy=s)
        for i, s in enumerate(scores)
    ]
    objective = TuningObjective(metric="accuracy", type="Maximize" if maximize else "Minimize")
    finished = [s for s in scores if s is not None]
    if not finished:
        with pytest.raises(SweepSelectionError):
            pick_best_member(outcomes, objective)
        return
    best = pick_best_member(outcomes, objective)
    target = max(finished) if maximize else min(finished)
    assert best.value == target
    assert best.winner == f"m{scores.index(target)}"
    assert len(best.ranking) == len(finished) and len(best.excluded) == len(scores) - len(finished)
    assert len(best.tied_with) == finished.count(target) - 1
