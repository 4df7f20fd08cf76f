"""``ember stats``'s first lines: what ember saved the project net, each lever's part, and
what it spent on its own (the savings ledger, ``ember.savings_ledger``), in one sentence."""

from __future__ import annotations

from typing import Any

import click

from ember.config import Settings
from ember.errors import EmberError
from ember.savings import OutputRates

#: How the sentence names each part (the JSON's keys are the names users script against).
NAMES = {
    "compression": "compression",
    "shaping": "shaping",
    "shadow": "shadow",
    "steward": "steward",
    "retrievals": "retrievals",
    "memory_blocks": "memory blocks",
    "verbosity_block": "verbosity block",
    "tool_definitions": "tool definitions",
    "learn": "learn",
    "other": "other calls",
}
#: Spent parts named even at $0: what the user asked about, the ones that cost by default.
ALWAYS = ("shadow", "memory_blocks", "retrievals")


def output_rates(settings: Settings) -> OutputRates:
    """Shaping's rates, read from the home's stats.db (or the PostgreSQL store); what cannot
    be read leaves shaping without an estimate, saying why, and never fails ``ember stats``."""
    try:
        from ember.shaping.cli import opened_state
        from ember.shaping.rates import output_rates as rates_of
        from ember.shaping.recorder import read_state

        with opened_state(settings, write=False) as state:
            stored = read_state(state)
        return OutputRates.from_json(rates_of(stored))
    except (ValueError, OSError, EmberError, click.ClickException) as exc:
        return OutputRates(why=f"shaping's state cannot be read: {exc}")


def _usd(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.4f}"


def _shaping(part: dict[str, Any]) -> str:
    if not part["requests"] or part["requests_without_estimate"] == part["requests"]:
        return "shaping no estimate"
    label = "est." if part["label"] == "estimated" else "measured"
    return f"shaping {_usd(part['usd'])} {label}"


def sentence(doc: dict[str, Any], window: str) -> list[str]:
    """ "Saved $X net <window> (compression $A, shaping $B est.) − spent $C (shadow $..,
    memory blocks $.., retrievals $..)", then why an empty part is empty."""
    net = doc["net_usd"]
    saved = f"compression {_usd(doc['compression']['usd'])}, {_shaping(doc['shaping'])}"
    spent_parts = [
        f"{NAMES[n]} {_usd(doc[n]['usd'])}"
        for n in NAMES
        if n not in ("compression", "shaping") and (n in ALWAYS or doc[n]["requests"])
    ]
    if net is None:
        head = f"Saved: unknown net {window}"
    elif net >= 0:
        head = f"Saved {_usd(net)} net {window}"
    else:
        head = f"Cost {_usd(-net)} net {window} (ember spent more than it saved)"
    lines = [f"{head} ({saved}) − spent {_usd(doc['spent_usd'])} ({', '.join(spent_parts)})."]
    n = doc["unpriced_requests"]
    if n:
        lines.append(
            f"  {n} {'request is' if n == 1 else 'requests are'} of a model without a price, so "
            'the net is unknown: add its price as [prices."<model>"] in the config file.'
        )
    lines.extend(f"  {why}" for why in doc["why"].values())
    return [*lines, ""]
