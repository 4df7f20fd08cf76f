"""One TOIN pattern: statistics of the tool outputs of one structure in one slice (pure).

A pattern holds counts, a size distribution and hashed names -- nothing a request said. Two
patterns of the same key merge by adding (counts, field tallies) or by a sample-size-weighted
combination (the size distribution: mean and variance weighted by observations), so a merge
of two instances' tables equals the table one instance would have built from both streams.

Confidence grows with observations and with the number of distinct instances (users) that saw
the structure: ``min(0.95, 0.65 * n / (n + 50) + min(0.3, 0.1 * (users - 1)))``. One user
alone never passes 0.65 however much they observe (one workflow's habits are not a general
truth); each other user adds 0.1, up to 0.3; nothing is ever certain (0.95).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ember.learn.toin.keys import PatternKey, parse_key
from ember.stats import RunningStats

#: Instance hashes remembered per pattern; ``user_count`` keeps counting past it.
MAX_INSTANCES = 100
MAX_FIELD_TALLIES = 64
MAX_QUERY_TALLIES = 16

CONFIDENCE_CAP = 0.95
SINGLE_USER_CAP = 0.65
HALF_CONFIDENCE_AT = 50
USER_BONUS = 0.1
USER_BONUS_CAP = 0.3


def confidence(observations: int, users: int) -> float:
    """How far a pattern's numbers are to be trusted, 0..0.95 (see the module docstring)."""
    if observations <= 0:
        return 0.0
    base = SINGLE_USER_CAP * observations / (observations + HALF_CONFIDENCE_AT)
    bonus = min(USER_BONUS_CAP, USER_BONUS * max(0, users - 1))
    return min(CONFIDENCE_CAP, base + bonus)


def _top(tally: Mapping[str, int], keep: int) -> dict[str, int]:
    return dict(sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))[:keep])


@dataclass
class Pattern:
    key: PatternKey
    kind: str
    #: tool outputs of this structure seen (TOIN's sample size)
    observations: int = 0
    #: calls made again in the same session after an output of this structure
    refetches: int = 0
    errors: int = 0
    size: RunningStats = field(default_factory=RunningStats)
    fields: Counter[str] = field(default_factory=Counter)
    queries: Counter[str] = field(default_factory=Counter)
    instances: tuple[str, ...] = ()
    user_count: int = 1
    first_seen: float = 0.0
    last_seen: float = 0.0

    @property
    def refetch_rate(self) -> float:
        return self.refetches / self.observations if self.observations else 0.0

    @property
    def error_rate(self) -> float:
        return self.errors / self.observations if self.observations else 0.0

    @property
    def confidence(self) -> float:
        return confidence(self.observations, self.user_count)

    def observe(self, size: int, error: bool, fields: Iterable[str], now: float) -> None:
        self.observations += 1
        self.errors += int(error)
        self.size.add(size)
        self.fields.update(fields)
        self.fields = Counter(_top(self.fields, MAX_FIELD_TALLIES))
        self.first_seen = self.first_seen or now
        self.last_seen = max(self.last_seen, now)

    def merged(self, other: Pattern) -> Pattern:
        """Both patterns' evidence together (same key). Instances new to this pattern raise
        ``user_count``, also past the ``MAX_INSTANCES`` that are remembered, and so do the
        users the other side counted beyond the hashes it kept."""
        seen = set(self.instances)
        new = [h for h in other.instances if h not in seen]
        unlisted = max(0, other.user_count - len(other.instances))
        instances = (*self.instances, *new)[:MAX_INSTANCES]
        firsts = [t for t in (self.first_seen, other.first_seen) if t]
        return Pattern(
            key=self.key,
            kind=self.kind or other.kind,
            observations=self.observations + other.observations,
            refetches=self.refetches + other.refetches,
            errors=self.errors + other.errors,
            size=self.size.merged(other.size),
            fields=Counter(_top(self.fields + other.fields, MAX_FIELD_TALLIES)),
            queries=Counter(_top(self.queries + other.queries, MAX_QUERY_TALLIES)),
            instances=instances,
            user_count=self.user_count + len(new) + unlisted,
            first_seen=min(firsts) if firsts else 0.0,
            last_seen=max(self.last_seen, other.last_seen),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "key": str(self.key),
            "kind": self.kind,
            "observations": self.observations,
            "refetches": self.refetches,
            "errors": self.errors,
            "size": self.size.to_json(),
            "fields": _top(self.fields, MAX_FIELD_TALLIES),
            "queries": _top(self.queries, MAX_QUERY_TALLIES),
            "instances": list(self.instances),
            "user_count": self.user_count,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
        }

    @classmethod
    def from_json(cls, data: Any) -> Pattern:
        """Parse an exported pattern; raises ``ValueError`` naming what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("a pattern must be an object")
        try:
            counts = [data.get(k, 0) for k in ("observations", "refetches", "errors")]
            if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
                raise ValueError("observations/refetches/errors must be counts")
            return cls(
                key=parse_key(str(data["key"])),
                kind=_short(data.get("kind", "")),
                observations=counts[0],
                refetches=counts[1],
                errors=counts[2],
                size=RunningStats.from_json(data.get("size", [0, 0.0, 0.0])),
                fields=_tally(data.get("fields", {}), MAX_FIELD_TALLIES),
                queries=_tally(data.get("queries", {}), MAX_QUERY_TALLIES),
                instances=tuple(_hexes(data.get("instances", [])))[:MAX_INSTANCES],
                user_count=max(1, int(data.get("user_count", 1))),
                first_seen=float(data.get("first_seen", 0.0)),
                last_seen=float(data.get("last_seen", 0.0)),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed pattern: {exc}") from exc


def _short(value: Any) -> str:
    if (
        not isinstance(value, str)
        or len(value) > 40
        or not value.replace("-", "").replace(":", "").isalpha()
    ):
        raise ValueError(f"not a structure kind: {str(value)[:40]!r}")
    return value


def _hexes(values: Any) -> list[str]:
    if not isinstance(values, list) or not all(
        isinstance(v, str) and 0 < len(v) <= 64 and all(c in "0123456789abcdef" for c in v)
        for v in values
    ):
        raise ValueError("instances must be a list of hex digests")
    return values


def _tally(data: Any, keep: int) -> Counter[str]:
    """A ``{hashed name or query pattern: count}`` object; anything that is not made of
    hashes is refused, so an import cannot smuggle values into the table."""
    if not isinstance(data, dict):
        raise ValueError("tallies must be objects")
    out: Counter[str] = Counter()
    for name, count in data.items():
        tokens = str(name).replace(":*", "").split()
        if not tokens or not all(
            len(t) == 8 and all(c in "0123456789abcdef" for c in t) for t in tokens
        ):
            raise ValueError(f"not a hashed name: {str(name)[:40]!r}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"not a count: {count!r}")
        out[str(name)] = count
    return Counter(_top(out, keep))
