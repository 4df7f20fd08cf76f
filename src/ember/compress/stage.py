"""The compression stage: long tool outputs shortened once, replayed byte for byte after.

On each request of the user's own thread (title requests, compactions and sub-agents are
forwarded untouched, as README promises):
1. **Replay**: every output ember shortened in an earlier request of the session, found again
   by its message and the digest of what the client sent, gets the very bytes it got then
   (``OutputLedger``). Content that went out unshortened is never touched later: only a
   ledger entry is replayed.
2. **Shorten what is new**: outputs after the last assistant turn — reaching the provider
   for the first time — are judged (``policy``) and shortened (``shorten``) when they are long
   and may be; the result is recorded before it is sent.
3. **Retrieval**: a conversation whose first request ember saw over HTTP carries
   ``ember_retrieve`` in its tools from that request on (fixed bytes); a request whose history
   holds a shortening with a ref has the tool run by ember (``owned_tools``). A conversation
   without it (first seen later, or over a WebSocket) only gets lossless regroupings.

Fail open for the request: anything that fails here leaves the outputs as the client sent
them (a replay that fails is the one case that costs a cache write, and the log says so).
Off with ``compress = "off"`` or the request header ``x-ember-compress: off``.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.compress.ledger import Entry, OutputLedger, digest, new_ref, prune
from ember.compress.policy import judge, terms_of
from ember.compress.retrieve import SPEC, Retrieval
from ember.compress.settings import CompressSettings
from ember.compress.shorten import shorten
from ember.config import Settings
from ember.errors import EmberError, StorageUnavailable
from ember.exchange import Exchange, OwnedTools, Stage
from ember.protocols import edits
from ember.protocols.outputs import ToolOutput, live_outputs, opens_conversation, outputs_in
from ember.protocols.tooling import TOOLING, ToolSpec
from ember.redaction import has_secret
from ember.store.registry import Storage
from ember.tokens import count_tokens

log = logging.getLogger(__name__)

HEADER = "x-ember-compress"
#: Seconds between two looks at a project's originals (``_maybe_prune``).
PRUNE_EVERY = 3600.0


@dataclass
class Done:
    """What the stage did to one request (its notes, and the savings ledger's input)."""

    new: int = 0
    replayed: int = 0
    #: tokens left out of outputs new in this request, and of outputs replayed
    saved_new: int = 0
    saved_replayed: int = 0
    #: tokens of the ``ember_retrieve`` definition the request carries (what it costs: the
    #: savings ledger counts it against compression)
    tool_tokens: int = 0
    refs: list[str] = field(default_factory=list)

    def notes(self) -> dict[str, int]:
        return {
            "new": self.new,
            "replayed": self.replayed,
            "saved_new": self.saved_new,
            "saved_replayed": self.saved_replayed,
            "tool_tokens": self.tool_tokens,
        }


class CompressStage(Stage):
    name = "compress"

    def __init__(
        self, settings: Settings, storage: Storage, ledger: OutputLedger | None = None
    ) -> None:
        self.settings = settings
        self.options = settings.section(CompressSettings)
        self.storage = storage
        self.ledger = ledger or OutputLedger(storage)
        self._pruned: dict[Path, float] = {}

    async def on_request(self, ex: Exchange) -> None:
        if ex.project is None or ex.headers.get(HEADER, "").strip().lower() == "off":
            return
        if not ex.is_main_thread:
            return  # title requests, compactions and sub-agents are forwarded untouched
        db = ex.project.db_path(self.settings.home)
        if not self.storage.database(db).health.ok:
            return
        try:
            await self._compress(ex, db)
        except StorageUnavailable:
            return  # the database said so itself, once
        except EmberError as exc:
            log.warning("compress: request of session %s left as sent: %s", ex.session_id, exc)

    async def _compress(self, ex: Exchange, db: Path) -> None:
        body = ex.doc.value
        conversation = ex.thread.id if ex.thread is not None else ex.session_id
        offered = await self.ledger.offered(
            db, conversation, opens_conversation(ex.adapter, body), not ex.over_socket
        )
        entries = await self.ledger.entries(db, ex.session_id)
        done = Done()
        self._replay(ex, entries, done)
        await self._shorten_new(ex, db, entries, offered, done)
        if offered:
            ops = TOOLING[ex.adapter.name]
            ops.add_definitions(ex.doc, SPECS)
            done.tool_tokens = _definition_tokens(ex.adapter.name)
            if done.refs:
                ex.owned_tools = with_owned(ex.owned_tools, Retrieval(self.ledger, db))
        if done.new or done.replayed or done.tool_tokens:
            ex.notes[self.name] = done.notes()
            ex.state[self.name] = done

    def _replay(self, ex: Exchange, entries: dict[str, Entry], done: Done) -> None:
        """Put back what was sent in place of each earlier output still in the history."""
        if not entries:
            return
        by_message: dict[int, list[Entry]] = {}
        for e in entries.values():
            by_message.setdefault(e.message, []).append(e)
        body = ex.doc.value
        for message in sorted(by_message):
            for out in outputs_in(ex.adapter, body, message):
                if out.text is None:
                    continue
                entry = entries.get(digest(out.call_id, out.text))
                if entry is None or entry.message != message:
                    continue
                edits.replace_tool_output(ex.doc, out, entry.shortened)
                done.replayed += 1
                done.saved_replayed += entry.saved_tokens
                if "ember_retrieve ref=" in entry.shortened:
                    done.refs.append(entry.ref)

    async def _shorten_new(
        self, ex: Exchange, db: Path, entries: dict[str, Entry], offered: bool, done: Done
    ) -> None:
        live = [o for o in live_outputs(ex.adapter, ex.doc.value) if o.text is not None]
        if not live:
            return
        ask = _ask(ex)
        for out in live:
            assert out.text is not None
            key = digest(out.call_id, out.text)
            if key in entries:
                continue  # a retried request: replayed above
            entry = await self._shorten_one(ex, db, out, key, ask, offered)
            if entry is None:
                continue
            edits.replace_tool_output(ex.doc, out, entry.shortened)
            done.new += 1
            done.saved_new += entry.saved_tokens
            if "ember_retrieve ref=" in entry.shortened:
                done.refs.append(entry.ref)

    async def _shorten_one(
        self, ex: Exchange, db: Path, out: ToolOutput, key: str, ask: str, offered: bool
    ) -> Entry | None:
        text = out.text or ""
        verdict = judge(
            out.tool,
            out.arguments,
            text,
            is_error=out.is_error,
            min_chars=self.options.compress_min_chars,
            policies=self.options.compress_tools,
            retrievable=offered and out.tool is not None,
        )
        if verdict.how is None or has_secret(text):
            return None  # exact; or a secret a stored original would keep
        ref = new_ref(ex.session_id, key)
        terms = terms_of(ask, *(str(v) for v in out.arguments.values()))
        short = shorten(text, verdict.how, ref, terms)
        if short is None:
            return None
        entry = Entry(
            ref,
            out.message,
            out.call_id,
            key,
            short.text,
            count_tokens(text),
            count_tokens(short.text),
        )
        await self.ledger.record(
            db,
            ex.session_id,
            entry,
            tool=out.tool,
            how=short.how,
            original=text,
            left_out=short.left_out,
        )
        self._maybe_prune(db)
        return entry

    def _maybe_prune(self, db: Path) -> None:
        """Keep the originals within their bounds (``compress_keep_days``, ``_mb``): looked at
        once an hour per project, on the database's writer, never in a request's way."""
        now = time.monotonic()
        if now - self._pruned.get(db, -PRUNE_EVERY) < PRUNE_EVERY:
            return
        self._pruned[db] = now
        older = time.time() - self.options.compress_keep_days * 86400
        keep = int(self.options.compress_keep_mb * 1024 * 1024)
        self.storage.database(db).submit(lambda c: prune(c, older, keep), label="compress")


#: Fixed bytes: the tool list is part of the cached prefix.
SPECS: tuple[ToolSpec, ...] = (SPEC,)


@functools.cache
def _definition_tokens(protocol: str) -> int:
    """The tokens ``ember_retrieve``'s definition adds to a request of ``protocol``."""
    return count_tokens(json.dumps([TOOLING[protocol].definition(s) for s in SPECS]))


def _ask(ex: Exchange) -> str:
    """The user's latest words (what the terms a shortening keeps come from)."""
    index = ex.adapter.latest_user_index(ex.doc.value)
    return ex.adapter.user_text(ex.doc.value, index) if index is not None else ""


class _Both:
    """Two sets of owned tools as one (memory's tool mode, and ``ember_retrieve``)."""

    def __init__(self, first: OwnedTools, second: OwnedTools) -> None:
        self._parts = (first, second)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(s for p in self._parts for s in p.specs)

    async def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        for part in self._parts:
            if any(s.name == name for s in part.specs):
                return await part.call(name, arguments)
        return f"unknown tool {name!r}", True


def with_owned(current: OwnedTools | None, added: OwnedTools) -> OwnedTools:
    return added if current is None else _Both(current, added)
