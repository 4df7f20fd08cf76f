"""The tables of ``ember shadow runs`` and ``ember shadow proposals``, readable at 80 columns.

The runs table used to be seven bordered columns that rich squeezed at 80 columns until
"completed" read "comple / ted" and a model "claude / -sonne / t-4-5". Here each row is a few
short lines (run, session, start; path, trigger, model; status, latency...), a long value is
cut with "…" (the table then says "--json for the full rows"), and the long texts — why a
run was skipped or failed, why a proposal is invalid — are numbered notes under the table,
at the terminal's full width.
"""

from __future__ import annotations

import json
import time
from typing import Any

from rich.table import Table
from rich.text import Text

from ember.cmdkit.render import Clip, count, table
from ember.shadow.spend_share import weighted_tokens

TOKENS_HOW = "tokens: the provider's usage counters, summed over the run's calls"
LATENCY_HOW = "latency: first call sent to last answer read"


class Notes:
    """Long texts moved out of a narrow cell: the cell gets ``[n]``, the note its text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def mark(self, text: str | None) -> str:
        if not text:
            return ""
        if text not in self.texts:
            self.texts.append(text)
        return f" [{self.texts.index(text) + 1}]"

    def lines(self) -> list[str]:
        return [f"[{i}] {t}" for i, t in enumerate(self.texts, 1)]


def _lines(*parts: tuple[str, str]) -> Text:
    """Cell text of several lines; the first plain, the others in the given style."""
    return Text("\n").join(Text(p, style=s) for p, s in parts)


def run_cost(r: dict[str, Any]) -> Text:
    """Dollars; for a model without a price, weighted tokens, as the budget counts them;
    "-" for a run that made no call."""
    if not r["calls"]:
        return Text("-")  # no call made (skipped, failed before asking): nothing spent
    if r["estimated_usd"] is not None:
        return Text(f"${r['estimated_usd']:.4f}")
    protocol = "anthropic" if str(r["model"] or "").startswith("claude") else "openai"
    tokens = weighted_tokens(
        protocol,
        r["input_tokens"],
        r["cache_read_tokens"],
        r["cache_write_tokens"],
        r["output_tokens"],
    )
    return _lines(("unknown", ""), (f"{count(tokens)} tok", "dim"))


def runs_table(rows: list[dict[str, Any]], title: str, cost_how: str) -> Table:
    """Six columns in at most 78 characters; reasons and errors as numbered notes."""
    clip, notes = Clip(), Notes()
    t = table(title)
    t.leading = 1  # a blank line between rows of several lines each
    t.add_column("run\nsession\nstarted", no_wrap=True)
    t.add_column("path\ntrigger\nmodel", no_wrap=True)
    t.add_column("status\nlatency", no_wrap=True)
    t.add_column("tokens\nin/read\nwrite/out", justify="right", no_wrap=True)
    t.add_column("cost", justify="right", no_wrap=True)
    t.add_column("facts\nok/all", justify="right", no_wrap=True)
    for r in rows:
        started = time.strftime("%m-%d %H:%M", time.localtime(r["started_at"]))
        latency = "-" if r["latency_ms"] is None else f"{r['latency_ms']:,.0f} ms"
        t.add_row(
            _lines((r["id"], ""), (clip(r["session_id"], 14), "dim"), (started, "dim")),
            _lines(
                (r["path"], ""),
                (clip(r.get("trigger") or "-", 17), "dim"),
                (clip(r["model"], 17), "dim"),
            ),
            _lines((r["status"] + notes.mark(r["error"] or r["reason"]), ""), (latency, "dim")),
            _lines(
                (f"{count(r['input_tokens'])}/{count(r['cache_read_tokens'])}", ""),
                (f"{count(r['cache_write_tokens'])}/{count(r['output_tokens'])}", ""),
            ),
            run_cost(r),
            f"{r['valid_proposals']}/{r['proposals']}",
        )
    t.caption = "\n".join(
        [
            *notes.lines(),
            f"{TOKENS_HOW} (input / cache read, cache write / output; k = thousand, M = million)",
            cost_how,
            LATENCY_HOW,
            "facts: valid / proposed",
            *clip.hint(),
        ]
    )
    return t


def _evidence_cell(evidence: Any, clip: Clip) -> Text:
    if not isinstance(evidence, list):
        return Text(clip(json.dumps(evidence, ensure_ascii=False), 40))
    parts: list[tuple[str, str]] = []
    for e in evidence:
        if isinstance(e, dict):
            target = e.get("messageId") or e.get("sessionId") or "?"
            parts += [(clip(str(e.get("kind")), 16), ""), ("-> " + clip(str(target), 13), "dim")]
        else:
            parts.append((clip(json.dumps(e, ensure_ascii=False), 16), ""))
    return _lines(*parts) if parts else Text("-")


def proposals_table(rows: list[dict[str, Any]], title: str) -> Table:
    """Four columns at 80: ids, the fact (wrapped), its evidence, the check and the memory
    it became; why a proposal is invalid is a numbered note under the table."""
    clip, notes = Clip(), Notes()
    t = table(title)
    t.leading = 1
    t.add_column("proposal\nrun", no_wrap=True)
    t.add_column("content", overflow="fold", ratio=1)
    t.add_column("evidence", no_wrap=True)
    t.add_column("check\nmemory", no_wrap=True)
    for r in rows:
        error = r["validation_error"]
        check = "valid" if error is None else "invalid" + notes.mark(error)
        t.add_row(
            _lines((r["id"], ""), (r["run_id"], "dim")),
            Text(r["content"]),
            _evidence_cell(r["evidence"], clip),
            _lines((check, ""), (r["memory_id"] or "-", "dim")),
        )
    t.caption = "\n".join(
        [
            *notes.lines(),
            "valid: passed the schema and the evidence checks (each pointer names a message "
            "of this session of the kind it claims); it says nothing of whether the fact is "
            "true",
            *clip.hint(),
        ]
    )
    return t
