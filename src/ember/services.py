"""What one feature hands another while the app is built, by typed key.

A feature that offers something to the others declares a ``ServiceKey`` next to the protocol
the value satisfies, in a module neither feature owns (``ember.facts.MEMORIES``: the project
stores facts are saved into). The provider lists the key in ``Feature.provides`` and calls
``Composition.provide``; a user lists it in ``Feature.needs`` and gets the value, typed, from
``Composition.need``. ``unmet`` checks the order when the features are registered: a feature
that needs a key no earlier feature provides is refused at start-up with both names, instead
of failing (or silently getting nothing) when its stage is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

__all__ = ["ServiceKey", "Wiring", "unmet"]


@dataclass(frozen=True, eq=False)
class ServiceKey(Generic[T]):
    """A name for a value of type ``T`` that one feature provides and others need. Keys
    compare by identity: two keys with one name are two services, never confused."""

    name: str

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"


#: One feature as ``unmet`` reads it: its name, the keys it provides, the keys it needs.
Wiring = tuple[str, Sequence[ServiceKey[Any]], Sequence[ServiceKey[Any]]]


def unmet(order: Sequence[Wiring]) -> list[str]:
    """For features in build order: one line per key a feature needs that no feature before
    it provides, saying what to do (empty when every need is met)."""
    provider = {key: name for name, provides, _ in reversed(order) for key in provides}
    seen: set[ServiceKey[Any]] = set()
    out = []
    for name, provides, needs in order:
        for key in needs:
            if key in seen:
                continue
            if key in provider:
                fix = f"{provider[key]!r} provides it later: register {name!r} after it"
            else:
                fix = "no feature provides it: install the feature that does"
            out.append(
                f"feature {name!r} needs {key.name!r}, which no feature before it provides ({fix})"
            )
        seen.update(provides)
    return out
