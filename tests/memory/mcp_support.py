"""Calling ember's MCP tools from a test, with the SDK's in-process client or a stdio session
alike (both answer ``call_tool``)."""

from __future__ import annotations

import json
from typing import Any


async def call(client: Any, tool: str, **arguments: Any) -> Any:
    """The tool's JSON result; a tool error fails the test with what it said."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def error(client: Any, tool: str, **arguments: Any) -> str:
    """The text of the tool's error; a tool that succeeded fails the test."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return str(result.content[0].text)
