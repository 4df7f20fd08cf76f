"""The MCP server's five memory tools: their definitions and their input, checked (pure).

Every client that lists these tools puts their names, descriptions and schemas into the
model's prompt on every request, so each word here is paid for again and again: the texts are
short, say exactly what a call does, and carry no examples; ``tools_tokens`` counts the whole
list (README and docs/mcp.md give the number; a test keeps them in step).

The arguments are validated here, before any store is opened: a bad call (empty text, an
importance outside 0..1, a missing id) becomes ``ToolInputError`` naming the argument, what was
wrong with it and how to fix it, which the server returns as a tool error the model can read
and correct — never a traceback, never a half-done write. A fact's text and importance are
checked by the same model as tool mode's ``memory_save`` (``extraction.FactIn``), so a fact
one path refuses the other refuses too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ember.memory.errors import MemoryInputError
from ember.memory.extraction import FactIn
from ember.tokens import count_tokens

SEARCH, SAVE, UPDATE, FORGET, LIST = (
    "memory_search",
    "memory_save",
    "memory_update",
    "memory_forget",
    "memory_list",
)

#: How many hits a search may ask for: the injection's own item cap (``budget.MAX_ITEMS_CAP``).
MAX_TOP_K = 10
MAX_LIST = 100
_ID = {"type": "string"}
_IMPORTANCE = {"type": "number", "minimum": 0, "maximum": 1}


@dataclass(frozen=True)
class ToolDef:
    """One tool as ``tools/list`` shows it.

    ``read_only`` / ``destructive`` become the MCP tool annotations clients decide approval
    by: Codex runs a tool marked read-only without asking, and in ``codex exec`` (approval
    "never") refuses any other tool it would have had to ask about. A search marked as a write
    would never run there; a forget marked harmless would run without the user's yes."""

    name: str
    description: str
    schema: dict[str, Any]
    read_only: bool = False
    destructive: bool = False
    #: calling it again with the same arguments changes nothing more (a save of a fact
    #: already current returns it; a forget of a forgotten id finds nothing)
    idempotent: bool = False


TOOLS: tuple[ToolDef, ...] = (
    ToolDef(
        SEARCH,
        "Search this project's memories (meaning and keywords). Returns hits above the "
        "relevance floor, best first.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": 5},
                "explain": {"type": "boolean", "description": "add each score's parts"},
            },
            "required": ["query"],
        },
        read_only=True,
        idempotent=True,
    ),
    ToolDef(
        SAVE,
        "Remember facts for later sessions of this project. One self-contained fact each; no "
        "secrets. user_stated: only if the user said it.",
        {
            "type": "object",
            "properties": {
                "facts": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string"},
                            "importance": _IMPORTANCE,
                            "category": {"type": "string"},
                        },
                        "required": ["content"],
                    },
                },
                "user_stated": {"type": "boolean"},
            },
            "required": ["facts"],
        },
        idempotent=True,
    ),
    ToolDef(
        UPDATE,
        "Correct a memory by id. New content replaces it (old kept as history, new id); "
        "importance or category alone change in place.",
        {
            "type": "object",
            "properties": {
                "id": _ID,
                "content": {"type": "string"},
                "importance": _IMPORTANCE,
                "category": {"type": "string"},
            },
            "required": ["id"],
        },
    ),
    ToolDef(
        FORGET,
        "Delete a memory by id, for good.",
        {"type": "object", "properties": {"id": _ID}, "required": ["id"]},
        destructive=True,
        idempotent=True,
    ),
    ToolDef(
        LIST,
        "List this project's memories, newest first.",
        {
            "type": "object",
            "properties": {
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST, "default": 20}
            },
        },
        read_only=True,
        idempotent=True,
    ),
)


def tools_tokens(tools: tuple[ToolDef, ...] = TOOLS) -> int:
    """What the tools list costs in a prompt, by ``ember.tokens.count_tokens`` (which errs
    high): each tool's name, description and input schema as compact JSON, as a client
    serialises them for the model."""
    return sum(
        count_tokens(
            json.dumps(
                {"name": t.name, "description": t.description, "input_schema": t.schema},
                separators=(",", ":"),
            )
        )
        for t in tools
    )


class ToolInputError(MemoryInputError):
    """A tool's argument is missing or wrong; the message says which, why and the fix."""


#: How to fix each argument, said after what was wrong with it.
_FIXES = {
    "query": "give the words to search for",
    "top_k": f"give a whole number from 1 to {MAX_TOP_K}, or leave it out (5)",
    "explain": "give true or false",
    "facts": "give a list of facts, each {content, importance?, category?}",
    "content": "give the fact itself as one self-contained sentence",
    "importance": "give a number from 0 (trivia) to 1 (needed in every session), or leave "
    "it out (0.5)",
    "category": "give a short word (decision, preference, convention...) or leave it out",
    "user_stated": "give true only when the user said the facts themselves",
    "id": "give the id that memory_search or memory_list shows",
    "limit": f"give a whole number from 1 to {MAX_LIST}, or leave it out (20)",
}


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class SearchArgs(_Args):
    query: str = Field(min_length=1)
    top_k: int = Field(default=5, ge=1, le=MAX_TOP_K)
    explain: bool = False


class SaveArgs(_Args):
    facts: tuple[FactIn, ...] = Field(min_length=1, max_length=50)
    user_stated: bool = False


class UpdateArgs(_Args):
    id: str = Field(min_length=1)
    content: str | None = Field(default=None, min_length=1, max_length=2000)
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    category: str | None = Field(default=None, max_length=64)


class ForgetArgs(_Args):
    id: str = Field(min_length=1)


class ListArgs(_Args):
    limit: int = Field(default=20, ge=1, le=MAX_LIST)


_MODELS: dict[str, type[_Args]] = {
    SEARCH: SearchArgs,
    SAVE: SaveArgs,
    UPDATE: UpdateArgs,
    FORGET: ForgetArgs,
    LIST: ListArgs,
}


def parse(tool: str, arguments: dict[str, Any] | None) -> _Args:
    """The call's arguments, validated; ``ToolInputError`` for the first bad one. ``KeyError``
    for a tool that is not one of these five (the server answers that as a protocol error)."""
    model = _MODELS[tool]
    try:
        args = model.model_validate(arguments or {})
    except ValidationError as exc:
        raise ToolInputError(_wording(tool, exc)) from exc
    if isinstance(args, UpdateArgs) and (args.content, args.importance, args.category) == (
        None,
        None,
        None,
    ):
        raise ToolInputError(
            f"{UPDATE}: nothing to change: give content, importance or category with the id"
        )
    return args


def _wording(tool: str, exc: ValidationError) -> str:
    """The first error as "tool: where: what was wrong (the value given): the fix"."""
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    where = ".".join(loc) or "arguments"
    field = next((p for p in reversed(loc) if not p.isdigit()), "")
    given = "" if err["type"] == "missing" else f" (got {json.dumps(err.get('input'))[:80]})"
    fix = _FIXES.get(field, "see the tool's input schema")
    if err["type"] == "extra_forbidden":
        fix = f"leave it out; {tool} takes {', '.join(_MODELS[tool].model_fields)}"
    return f"{tool}: {where}: {_message(err)}{given}: {fix}"


def _message(err: Any) -> str:
    if err["type"] == "string_too_short":
        return "is empty"
    if err["type"] == "missing":
        return "is required"
    if err["type"] == "extra_forbidden":
        return "is not an argument of this tool"
    return str(err["msg"]).lower()
