"""The MCP tools' definitions and argument checks (pure)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ember.memory.mcp_tools import (
    TOOLS,
    ToolDef,
    ToolInputError,
    UpdateArgs,
    parse,
    tools_tokens,
)
from ember.memory.tools import MEMORY_TOOL_SPECS

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_five_tools_in_their_order() -> None:
    assert [t.name for t in TOOLS] == [
        "memory_search",
        "memory_save",
        "memory_update",
        "memory_forget",
        "memory_list",
    ]


def test_the_tools_list_is_lean_and_readme_gives_its_cost() -> None:
    """Every prompt that lists them carries them: the list stays well under tool mode's four
    (whose save carries the extraction rules), and README gives both costs."""
    total = tools_tokens()
    assert total == sum(tools_tokens((t,)) for t in TOOLS)
    tool_mode = tools_tokens(
        tuple(ToolDef(s.name, s.description, dict(s.input_schema)) for s in MEMORY_TOOL_SPECS)
    )
    assert total < 520 and total < tool_mode
    assert all(len(t.description) <= 160 for t in TOOLS)
    readme = README.read_text(encoding="utf-8")
    assert f"{total} tokens" in readme and f"{tool_mode} tokens" in readme


@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        ("memory_save", {"facts": [{"content": "  "}]}, "facts.0.content: is empty"),
        ("memory_save", {"facts": [{"content": "x", "importance": 1.5}]}, "from 0 (trivia) to 1"),
        ("memory_save", {"facts": [{"content": "x", "importance": -0.1}]}, "(got -0.1)"),
        ("memory_save", {"facts": []}, "give a list of facts"),
        ("memory_save", {}, "facts: is required"),
        ("memory_search", {"query": ""}, "query: is empty"),
        ("memory_search", {"query": "x", "top_k": 11}, "from 1 to 10"),
        ("memory_forget", {}, "id: is required: give the id that memory_search"),
        ("memory_update", {"id": "abc"}, "nothing to change"),
        ("memory_list", {"limit": 0}, "from 1 to 100"),
        ("memory_search", {"query": "x", "k": 3}, "k: is not an argument of this tool"),
    ],
)
def test_bad_arguments_say_which_what_and_the_fix(
    tool: str, arguments: dict[str, object], said: str
) -> None:
    with pytest.raises(ToolInputError) as caught:
        parse(tool, arguments)
    message = str(caught.value)
    assert message.startswith(f"{tool}: ")
    assert said in message
    assert re.search(r": (give|leave)", message) or "nothing to change" in message


def test_good_arguments_parse_with_their_defaults() -> None:
    args = parse("memory_update", {"id": " abc ", "importance": 0.9})
    assert isinstance(args, UpdateArgs)
    assert (args.id, args.content, args.importance) == ("abc", None, 0.9)
    search = parse("memory_search", {"query": "db"})
    assert search.model_dump() == {"query": "db", "top_k": 5, "explain": False}


def test_an_unknown_tool_is_not_an_argument_error() -> None:
    with pytest.raises(KeyError):
        parse("memory_delete", {"id": "x"})
