"""Hostile or odd files given to both loaders (training spec and pipeline): a clear error, never a traceback.

The fuzzing part feeds raw bytes and mutated YAML to both loaders. CI replays a fixed set of
examples (the ``ci`` profile in tests/conftest.py); explore new ones with::

    HYPOTHESIS_PROFILE=explore ADT_FUZZ_EXAMPLES=10000 .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/unit/spec/test_hostile_files.py -k fuzz
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_dist_training.cli import main
from airflow_dist_training.dag_factory import load_pipeline
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.spec.loading import MAX_FILE_BYTES, load_spec
from tests.paths import REPO

SPECS = REPO / "examples" / "specs"
FUZZ_EXAMPLES = int(os.environ.get("ADT_FUZZ_EXAMPLES", "150"))
# per example: a hostile file must be refused quickly and without a big allocation
MAX_CPU_SECONDS = 5.0  # CPU time, not wall time: the machine is shared; the alias bomb took 78 s
MAX_PEAK_BYTES = 64 * 1024 * 1024

BOMB = "hyperparameters:\n  a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  {chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


def _write(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


def _spec_error(path: Path) -> str:
    with pytest.raises(SpecValidationError) as info:
        load_spec(path)
    return info.value.render()


def _pipeline_error(path: Path) -> str:
    with pytest.raises(SpecValidationError) as info:
        load_pipeline(path)
    return info.value.render()


LOADERS: dict[str, Callable[[Path], str]] = {"spec": _spec_error, "pipeline": _pipeline_error}


@pytest.mark.parametrize("loader", LOADERS)
def test_non_utf8_file_names_file_and_byte_offset(tmp_path, loader):
    path = _write(tmp_path, "latin1.yaml", "name: caf\u00e9\n".encode("latin-1"))
    message = LOADERS[loader](path)
    assert message == f"{path}: is not UTF-8 text: byte offset 9 (line 1) is 0xe9; save the file as UTF-8"


@pytest.mark.parametrize("loader", LOADERS)
def test_random_bytes_are_a_clear_error(tmp_path, loader):
    path = _write(tmp_path, "random.yaml", bytes(range(256)) * 4)
    message = LOADERS[loader](path)
    assert message.startswith(f"{path}: ") and "Traceback" not in message


@pytest.mark.parametrize("loader", LOADERS)
def test_duplicate_key_names_file_line_and_key(tmp_path, loader):
    path = _write(tmp_path, "dup.yaml", b"name: first\ncompute:\n  instance_type: ml.g5.xlarge\nname: second\n")
    message = LOADERS[loader](path)
    assert message == (
        f"{path}: line 4: duplicate key 'name' (first on line 1); YAML would silently keep only the last one"
    )


def test_duplicate_nested_key_in_a_spec_is_rejected(tmp_path):
    text = "name: x\ncompute:\n  instance_type: ml.p4d.24xlarge\n  instance_count: 1\n  instance_count: 2\n"
    message = _spec_error(_write(tmp_path, "dup2.yaml", text.encode()))
    assert message.endswith("line 5: duplicate key 'instance_count' (first on line 4); YAML would silently keep only the last one")


@pytest.mark.parametrize("loader", LOADERS)
def test_alias_bomb_is_refused_fast_with_bounded_memory(tmp_path, loader):
    path = _write(tmp_path, "bomb.yaml", ("name: bomb\n" + BOMB).encode())
    tracemalloc.start()
    started = time.process_time()
    try:
        message = LOADERS[loader](path)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.process_time() - started < 3.0
    assert peak < 16 * 1024 * 1024
    assert "expands to more than 100000 values (alias expansion or a huge document)" in message
    assert message.startswith(f"{path}: line ")


def test_many_aliases_are_refused(tmp_path):
    text = "name: x\nhyperparameters:\n  base: &b 1\n" + "".join(f"  k{i}: *b\n" for i in range(1200))
    message = _spec_error(_write(tmp_path, "aliases.yaml", text.encode()))
    assert "more than 1000 alias references (*name): refusing to expand them" in message


def test_recursive_alias_is_refused(tmp_path):
    message = _spec_error(_write(tmp_path, "rec.yaml", b"name: x\nhyperparameters: &h {a: *h}\n"))
    assert "an alias refers to a value that contains it (recursive YAML)" in message


@pytest.mark.parametrize("loader", LOADERS)
def test_oversized_file_is_refused_before_parsing(tmp_path, loader):
    path = _write(tmp_path, "huge.yaml", b"# " + b"x" * MAX_FILE_BYTES + b"\n")
    message = LOADERS[loader](path)
    assert message == f"{path}: is larger than 1024 KiB: not a {loader} file (refusing to read it)"


@pytest.mark.parametrize("loader", LOADERS)
def test_directory_as_path_is_a_clear_error(tmp_path, loader):
    message = LOADERS[loader](tmp_path)
    assert message == f"{tmp_path}: is a directory, not a {loader} file (give the path of a .yaml file)"


def test_directory_without_yaml_suffix_is_not_read_as_yaml_text(tmp_path):
    with pytest.raises(SpecValidationError) as info:
        load_spec(str(tmp_path))
    assert "is a directory" in info.value.render()
    assert "mapping" not in info.value.render()


def test_unconstructible_value_is_a_clear_error(tmp_path):
    message = _spec_error(_write(tmp_path, "int.yaml", b"name: x\nhyperparameters: {n: " + b"9" * 5000 + b"}\n"))
    assert message.startswith(f"{tmp_path / 'int.yaml'}: invalid YAML value: Exceeds the limit (4300 digits)")


def test_dates_stay_text(tmp_path):
    spec = (SPECS / "torch_distributed_p4d.yaml").read_text().replace("{team: ml-platform}", "{built: 2026-02-30}")
    assert load_spec(_write(tmp_path, "d.yaml", spec.encode())).tags["built"] == "2026-02-30"


def test_cli_validate_of_hostile_files_exits_2_without_traceback(tmp_path, capsys):
    for name, data in {
        "bytes.yaml": bytes(range(256)),
        "bomb.yaml": ("name: bomb\n" + BOMB).encode(),
        "dup.yaml": b"name: a\nname: b\n",
    }.items():
        assert main(["validate", str(_write(tmp_path, name, data))]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {tmp_path / name}: ") and "Traceback" not in err
    assert main(["validate", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- fuzzing

_FUZZ_DIR = Path(tempfile.mkdtemp(prefix="adt-fuzz-"))
_SEEDS = {
    "spec": [(SPECS / n).read_bytes() for n in ("torch_distributed_p4d.yaml", "smp_v1_p4d.yaml")],
    "pipeline": [
        b"dag_id: fuzz\nbackend: sagemaker\nschedule: '@daily'\nstart_date: '2026-01-01'\n"
        b"training: " + str(SPECS / "torch_distributed_p4d.yaml").encode() + b"\n"
        b"staging: {channel: train, source: 's3://b/x/', file_system_id: fs-0123456789abcdef0, "
        b"file_system_path: /data}\n"
        b"registry: {model_package_group: g}\n"
    ],
}
# fragments that exercise the YAML features hostile files use
_FRAGMENTS = [
    b"&a ", b"*a", b"<<: *a\n", b"!!python/object:os.system ", b"\xff", b"\x00", b"\t", b"- ", b": ", b"{", b"[",
    b"'", b'"', b"? ", b"---\n", b"...\n", b"%YAML 1.1\n", b"!!binary ", b"2026-02-30", b"1e400", b"9" * 5000,
    b"\xef\xbb\xbf", b"\n  ", b"name: dup\n", b"instance_count: true\n",
]  # fmt: skip


def _mutate(seed: bytes, draws: list[tuple[int, int, bytes]]) -> bytes:
    data = bytearray(seed)
    for position, delete, insert in draws:
        at = position % (len(data) + 1)
        data[at : at + delete] = insert
    return bytes(data)


mutations = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=10_000),
        st.integers(min_value=0, max_value=20),
        st.one_of(st.sampled_from(_FRAGMENTS), st.binary(max_size=12)),
    ),
    min_size=1,
    max_size=6,
)


class _NoNetwork:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("loading a file must not open a network connection")


def _check(kind: str, data: bytes) -> None:
    path = _FUZZ_DIR / f"{kind}.yaml"
    path.write_bytes(data)
    original = socket.socket
    socket.socket = _NoNetwork  # type: ignore[misc,assignment]
    tracemalloc.start()
    started = time.process_time()
    try:
        if kind == "spec":
            spec = load_spec(path)
            plan_training_job(spec, job_name="fuzz-1", region="us-east-1")
        else:
            from airflow_dist_training.pipeline_checks import check_pipeline_file

            check_pipeline_file(path)
    except SpecValidationError as exc:
        assert exc.problems and exc.source, "an error names the file"
        for problem in exc.problems:
            assert problem.message and "Traceback" not in problem.message
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        socket.socket = original  # type: ignore[misc]
    assert time.process_time() - started < MAX_CPU_SECONDS
    assert peak < MAX_PEAK_BYTES


_FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("kind", ["spec", "pipeline"])
@_FUZZ
@given(data=st.binary(max_size=2048))
def test_fuzz_raw_bytes_never_traceback(kind, data):
    _check(kind, data)


@pytest.mark.parametrize("kind", ["spec", "pipeline"])
@_FUZZ
@given(seed=st.integers(min_value=0, max_value=10), edits=mutations)
def test_fuzz_mutated_yaml_never_traceback(kind, seed, edits):
    seeds = _SEEDS[kind]
    _check(kind, _mutate(seeds[seed % len(seeds)], edits))


# Documents the safety walk builds itself, and documents it leaves to PyYAML's constructor (merge
# keys, explicit tags, a mapping as a key): either way, the value PyYAML's safe loader gives.
SAME_AS_PYYAML = [
    "a: 1\nb: 0x1F\nc: 1_000\nd: 1:30\ne: .inf\ng: yes\nh: ~\ni: 2026-01-01\nj: '3'\nk: [1, 2.5, -3e2, null, Off]\n",
    "1: a\n2.5: b\nnull: c\ntrue: d\n'': e\n",
    "base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n",
    "x: !!str 12\ny: !!int '7'\nz: !!float '1'\nb: !!binary aGVsbG8=\n",
    "s: !!set {a, b}\no: !!omap [{x: 1}]\n",
    "- - - a\n  - b\n- {}\n- []\n",
]


@pytest.mark.parametrize("text", SAME_AS_PYYAML)
def test_the_walk_builds_what_pyyaml_builds(text: str) -> None:
    import yaml

    from airflow_dist_training.spec.loading import _loader_class, parse_yaml

    expected = yaml.load(text, Loader=_loader_class())  # the safe loader, without timestamps
    assert _typed(parse_yaml(text, "t.yaml")) == _typed(expected)


def _typed(value: Any) -> Any:
    """The value with every item's type beside it (``1 == True == 1.0`` in a plain comparison)."""
    if isinstance(value, dict):
        return {_typed(k): _typed(v) for k, v in value.items()}
    if isinstance(value, (list, set)):
        return [type(value), *(_typed(v) for v in (sorted(value) if isinstance(value, set) else value))]
    if isinstance(value, tuple):
        return (tuple, *(_typed(v) for v in value))
    return (type(value).__name__, value)


def test_an_alias_gives_one_shared_value_as_in_pyyaml() -> None:
    from airflow_dist_training.spec.loading import parse_yaml

    data = parse_yaml("a: &x {p: [1]}\nb: *x\nc: [*x]\n", "t.yaml")
    assert data["a"] is data["b"] is data["c"][0]
    assert data == {"a": {"p": [1]}, "b": {"p": [1]}, "c": [{"p": [1]}]}
