"""Write and find complete checkpoints from inside a training script (stdlib only).

It runs *inside the training container*: no Airflow, boto3 or torch, and self-contained, so it can
be shipped with a job or copied into an image as one file (usage: docs/checkpoints.md).

One directory per checkpoint under the job's checkpoint root, its ``_MANIFEST.json`` written last
by an atomic rename. A checkpoint is *complete* when its manifest exists and every file it lists
has the listed size: SageMaker uploads the directory file by file in no guaranteed order, and the
size check keeps a half-uploaded checkpoint from ever looking complete. By default only rank 0
writes (other ranks get a throw-away directory, so the same code runs on every rank); with
``sharded=True`` every rank writes its own files and rank 0 writes the manifest last, listing every
rank's files with their sizes, once all ranks are done.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import pathlib
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "LATEST_HINT_NAME",
    "MANIFEST_NAME",
    "CheckpointWriter",
    "ManifestError",
    "checkpoint_dir_name",
    "latest_complete_checkpoint",
    "list_checkpoints",
    "parse_step",
    "read_manifest",
    "validate_manifest",
    "verify_checkpoint",
]

FORMAT = "airflow-dist-training/checkpoint"
FORMAT_VERSION = 1
MANIFEST_NAME = "_MANIFEST.json"
# at the root: {"step": N, "path": "step-.../"}; a hint, never trusted alone
LATEST_HINT_NAME = "_LATEST.json"
_TMP_MANIFEST_PREFIX = "._MANIFEST.json.tmp"
_RANK_RECORD_PREFIX = "._rank-"  # sharded: one rank's files, until rank 0 wrote the manifest
_STEP_RE = re.compile(r"^step-(\d{1,20})$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class ManifestError(ValueError):
    """A manifest is missing fields or has fields of the wrong type.

    ``problems`` is a list of ``(field, message)``; the text names the manifest path and each field.
    """

    def __init__(self, manifest_path: str, problems: list[tuple[str, str]]):
        self.manifest_path = manifest_path
        self.problems = problems
        lines = [f"{manifest_path}: field {field!r}: {message}" for field, message in problems]
        super().__init__("malformed checkpoint manifest\n" + "\n".join(lines))


def checkpoint_dir_name(step: int) -> str:
    """``step-<step:012d>``: zero padded, so lexical order (S3 listing order) is step order."""
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"step must be a non-negative integer, got {step!r}")
    return f"step-{step:012d}"


def parse_step(name: str) -> int | None:
    """The step of a checkpoint directory name (``step-000000000120`` -> 120), else None."""
    match = _STEP_RE.match(name.rstrip("/").rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) and math.isfinite(value)


def validate_manifest(data: Any) -> list[tuple[str, str]]:
    """Return ``(field, message)`` problems of a decoded manifest; ``[]`` when it is well formed."""
    if not isinstance(data, dict):
        return [("", f"must be a JSON object, got {type(data).__name__}")]
    return [*_header_problems(data), *_metrics_problems(data), *_files_problems(data)]


def _header_problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    """format_version, step, epoch, world_size, created_at."""
    problems: list[tuple[str, str]] = []
    version: Any = data.get("format_version")
    if "format_version" not in data:
        problems.append(("format_version", "missing"))
    elif not _is_int(version) or version < 1:
        problems.append(("format_version", f"must be a positive integer, got {version!r}"))
    elif version > FORMAT_VERSION:
        problems.append(
            ("format_version", f"version {version} is newer than this reader supports ({FORMAT_VERSION})")
        )
    if "step" not in data:
        problems.append(("step", "missing"))
    elif not _is_int(data["step"]) or data["step"] < 0:
        problems.append(("step", f"must be a non-negative integer, got {data['step']!r}"))
    if data.get("epoch") is not None and (not _is_int(data["epoch"]) or data["epoch"] < 0):
        problems.append(("epoch", f"must be a non-negative integer or null, got {data['epoch']!r}"))
    if data.get("world_size") is not None and (not _is_int(data["world_size"]) or data["world_size"] < 1):
        problems.append(("world_size", f"must be a positive integer or null, got {data['world_size']!r}"))
    if "created_at" in data and not isinstance(data["created_at"], str):
        problems.append(("created_at", f"must be an ISO 8601 string, got {data['created_at']!r}"))
    return problems


def _metrics_problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    metrics = data.get("metrics", {})
    if not isinstance(metrics, dict):
        return [("metrics", f"must be an object of name -> number, got {type(metrics).__name__}")]
    return [
        (f"metrics.{name}", f"must be a finite number, got {value!r}")
        for name, value in metrics.items()
        if value is not None and not _is_number(value)
    ]


def _files_problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    if "files" not in data:
        return [("files", "missing")]
    files = data["files"]
    if not isinstance(files, list):
        return [("files", f"must be a list, got {type(files).__name__}")]
    return [problem for i, entry in enumerate(files) for problem in _file_entry_problems(f"files[{i}]", entry)]


def _file_entry_problems(where: str, entry: Any) -> list[tuple[str, str]]:
    if not isinstance(entry, dict):
        return [(where, "must be an object with path, size, sha256")]
    problems: list[tuple[str, str]] = []
    path = entry.get("path")
    if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
        problems.append((f"{where}.path", f"must be a relative path inside the checkpoint, got {path!r}"))
    if not _is_int(entry.get("size")) or entry["size"] < 0:
        problems.append((f"{where}.size", f"must be a non-negative integer, got {entry.get('size')!r}"))
    sha = entry.get("sha256")
    if sha is not None and (not isinstance(sha, str) or not _SHA256_RE.match(sha)):
        problems.append((f"{where}.sha256", f"must be 64 lowercase hex characters, got {sha!r}"))
    return problems


def parse_manifest(raw: bytes | str, manifest_path: str) -> dict[str, Any]:
    """Decode and validate manifest bytes; raise :class:`ManifestError` naming ``manifest_path``."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(manifest_path, [("", f"not valid JSON ({exc})")]) from None
    problems = validate_manifest(data)
    if problems:
        raise ManifestError(manifest_path, problems)
    return data


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a manifest; ``path`` is the checkpoint directory or the manifest file."""
    p = pathlib.Path(path)
    manifest = p if p.name == MANIFEST_NAME else p / MANIFEST_NAME
    return parse_manifest(manifest.read_bytes(), str(manifest))


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _atomic_write(target: pathlib.Path, body: bytes) -> None:
    tmp = target.parent / f"{_TMP_MANIFEST_PREFIX}-{target.name}-{os.getpid()}"
    with tmp.open("wb") as fh:
        fh.write(body)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)
    with contextlib.suppress(OSError):  # make the rename durable where the OS allows it
        fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def verify_checkpoint(path: str | os.PathLike[str], *, checksums: bool = False) -> list[str]:
    """Problems that make a local checkpoint incomplete; ``[]`` means complete.

    Checks that the manifest exists and parses and every listed file exists with its size;
    with ``checksums=True`` also recomputes each sha256 (reads every byte).
    """
    directory = pathlib.Path(path)
    manifest_path = directory / MANIFEST_NAME
    if not manifest_path.is_file():
        return [f"{manifest_path}: missing (checkpoint not finished)"]
    manifest = read_manifest(directory)
    problems = []
    for entry in manifest["files"]:
        file_path = directory / entry["path"]
        if not file_path.is_file():
            problems.append(f"{file_path}: missing")
            continue
        size = file_path.stat().st_size
        if size != entry["size"]:
            problems.append(f"{file_path}: size {size}, manifest says {entry['size']}")
        elif checksums and entry.get("sha256") and _sha256(file_path) != entry["sha256"]:
            problems.append(f"{file_path}: sha256 differs from the manifest")
    return problems


def list_checkpoints(root: str | os.PathLike[str]) -> list[tuple[int, pathlib.Path]]:
    """All ``step-*`` directories under ``root`` (complete or not), newest step first."""
    base = pathlib.Path(root)
    if not base.is_dir():
        return []
    found = [(step, child) for child in base.iterdir() if (step := parse_step(child.name)) is not None]
    return sorted(((s, c) for s, c in found if c.is_dir()), key=lambda item: item[0], reverse=True)


def latest_complete_checkpoint(
    root: str | os.PathLike[str], *, checksums: bool = False, strict: bool = True
) -> pathlib.Path | None:
    """The newest complete checkpoint directory under ``root``, or None when there is none.

    Incomplete checkpoints (no manifest, a missing file, a wrong size) are skipped. A malformed
    manifest raises :class:`ManifestError` (naming the manifest and the field) unless
    ``strict=False``, in which case that checkpoint is skipped too.
    """
    for _step, directory in list_checkpoints(root):
        try:
            if not verify_checkpoint(directory, checksums=checksums):
                return directory
        except ManifestError:
            if strict:
                raise
    return None


def _rank_from_env() -> int:
    for var in ("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        value = os.environ.get(var)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return 0


def _save_token(step: int) -> str:
    """What every rank of one save agrees on without talking: torchrun's run id and restart count."""
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    return f"{run}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{step}"


def _utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class CheckpointWriter:
    """Writes checkpoints under ``root`` as ``step-<step:012d>/`` plus a manifest written last.

    :param root: local checkpoint directory (e.g. ``$SM_CHECKPOINT_DIR`` or ``/opt/ml/checkpoints``).
    :param rank: this process's global rank; defaults to ``$RANK`` (torchrun), then 0. Only rank 0
        writes; other ranks get a temporary directory that is removed on exit.
    :param overwrite: replace an existing *complete* checkpoint of the same step (default: error).
    :param checksums: compute a sha256 per file for the manifest (default True).
    :param fsync: flush every file to disk before the manifest is written (default True), so that
        after a machine crash a manifest never describes data that did not reach the disk. Costs a
        few milliseconds per file; turn off for checkpoints of thousands of small files.
    :param sharded: every rank writes its own files, into ``step-…/rank-<rank:05d>/``; no gather on
        rank 0. Each rank records its files (``._rank-<rank>.json``) when its block exits; rank 0
        waits for all ``world_size`` ranks, then writes the manifest listing every rank's files.
    :param world_size: ranks taking part (sharded); defaults to ``$WORLD_SIZE``, then 1.
    :param gather: sharded, when ranks do not share the checkpoint directory (one local disk per
        node): a collective ``gather(entries) -> [entries of rank 0, 1, …]`` on every rank, e.g.
        built on ``torch.distributed.all_gather_object``. Default: the rank records in the shared directory.
    :param wait_seconds: sharded: how long rank 0 waits for the other ranks' records.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        rank: int | None = None,
        overwrite: bool = False,
        checksums: bool = True,
        fsync: bool = True,
        sharded: bool = False,
        world_size: int | None = None,
        gather: Callable[[list[dict[str, Any]]], list[list[dict[str, Any]]]] | None = None,
        wait_seconds: float = 1800.0,
    ) -> None:
        self.root = pathlib.Path(root)
        self.fsync = fsync
        self.rank = _rank_from_env() if rank is None else rank
        self.overwrite = overwrite
        self.checksums = checksums
        self.sharded = sharded
        self.world_size = world_size or int(os.environ.get("WORLD_SIZE", "1") or 1)
        self.gather = gather
        self.wait_seconds = wait_seconds

    @property
    def is_writer(self) -> bool:
        return self.rank == 0

    @contextlib.contextmanager
    def checkpoint(
        self,
        step: int,
        *,
        epoch: int | None = None,
        metrics: Mapping[str, float] | None = None,
        world_size: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Iterator[pathlib.Path]:
        """Yield the directory to write the checkpoint's files into; finish it on a clean exit.

        If the block raises, no manifest is written: the directory stays incomplete and is never
        chosen for resume.
        """
        name = checkpoint_dir_name(step)
        metrics_dict = dict(metrics or {})
        for key, value in metrics_dict.items():
            if not _is_number(value):
                raise ValueError(f"metrics[{key!r}] must be a finite number, got {value!r}")
        if self.sharded:
            with self._sharded(step, epoch, metrics_dict, dict(metadata or {})) as directory:
                yield directory
            return
        if not self.is_writer:
            with tempfile.TemporaryDirectory(prefix=f"ckpt-rank{self.rank}-") as scratch:
                yield pathlib.Path(scratch)
            return
        directory = self.root / name
        if (directory / MANIFEST_NAME).exists():
            if not self.overwrite:
                raise FileExistsError(f"{directory}: a complete checkpoint for step {step} already exists")
            (directory / MANIFEST_NAME).unlink()  # incomplete from here on
        if directory.exists():
            shutil.rmtree(directory)  # left over from an attempt that died mid-write
        directory.mkdir(parents=True)
        yield directory
        files = self._file_entries(directory, directory)
        self._write_manifest(directory, step, epoch, metrics_dict, world_size, dict(metadata or {}), files)

    def _file_entries(self, directory: pathlib.Path, base: pathlib.Path) -> list[dict[str, Any]]:
        """Every file under ``directory`` (fsynced), with its path relative to ``base`` and its size."""
        files = []
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            if path.name == MANIFEST_NAME or path.name.startswith((_TMP_MANIFEST_PREFIX, _RANK_RECORD_PREFIX)):
                continue
            if self.fsync:
                with path.open("rb") as fh:
                    os.fsync(fh.fileno())
            entry: dict[str, Any] = {"path": path.relative_to(base).as_posix(), "size": path.stat().st_size}
            if self.checksums:
                entry["sha256"] = _sha256(path)
            files.append(entry)
        return files

    @contextlib.contextmanager
    def _sharded(
        self, step: int, epoch: int | None, metrics: dict[str, float], metadata: dict[str, Any]
    ) -> Iterator[pathlib.Path]:
        """Every rank writes ``step-…/rank-<r>/``; rank 0 writes the manifest once all ranks are done."""
        directory = self.root / checkpoint_dir_name(step)
        if self.is_writer and (directory / MANIFEST_NAME).exists():
            if not self.overwrite:
                raise FileExistsError(f"{directory}: a complete checkpoint for step {step} already exists")
            (directory / MANIFEST_NAME).unlink()  # incomplete from here on
        own = directory / f"rank-{self.rank:05d}"
        record = directory / f"{_RANK_RECORD_PREFIX}{self.rank:05d}.json"
        record.unlink(missing_ok=True)
        if own.exists():
            shutil.rmtree(own)  # this rank's leftover from an attempt that died mid-write
        own.mkdir(parents=True)
        yield own
        entries = self._file_entries(own, directory)
        token = _save_token(step)
        if self.gather is not None:
            per_rank = self.gather(entries)
        else:
            _atomic_write(record, json.dumps({"token": token, "files": entries}).encode())
            per_rank = self._wait_for_ranks(directory, token) if self.is_writer else []
        if self.is_writer:
            files = [entry for rank_files in per_rank for entry in rank_files]
            self._write_manifest(directory, step, epoch, metrics, self.world_size, metadata, files)
            for rank in range(self.world_size):
                (directory / f"{_RANK_RECORD_PREFIX}{rank:05d}.json").unlink(missing_ok=True)

    def _wait_for_ranks(self, directory: pathlib.Path, token: str) -> list[list[dict[str, Any]]]:
        """Every rank's file list, from the records in the shared directory (this save's only)."""
        deadline = time.monotonic() + self.wait_seconds
        found: dict[int, list[dict[str, Any]]] = {}
        while True:
            for rank in range(self.world_size):
                if rank not in found:
                    with contextlib.suppress(OSError, ValueError):
                        data = json.loads((directory / f"{_RANK_RECORD_PREFIX}{rank:05d}.json").read_bytes())
                        if data.get("token") == token:
                            found[rank] = data["files"]
            if len(found) == self.world_size:
                return [found[rank] for rank in range(self.world_size)]
            if time.monotonic() > deadline:
                missing = sorted(set(range(self.world_size)) - set(found))
                raise TimeoutError(
                    f"{directory}: ranks {missing} did not finish their part within {self.wait_seconds:.0f}s; "
                    "no manifest written (the checkpoint stays incomplete)"
                )
            time.sleep(0.05)

    def _current_hint_step(self) -> int | None:
        try:
            value = json.loads((self.root / LATEST_HINT_NAME).read_bytes()).get("step")
        except (OSError, ValueError, AttributeError):
            return None
        return value if _is_int(value) else None

    def _write_manifest(
        self,
        directory: pathlib.Path,
        step: int,
        epoch: int | None,
        metrics: dict[str, float],
        world_size: int | None,
        metadata: dict[str, Any],
        files: list[dict[str, Any]],
    ) -> None:
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "step": step,
            "epoch": epoch,
            "metrics": metrics,
            "world_size": world_size,
            "created_at": _utc_now(),
            "files": files,
            "metadata": metadata,
        }
        body = json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False).encode()
        _atomic_write(directory / MANIFEST_NAME, body)
        # A hint for readers on S3 (one GET instead of listing every step); written after the manifest.
        hint = {"step": step, "path": f"{directory.name}/", "updated_at": manifest["created_at"]}
        current = self._current_hint_step()
        if current is None or step >= current:
            _atomic_write(self.root / LATEST_HINT_NAME, json.dumps(hint, sort_keys=True).encode())


# --------------------------------------------------------------------------- saving on a stop signal
# SageMaker stops a job (StopTrainingJob, a spot interruption, MaxRuntimeInSeconds) with SIGTERM to the
# container's PID 1 and SIGKILL 120 s later. Whether the script gets that SIGTERM depends on the mode
# (docs/checkpoints.md, "Saving when SageMaker stops your job"). Layout-agnostic: the loop saves with
# whatever it saves with (CheckpointWriter, torch.distributed.checkpoint, a Trainer's save_model).
import signal as _signal  # noqa: E402
import time as _time  # noqa: E402
from collections.abc import Callable as _Callable  # noqa: E402

SAGEMAKER_STOP_GRACE_SECONDS = 120.0


class StopSignal:
    """A flag SageMaker's stop signal sets; the training loop checks it between steps, saves and exits.

    ``stop = StopSignal.install()`` then, in the loop, ``if stop.requested: save(step); break``.
    A flag, not a save in the handler: the handler interrupts the loop anywhere, even mid-step.
    With collective saves (DDP, FSDP, DCP) the ranks must agree on the step: reduce the flag across
    ranks each step (``all_reduce`` of ``int(stop.requested)`` with MAX) before deciding.
    ``callback(signum)`` runs in the handler (keep it short); a previous Python handler still runs.
    """

    def __init__(self, callback: _Callable[[int], None] | None = None) -> None:
        self.requested = False
        self.signum: int | None = None
        self.received_at: float | None = None
        self.callback = callback
        self._previous: dict[int, Any] = {}

    @classmethod
    def install(
        cls, signals: tuple[int, ...] = (_signal.SIGTERM,), callback: _Callable[[int], None] | None = None
    ) -> StopSignal:
        """Handle ``signals`` (main thread only, as any Python signal handler)."""
        stop = cls(callback)
        for sig in signals:
            stop._previous[sig] = _signal.signal(sig, stop._handle)
        return stop

    def _handle(self, signum: int, frame: Any) -> None:
        if not self.requested:
            self.requested, self.signum, self.received_at = True, signum, _time.monotonic()
        if self.callback is not None:
            self.callback(signum)
        previous = self._previous.get(signum)
        if callable(previous):
            previous(signum, frame)

    def seconds_left(self, grace: float = SAGEMAKER_STOP_GRACE_SECONDS) -> float | None:
        """Seconds until SIGKILL (None before the signal): how much saving still fits."""
        if self.received_at is None:
            return None
        return max(0.0, grace - (_time.monotonic() - self.received_at))
