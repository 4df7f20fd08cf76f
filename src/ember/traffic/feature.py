"""Traffic learning as one feature: its observation-only stage (``traffic_learning``) and the
project database's sightings. Lessons go into the project stores another feature
provides (``ember.facts.MEMORIES``: memory)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from ember.facts import MEMORIES
from ember.features import Composition, Feature, later

if TYPE_CHECKING:
    from ember.exchange import Stage
    from ember.store.migrations import Migration


class TrafficSettings(BaseModel):
    """Traffic learning's settings (top-level keys: ``traffic_learning``,
    ``EMBER_TRAFFIC_LEARNING``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Learn facts from the traffic the proxy already sees (a failed tool call and the call
    #: that then worked, commands that work here, the user's standing instructions), with no
    #: model call. Its evidence names rows of the transcript the proxy records (with shadow
    #: memory on or off).
    traffic_learning: bool = True


def _stages(comp: Composition) -> Sequence[Stage]:
    if not comp.settings.section(TrafficSettings).traffic_learning:
        return ()
    from ember.traffic.stage import TrafficStage

    return (TrafficStage(comp.settings, memories=comp.need(MEMORIES)),)


def _project_migrations() -> Sequence[Migration]:
    from ember.traffic.schema import TRAFFIC

    return TRAFFIC


FEATURE = Feature(
    "traffic",
    _stages,
    project_migrations=_project_migrations,
    needs=(MEMORIES,),
    settings=TrafficSettings,
    flat_settings=True,
    views=later("ember.traffic.views:views"),
    postgres=True,
)
