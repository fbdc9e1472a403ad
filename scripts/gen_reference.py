#!/usr/bin/env python3
"""Write docs/reference/*.md from the docstrings of every operator, sensor, hook, trigger and link.

No mkdocstrings (not installed, and the site must build offline): this imports the modules under
``airflow_dist_training.{operators,sensors,hooks,triggers,links}`` (importing them makes no AWS call:
constructors and hooks are lazy), finds the public classes each module defines (including classes a
module builds lazily behind ``__getattr__``, found by reading its source), and renders the class
docstring, the constructor signature and a parameter table from the Sphinx ``:param name:`` lines
(inherited from the class's bases when the class itself does not document a parameter).

Run by hand to update the committed pages: ``.venv/bin/python scripts/gen_reference.py`` (files are
only rewritten when their content changes); ``--check`` exits 1 naming the stale pages instead
(tests/docs/test_reference_docs.py runs it). The docs build renders the pages from the docstrings too:
``mkdocs.yml`` lists this file under ``hooks:``, and ``on_files`` serves the generated text in
place of the committed files, in memory, so a build never writes into the repository.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = REPO_ROOT / "docs" / "reference"
PACKAGE = "airflow_dist_training"
KINDS = {
    "operators": ("Operators", "Airflow operators: the tasks you put in a DAG."),
    "sensors": ("Sensors", "Sensors: tasks that wait for a condition, in poke or deferrable mode."),
    "hooks": (
        "Hooks",
        "Hooks and clients: the I/O layer (SageMaker, FSx, S3 checkpoints, registry, local torchrun).",
    ),
    "triggers": ("Triggers", "Triggers: the async waits that run in the triggerer for deferrable tasks."),
    "links": ("Extra links", "Operator extra links shown on the task in the Airflow UI."),
}
PARAM_RE = re.compile(r"^:param\s+(?:[\w\[\], .|]+\s+)?(\w+):\s*(.*)$")


@dataclass
class ClassDoc:
    name: str
    module: str
    kind: str
    summary: str
    body: str
    signature: str
    params: list[tuple[str, str, str]] = field(default_factory=list)  # name, default, description
    template_fields: list[str] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return self.name.lower()


def _md_inline(text: str) -> str:
    """Sphinx inline markup -> Markdown: ``x`` -> `x`, :class:`x` -> `x`; escape < > outside code."""
    text = re.sub(r":(?:class|func|meth|attr|mod|obj|ref|data|exc):`~?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def split_docstring(doc: str) -> tuple[str, str, dict[str, str]]:
    """(summary, body without :param: lines, {param: description})."""
    lines = inspect.cleandoc(doc or "").splitlines()
    params: dict[str, str] = {}
    body: list[str] = []
    current: str | None = None
    for line in lines:
        match = PARAM_RE.match(line.strip()) if not line.startswith(" ") or current is None else None
        if match:
            current = match.group(1)
            params[current] = match.group(2).strip()
            continue
        if current is not None and line.startswith(" ") and line.strip():
            params[current] += " " + line.strip()
            continue
        if current is not None and re.match(r"^:(returns?|raises?|rtype)\b", line.strip()):
            current = None
            continue
        current = None
        body.append(line)
    text = "\n".join(body).strip()
    summary, _, rest = text.partition("\n\n")
    return " ".join(summary.split()), rest.strip(), params


def _kind(cls: type, package_kind: str) -> str:
    names = {base.__name__ for base in cls.__mro__}
    if "BaseSensorOperator" in names:
        return "sensors"
    if "BaseOperatorLink" in names:
        return "links"
    if "BaseTrigger" in names:
        return "triggers"
    if "BaseOperator" in names:
        return "operators"
    return package_kind


def _defined_class_names(module: Any) -> list[str]:
    """Public class names defined anywhere in the module's source (top level or in a builder function)."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return []
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and node.name not in names:
            names.append(node.name)
    return names


def _is_public_api(cls: type, kind: str) -> bool:
    if kind == "operators":
        return _kind(cls, "") == kind  # an Airflow operator, not a record beside one (e.g. a planned launch)
    if kind in ("sensors", "triggers", "links"):
        return _kind(cls, kind) == kind
    # hooks package: hooks and the clients/registries they expose; not exceptions, protocols or records
    import dataclasses

    if issubclass(cls, BaseException) or dataclasses.is_dataclass(cls) or not cls.__doc__:
        return False
    return not getattr(cls, "_is_protocol", False)


def _params(cls: type) -> tuple[str, list[tuple[str, str, str]]]:
    documented: dict[str, str] = {}
    for klass in reversed(cls.__mro__):  # subclasses override their bases' descriptions
        if klass.__module__.startswith(PACKAGE):
            documented.update(split_docstring(klass.__doc__ or "")[2])
            init_doc = klass.__dict__.get("__init__")
            if init_doc is not None and init_doc.__doc__:
                documented.update(split_docstring(init_doc.__doc__)[2])
    try:
        sig = inspect.signature(cls.__dict__.get("__init__") or cls)
    except (TypeError, ValueError):
        return "", []
    parameters = dict(sig.parameters)
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        # keyword arguments a base class of this package takes through **kwargs
        for klass in cls.__mro__[1:]:
            if not klass.__module__.startswith(PACKAGE) or "__init__" not in klass.__dict__:
                continue
            for name, p in inspect.signature(klass.__dict__["__init__"]).parameters.items():
                if name not in parameters and p.kind is p.KEYWORD_ONLY:
                    parameters[name] = p
    ordered = [p for p in parameters.values() if p.kind is not p.VAR_KEYWORD]
    ordered += [p for p in parameters.values() if p.kind is p.VAR_KEYWORD]
    rows = []
    shown = []
    for p in ordered:
        name = p.name
        if name == "self" or p.kind in (p.VAR_POSITIONAL,):
            continue
        if p.kind is p.VAR_KEYWORD:
            shown.append(f"**{name}")
            continue
        default = "required" if p.default is p.empty else repr(p.default)
        if len(default) > 60:
            default = default[:57] + "..."
        shown.append(name if p.default is p.empty else f"{name}={default}")
        rows.append((name, default, documented.get(name, "")))
    return f"{cls.__name__}({', '.join(shown)})", rows


def collect() -> dict[str, list[ClassDoc]]:
    sys.path.insert(0, str(REPO_ROOT))
    found: dict[str, list[ClassDoc]] = {kind: [] for kind in KINDS}
    seen: set[str] = set()
    for package_kind in KINDS:
        package = importlib.import_module(f"{PACKAGE}.{package_kind}")
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name in _defined_class_names(module):
                try:
                    cls = getattr(module, name)
                except AttributeError:
                    continue
                if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                    continue
                qualified = f"{module.__name__}.{name}"
                if qualified in seen or not _is_public_api(cls, package_kind):
                    continue
                seen.add(qualified)
                kind = _kind(cls, package_kind)
                summary, body, _ = split_docstring(cls.__doc__ or "")
                signature, params = _params(cls)
                fields = (
                    list(getattr(cls, "template_fields", ()) or ())
                    if kind in ("operators", "sensors")
                    else []
                )
                found.setdefault(kind, []).append(
                    ClassDoc(name, module.__name__, kind, summary, body, signature, params, fields)
                )
    return found


def render_kind(kind: str, classes: list[ClassDoc]) -> str:
    title, intro = KINDS[kind]
    out = [
        f"# {title}",
        "",
        "<!-- Generated by scripts/gen_reference.py from the docstrings; do not edit by hand. -->",
        "",
        intro,
        "",
    ]
    if not classes:
        out += ["_None yet._", ""]
    for c in classes:
        out += [f"## {c.name}", "", f"`from {c.module} import {c.name}`", ""]
        if c.summary:
            out += [_md_inline(c.summary), ""]
        if c.signature:
            out += ["```python", c.signature, "```", ""]
        if c.params:
            out += ["| parameter | default | description |", "|---|---|---|"]
            for name, default, desc in c.params:
                default_cell = default if default == "required" else f"`{default}`"
                desc_cell = _md_inline(desc).replace("|", "\\|") if desc else ""
                out.append(f"| `{name}` | {default_cell.replace('|', chr(92) + '|')} | {desc_cell} |")
            out.append("")
        if c.template_fields:
            out += ["Templated fields: " + ", ".join(f"`{f}`" for f in c.template_fields), ""]
        if c.body:
            out += [_md_inline(c.body), ""]
    return "\n".join(out).rstrip() + "\n"


def render_index(found: dict[str, list[ClassDoc]]) -> str:
    out = [
        "# API reference",
        "",
        "<!-- Generated by scripts/gen_reference.py from the docstrings; do not edit by hand. -->",
        "",
        "Every operator, sensor, hook, trigger and extra link of `airflow-dist-training`, generated from "
        "the code's docstrings at docs build time. The pure layers (spec, planner) are described in "
        "[Concepts](../concepts.md); `airflow-dist-training schema` prints the spec's JSON Schema.",
        "",
        "| class | kind | module | summary |",
        "|---|---|---|---|",
    ]
    for kind, classes in found.items():
        for c in classes:
            summary = _md_inline(c.summary).replace("|", "\\|")
            out.append(
                f"| [`{c.name}`]({kind}.md#{c.anchor}) | {KINDS[kind][0]} | `{c.module}` | {summary} |"
            )
    return "\n".join(out) + "\n"


def render_all() -> dict[str, str]:
    """Each reference page's name (``operators.md``, ..., ``index.md``) and its text."""
    found = collect()
    pages = {f"{kind}.md": render_kind(kind, found.get(kind, [])) for kind in KINDS}
    pages["index.md"] = render_index(found)
    return pages


def write_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True


def generate(out_dir: Path = OUT_DIR) -> list[Path]:
    """Write the pages under ``out_dir``; the paths actually rewritten."""
    return [out_dir / name for name, text in render_all().items() if write_if_changed(out_dir / name, text)]


def stale(out_dir: Path = OUT_DIR) -> list[Path]:
    """The pages under ``out_dir`` that differ from what the docstrings give (or are missing)."""
    return [
        out_dir / name
        for name, text in render_all().items()
        if not (out_dir / name).exists() or (out_dir / name).read_text() != text
    ]


def on_files(files: Any, config: Any, **kwargs: Any) -> Any:
    """mkdocs hook: the reference pages as the docstrings give them, served from memory."""
    from mkdocs.structure.files import File

    for name, text in render_all().items():
        uri = f"reference/{name}"
        committed = files.get_file_from_path(uri)
        if committed is not None:
            files.remove(committed)
        files.append(File.generated(config, uri, content=text))
    return files


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Write docs/reference/*.md from the docstrings.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is stale")
    args = parser.parse_args(argv)
    if args.check:
        outdated = stale()
        for path in outdated:
            print(f"stale: {path.relative_to(REPO_ROOT)} (run scripts/gen_reference.py)")
        return 1 if outdated else 0
    for path in generate():
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
