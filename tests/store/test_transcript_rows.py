"""Position digests: how the transcript tells that a request extends what it recorded."""

from __future__ import annotations

import hashlib

from ember.protocols import ANTHROPIC
from ember.protocols.transcript_items import item_digest, transcript_items
from ember.store.transcript_rows import position_digests
from tests.client_fixtures import all_requests


def test_a_read_from_a_position_digests_the_positions_it_read_as_the_full_read() -> None:
    """The lineage compares the first and the last recorded position's digests: a read that
    starts late must give those positions the very digests of a full read, and every
    position it skipped the digest of nothing."""
    nothing = hashlib.sha256(b"").hexdigest()[:24]
    requests = [r for r in all_requests() if r.client == "claude-code" and r.kind == "main"]
    assert requests
    for request in requests:
        body = request.json()
        full = position_digests(transcript_items(ANTHROPIC, body))
        for start in range(2, len(full)):
            late = position_digests(transcript_items(ANTHROPIC, body, from_position=start))
            assert late[0] == full[0] and late[start:] == full[start:]
            assert late[1:start] == [nothing] * (start - 1)


def test_a_position_digest_joins_its_items_digests_in_order() -> None:
    items = transcript_items(
        ANTHROPIC,
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "tool_result", "tool_use_id": "x", "content": "b"},
                    ],
                }
            ]
        },
    )
    assert len(items) == 2
    joined = "\0".join(item_digest(i) for i in items)
    assert position_digests(items) == [hashlib.sha256(joined.encode()).hexdigest()[:24]]
