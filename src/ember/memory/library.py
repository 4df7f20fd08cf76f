"""Library mode for memory: a framework that calls the model itself gets the project's memories
in its requests exactly as the proxy puts them there.

``MemoryInjector.inject`` takes the request the framework is about to send and hands back the
one to send instead. It runs the proxy's own memory stage (``ember.memory.stage``, mode
``auto_tail``) on it, so both modes do the same thing with the same code:

- a new ask of the user gets the READ-ONLY block of what the project's store finds for it,
  appended after the client's last block of that ask — system, tools and every earlier byte
  are left as they were;
- every later request of the session gets each earlier block back at its message, byte for
  byte (``ember.memory.ledger``: kept in the project's database, so a restarted framework
  replays them too). The framework keeps its own history *without* the blocks, as a client of
  the proxy does; the provider still sees the prefix it cached, and the session keeps its
  cache reads.

What comes back has the type of what went in: bytes (or text) are edited by splicing, every
byte of the framework's kept; a mapping comes back as a new ``dict`` (the framework's own is
never changed) for an SDK to serialise as it serialises the rest.

Fail closed for data, open for the request, as in the proxy: a project that cannot be resolved
gets nothing, and when memory fails the request is handed back as it was (the log says why).
Only the user's own conversation should be passed: a title request, a summary or a sub-agent's
request would each take a block of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Any, overload

from prometheus_client import CollectorRegistry

# Library mode is an entry point: a program that imports this module and calls
# ``ember.config.load_settings()`` (README) gets the registered features' settings and
# tables, which loading the composition root installs (``ember.installed``).
import ember.compose  # noqa: F401
from ember.config import Settings
from ember.errors import StorageUnavailable
from ember.exchange import Exchange
from ember.framework import LibraryError, ProjectLike, adapter_for, project_ref, request_bytes
from ember.memory.metrics import MemoryMetrics
from ember.memory.settings import MemorySettings
from ember.memory.stage import MemoryStage
from ember.protocols.jsonedit import JsonDoc
from ember.protocols.plain import PATHS
from ember.store.registry import Storage, storage_for

__all__ = ["LibraryError", "MemoryInjector"]

log = logging.getLogger(__name__)


class MemoryInjector:
    """The proxy's memory injection for a framework's requests; see the module. Use it on one
    event loop, inside ``async with`` (or ``close()`` it).

    ``storage``: share another library's (``shadow.storage`` of ``ember.compose.
    shadow_library``: one owner per database in a process; close the injector first, as
    nested ``async with`` does). Without it the injector opens its own and closes it. The
    memory stores are the injector's own either way: what another writer adds to a project
    (shadow memory's promoted facts, ``ember memory add``) is seen at the next search."""

    def __init__(self, settings: Settings, *, storage: Storage | None = None) -> None:
        mode = settings.section(MemorySettings).memory_mode
        if mode == "tool":
            raise LibraryError(
                "memory_mode is tool: its memory tools are run by the proxy, which a library "
                "has not got; use memory_mode auto_tail (or off) for library injection"
            )
        self.settings = settings
        self._own_storage = storage is None
        self.storage = storage or storage_for(settings)
        self.stage = MemoryStage(settings, self.storage)
        #: memory's metrics (``ember_memory_*``), in a registry of the injector's own
        self.metrics = CollectorRegistry()
        self.stage.metrics = MemoryMetrics(self.metrics, self.stage.gate)
        self._closed = False

    @overload
    async def inject(
        self, session_id: str, *, project: ProjectLike, protocol: str, request: bytes | str
    ) -> bytes: ...

    @overload
    async def inject(
        self,
        session_id: str,
        *,
        project: ProjectLike,
        protocol: str,
        request: Mapping[str, Any],
    ) -> dict[str, Any]: ...

    async def inject(
        self,
        session_id: str,
        *,
        project: ProjectLike,
        protocol: str,
        request: bytes | str | Mapping[str, Any],
    ) -> bytes | dict[str, Any]:
        """The request of ``session_id`` to send, with the project's memories: a new block on
        a new ask, the session's earlier blocks back where they were (``protocol``:
        ``anthropic``, ``openai_chat`` or ``openai_responses``; ``project``: its directory or
        a ``ProjectRef``). Raises ``LibraryError`` for arguments it cannot use."""
        if self._closed:
            raise LibraryError("the injector is closed: build a new one")
        if not session_id:
            raise LibraryError("session_id is empty: pass the framework's id of the conversation")
        adapter = adapter_for(protocol)
        ref = project_ref(project, self.settings.project_identity)
        raw, _ = request_bytes(request)
        doc = JsonDoc(raw)
        ex = Exchange(adapter, PATHS[adapter.name], "", {}, doc, session_id, ref)
        try:
            await self.stage.on_request(ex)
        except StorageUnavailable:  # the project's database said so itself, once
            doc.rollback(0)
        except Exception:  # fail open: the request goes as the framework wrote it
            log.exception("memory: no injection for a request of session %s", session_id)
            doc.rollback(0)
        if isinstance(request, Mapping):
            value: dict[str, Any] = doc.value
            return value
        return doc.to_bytes()

    async def close(self) -> None:
        """Close the memory stores (and the storage, if the injector opened it). Closing twice
        is closing once."""
        if self._closed:
            return
        self._closed = True
        await self.stage.close()
        if self._own_storage:
            await asyncio.to_thread(self.storage.flush, 10)
            await asyncio.to_thread(self.storage.close)

    async def __aenter__(self) -> MemoryInjector:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
