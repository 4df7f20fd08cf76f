"""The human rendering of ``ember shadow``: one table per measure, each followed by how it was
computed (the JSON carries the same ``method`` / ``label`` / ``note`` fields)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text


def _share(s: dict[str, Any] | None) -> str:
    if not s:
        return "-"
    share = s.get("share")
    pct = "n/a" if share is None else f"{share:.0%}"
    return f"{s['covered']} / {s['total']} ({pct})"


def _usd(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.4f}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def scope_text(result: dict[str, Any]) -> Text:
    s = result["scope"]
    return Text(
        f"Compared sessions: {s['compared_sessions']} (left out: {s['sessions_left_out']}); "
        f"valid steward facts: {s['steward_facts']}, valid shadow proposals: "
        f"{s['shadow_proposals']}.\n{s['method']}."
    )


def coverage_table(result: dict[str, Any]) -> Table:
    ex, ev, se = result["exact"], result["evidence"], result["semantic"]
    notes = [
        "covered / total: facts of one side that the measure matches on the other.",
        f"exact: {ex['method']}.",
        f"evidence: {ev['method']}; {ev['note']}.",
    ]
    if se.get("computed"):
        notes.append(f"semantic: {se['method']} ({se['label']}); cost {_usd(se['estimated_usd'])}.")
    else:
        notes.append(f"semantic: not computed: {se['why']}.")
    table = Table(
        title="Coverage (three measures, never added up)",
        caption="\n".join(notes),
    )
    table.add_column("measure")
    table.add_column("steward facts the shadow also has", justify="right")
    table.add_column("shadow facts the steward also has", justify="right")
    table.add_row(
        "exact", _share(ex["steward_covered_by_shadow"]), _share(ex["shadow_covered_by_steward"])
    )
    table.add_row(
        "evidence",
        _share(ev["steward_covered_by_shadow"]),
        _share(ev["shadow_covered_by_steward"]),
    )
    if se.get("computed"):
        table.add_row(
            "semantic",
            _share(se["steward_covered_by_shadow"]),
            _share(se["shadow_covered_by_steward"]),
        )
    else:
        table.add_row("semantic", "not computed", "not computed")
    return table


def pairs_table(title: str, pairs: list[dict[str, Any]], caption: str) -> Table | None:
    if not pairs:
        return None
    table = Table(title=title, caption=caption)
    for col in ("steward fact", "shadow proposal"):
        table.add_column(col, overflow="fold")
    extra = "shared_messages" in pairs[0]
    if extra:
        table.add_column("shared evidence", overflow="fold")
    for p in pairs:
        cells = [
            f"{p['steward_content']}\n[dim]{p['steward']}[/dim]",
            f"{p['shadow_content']}\n[dim]{p['shadow']}[/dim]",
        ]
        if extra:
            cells.append(", ".join(p["shared_messages"]))
        table.add_row(*cells)
    return table


def cost_table(result: dict[str, Any]) -> Table:
    cost = result["cost"]
    totals = ", ".join(f"{side} {_usd(v)}" for side, v in cost["totals_usd"].items())
    table = Table(
        title=f"Cost by path x model x status ({cost['label']})",
        caption=f"{cost['method']}.\ntokens: input / cache read / cache write / output.\n"
        f"Totals: {totals}.",
    )
    table.add_column("side / path")
    table.add_column("model", overflow="fold")
    table.add_column("status")
    for col in ("runs / calls", "tokens", "cost / price snapshot"):
        table.add_column(col, justify="right")
    for r in cost["rows"]:
        table.add_row(
            f"{r['side']}\n[dim]{r['path']}[/dim]",
            r["model"] or "-",
            r["status"],
            f"{r['runs']} / {r['calls']}",
            f"{r['input_tokens']:,} / {r['cache_read_tokens']:,}\n"
            f"{r['cache_write_tokens']:,} / {r['output_tokens']:,}",
            f"{_usd(r['estimated_usd'])}\n[dim]{', '.join(r['price_snapshots']) or '-'}[/dim]",
        )
    return table


def latency_table(result: dict[str, Any]) -> Table:
    lat = result["latency"]
    table = Table(title="Latency per path", caption=lat["method"])
    table.add_column("path")
    for col in ("runs", "p50 ms", "p95 ms"):
        table.add_column(col, justify="right")
    for r in lat["rows"]:
        table.add_row(r["path"], str(r["runs"]), _ms(r["p50_ms"]), _ms(r["p95_ms"]))
    return table


_QUALITY_ROWS = (
    ("proposals", "proposals (valid and invalid)"),
    ("valid", "valid"),
    ("facts_all_ok", "with every pointer ok"),
    ("pointers", "pointers"),
    ("ok", "  ok"),
    ("missing_target", "  target missing"),
    ("other_session", "  in another session"),
    ("wrong_target", "  wrong kind of target"),
    ("malformed", "  malformed"),
)


def quality_table(result: dict[str, Any]) -> Table:
    q = result["evidence_quality"]
    table = Table(title="Evidence pointers", caption=f"{q['method']}.\n{q['note']}.")
    table.add_column("")
    by_side = {r["side"]: r for r in q["rows"]}
    for side in by_side:
        table.add_column(side, justify="right")
    for key, title in _QUALITY_ROWS:
        table.add_row(title, *(str(row[key]) for row in by_side.values()))
    return table


def with_notes(renderables: list[Any]) -> list[Any]:
    """Each table's caption printed under it at the console's full width (a caption is only
    as wide as its table, and a narrow table made the notes a column of words)."""
    out: list[Any] = []
    for r in renderables:
        caption = r.caption if isinstance(r, Table) else None
        if isinstance(r, Table):
            r.caption = None
        out.append(r)
        if caption:
            out.append(Text(str(caption), style="dim"))
        out.append(Text(""))
    return out


def render(result: dict[str, Any]) -> list[Any]:
    """The report, top to bottom."""
    out: list[Any] = [scope_text(result), coverage_table(result)]
    ev = result["evidence"]
    for table in (
        pairs_table(
            "Evidence neighbours (not the same fact: review them)",
            ev["neighbours"],
            ev["note"],
        ),
        pairs_table(
            f"Semantic pairs ({result['semantic'].get('label')})",
            result["semantic"].get("pairs") or [],
            "the light model's judgment, one call per session",
        ),
    ):
        if table is not None:
            out.append(table)
    out += [cost_table(result), latency_table(result), quality_table(result)]
    return out
