"""OpenTelemetry export as one feature: a stage that exists only when ``otel_endpoint`` is set
(nothing is imported otherwise), its settings, and a line in the start-up banner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ember.features import Composition, Feature
from ember.otel.settings import OtelSettings

if TYPE_CHECKING:
    from ember.config import Settings
    from ember.exchange import Stage


def _stages(comp: Composition) -> Sequence[Stage]:
    if comp.settings.section(OtelSettings).otel_endpoint is None:
        return ()
    from ember.otel.stage import OtelStage

    return (OtelStage(comp.settings),)


def _banner(settings: Settings) -> str | None:
    endpoint = settings.section(OtelSettings).otel_endpoint
    return None if endpoint is None else f"OpenTelemetry: one span per exchange to {endpoint}"


#: Keeps nothing in the store: it runs on a PostgreSQL store as it does on SQLite.
FEATURE = Feature(
    "otel", _stages, settings=OtelSettings, flat_settings=True, banner=_banner, postgres=True
)
