"""Compression of tool output as one feature: its stage (after memory, so memory's search
reads the outputs as the tools gave them), its ledger's tables, its settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ember.compress.settings import CompressSettings
from ember.features import Composition, Feature

if TYPE_CHECKING:
    from ember.config import Settings
    from ember.exchange import Stage
    from ember.store.migrations import Migration


def _stages(comp: Composition) -> Sequence[Stage]:
    if comp.settings.section(CompressSettings).compress == "off":
        return ()
    from ember.compress.stage import CompressStage

    return (CompressStage(comp.settings, comp.storage),)


def _project_migrations() -> Sequence[Migration]:
    from ember.compress.schema import COMPRESS

    return COMPRESS


def _banner(settings: Settings) -> str | None:
    if settings.section(CompressSettings).compress == "off":
        return None
    return (
        "compress: long tool outputs are shortened once and replayed byte for byte; "
        'ember_retrieve brings back what was left out (compress = "off" to disable)'
    )


FEATURE = Feature(
    "compress",
    _stages,
    project_migrations=_project_migrations,
    settings=CompressSettings,
    flat_settings=True,
    banner=_banner,
    postgres=True,
)
