"""Shadow memory as one feature: its stage (``EMBER_SHADOW``), its tables in the project
database (runs, proposals, cursors, spend; and, for now, the transcript's, whose recording is
the kernel's: ``ember.transcript_recorder``), and ``ember shadow``. Facts it promotes go into the
project stores another feature provides (``ember.facts.MEMORIES``: memory)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ember.facts import MEMORIES
from ember.features import Composition, Feature, later
from ember.shadow.settings import ShadowSettings

if TYPE_CHECKING:
    import click

    from ember.config import Settings
    from ember.exchange import Stage
    from ember.store.migrations import Migration


def _stages(comp: Composition) -> Sequence[Stage]:
    if comp.settings.section(ShadowSettings).shadow == "off":
        return ()
    from ember.shadow.stage import ShadowStage

    return (ShadowStage(comp.settings, memories=comp.need(MEMORIES)),)


def _banner(settings: Settings) -> str:
    """Shadow memory is on by default and calls the model with the client's own key: a user
    must learn it where they look first, with the budget that bounds it and how to turn it
    off."""
    shadow = settings.section(ShadowSettings)
    if shadow.shadow == "off":
        return "shadow memory: off (EMBER_SHADOW=off)"
    return (
        f"shadow memory: {shadow.shadow} — after a session goes quiet (and when the proxy "
        f"stops) ember asks the model, with the client's own key, which facts to remember; "
        f"it may spend {shadow.shadow_max_share:.0%} of each project's client spend over 7 "
        f"days plus a small allowance (`ember stats --cwd DIR` shows it). Off: EMBER_SHADOW=off"
    )


def _project_migrations() -> Sequence[Migration]:
    from ember.shadow.schema import SHADOW

    return SHADOW


def _commands() -> Sequence[click.Command]:
    from ember.shadow.cli import shadow

    return (shadow,)


FEATURE = Feature(
    "shadow",
    _stages,
    project_migrations=_project_migrations,
    commands=_commands,
    needs=(MEMORIES,),
    settings=ShadowSettings,
    flat_settings=True,
    banner=_banner,
    views=later("ember.shadow.views:views"),
    postgres=True,
)
