"""What ``ember memory`` prints: for people, search hits, the list table and one memory with
its history and evidence, each wrapped at the terminal's width (80 columns included); with
--json, one JSON document in the shapes CONTRACT.md gives (a hit, an evidence pointer).

``memory show`` used to print the evidence only with --json although its help promised it,
and a value longer than the terminal ran past the right edge; here every field wraps under
itself and each evidence pointer is its own line: its kind, then the message or session it
points at.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from ember.cmdkit import render
from ember.memory.injected import MemoryUse
from ember.memory.models import Memory, MemoryHit, iso

#: The fields ``memory show`` prints, in order (when set).
SHOWN = (
    "id",
    "content",
    "scope",
    "importance",
    "category",
    "created_at",
    "valid_until",
    "supersedes",
    "superseded_by",
    "promoted_from",
    "access_count",
    "metadata",
)


def echo_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False))


def evidence_json(kind: str, message_id: str | None, session_id: str | None) -> dict[str, str]:
    """One pointer in CONTRACT.md's shape: ``{"kind", "messageId"}`` or ``{"kind",
    "sessionId"}`` (a pointer names exactly one of them)."""
    if message_id is not None:
        return {"kind": kind, "messageId": message_id}
    return {"kind": kind, "sessionId": session_id or ""}


def evidence_text(e: dict[str, str]) -> str:
    if "messageId" in e:
        return f"{e['kind']} -> message {e['messageId']}"
    return f"{e['kind']} -> session {e['sessionId']}"


def injections_json(use: MemoryUse) -> dict[str, Any]:
    """How often the memory went into a request (``memory.injected``): the asks whose block
    carried it, how many of those the answers cited, how many have no answer recorded yet,
    and when it was last injected (ISO-8601 UTC, None if never)."""
    return {
        "requests": use.requests,
        "cited": use.cited,
        "unanswered": use.unanswered,
        "last_injected_at": iso(use.last),
    }


def injections_text(doc: dict[str, Any]) -> str:
    if not doc["requests"]:
        return "never (no request carried it yet)"
    plural = "" if doc["requests"] == 1 else "s"
    counts = f"{doc['cited']} cited"
    if doc["unanswered"]:
        counts += f", {doc['unanswered']} not answered yet"
    last = str(doc["last_injected_at"])[:16].replace("T", " ")  # to the minute
    return f"into {doc['requests']} request{plural} ({counts}), last {last} UTC"


def _grid() -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(overflow="fold")
    return grid


def print_memory(doc: dict[str, Any], current_id: str) -> None:
    """One memory: its fields, its evidence, the requests it went into, then its history when
    it has one."""
    grid = _grid()
    for key in SHOWN:
        value = doc.get(key)
        if value in (None, {}, []):
            continue
        text = json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else str(value)
        grid.add_row(f"{key}:", Text(text))
    evidence = doc.get("evidence") or []
    for i, e in enumerate(evidence):
        grid.add_row("evidence:" if i == 0 else "", Text(evidence_text(e)))
    if not evidence:
        grid.add_row("evidence:", "none recorded (added by hand or imported)")
    if "injections" in doc:
        grid.add_row("injected:", Text(injections_text(doc["injections"])))
    history = doc.get("history") or []
    if len(history) > 1:
        for i, h in enumerate(history):
            mark = "*" if h["id"] == current_id else " "
            grid.add_row("history:" if i == 0 else "", Text(f"{mark} [{h['id']}] {h['content']}"))
    render.console().print(grid)


def print_list(found: Sequence[Memory], title: str) -> None:
    table = render.table(title)
    table.leading = 1
    table.add_column("id", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("scope", no_wrap=True)
    table.add_column("imp.", justify="right", no_wrap=True)
    table.add_column("content", overflow="fold", ratio=1)
    for m in found:
        created = time.strftime("%Y-%m-%d", time.gmtime(m.created_at))
        label = m.scope.value + ("" if m.is_current else " (old)")
        table.add_row(m.id, created, label, f"{m.importance:.2f}", Text(m.content))
    render.console().print(table)


def explain_line(e: dict[str, Any]) -> str:
    keywords = "none" if e["keywords"] is None else f"{e['keywords']:.3f}"
    parts = [f"cosine {e['cosine']:.3f}", f"keywords {keywords}", f"time {e['time']:.2f}",
             f"short turn {e['short_turn']:.2f}"]  # fmt: skip
    if e["reply_of"]:
        parts.append(f"reply to [{e['reply_of']}]")
    verdict = "above" if e["above_floor"] else "below"
    return " · ".join(parts) + f" · {verdict} the floor {e['floor']:.2f}"


def print_search(
    found: Sequence[tuple[str, Sequence[MemoryHit], Sequence[dict[str, Any] | None]]],
) -> None:
    """Each query (named when there are several), then its hits: score, id, content, and
    with --explain what the score is made of."""
    out = render.console()
    for query, hits, explained in found:
        if len(found) > 1:
            render.say(query, out=out)
        if not hits:
            render.say("  (no memories)", out=out)
            continue
        grid = Table.grid(padding=(0, 1), pad_edge=True)
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for h, e in zip(hits, explained, strict=True):
            grid.add_row(f"{h.score:.3f}", Text(f"[{h.memory.id}] {h.memory.content}"))
            if e is not None:
                grid.add_row("", Text(explain_line(e), style="dim"))
        out.print(grid)
