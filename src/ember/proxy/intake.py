"""From the bytes a client sent to an ``Exchange``: parse, resolve project, session and thread.

Shared by every transport (HTTP POST, and Responses over WebSocket), so a request is read the
same way whichever way it came. Pure but for the session registry it updates.
"""

from __future__ import annotations

from collections.abc import Mapping

from ember.config import Settings
from ember.errors import ProtocolError
from ember.exchange import Exchange
from ember.project import resolve_project
from ember.protocols.base import ProtocolAdapter
from ember.proxy.limits import parse_body
from ember.session import derive_session_id
from ember.sessions import SessionRegistry
from ember.threads import RequestShape

#: How many leading *user* messages are searched for a working directory (Claude Code and Codex
#: put their environment block in the first user turn; scanning a long history every turn is
#: waste). Counted among user messages only: Codex 0.171.0 with its default model sends five
#: developer items (one holding its tools) before its ``<environment_context>``, which a count
#: of the first three items of any role missed, so its sessions resolved to no project.
CWD_SCAN_MESSAGES = 3
#: Claude Code marks its sub-agents' requests with this header.
SUBAGENT_HEADER = "x-claude-code-agent-id"


def build_exchange(
    adapter: ProtocolAdapter,
    path: str,
    query: str,
    headers: dict[str, str],
    body: bytes,
    settings: Settings,
    sessions: SessionRegistry,
) -> Exchange:
    """Raises ``ProtocolError`` (a 400) for a body that is not a JSON object or is nested past
    ``max_json_depth``."""
    doc = parse_body(body, settings)
    if not isinstance(doc.value, dict):
        raise ProtocolError("request body must be a JSON object")
    value = doc.value
    texts = adapter.leading_user_texts(value, CWD_SCAN_MESSAGES)
    system = adapter.system_text(value)
    project = resolve_project(
        headers, settings.project_root, system, texts, settings.project_identity
    )
    first_user = adapter.first_user_text(value)
    session = derive_session_id(
        headers,
        value,
        project.identity if project else None,
        adapter.model(value),
        first_user,
        sessions.credentials.tag(headers),
    )
    thread, project = sessions.observe(
        session, _shape(adapter, value, system, first_user, headers), project
    )
    ex = Exchange(adapter, path, query, headers, doc, session, project)
    ex.thread = thread
    return ex


def _shape(
    adapter: ProtocolAdapter,
    body: object,
    system: str,
    first_user: str | None,
    headers: Mapping[str, str],
) -> RequestShape:
    return RequestShape.of(
        system,
        adapter.tool_names(body),
        first_user or "",
        structured=adapter.wants_structured_output(body),
        subagent_marker=bool(headers.get(SUBAGENT_HEADER)),
    )
