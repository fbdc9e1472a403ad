"""Every shell command in ``docs/`` and the README is run or checked, and every Python block that can
run without AWS is run (``test_docs_examples.py`` parses the rest and checks their imports).

Shell commands come from ``bash`` blocks, ``console`` blocks (``$ `` lines, whose printed output
must be what the command prints) and inline code spans naming ``airflow-dist-training`` in prose.

- ``airflow-dist-training``: every command line is parsed by the CLI's own parser (an unknown
  option fails here). The cheap ones (``validate``, ``plan``, ``schema``) run for real when their
  files exist; the long ones (``run``, ``emulator``, ``job-env``) are only parsed.
- ``scripts/*.sh``: each is asked ``--help`` (printing its header, starting nothing), and the options
  the docs pass appear there; ``python examples/*.py``: the same with argparse's ``--help``.
- ``pip install``: the extras exist in pyproject.toml and a pinned Airflow is the supported floor.
- ``export``: JSON values parse; an Airflow connection names its ``conn_type``.
- ``curl .../_emulator/faults``: the body parses and names a fault the endpoint knows.
- ``pytest``: the paths exist and a ``-m`` marker is registered.
A command this test does not know fails it, so a new kind of command gets a check too.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import inspect
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from airflow_dist_training.cli import build_parser, main
from tests.paths import REPO

DOCS = sorted([*REPO.joinpath("docs").rglob("*.md"), REPO / "README.md"])
SHELL_FENCE = re.compile(r"^```(bash|console)\s*\n(.*?)^```", re.M | re.S)
ANY_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CLI = re.compile(r"`((?:\.venv/bin/)?airflow-dist-training [^`]+)`")
PYTHON_FENCE = re.compile(r"^```python\s*\n(.*?)^```", re.M | re.S)
CLI = {"airflow-dist-training", ".venv/bin/airflow-dist-training"}
CHEAP = {"validate", "plan", "schema", "validate-pipeline"}
# commands of other tools, shown for orientation: nothing of ours to check
FOREIGN = {"git", "cd", "source", "grep", "airflow", "mlflow", "python3.11", "/tmp/low/bin/pip"}
# Python blocks that run a training job or need an endpoint: parsed only (the integration tests run them)
LONG_PYTHON = ("run_job(", "Emulator(", "boto3.client(")
# a walkthrough that registers into a process-wide registry runs in its own test, which undoes it
RUN_ELSEWHERE = {REPO / "docs/contributing.md": "tests/unit/sagemaker/test_strategies.py"}


def _where(path: Path, text: str, offset: int) -> str:
    return f"{path.relative_to(REPO)}:{text[:offset].count(chr(10)) + 1}"


def _lines(body: str, console: bool) -> list[tuple[str, list[str]]]:
    """(command line, its documented output) for each command of a block; continuations joined."""
    found: list[tuple[str, list[str]]] = []
    pending = ""
    for raw in body.splitlines():
        if console and not raw.startswith("$ ") and not pending:
            if found:
                found[-1][1].append(raw)
            continue
        line = raw[2:] if console and raw.startswith("$ ") and not pending else raw
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if pending.count("'") % 2 or pending.count('"') % 2:  # a quoted value over two lines
            pending += " "
            continue
        if pending.strip():
            found.append((pending.strip(), []))
        pending = ""
    return found


def _commands() -> list[tuple[str, list[str], list[str] | None]]:
    """(where, argv, documented output) for every simple command in the docs; output None: a span
    in prose, which names a command and its options without its arguments."""
    commands = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in SHELL_FENCE.finditer(text):
            for line, output in _lines(m.group(2), console=m.group(1) == "console"):
                lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
                lexer.whitespace_split = True
                argv: list[str] = []
                for token in [*lexer, ";"]:
                    if token in ("&&", "|", ";", "||"):
                        if argv:
                            commands.append(
                                (_where(path, text, m.start()), argv, output if token == ";" else [])
                            )
                        argv = []
                    else:
                        argv.append(token)
        prose = ANY_FENCE.sub(lambda f: "\n" * f.group(0).count("\n"), text)
        for m in INLINE_CLI.finditer(prose):
            if not re.search(r"\.\.\.|<|\(| / ", m.group(1)):  # not a placeholder or a list of commands
                commands.append((_where(path, prose, m.start()), shlex.split(m.group(1)), None))
    return commands


COMMANDS = _commands()


def _ids() -> list[str]:
    return [f"{where}:{' '.join(argv)[:60]}" for where, argv, _ in COMMANDS]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _subcommand_options(name: str) -> set[str]:
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert name in commands.choices, f"airflow-dist-training has no command {name!r}"
    return set(commands.choices[name]._option_string_actions)


def _cli(argv: list[str], documented: list[str] | None) -> None:
    if documented is None:  # prose: the command and its options exist
        if argv[0].startswith("--"):
            assert argv[0] in build_parser()._option_string_actions, argv
            return
        options = {a.split("=")[0] for a in argv[1:] if a.startswith("--")}
        unknown = options - _subcommand_options(argv[0])
        assert not unknown, f"airflow-dist-training {argv[0]} has no option {sorted(unknown)}"
        return
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: "unrecognized arguments", "invalid choice", ...
        pytest.fail(f"the CLI refuses {argv}: exit {exc.code}")
    if args.command not in CHEAP:
        return
    files = [a for a in argv[1:] if a.endswith((".yaml", ".yml"))]
    if not all((REPO / f).is_file() for f in files):
        return  # a file the reader writes (two_p3_8xlarge.yaml): its options were parsed above
    out, err = io.StringIO(), io.StringIO()
    cwd = Path.cwd()
    os.chdir(REPO)  # the docs' paths are the repository's; these commands only read
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        os.chdir(cwd)
    assert code == 0, err.getvalue()
    # a console block shows what it prints, in order ("..." elides lines; job names end in a hash)
    strip = re.compile(r"-[0-9a-f]{10}\b")
    printed = iter(strip.sub("-<hash>", line) for line in out.getvalue().splitlines())
    for line in documented:
        if line.strip() in ("...", "…"):
            continue
        want = strip.sub("-<hash>", line)
        assert any(got == want for got in printed), (
            f"the docs show a line the command does not print: {line!r}"
        )


def _script(argv: list[str]) -> None:
    script = REPO / argv[0]
    assert script.is_file() and os.access(script, os.X_OK), f"{argv[0]} is not an executable script"
    # never start a script that would take --help for an ordinary argument (and set up, or test)
    assert re.search(r"^\s*-h\|--help\)", script.read_text(), re.M), f"{argv[0]} has no --help"
    done = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    for option in [a for a in argv[1:] if a.startswith("--")]:
        assert option in done.stdout, f"{argv[0]} --help does not mention {option}"


def _python(argv: list[str]) -> None:
    script = argv[1]
    assert (REPO / script).is_file(), script
    done = subprocess.run(
        [sys.executable, str(REPO / script), "--help"], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    for option in [a.split("=")[0] for a in argv[2:] if a.startswith("--")]:
        assert option in done.stdout, f"{script} has no option {option}"


def _pip(argv: list[str]) -> None:
    if argv[1] in ("wheel",) or "--dry-run" in argv:
        return
    assert argv[1] == "install", argv
    project = _pyproject()["project"]
    floor = re.search(r"^apache-airflow==(\S+)$", (REPO / "constraints-airflow-3.1.txt").read_text(), re.M)
    assert floor is not None
    for requirement in argv[2:]:
        m = re.fullmatch(r"(?:.*/)?(airflow[-_]dist[-_]training)[^\[]*(?:\[(.+)\])?", requirement)
        if m and m.group(2):
            assert set(m.group(2).split(",")) <= set(project["optional-dependencies"]), requirement
        pinned = re.fullmatch(r"apache-airflow==(\S+)", requirement)
        if pinned and pinned.group(1).startswith("3.1"):
            assert pinned.group(1) == floor.group(1), (
                f"the docs pin {requirement}; the floor is {floor.group(1)}"
            )


def _export(argv: list[str]) -> None:
    for assignment in argv[1:]:
        name, _, value = assignment.partition("=")
        if value.startswith("{"):
            parsed = json.loads(value)
            if name.startswith("AIRFLOW_CONN_"):
                assert parsed["conn_type"] == "aws", name


def _curl(argv: list[str]) -> None:
    from airflow_dist_training.emulator.server import Emulator

    body = json.loads(argv[argv.index("-d") + 1])
    assert argv[-1].endswith("/_emulator/faults") or any(a.endswith("/_emulator/faults") for a in argv)
    assert f'"{body["fault"]}"' in inspect.getsource(Emulator.inject), f"unknown fault {body['fault']}"


def _pytest(argv: list[str]) -> None:
    markers = {m.split(":")[0] for m in _pyproject()["tool"]["pytest"]["ini_options"]["markers"]}
    for i, arg in enumerate(argv[1:], 1):
        if arg == "-m":
            assert argv[i + 1] in markers, f"marker {argv[i + 1]} is not registered"
        elif arg.startswith("tests/"):
            assert (REPO / arg.split("::")[0]).exists(), arg


@pytest.mark.parametrize(("where", "argv", "documented"), COMMANDS, ids=_ids())
def test_docs_shell_command_runs_or_its_options_exist(
    where: str, argv: list[str], documented: list[str] | None
) -> None:
    program = argv[0]
    if program in CLI:
        _cli(argv[1:], documented)
    elif program.startswith("scripts/") and documented is not None:
        _script(argv)
    elif program == "python" and argv[1].startswith("examples/"):
        _python(argv)
    elif program in ("pip", "pip3"):
        _pip(argv)
    elif program == "export":
        _export(argv)
    elif program == "curl":
        _curl(argv)
    elif program.endswith("pytest"):
        _pytest(argv)
    else:
        assert program in FOREIGN or documented is None, (
            f"{where}: no check for {program!r}; teach tests/docs/test_docs_commands.py"
        )


def test_the_commands_found_include_the_known_ones() -> None:
    found = {" ".join(argv) for _, argv, _ in COMMANDS}
    assert "scripts/demo.sh --emulator" in found
    assert "airflow-dist-training plan examples/specs/smp_v2_p4d.yaml" in found
    assert "airflow-dist-training job-env --show" in found
    assert any(argv[0] == "export" for _, argv, _ in COMMANDS)


def _free_names(tree: ast.AST) -> set[str]:
    bound = set(dir(builtins)) | {"__file__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


def _runnable_python() -> list[object]:
    """Whole programs (no name left for the reader to fill in, no ``...`` placeholder) that need no AWS."""
    params = []
    for path in DOCS:
        if path in RUN_ELSEWHERE:
            continue
        text = path.read_text(encoding="utf-8")
        for m in PYTHON_FENCE.finditer(text):
            code = m.group(1)
            tree = ast.parse(code)
            placeholder = any(isinstance(n, ast.Constant) and n.value is Ellipsis for n in ast.walk(tree))
            if _free_names(tree) or placeholder or any(k in code for k in LONG_PYTHON):
                continue
            params.append(pytest.param(code, id=_where(path, text, m.start())))
    return params


RUNNABLE = _runnable_python()


@pytest.mark.parametrize("code", RUNNABLE)
def test_docs_python_block_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a sandbox: the repository's examples/ and dags/ to read, every write in tmp_path, no AWS
    for name in ("examples", "dags"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SM_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens: no real AWS call
    # a DAG file next to its YAML (docs/howto/yaml-pipelines.md) is the shipped pipeline's
    dag_file = tmp_path / "dags" / "pipelines" / "demo_mlp_local.py"
    exec(compile(code, "<docs>", "exec"), {"__name__": "docs_example", "__file__": str(dag_file)})


def test_the_runnable_python_blocks_include_the_known_ones() -> None:
    assert len(RUNNABLE) >= 12


def test_the_supported_versions_the_docs_state_are_pyprojects() -> None:
    dependencies = _pyproject()["project"]["dependencies"]
    [airflow] = [d for d in dependencies if d.startswith("apache-airflow>=")]
    [amazon] = [d for d in dependencies if d.startswith("apache-airflow-providers-amazon")]
    low, high = re.fullmatch(r"apache-airflow>=3\.(\d+),<3\.(\d+)", airflow).groups()  # type: ignore[union-attr]
    minors = [f"3.{m}" for m in range(int(low), int(high))]
    supported = re.compile(", ".join(minors[:-1]) + rf",? (?:and|or) {minors[-1]}")
    floor = re.search(r">=(\S+)", amazon).group(1)  # type: ignore[union-attr]
    for page in (REPO / "README.md", REPO / "docs" / "index.md"):
        text = page.read_text()
        assert supported.search(text), f"{page.name} does not say Airflow {', '.join(minors)}"
        # "an Airflow 3.3 provider", "Apache Airflow 3.3," as the requirement: only one of the versions
        assert not re.search(rf"Apache Airflow {minors[-1]}(?: provider|,)", text), page.name
    assert (
        f"`apache-airflow-providers-amazon[aiobotocore]` {floor} or later"
        in (REPO / "docs" / "index.md").read_text()
    )
