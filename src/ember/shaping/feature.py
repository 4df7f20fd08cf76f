"""Output shaping as one feature: its stage, first in the pipeline (it edits the stable system
tail; present even with ``EMBER_OUTPUT_SHAPING=false``, to record the unshaped baseline, editing
nothing), and ``ember output-savings``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ember.features import Composition, Feature, later
from ember.shaping.settings import ShapingSettings

if TYPE_CHECKING:
    import click

    from ember.exchange import Stage
    from ember.store.migrations import Migration


def _stages(comp: Composition) -> Sequence[Stage]:
    from ember.shaping.stage import ShapingStage

    return (ShapingStage(comp.settings, storage=comp.storage),)


def _stats_migrations() -> Sequence[Migration]:
    from ember.shaping.state import SHAPING

    return SHAPING


def _commands() -> Sequence[click.Command]:
    from ember.shaping.cli import output_savings

    return (output_savings,)


FEATURE = Feature(
    "shaping",
    _stages,
    stats_migrations=_stats_migrations,
    commands=_commands,
    settings=ShapingSettings,
    flat_settings=True,
    views=later("ember.shaping.views:views"),
    postgres=True,
)
