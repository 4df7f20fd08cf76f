"""``memory_save``: facts, entities and relationships in one tool call (pure models + schema).

Saving the classic way costs three or four model calls per save (the agent says "remember X",
then a separate extractor asks a model for facts, then entities, then relationships). Here
the agent that is already talking does the extraction while it calls the tool: the tool's
schema and description carry the extraction rules, and one call delivers all three parts.

``MEMORY_SAVE_SCHEMA`` and the descriptions are constants: tool definitions sit in the cached
prompt prefix, so their bytes must never change from one request to the next.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ember.memory.errors import MemoryInputError

MAX_CONTENT_CHARS = 2000

MEMORY_SAVE_DESCRIPTION = (
    "Save facts worth remembering in later sessions of this project, with the entities they "
    "mention and how those entities relate, in this one call. Each fact must stand alone: name "
    'its subject ("The API server uses PostgreSQL 16", not "It uses 16"), state one thing, '
    'and anchor time when it matters ("since 2026-03", "as of the v2 release"). Save '
    "decisions, preferences, conventions, environment facts and lessons from failures; not "
    "small talk, not what is obvious from the code, not secrets. Entities are the named things "
    "in the facts (people, services, files, libraries) with a short type. Relationships link "
    'two entities with a short verb phrase ("api-server" -"depends on"-> "postgres").'
)

MEMORY_SAVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "One self-contained fact."},
                    "category": {
                        "type": "string",
                        "description": "decision, preference, convention, environment, "
                        "lesson, or another short word",
                    },
                    "importance": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": 1,
                        "description": "0.7 or more: useful in every later session",
                    },
                    "entities": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Names of the entities this fact is about.",
                    },
                },
                "required": ["content"],
            },
        },
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "type": {"type": "string"}},
                "required": ["name"],
            },
        },
        "relationships": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "source": {"type": "string"},
                    "relation": {"type": "string"},
                    "target": {"type": "string"},
                },
                "required": ["source", "relation", "target"],
            },
        },
    },
    "required": ["facts"],
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, str_strip_whitespace=True)


class FactIn(_Model):
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    category: str | None = Field(default=None, max_length=64)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    entities: tuple[str, ...] = ()


class EntityIn(_Model):
    name: str = Field(min_length=1, max_length=200)
    type: str | None = Field(default=None, max_length=64)


class RelationshipIn(_Model):
    source: str = Field(min_length=1, max_length=200)
    relation: str = Field(min_length=1, max_length=100)
    target: str = Field(min_length=1, max_length=200)


class SavePayload(_Model):
    """The input of one ``memory_save`` call."""

    facts: tuple[FactIn, ...] = Field(min_length=1, max_length=50)
    entities: tuple[EntityIn, ...] = ()
    relationships: tuple[RelationshipIn, ...] = ()

    @classmethod
    def parse(cls, data: Any) -> SavePayload:
        """Validate tool input; ``MemoryInputError`` names the first bad field."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "input"
            raise MemoryInputError(f"memory_save: {where}: {err['msg']}") from exc

    def entity_names(self) -> list[str]:
        """Every entity named anywhere in the payload, first mention first, case-insensitive."""
        seen: dict[str, str] = {}
        names = [e.name for e in self.entities]
        names += [n for f in self.facts for n in f.entities]
        names += [n for r in self.relationships for n in (r.source, r.target)]
        for n in names:
            if n.strip():
                seen.setdefault(n.strip().casefold(), n.strip())
        return list(seen.values())
