"""The entity/relationship half of a ``memory_save`` call, inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ember.memory import rows
from ember.memory.extraction import SavePayload
from ember.memory.models import Memory
from ember.store.driver import Connection


@dataclass(frozen=True)
class SaveResult:
    """What one ``memory_save`` stored: the facts (existing ones when deduplicated), the
    entity names and the number of relationships given."""

    memories: tuple[Memory, ...]
    entities: tuple[str, ...]
    relationships: int

    def to_json(self) -> dict[str, object]:
        return {
            "saved": [{"id": m.id, "content": m.content} for m in self.memories],
            "entities": list(self.entities),
            "relationships": self.relationships,
        }


def store_graph(
    conn: Connection, payload: SavePayload, saved: Sequence[Memory], now: float
) -> list[str]:
    """Upsert the entities, link each fact to the entities it names, add the relationships.

    A fact is linked to the entities it lists, and to any payload entity whose name occurs in
    its text (case-insensitive), so "which facts mention postgres?" works even when the model
    forgot to list it.
    """
    kinds = {e.name.casefold(): e.type for e in payload.entities}
    names = payload.entity_names()
    ids = {n.casefold(): rows.upsert_entity(conn, n, kinds.get(n.casefold()), now) for n in names}
    for fact, memory in zip(payload.facts, saved, strict=True):
        found = rows.by_id(conn, memory.id)
        if found is None:
            continue
        wanted = {n.casefold() for n in fact.entities}
        text = memory.content.casefold()
        wanted |= {k for k in ids if k in text}
        rows.link_entities(conn, found[0], sorted(ids[k] for k in wanted if k in ids))
    for r in payload.relationships:
        source, target = ids[r.source.strip().casefold()], ids[r.target.strip().casefold()]
        rows.add_relationship(conn, source, r.relation, target, now)
    return names
