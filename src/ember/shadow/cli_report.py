"""The human rendering of ``ember shadow compare``: one table per measure, each followed by
how it was computed (the JSON carries the same ``method`` / ``label`` / ``note`` fields).

Tables are drawn without outer borders and token counts as 12.3k, so the cost table's six
columns fit 80 columns instead of folding a model name over three lines; a model name too
long for its column is cut with "…" and the note under the table says so."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from ember.cmdkit.render import Clip, count, table


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
    t = table("Coverage (three measures, never added up)")
    t.caption = "\n".join(notes)
    t.add_column("measure")
    t.add_column("steward facts the\nshadow also has", justify="right")
    t.add_column("shadow facts the\nsteward also has", justify="right")
    t.add_row(
        "exact", _share(ex["steward_covered_by_shadow"]), _share(ex["shadow_covered_by_steward"])
    )
    t.add_row(
        "evidence",
        _share(ev["steward_covered_by_shadow"]),
        _share(ev["shadow_covered_by_steward"]),
    )
    if se.get("computed"):
        t.add_row(
            "semantic",
            _share(se["steward_covered_by_shadow"]),
            _share(se["shadow_covered_by_steward"]),
        )
    else:
        t.add_row("semantic", "not computed", "not computed")
    return t


def pairs_table(title: str, pairs: list[dict[str, Any]], caption: str) -> Table | None:
    if not pairs:
        return None
    t = table(title)
    t.caption = caption
    t.leading = 1
    for col in ("steward fact", "shadow proposal"):
        t.add_column(col, overflow="fold", ratio=1)
    extra = "shared_messages" in pairs[0]
    if extra:
        t.add_column("shared evidence", overflow="fold")
    for p in pairs:
        cells = [
            Text(p["steward_content"]) + Text("\n" + p["steward"], style="dim"),
            Text(p["shadow_content"]) + Text("\n" + p["shadow"], style="dim"),
        ]
        if extra:
            cells.append(Text(", ".join(p["shared_messages"])))
        t.add_row(*cells)
    return t


def cost_table(result: dict[str, Any]) -> Table:
    cost = result["cost"]
    totals = ", ".join(f"{side} {_usd(v)}" for side, v in cost["totals_usd"].items())
    clip = Clip()
    t = table(f"Cost by path x model x status ({cost['label']})")
    t.leading = 1
    t.add_column("side\npath", no_wrap=True)
    t.add_column("model", no_wrap=True)
    t.add_column("status", no_wrap=True)
    t.add_column("runs /\ncalls", justify="right", no_wrap=True)
    t.add_column("tokens\nin/read\nwrite/out", justify="right", no_wrap=True)
    t.add_column("cost\nprice snapshot", justify="right", no_wrap=True)
    for r in cost["rows"]:
        snapshots = ", ".join(r["price_snapshots"]) or "-"
        t.add_row(
            Text(r["side"]) + Text("\n" + r["path"], style="dim"),
            clip(r["model"], 20),
            r["status"],
            f"{r['runs']} / {r['calls']}",
            f"{count(r['input_tokens'])}/{count(r['cache_read_tokens'])}\n"
            f"{count(r['cache_write_tokens'])}/{count(r['output_tokens'])}",
            Text(_usd(r["estimated_usd"])) + Text("\n" + clip(snapshots, 16), style="dim"),
        )
    t.caption = "\n".join(
        [
            f"{cost['method']}.",
            "tokens: input / cache read, cache write / output (k = thousand, M = million).",
            f"Totals: {totals}.",
            *clip.hint(),
        ]
    )
    return t


def latency_table(result: dict[str, Any]) -> Table:
    lat = result["latency"]
    t = table("Latency per path")
    t.caption = lat["method"]
    t.add_column("path")
    for col in ("runs", "p50 ms", "p95 ms"):
        t.add_column(col, justify="right")
    for r in lat["rows"]:
        t.add_row(r["path"], str(r["runs"]), _ms(r["p50_ms"]), _ms(r["p95_ms"]))
    return t


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
    t = table("Evidence pointers")
    t.caption = f"{q['method']}.\n{q['note']}."
    t.add_column("")
    by_side = {r["side"]: r for r in q["rows"]}
    for side in by_side:
        t.add_column(side, justify="right")
    for key, title in _QUALITY_ROWS:
        t.add_row(title, *(str(row[key]) for row in by_side.values()))
    return t


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


def report(result: dict[str, Any]) -> list[Any]:
    """The report, top to bottom."""
    out: list[Any] = [scope_text(result), coverage_table(result)]
    ev = result["evidence"]
    for pairs in (
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
        if pairs is not None:
            out.append(pairs)
    out += [cost_table(result), latency_table(result), quality_table(result)]
    return out
