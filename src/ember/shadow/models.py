"""What a shadow turn may propose, and the outcome of a run (pure data).

The proposal batch is the contract (``CONTRACT.md``): ``{"facts": [{"content", "category"?,
"evidence": [{"kind", "messageId"} | {"kind": "observed-outcome", "sessionId"}, ...],
"supersedes"?: ["<memory id>", ...]}]}``.
Each fact is validated on its own: one bad fact is kept with its ``validation_error`` and
never takes its valid siblings down with it (they are the comparison data too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from ember.redaction import redact

EvidenceKind = Literal["user-stated", "user-accepted", "tool-verified", "observed-outcome"]
RunPath = Literal["hot", "cold"]
RunStatus = Literal["running", "completed", "failed", "cancelled", "skipped"]
Trigger = Literal[
    "turn-ended",
    "turn-failed",
    "idle",
    "generation-ended",
    "stopping",
    "backlog",
    "library",
    "manual",
]

#: A fact longer than this is a summary, not a fact.
MAX_FACT_CHARS = 1000
#: At most this many facts are taken from one answer (the rest are dropped, and said so).
MAX_FACTS = 20
#: At most this many remembered facts one fact may correct.
MAX_SUPERSEDES = 5


class EvidenceIn(BaseModel):
    """Exactly one of ``messageId`` (a transcript message) or ``sessionId`` (the generation
    as a whole, only for an observed outcome)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    kind: EvidenceKind
    messageId: str | None = Field(default=None, min_length=1, max_length=64)
    sessionId: str | None = Field(default=None, min_length=1, max_length=256)

    @model_validator(mode="after")
    def _one_target(self) -> EvidenceIn:
        if (self.messageId is None) == (self.sessionId is None):
            raise ValueError("each evidence item names exactly one of messageId or sessionId")
        if self.sessionId is not None and self.kind != "observed-outcome":
            raise ValueError("only observed-outcome evidence may point at a whole session")
        return self


MemoryId = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class FactIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    content: str = Field(min_length=1, max_length=MAX_FACT_CHARS)
    category: str | None = Field(default=None, max_length=64)
    evidence: list[EvidenceIn] = Field(min_length=1, max_length=10)
    #: the ids of remembered facts (as the question listed them) that this one corrects
    supersedes: list[MemoryId] | None = Field(default=None, max_length=MAX_SUPERSEDES)


@dataclass(frozen=True)
class ParsedFact:
    """One proposed fact as the model wrote it, with what is wrong with it (None: nothing
    found yet; the service's checks come next)."""

    raw: Any
    fact: FactIn | None
    error: str | None

    @property
    def content(self) -> str:
        if self.fact is not None:
            return self.fact.content
        raw = self.raw.get("content") if isinstance(self.raw, dict) else None
        return raw if isinstance(raw, str) else ""


def parse_facts(batch: Any) -> list[ParsedFact]:
    """The facts of a batch, each validated on its own. Raises ``ValueError`` when the batch
    itself has no ``facts`` list (the answer did not follow the contract at all)."""
    facts = batch.get("facts") if isinstance(batch, dict) else None
    if not isinstance(facts, list):
        raise ValueError('the answer is not {"facts": [...]}')
    out = []
    for raw in facts[:MAX_FACTS]:
        masked = _masked(raw)
        try:
            fact = FactIn.model_validate(masked)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "fact"
            out.append(ParsedFact(masked, None, f"schema: {where}: {first['msg']}"))
            continue
        found = redact(raw["content"]) if isinstance(raw, dict) else None
        if found is not None and found.only_secret:
            out.append(ParsedFact(masked, None, f"secret: {found.reason()}"))
        else:
            out.append(ParsedFact(masked, fact, None))
    return out


def _masked(raw: Any) -> Any:
    """The proposed fact with any secret in its content masked: a proposal is stored even
    when it is refused, and its row must never hold what a memory may not (a fact that is
    nothing but the secret is then refused by ``parse_facts``)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("content"), str):
        return raw
    text = redact(raw["content"]).text
    return raw if text == raw["content"] else {**raw, "content": text}


@dataclass
class CallUsage:
    """What one upstream call of a run cost (the provider's counters)."""

    model: str | None
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    usd: float | None = None


@dataclass
class RunResult:
    """What a run produced, before it is written."""

    path: RunPath
    model: str | None
    status: RunStatus
    reason: str | None = None
    error: str | None = None
    facts: list[ParsedFact] = field(default_factory=list)
    calls: list[CallUsage] = field(default_factory=list)
    latency_ms: float = 0.0
