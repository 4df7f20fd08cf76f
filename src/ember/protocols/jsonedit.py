"""Byte-preserving edits of a JSON request body.

A proxy that re-serialises a client's JSON changes bytes it never meant to change: key order,
whitespace, ``\\u`` escapes, float spelling. Those bytes are the client's cache prefix and the
exact request the client believes it sent. ``JsonDoc`` therefore keeps the original text and
applies each edit as a splice at the byte span of the value it targets; everything outside the
spliced spans is returned unchanged, and a document with no edits returns the very bytes it was
built from.

The parsed value (``doc.value``) is kept in step with the edits so later pipeline stages read the
request as it will be sent.

Edits may not overlap: an edit inside a value that another edit replaces is refused
(``OverlappingEdit``), because the splice of the outer edit would silently drop the inner one.
"""

from __future__ import annotations

import json
import json.scanner
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce
from itertools import repeat
from operator import getitem
from typing import Any

import orjson

from ember.errors import NestingTooDeep, ProtocolError

Path = Sequence[str | int]

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
# The C scanner and string scanner behind json.loads: they parse one value from an offset and
# report where it ends, which is all a span locator needs (typeshed does not describe them).
_scan_once: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]
_scanstring: Callable[[str, int], tuple[str, int]] = getattr(json.decoder, "scanstring")  # noqa: B009


def dumps(value: Any) -> str:
    """Compact JSON the way JavaScript and the official SDKs write it (no ASCII escaping)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    """One JSON value, as ``json.loads`` reads it, raising its ``JSONDecodeError`` alike;
    for reading a streamed answer's events, every one of which is parsed on the proxy's loop.

    orjson reads it first, several times faster. What orjson refuses and the standard library
    accepts (NaN, Infinity, escaped lone surrogates) goes to ``json.loads``, so no event that
    parsed before is dropped now. One difference is kept: an integer past 64 bits comes back
    as a float (orjson's reading); no field of a provider's event envelope holds one."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _spliced(value: Any) -> str:
    """``dumps(value)`` for splicing into a body that will be sent as UTF-8.

    A string holding a lone surrogate (a ``\\ud83d`` escape in a provider's JSON decodes to
    one) cannot be encoded as UTF-8: written raw, the whole body would fail to encode. Such a
    value is written with ASCII escapes instead, which is the same JSON value.
    """
    text = dumps(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text


class OverlappingEdit(ValueError):
    """Two edits touch the same bytes; apply them as one edit instead."""


@dataclass(frozen=True)
class _Splice:
    start: int
    end: int
    text: str


def _skip_ws(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m else pos


def _value_end(text: str, pos: int) -> int:
    try:
        return int(_scan_once(text, pos)[1])
    except StopIteration as exc:
        raise ProtocolError(f"invalid JSON value at offset {pos}") from exc


#: A parsed value not known (no guess at where a member ends).
_UNKNOWN: Any = object()


def _member_of(node: Any, step: str | int) -> Any:
    if isinstance(node, dict) and isinstance(step, str):
        return node.get(step, _UNKNOWN)
    if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
        return node[step]
    return _UNKNOWN


def _compact(text: str) -> bool:
    """Whether the body is written compactly (``{"k":v,...}``, as Claude Code, Codex and
    JavaScript write it), judged by its first member: only then can a value's compact
    serialisation be its very text."""
    pos = _skip_ws(text, 0)
    if not text.startswith('{"', pos):
        return False
    try:
        _, after = _scanstring(text, pos + 2)
    except ValueError:
        return False
    return text.startswith(":", after) and text[after + 1 : after + 2] not in (" ", "\n")


class _Container:
    """Members of one object/array found so far, where the scan stopped, and the parsed
    value the container was read as (``_UNKNOWN`` when not known)."""

    __slots__ = ("closer", "index", "members", "pos", "value")

    def __init__(self, text: str, start: int, value: Any = _UNKNOWN) -> None:
        opener = text[start]
        if opener not in "{[":
            raise TypeError(f"no object or array at offset {start}")
        self.closer = "}" if opener == "{" else "]"
        self.members: dict[str | int, tuple[int, int]] = {}
        self.pos: int | None = _skip_ws(text, start + 1)  # None: scanned to the end
        self.index = 0
        self.value = value


class _Spans:
    """Where members of containers start and end in one text, found lazily and kept.

    Every container on an edited path is scanned at most once, so several edits (shaping's
    block and effort, memory's tail) walk a 200 KiB history once instead of once per edit. A
    key whose spelling occurs only once in the whole text cannot have a duplicate, so its scan
    stops where it is found (the system prompt is found without parsing the history after it);
    any other key is looked up after a full scan, so duplicates resolve to the last one, as
    in ``json.loads``.
    """

    def __init__(self, text: str, value: Any = _UNKNOWN) -> None:
        self.text = text
        self._containers: dict[int, _Container] = {}
        self._once: dict[str, bool] = {}
        self._root = value
        self._guess = value is not _UNKNOWN and _compact(text)

    def member(self, start: int, step: str | int, value: Any = _UNKNOWN) -> tuple[int, int]:
        c = self._containers.get(start)
        if c is None:
            c = self._containers[start] = _Container(self.text, start, value)
        found = c.members.get(step)
        if found is not None and (not isinstance(step, str) or self._unique(step)):
            return found
        self._scan(c, step if isinstance(step, int) or self._unique(step) else None)
        return c.members[step]

    def _unique(self, key: str) -> bool:
        """Exactly one ``"key":`` in the text (none means it is spelled with escapes: scan all).

        Kept per key: the text never changes, and a memory replay locates ``messages`` and
        ``content`` once per earlier ask, each look a search of the whole body (8% of a
        loaded proxy's samples with 25-turn histories)."""
        once = self._once.get(key)
        if once is None:
            pattern = re.compile(re.escape(dumps(key)) + r"[ \t\n\r]*:")
            once = self._once[key] = len(pattern.findall(self.text, 0)) == 1
        return once

    def _scan(self, c: _Container, want: str | int | None) -> None:
        """Scan on from where ``c`` stopped: until ``want`` is found, or to the end."""
        text, pos = self.text, c.pos
        while pos is not None and text[pos] != c.closer:
            key: str | int = c.index
            if c.closer == "}":
                key, pos = _scanstring(text, pos + 1)
                pos = _skip_ws(text, _skip_ws(text, pos) + 1)  # past ':'
            end = self._end(c, key, pos)
            c.members[key] = (pos, end)
            c.index += 1
            pos = _skip_ws(text, end)
            if text[pos] == ",":
                pos = _skip_ws(text, pos + 1)
            if want is not None and key == want:
                c.pos = pos
                return
        c.pos = None

    def _end(self, c: _Container, key: str | int, pos: int) -> int:
        """Where the member value at ``pos`` ends, without reading it again when the text
        there is exactly the compact serialisation of the parsed value: a Claude Code body
        puts ``system`` after ``messages``, and scanning past a 400-message history built
        it all again as Python objects (~0.9 ms a request, a sixth of the proxy's CPU on a
        long session); orjson writes it in a fraction of that. Exact, not a heuristic: a
        complete array or object that the text begins with ends where it ends. Any
        mismatch (another spelling of a number or an escape, a duplicate key, a value an
        edit changed) scans, and stops guessing for this body."""
        if self._guess:
            guess = _member_of(c.value, key)
            if isinstance(guess, (dict, list)):
                try:
                    written = orjson.dumps(guess).decode()
                except orjson.JSONEncodeError:  # a lone surrogate: not orjson's to write
                    written = ""
                if written and self.text.startswith(written, pos):
                    return pos + len(written)
                self._guess = False
        return _value_end(self.text, pos)

    def members(self, start: int) -> tuple[dict[str | int, tuple[int, int]], bool]:
        """Every member of the container at ``start``, in text order, and whether each key
        occurs once (a duplicate key leaves fewer entries than members scanned)."""
        c = self._containers.get(start)
        if c is None:
            c = self._containers[start] = _Container(self.text, start)
        self._scan(c, None)
        return c.members, c.index == len(c.members)

    def locate(self, path: Path) -> tuple[int, int]:
        start = _skip_ws(self.text, 0)
        end: int | None = None
        node = self._root
        for step in path:
            try:
                start, end = self.member(start, step, node)
            except (KeyError, TypeError) as exc:
                raise (KeyError if isinstance(step, str) else IndexError)(step) from exc
            node = _member_of(node, step)
        return start, (end if end is not None else _value_end(self.text, start))


def locate(text: str, path: Path) -> tuple[int, int]:
    """The ``(start, end)`` offsets of the value at ``path`` in ``text``.

    Raises ``KeyError``/``IndexError`` when the path does not exist; callers validate paths
    against the parsed value first, so reaching that is a programming error.
    """
    return _Spans(text).locate(path)


#: orjson refuses input nested deeper than this (its documented limit). The depth check is
#: built on it; tests pin the number, so an orjson that changes it fails loudly.
ORJSON_MAX_DEPTH = 1024
_OPEN = b"[" * ORJSON_MAX_DEPTH
_CLOSE = b"]" * ORJSON_MAX_DEPTH


class _NotWrapped(ValueError):
    """The wrapped parse did not give back exactly one value of the client's."""


def _unwrap(wrapped: Any, wrap: int) -> Any:
    """The client's value inside ``wrap`` levels of one-element lists.

    A body that is not JSON on its own can parse once wrapped, by closing wrapper brackets
    itself (``1],[2``). Some wrapper level then holds two elements, so following the first and
    following the last element part ways and reach different innermost lists: one path and one
    element there prove the wrapper intact and the body a single JSON value.
    """
    try:
        first = reduce(getitem, repeat(0, wrap - 1), wrapped)
        last = reduce(getitem, repeat(-1, wrap - 1), wrapped)
    except (IndexError, KeyError, TypeError) as exc:
        raise _NotWrapped from exc
    if first is not last or type(first) is not list or len(first) != 1:
        raise _NotWrapped
    return first[0]


def nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` has containers nested more than ``limit`` deep (``{}`` is depth 1).
    Iterative, so no input can exhaust the stack; stops at the first level past ``limit``."""
    level = [value]
    for _ in range(limit):
        level = [
            child
            for node in level
            if isinstance(node, (dict, list))
            for child in (node.values() if isinstance(node, dict) else node)
        ]
        if not level:
            return False
    return any(isinstance(node, (dict, list)) for node in level)


def _openers(raw: bytes) -> int:
    """How many ``[`` and ``{`` bytes ``raw`` holds, in one vectorised pass (``[`` is 0x5B,
    ``{`` 0x7B, and no other byte ORed with 0x20 gives 0x7B). Two ``bytes.count`` calls took
    ~0.1 ms on a 138 KB Claude Code body, 0.7 of its parse, before the wrapped parse it then
    needed anyway; this takes ~0.012 ms. numpy is imported on the first body, not with the
    module."""
    import numpy as np

    return int(np.count_nonzero((np.frombuffer(raw, np.uint8) | 0x20) == 0x7B))


def _parse(raw: bytes, max_depth: int | None = None) -> Any:
    """Parse a body on the request path: orjson (about twice as fast as ``json`` on agent
    histories), with ``json`` as the judge for the few inputs orjson refuses and the standard
    accepts (NaN, lone surrogates). orjson reads integers beyond 64 bits as floats; only the
    parsed view sees that — the bytes forwarded are the client's.

    ``max_depth`` refuses deeper nesting with ``NestingTooDeep`` at a cost that does not grow
    with the body: it is parsed inside ``1024 - max_depth`` wrapper lists, so orjson's own
    fixed depth limit trips exactly when the body is deeper than ``max_depth``. The price is a
    copy of the body and the wrapper lists: about 0.08 ms on a small body, a few per cent of
    the parse on a 2 MB one (``bench/json_depth.py``), where a scan of the bytes or a walk of
    the parsed value costs one to three times the parse — and 768 more containers for the
    garbage collector per request. A body with no more ``[`` and ``{`` bytes than
    ``max_depth`` cannot nest deeper (two counts in C, microseconds): it is parsed plainly.
    Nothing deep ever reaches the recursive ``json`` parser unguarded: a body past its
    recursion limit is ``NestingTooDeep``, not a ``RecursionError`` (a 100k-deep body was a 500).
    """
    wrap = ORJSON_MAX_DEPTH - max_depth if max_depth is not None else 0
    if max_depth is not None and _openers(raw) <= max_depth:
        wrap = 0  # no deeper than it has openers: the plain parse is the check
    try:
        if wrap <= 0:
            return orjson.loads(raw)
        return _unwrap(orjson.loads(b"".join((_OPEN[:wrap], raw, _CLOSE[:wrap]))), wrap)
    except (orjson.JSONDecodeError, _NotWrapped):
        pass
    try:
        value = json.loads(raw.decode("utf-8"))
    except RecursionError as exc:
        raise NestingTooDeep(max_depth) from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"request body is not valid JSON: {exc}") from exc
    if max_depth is not None and nesting_exceeds(value, max_depth):
        raise NestingTooDeep(max_depth)
    return value


def _get(value: Any, path: Path) -> Any:
    for step in path:
        value = value[step]
    return value


class JsonDoc:
    """A request body: the original text, its parsed value, and pending byte-exact edits."""

    def __init__(self, raw: bytes, *, max_depth: int | None = None) -> None:
        """Parse ``raw``; ``ProtocolError`` when it is not JSON, ``NestingTooDeep`` when it is
        nested more than ``max_depth`` levels (``None``: only what the parsers can take)."""
        self.raw = raw
        self.value: Any = _parse(raw, max_depth)
        self._text: str | None = None
        self._spans: _Spans | None = None
        self._splices: list[_Splice] = []

    @property
    def text(self) -> str:
        """The original body as text; decoded only when an edit needs offsets."""
        if self._text is None:
            self._text = self.raw.decode("utf-8")
        return self._text

    def _locate(self, path: Path) -> tuple[int, int]:
        if self._spans is None:
            self._spans = _Spans(self.text, self.value)
        return self._spans.locate(path)

    @property
    def edited(self) -> bool:
        return bool(self._splices)

    def _add(self, start: int, end: int, text: str) -> None:
        for s in self._splices:
            if (start < s.end and s.start < end) or (start == end and s.start < start < s.end):
                raise OverlappingEdit(f"edit at {start}-{end} overlaps edit at {s.start}-{s.end}")
        self._splices.append(_Splice(start, end, text))

    def replace(self, path: Path, new_value: Any) -> None:
        """Replace the value at ``path`` (which must exist)."""
        start, end = self._locate(path)
        self._add(start, end, _spliced(new_value))
        parent = _get(self.value, path[:-1])
        parent[path[-1]] = new_value

    def set_key(self, path: Path, key: str, new_value: Any) -> None:
        """Set ``key`` in the object at ``path``: replaced in place if present, else appended
        as the object's last member (so no existing member moves)."""
        obj = _get(self.value, path)
        if not isinstance(obj, dict):
            raise TypeError(f"value at {list(path)} is not an object")
        if key in obj:
            self.replace([*path, key], new_value)
            return
        start, end = self._locate(path)
        close = self.text.rindex("}", start, end)
        sep = "," if obj else ""
        self._add(close, close, f"{sep}{_spliced(key)}:{_spliced(new_value)}")
        obj[key] = new_value

    def delete_key(self, path: Path, key: str) -> None:
        """Remove ``key`` from the object at ``path``; every other member keeps its bytes.

        The member goes together with the comma that joined it to a neighbour, so the object
        stays valid JSON. An object that spells ``key`` twice is refused (``ValueError``):
        which of the two a reader takes is the parser's choice, so deleting one could leave
        the other in force.
        """
        obj = _get(self.value, path)
        if not isinstance(obj, dict) or key not in obj:
            raise KeyError(key)
        start, _ = self._locate(path)
        assert self._spans is not None
        members, unique = self._spans.members(start)
        if not unique:
            raise ValueError(f"object at {list(path)} has duplicate keys")
        keys = list(members)
        i = keys.index(key)
        begin, end = members[key]
        if i > 0:
            begin = members[keys[i - 1]][1]  # from the end of the previous value: ', "key": v'
        else:
            begin = _skip_ws(self.text, start + 1)
            if len(keys) > 1:  # up to the next key: '"key": v, '
                end = _skip_ws(self.text, _skip_ws(self.text, end) + 1)
        self._add(begin, end, "")
        del obj[key]

    def append(self, path: Path, new_value: Any) -> None:
        """Append ``new_value`` to the array at ``path``; existing elements keep their bytes."""
        arr = _get(self.value, path)
        if not isinstance(arr, list):
            raise TypeError(f"value at {list(path)} is not an array")
        start, end = self._locate(path)
        close = self.text.rindex("]", start, end)
        sep = "," if arr else ""
        self._add(close, close, sep + _spliced(new_value))
        arr.append(new_value)

    def to_bytes(self) -> bytes:
        """The body to send: the original bytes when nothing was edited."""
        if not self._splices:
            return self.raw
        parts: list[bytes] = []
        copied = 0
        known = (0, 0)  # (character, byte) of the last edge found
        for s in sorted(self._splices, key=lambda s: (s.start, s.end)):
            start = self._byte_at(s.start, known)
            end = self._byte_at(s.end, (s.start, start))
            parts += [self.raw[copied:start], s.text.encode("utf-8")]
            copied, known = end, (s.end, end)
        parts.append(self.raw[copied:])
        return b"".join(parts)

    def _byte_at(self, char: int, known: tuple[int, int]) -> int:
        """The byte offset of character ``char`` of ``text``, from the nearest of the text's
        start, its end and ``known`` (an earlier character's offset): only the text between
        is encoded. Encoding the whole edited text again cost a long session ~0.4 ms a
        request; the client's own bytes are copied instead. Exact: ``text`` is the strict
        UTF-8 decoding of ``raw``, so any slice encodes to its very bytes."""
        text = self.text
        if len(text) == len(self.raw):  # ASCII: one byte a character
            return char
        k_char, k_byte = known
        if char - k_char <= len(text) - char:
            return k_byte + len(text[k_char:char].encode("utf-8"))
        return len(self.raw) - len(text[char:].encode("utf-8"))

    def checkpoint(self) -> int:
        return len(self._splices)

    def rollback(self, mark: int) -> None:
        """Drop edits made after ``mark`` (a stage that failed half-way leaves no trace)."""
        if mark == len(self._splices):
            return
        del self._splices[mark:]
        self.value = _parse(self.to_bytes())
