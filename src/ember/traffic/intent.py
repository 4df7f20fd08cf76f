"""What a tool call *meant to do*, as a key: two calls with the same intent are one lesson.

Deduplicating recoveries by their literal text would store ``grep foo | head -50`` and
``grep foo | head -100`` as two facts and crowd the 15 recovery slots with one lesson. So:
a file tool is keyed by the file's base name (the same file through another relative path is
the same lesson); a shell command has its volatile tail stripped (output limits, context
flags, ``2>&1``) and is cut at its first pipe or ``&&`` (what follows only shapes output);
any other tool by its name and its arguments with digits folded.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from typing import Any

#: Tools whose arguments name a file; the key is the file's base name.
FILE_TOOLS = {"read", "read_file", "view", "edit", "write", "multiedit", "notebookedit"}
#: Tools that run a shell command.
SHELL_TOOLS = {"bash", "shell", "exec_command", "local_shell", "run_shell_command", "shell_command"}
_PATH_KEYS = ("file_path", "path", "absolute_path", "notebook_path", "filename")
_COMMAND_KEYS = ("command", "cmd")

_VOLATILE = [
    re.compile(r"\s*2>&1"),
    re.compile(r"\s+-[ABC]\s*\d+\b"),
    re.compile(r"\s+--(?:max-count|lines|limit|head-limit)[= ]\d+\b"),
]
_CUT = re.compile(r"\s*(?:\|\|?|&&|;)\s*")
_NUMBER = re.compile(r"\b\d+\b")


def command_of(arguments: dict[str, Any]) -> str | None:
    """The shell command of a call, as one line (Codex sends ``["bash", "-lc", cmd]``)."""
    for key in _COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if len(value) >= 3 and value[1] in ("-c", "-lc"):
                return str(value[2])
            return " ".join(value)
        if isinstance(value, str):
            return value
    return None


def path_of(arguments: dict[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def normalise_command(command: str) -> str:
    """The command's intent: volatile flags stripped, cut at the first pipe / ``&&`` / ``;``."""
    text = " ".join(command.split())
    for pattern in _VOLATILE:
        text = pattern.sub("", text)
    return _CUT.split(text, maxsplit=1)[0].strip()


def intent_key(tool: str, arguments: dict[str, Any]) -> str:
    """A stable key (same inputs, same key across processes) for the call's intent."""
    name = tool.lower()
    if name in FILE_TOOLS and (path := path_of(arguments)):
        return f"file:{posixpath.basename(path.rstrip('/'))}"
    if name in SHELL_TOOLS and (command := command_of(arguments)):
        return f"shell:{normalise_command(command)}"
    folded = _NUMBER.sub("N", json.dumps(arguments, sort_keys=True, ensure_ascii=False))
    return f"tool:{name}:" + hashlib.sha256(folded.encode()).hexdigest()[:16]


def describe(tool: str, arguments: dict[str, Any], limit: int = 160) -> str:
    """The call as a person reads it in a fact: the command, or the tool and its file."""
    command = command_of(arguments) if tool.lower() in SHELL_TOOLS else None
    if command:
        shown = " ".join(command.split())
    elif path := path_of(arguments):
        shown = f"{tool} {path}"
    else:
        shown = f"{tool} {json.dumps(arguments, sort_keys=True, ensure_ascii=False)}"
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
