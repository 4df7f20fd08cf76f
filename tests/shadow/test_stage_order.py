"""Answers are handled after the client has them, concurrently: a late older one must not
look like a restarted history (the demo saw its transcript recorded twice, under new ids)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ember.compose import build_storage
from ember.config import load_settings
from ember.exchange import Exchange, Outcome, Services
from ember.project import ProjectRef
from ember.protocols import ANTHROPIC
from ember.protocols.base import AssembledMessage, Block
from ember.protocols.jsonedit import JsonDoc
from ember.proxy.upstream import Upstream
from ember.sessions import SessionRegistry
from ember.shadow.stage import ShadowStage

PROJECT = ProjectRef("/home/dev/order", "header:x-ember-cwd")


def exchange(messages: list[dict[str, Any]], settings: Any) -> Exchange:
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": messages})
    return Exchange(
        ANTHROPIC, "/v1/messages", "", {}, JsonDoc(body.encode()), settings, "s1", PROJECT
    )


def outcome(text: str) -> Outcome:
    answer = AssembledMessage(
        "anthropic", blocks=[Block("text", text)], stop_reason="end_turn", complete=True
    )
    return Outcome(200, "ok", answer, False, 1.0, sent=b"{}")


async def test_a_late_answer_of_an_older_request_is_not_a_new_generation(tmp_path: Path) -> None:
    settings = load_settings(env={}, home=tmp_path, shadow="primary")
    storage = build_storage(settings)
    stage = ShadowStage(settings)
    upstream = Upstream.from_settings(settings)
    await stage.start(Services(settings, storage, SessionRegistry(), upstream, lambda a, p, q: p))
    first = [{"role": "user", "content": "one"}]
    second = [
        *first,
        {"role": "assistant", "content": "ok one"},
        {"role": "user", "content": "two"},
    ]
    ex1, ex2 = exchange(first, settings), exchange(second, settings)
    await stage.on_request(ex1)
    await stage.on_request(ex2)
    await stage.on_response(ex2, outcome("ok two"))  # the newer answer is handled first
    await stage.on_response(ex1, outcome("ok one"))
    db = storage.database(PROJECT.db_path(tmp_path))
    gens = db.read(
        lambda c: [r[0] for r in c.execute("SELECT DISTINCT generation FROM transcript_messages")]
    )
    count = db.read(lambda c: c.execute("SELECT COUNT(*) FROM transcript_messages").fetchone()[0])
    assert gens == [1] and count == 4
    assert stage.service is not None
    st = stage.service.state("s1")
    assert st is not None and "generation-ended" not in st.pending.values()
    await stage.service.tasks.cancel_all()
    await upstream.close()
    storage.close()
