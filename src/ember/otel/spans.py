"""What one exchange's span says (pure): the attributes, named after OpenTelemetry's GenAI
conventions where one exists (``gen_ai.*``) and ``ember.*`` otherwise.

Never content and never credentials: the span carries the model, token counts, cost, status
and which project and session (the project as its folder name under ``$EMBER_HOME``: the
folder's basename and a digest of its path, never the path itself). A collector is often
another team's system; nothing a user typed goes there.
"""

from __future__ import annotations

from typing import Any

from ember.exchange import Exchange, Outcome
from ember.prices import PriceTable

SYSTEMS = {
    "anthropic": "anthropic",
    "openai_chat": "openai",
    "openai_responses": "openai",
    "gemini": "gcp.gemini",
}


def attributes(ex: Exchange, outcome: Outcome, prices: PriceTable) -> dict[str, Any]:
    msg = outcome.message
    usage = msg.usage if msg is not None else None
    model = (msg.model if msg is not None and msg.model else None) or ex.model
    out: dict[str, Any] = {
        "gen_ai.system": SYSTEMS.get(ex.adapter.name, ex.adapter.name),
        "gen_ai.operation.name": "chat",
        "http.response.status_code": outcome.status,
        "ember.protocol": ex.adapter.name,
        "ember.outcome": outcome.kind,
        "ember.stream": bool(ex.stream or outcome.streamed),
        "ember.session_id": ex.session_id,
        "ember.thread_kind": ex.thread.kind if ex.thread is not None else "main",
    }
    if model:
        out["gen_ai.request.model"] = model
    if ex.project is not None:
        out["ember.project"] = ex.project.dir_name
    if usage is not None:
        out["gen_ai.usage.input_tokens"] = usage.input_tokens
        out["gen_ai.usage.output_tokens"] = usage.output_tokens
        out["ember.usage.cache_read_tokens"] = usage.cache_read_tokens
        out["ember.usage.cache_write_tokens"] = usage.cache_write_tokens
    cost = prices.cost(model, usage)
    if cost is not None:
        out["ember.cost_usd"] = cost
    if outcome.ttfb_ms is not None:
        out["ember.ttfb_ms"] = outcome.ttfb_ms
    for stage, note in ex.notes.items():  # what ember changed: small values only
        for key, value in note.items():
            if isinstance(value, bool | int | float | str):
                out[f"ember.{stage}.{key}"] = value
    return out
