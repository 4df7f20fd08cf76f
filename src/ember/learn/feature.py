"""Learning from agents' logs (``ember learn``) and TOIN as one feature: TOIN's stage, last
among the features (it only reads, and sees the request as it goes upstream), its global tables
in ``stats.db``, and the ``learn`` and ``toin`` commands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ember.features import Composition, Feature

if TYPE_CHECKING:
    import click

    from ember.exchange import Stage
    from ember.store.migrations import Migration


def _stages(comp: Composition) -> Sequence[Stage]:
    if not comp.settings.toin:
        return ()
    from ember.learn.toin.stage import ToinStage

    return (ToinStage(comp.storage),)


def _stats_migrations() -> Sequence[Migration]:
    from ember.learn.toin.schema import TOIN

    return TOIN


def _commands() -> Sequence[click.Command]:
    from ember.cli.learn import learn
    from ember.learn.toin.cli import toin

    return (learn, toin)


FEATURE = Feature("learn", _stages, stats_migrations=_stats_migrations, commands=_commands)
