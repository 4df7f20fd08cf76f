"""Traffic learning as one feature: its observation-only stage (``traffic_learning``) and the
project database's sightings. Lessons go into the ``memories`` another feature offers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ember.features import Composition, Feature

if TYPE_CHECKING:
    from ember.exchange import Stage
    from ember.store.migrations import Migration


def _stages(comp: Composition) -> Sequence[Stage]:
    if not comp.settings.traffic_learning:
        return ()
    from ember.traffic.stage import TrafficStage

    return (TrafficStage(comp.settings, memories=comp.get("memories")),)


def _project_migrations() -> Sequence[Migration]:
    from ember.traffic.schema import TRAFFIC

    return TRAFFIC


FEATURE = Feature("traffic", _stages, project_migrations=_project_migrations)
