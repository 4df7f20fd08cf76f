"""Memory's settings: a flat section (``ember.sections``), so the keys keep the names README's
Configuration table gives them (``memory_mode``, ``EMBER_MEMORY_MIN_SCORE``...).

The embedder (``embed_backend``, ``embed_model``, ``models_dir``) and ``memory_vector_index``
stay the kernel's: the store opens every project file with the vector index, and the models
are a service other features use too.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ember.config import check_token


class MemorySettings(BaseModel):
    """What memory reads (``settings.section(MemorySettings)``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: auto_tail: retrieved memories are appended to each new user ask (replayed byte-for-byte
    #: on later turns); tool: the model gets memory_search/save/update/delete, run by ember;
    #: off: no memory in the proxy.
    memory_mode: Literal["auto_tail", "tool", "off"] = "auto_tail"
    #: The embedder loads on the first ask of a project that has memories; that ask waits at
    #: most this long for it (seconds) and otherwise goes on without memory.
    memory_embedder_wait: float = Field(default=3.0, ge=0, le=60)
    #: Injection budget. These are hard caps: a value may lower them (or raise the score
    #: floor) but a value past the cap is refused here, so no config can make injection unbounded.
    memory_budget_tokens: int = Field(default=1024, ge=1, le=1024)
    memory_max_items: int = Field(default=10, ge=1, le=10)
    memory_min_score: float = Field(default=0.21, ge=0.21, le=1.0)
    #: An ask naming a time ("last week", "on Halloween") prefers memories from then and
    #: takes candidates from inside that window; off: such asks rank like any other.
    memory_time_aware: bool = True
    #: Project stores kept open by the router (least recently used are closed first).
    memory_open_stores: int = Field(default=16, ge=1, le=256)
    #: New asks searched at once (each embeds its query: ~30-60 ms of CPU); an ask that
    #: finds them all busy goes on without memories at once instead of queueing behind other
    #: agents' asks (the log says how often). Under overload memory gives way, never the
    #: forwarding of requests. 0: one per CPU core.
    memory_concurrent_asks: int = Field(default=0, ge=0, le=64)
    #: The share of the machine's CPU time memory's own work may take on average: asks'
    #: searches and the vectors of facts the shadow or traffic learning found (0.1 = a tenth
    #: of every core, refilled out of idle time, down to a quarter of that on saturated
    #: cores: memory/share.py). Past it, asks go on without memories and such facts are
    #: stored without vectors until it has refilled: forwarding keeps the rest of the CPU.
    memory_cpu_share: float = Field(default=0.1, gt=0, le=1)
    #: The longest an ask waits for its memory search (seconds); past it, it goes on without
    #: memories (counted like a busy one) while the search finishes on its own and keeps its
    #: slot. A search takes milliseconds; this bounds a store that stopped answering (a
    #: PostgreSQL server that hangs never closes the connection, and the ask would wait).
    memory_search_wait: float = Field(default=2.0, gt=0, le=60)
    #: The bearer token ``ember mcp --http`` asks of every client; unset: a new one at each
    #: start, printed once on stderr. Never logged, never echoed in an error.
    mcp_token: str | None = Field(default=None, repr=False)

    @field_validator("mcp_token")
    @classmethod
    def _token(cls, v: str | None) -> str | None:
        return check_token(v)
