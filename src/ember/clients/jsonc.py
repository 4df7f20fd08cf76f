"""Set one key of a JSON-with-comments file, every other byte kept (pure).

OpenCode (``opencode.json``/``.jsonc``), Gemini CLI and Qwen Code (``settings.json``) read their
configuration as JSON that may hold ``//`` and ``/* */`` comments and trailing commas. Loading
such a file and dumping it again loses the comments and the user's layout; ``json.loads`` refuses
it outright. So the file is scanned once for where each member of each object sits, and a change
is spliced into the text: a value replaced in place, a missing member added after the last one
of its object in the object's own indentation. Nothing else moves, and setting a key to the value
it already holds returns the very same text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ember.errors import ClientError

_WS = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.DOTALL)
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


@dataclass
class _Object:
    """Where an object sits: its braces and, per member, the span of its value."""

    open: int
    close: int = -1
    #: key -> (start, end) of the value text, and the nested object when the value is one
    members: dict[str, tuple[int, int, _Object | None]] = field(default_factory=dict)
    #: end of the last member's value, and the end of the comma after it (-1: none)
    last_end: int = -1
    comma_end: int = -1


class _Parser:
    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where
        self.pos = 0

    def fail(self, what: str) -> ClientError:
        line = self.text.count("\n", 0, self.pos) + 1
        return ClientError(
            f"{self.where} is not valid JSON ({what} at line {line}); fix it, then run again"
        )

    def skip(self) -> None:
        m = _WS.match(self.text, self.pos)
        self.pos = m.end() if m else self.pos

    def value(self) -> tuple[Any, _Object | None]:
        self.skip()
        ch = self.text[self.pos : self.pos + 1]
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.array(), None
        if ch == '"':
            return self.string(), None
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return literal, None
        m = _NUMBER.match(self.text, self.pos)
        if m is None:
            raise self.fail("a value was expected")
        self.pos = m.end()
        return json.loads(m.group(0)), None

    def string(self) -> str:
        start = self.pos
        self.pos += 1
        while True:
            end = self.text.find('"', self.pos)
            if end < 0:
                raise self.fail("an unterminated string")
            slashes = len(self.text[self.pos : end]) - len(self.text[self.pos : end].rstrip("\\"))
            self.pos = end + 1
            if slashes % 2 == 0:
                break
        try:
            value: str = json.loads(self.text[start : self.pos])
        except json.JSONDecodeError as exc:
            raise self.fail("a bad string") from exc
        return value

    def array(self) -> list[Any]:
        self.pos += 1
        out: list[Any] = []
        while True:
            self.skip()
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return out
            out.append(self.value()[0])
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith("]", self.pos):
                raise self.fail("',' or ']' was expected")

    def obj(self) -> tuple[dict[str, Any], _Object]:
        node = _Object(self.pos)
        self.pos += 1
        out: dict[str, Any] = {}
        while True:
            self.skip()
            if self.text.startswith("}", self.pos):
                node.close = self.pos
                self.pos += 1
                return out, node
            if not self.text.startswith('"', self.pos):
                raise self.fail("a quoted key was expected")
            key = self.string()
            self.skip()
            if not self.text.startswith(":", self.pos):
                raise self.fail("':' was expected")
            self.pos += 1
            self.skip()
            start = self.pos
            out[key], child = self.value()
            node.members[key] = (start, self.pos, child)
            node.last_end, node.comma_end = self.pos, -1
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                node.comma_end = self.pos
            elif not self.text.startswith("}", self.pos):
                raise self.fail("',' or '}' was expected")


def _parse(text: str, where: str) -> tuple[dict[str, Any], _Object | None]:
    if not text.strip():
        return {}, None
    parser = _Parser(text, where)
    value, node = parser.value()
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("text after the end")
    if not isinstance(value, dict) or node is None:
        raise ClientError(f"{where} does not hold a JSON object; fix it by hand, then run again")
    return value, node


def loads(text: str | None, where: str) -> dict[str, Any]:
    """The file's object (comments and trailing commas allowed); ``{}`` when absent or empty."""
    return _parse(text or "", where)[0]


def set_key(text: str | None, path: tuple[str, ...], value: Any, where: str) -> str:
    """``text`` with ``path`` (keys from the top object down) set to ``value``; objects on the
    way are made when absent. A value on the way that is not an object is the user's to fix:
    ``ClientError``, nothing overwritten."""
    source = text or ""
    _, node = _parse(source, where)
    if node is None:
        return json.dumps(_nest(path, value), indent=2, ensure_ascii=False) + "\n"
    for depth, key in enumerate(path):
        found = node.members.get(key)
        if found is None:
            return _insert(source, node, path[depth:], value)
        start, end, child = found
        if depth == len(path) - 1:
            if json.loads(json.dumps(value)) == _parse_value(source[start:end], where):
                return source
            dumped = _dump(value, _indent_at(source, start), _unit(source))
            return source[:start] + dumped + source[end:]
        if child is None:
            dotted = ".".join(path[: depth + 1])
            raise ClientError(f"{where}: {dotted} is not an object; fix it by hand, then run again")
        node = child
    return source


def _parse_value(text: str, where: str) -> Any:
    parser = _Parser(text, where)
    return parser.value()[0]


def _nest(path: tuple[str, ...], value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def _insert(text: str, node: _Object, path: tuple[str, ...], value: Any) -> str:
    """A new member ``path[0]`` (holding the rest of ``path``) added to ``node``, after its
    last member, on a line of its own when the object spans lines."""
    unit = _unit(text)
    outer = _indent_at(text, node.open)
    member_value = _nest(path[1:], value)
    if node.last_end < 0:  # an empty object
        inner = outer + unit
        body = f'"{_key(path[0])}": {_dump(member_value, inner, unit)}'
        if "\n" in text[node.open : node.close]:
            return text[: node.open + 1] + f"\n{inner}{body}" + text[node.open + 1 :]
        return text[: node.open + 1] + f"\n{inner}{body}\n{outer}" + text[node.close :]
    first = min(start for start, _, _ in node.members.values())
    inner = _indent_at(text, first) if _line_start(text, first) else outer + unit
    after = node.comma_end if node.comma_end >= 0 else node.last_end
    comma = "" if node.comma_end >= 0 else ","
    newline = text.find("\n", after, node.close)
    if newline < 0:  # the object's last member shares a line with its closing brace
        compact = json.dumps(member_value, ensure_ascii=False)
        return text[:after] + f'{comma} "{_key(path[0])}": {compact}' + text[after:]
    body = f'"{_key(path[0])}": {_dump(member_value, inner, unit)}'
    return text[:after] + comma + text[after:newline] + f"\n{inner}{body}" + text[newline:]


def _key(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)[1:-1]


def _dump(value: Any, indent: str, unit: str) -> str:
    text = json.dumps(value, indent=unit, ensure_ascii=False)
    return text.replace("\n", "\n" + indent)


def _line_start(text: str, pos: int) -> bool:
    """Whether only whitespace comes before ``pos`` on its line."""
    return not text[text.rfind("\n", 0, pos) + 1 : pos].strip()


def _indent_at(text: str, pos: int) -> str:
    """The leading whitespace of the line holding ``pos``."""
    line = text[text.rfind("\n", 0, pos) + 1 :]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _unit(text: str) -> str:
    """The file's own indentation step (its first indented line), two spaces by default."""
    m = re.search(r"^([ \t]+)\S", text, re.MULTILINE)
    return m.group(1) if m else "  "
