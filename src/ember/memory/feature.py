"""Memory as one feature: the stage that injects memories (or offers memory tools), the
project database's injection ledger and memory tables, ``ember memory`` and ``ember mcp`` (the
project's memory served to any agent over the Model Context Protocol).

It provides the others ``ember.facts.MEMORIES`` (a ``MemoryOpener``): the project stores shadow
memory and traffic learning save their facts into, the very ones the memory stage reads. With
memory off, the stores are still opened for them, on first use, without an embedder of the
stage's (facts are then found by their words until vectors are caught up).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ember.facts import MEMORIES
from ember.features import Composition, Feature, later
from ember.memory.settings import MemorySettings

if TYPE_CHECKING:
    import click

    from ember.exchange import Stage
    from ember.store.migrations import Migration


def _stages(comp: Composition) -> Sequence[Stage]:
    from ember.memory.router import MemoryRouter

    if comp.settings.section(MemorySettings).memory_mode == "off":
        comp.provide_later(
            MEMORIES, lambda c: MemoryRouter(c.settings, None, storage=c.storage).for_project
        )
        return ()
    from ember.memory.stage import MemoryStage

    stage = MemoryStage(comp.settings, comp.storage)
    comp.provide(MEMORIES, stage.router.for_project)
    return (stage,)


def _project_migrations() -> Sequence[Migration]:
    from ember.memory.ledger_schema import LEDGER
    from ember.memory.schema import MEMORY

    return (*LEDGER, *MEMORY)


def _commands() -> Sequence[click.Command]:
    from ember.memory.cli import memory
    from ember.memory.mcp_cli import mcp

    return (memory, mcp)


FEATURE = Feature(
    "memory",
    _stages,
    project_migrations=_project_migrations,
    commands=_commands,
    command_refs={"mcp": "ember.memory.mcp_cli:mcp"},
    provides=(MEMORIES,),
    settings=MemorySettings,
    flat_settings=True,
    views=later("ember.memory.views:views"),
    postgres=True,
    derived=later("ember.memory.copying:derived"),
    rebuild=later("ember.memory.copying:rebuilder"),
)
