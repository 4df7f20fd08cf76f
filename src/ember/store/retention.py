"""Retention as a feature: the ``store_retention_days`` setting and the stage that prunes the
store once a day in the proxy (``retention_stage``).

Unset (the default), nothing is ever pruned: rows are the user's, and deleting them is asked
for, never assumed. The setting is at least ``prune.MIN_DAYS``: budgets read this month's
spend from the rows a prune deletes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, field_validator

from ember.features import Composition, Feature
from ember.store.prune import check_days

if TYPE_CHECKING:
    from ember.config import Settings
    from ember.exchange import Stage


class RetentionSettings(BaseModel):
    """The top-level ``store_retention_days`` (``EMBER_STORE_RETENTION_DAYS``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Rows older than this many days are pruned by the proxy once a day, as `ember store
    #: prune --older-than Nd` does (memories and their evidence are kept). Unset: never.
    store_retention_days: float | None = None

    @field_validator("store_retention_days")
    @classmethod
    def _at_least_a_month(cls, value: float | None) -> float | None:
        if value is not None:
            check_days(value)
        return value


def _stages(comp: Composition) -> Sequence[Stage]:
    days = comp.settings.section(RetentionSettings).store_retention_days
    if days is None:
        return ()
    from ember.store.retention_stage import RetentionStage

    return (RetentionStage(days, comp.storage),)


def _banner(settings: Settings) -> str | None:
    days = settings.section(RetentionSettings).store_retention_days
    if days is None:
        return None
    return (
        f"retention: rows older than {days:g} days are pruned once a day (memories and their "
        "evidence are kept; `ember store prune --dry-run` shows what goes)"
    )


FEATURE = Feature(
    "retention",
    _stages,
    settings=RetentionSettings,
    flat_settings=True,
    banner=_banner,
    postgres=True,
)
