"""Learning from agents' logs (``ember learn``) and TOIN as one feature: TOIN's stage, last
among the features (it only reads, and sees the request as it goes upstream), its global tables
in ``stats.db``, and the ``learn`` and ``toin`` commands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from ember.features import Composition, Feature, later

if TYPE_CHECKING:
    import click

    from ember.exchange import Stage
    from ember.store.migrations import Migration


class LearnSettings(BaseModel):
    """TOIN's switch (a top-level key: ``toin``, ``EMBER_TOIN``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: TOIN (tool-output structures): observe the structure of tool outputs and re-fetches
    #: passing through the proxy (hashes and counts in stats.db, never values; it never
    #: changes a request). What it learns leaves only through ``ember toin publish``.
    toin: bool = True


def _stages(comp: Composition) -> Sequence[Stage]:
    if not comp.settings.section(LearnSettings).toin:
        return ()
    from ember.learn.toin.stage import ToinStage

    return (ToinStage(comp.storage),)


def _stats_migrations() -> Sequence[Migration]:
    from ember.learn.toin.schema import TOIN

    return TOIN


def _commands() -> Sequence[click.Command]:
    from ember.learn.cli import learn
    from ember.learn.toin.cli import toin

    return (learn, toin)


FEATURE = Feature(
    "learn",
    _stages,
    stats_migrations=_stats_migrations,
    commands=_commands,
    settings=LearnSettings,
    flat_settings=True,
    views=later("ember.learn.views:views"),
    postgres=True,
)
