"""Which storage files a PyTorch Distributed Checkpoint references, read from ``.metadata`` without
unpickling it. Pure (stdlib only).

DCP's ``.metadata`` is a pickle of ``torch.distributed.checkpoint.metadata.Metadata``. Bytes from a
bucket are never unpickled (that would run whatever the pickle names): :func:`pickletools.genops`
only decodes opcodes, and :class:`_Reader` plays them on a stack where containers and constants are
built and classes are only names: nothing is imported and no callable is ever called. What counts
is ``Metadata.storage_data``: ``MetadataIndex -> _StorageInfo(relative_path, offset, length)``.
"""

from __future__ import annotations

import pickletools
from collections.abc import Callable
from typing import Any


class _Global:
    """A class a pickle names (never imported)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name


class _Object:
    """An object a pickle would build: its class's name and the state it would be given."""

    def __init__(self, cls: Any, args: Any) -> None:
        self.cls, self.args = cls, args
        self.state: dict[str, Any] = {}
        self.items: list[Any] = []  # what APPENDS/SETITEMS would add to a list or dict subclass

    def build(self, state: Any) -> None:
        for part in state if isinstance(state, tuple) else (state,):  # (dict, slots dict) with __slots__
            if isinstance(part, dict):
                self.state.update(part)

    def append(self, item: Any) -> None:
        self.items.append(item)

    def extend(self, items: list[Any]) -> None:
        self.items.extend(items)

    def update(self, pairs: dict[Any, Any]) -> None:
        self.items.extend(pairs.items())

    def __setitem__(self, key: Any, value: Any) -> None:
        self.items.append((key, value))


class _Key:
    """An unhashable dict key (a list, a dict) by identity: its value is not needed."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return _Key(value)
    return value


def _pairs(items: list[Any]) -> dict[Any, Any]:
    return {_hashable(k): v for k, v in zip(items[::2], items[1::2], strict=True)}


_CONSTANTS = frozenset(
    "INT BININT BININT1 BININT2 LONG LONG1 LONG4 STRING BINSTRING SHORT_BINSTRING BINBYTES SHORT_BINBYTES "
    "BINBYTES8 BYTEARRAY8 UNICODE SHORT_BINUNICODE BINUNICODE BINUNICODE8 FLOAT BINFLOAT".split()
)
_PLAIN = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False, "EMPTY_TUPLE": ()}


class _Reader:
    """A stack machine for the opcodes a DCP ``Metadata`` pickle uses; any other opcode is refused."""

    def __init__(self) -> None:
        self.stack: list[Any] = []
        self.marks: list[int] = []
        self.memo: dict[Any, Any] = {}
        s = self.stack
        self.ops: dict[str, Callable[[Any], object]] = {
            "MARK": lambda _: self.marks.append(len(s)),
            "MEMOIZE": lambda _: self.memo.__setitem__(len(self.memo), s[-1]),
            "EMPTY_DICT": lambda _: s.append({}),
            "EMPTY_LIST": lambda _: s.append([]),
            "EMPTY_SET": lambda _: s.append([]),
            "TUPLE1": lambda _: self._tuple(1),
            "TUPLE2": lambda _: self._tuple(2),
            "TUPLE3": lambda _: self._tuple(3),
            "TUPLE": lambda _: s.append(tuple(self._pop_mark())),
            "LIST": lambda _: s.append(self._pop_mark()),
            "FROZENSET": lambda _: s.append(self._pop_mark()),
            "DICT": lambda _: s.append(_pairs(self._pop_mark())),
            "SETITEM": lambda _: self._setitem(),
            "SETITEMS": lambda _: self._add(update=True),
            "APPEND": lambda _: self._append(),
            "APPENDS": lambda _: self._add(update=False),
            "ADDITEMS": lambda _: self._add(update=False),
            "GLOBAL": lambda arg: s.append(_Global(*str(arg).partition(" ")[::2])),
            "STACK_GLOBAL": lambda _: self._stack_global(),
            "REDUCE": lambda _: self._object(2),
            "NEWOBJ": lambda _: self._object(2),
            "NEWOBJ_EX": lambda _: self._object(3),
            "BUILD": lambda _: self._build(),
            "POP": lambda _: s.pop(),
            "POP_MARK": lambda _: self._pop_mark(),
            "DUP": lambda _: s.append(s[-1]),
            "PROTO": lambda _: None,
            "FRAME": lambda _: None,
        }
        for name in ("PUT", "BINPUT", "LONG_BINPUT"):
            self.ops[name] = lambda arg: self.memo.__setitem__(arg, s[-1])
        for name in ("GET", "BINGET", "LONG_BINGET"):
            self.ops[name] = lambda arg: s.append(self.memo[arg])
        for name in _CONSTANTS:
            self.ops[name] = s.append
        for name, value in _PLAIN.items():
            self.ops[name] = lambda _, value=value: s.append(value)  # type: ignore[misc]

    def _top(self) -> Any:
        return self.stack[-1]

    def _pop_mark(self) -> list[Any]:
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    def _tuple(self, count: int) -> None:
        items = self.stack[-count:]
        del self.stack[-count:]
        self.stack.append(tuple(items))

    def _add(self, *, update: bool) -> None:
        items = self._pop_mark()  # first: the container is below the mark
        if update:
            self._top().update(_pairs(items))
        else:
            self._top().extend(items)

    def _append(self) -> None:
        item = self.stack.pop()
        self._top().append(item)

    def _setitem(self) -> None:
        value, key = self.stack.pop(), self.stack.pop()
        self._top()[_hashable(key)] = value

    def _stack_global(self) -> None:
        attr, module = self.stack.pop(), self.stack.pop()
        self.stack.append(_Global(str(module), str(attr)))

    def _object(self, popped: int) -> None:
        parts = self.stack[-popped:]
        del self.stack[-popped:]
        self.stack.append(_Object(parts[0], parts[1]))

    def _build(self) -> None:
        state = self.stack.pop()
        if isinstance(self._top(), _Object):
            self._top().build(state)

    def read(self, raw: bytes) -> Any:
        for opcode, arg, _pos in pickletools.genops(raw):
            if opcode.name == "STOP":
                return self.stack[-1] if self.stack else None
            op = self.ops.get(opcode.name)
            if op is None:
                raise ValueError(f"pickle opcode {opcode.name} is not expected in DCP metadata")
            op(arg)
        raise ValueError("no STOP opcode (truncated)")


def dcp_references(raw: bytes) -> dict[str, int]:
    """Storage file -> the bytes it must hold at least (the end of the last range referenced).

    Raises ``ValueError`` saying what is wrong (truncated, not a pickle, not DCP metadata).
    """
    try:
        top = _Reader().read(raw)
    except (IndexError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed pickle ({type(exc).__name__})") from None
    if not isinstance(top, _Object) or not isinstance(top.cls, _Global) or top.cls.name != "Metadata":
        raise ValueError("not a DCP Metadata object")
    storage = top.state.get("storage_data")
    if not isinstance(storage, dict):
        raise ValueError("Metadata has no storage_data")
    needed: dict[str, int] = {}
    for info in storage.values():
        state = info.state if isinstance(info, _Object) else {}
        path, offset, length = state.get("relative_path"), state.get("offset"), state.get("length")
        if not isinstance(path, str) or not isinstance(offset, int) or not isinstance(length, int):
            raise ValueError("a storage_data entry has no relative_path/offset/length")
        needed[path] = max(needed.get(path, 0), offset + length)
    return needed
