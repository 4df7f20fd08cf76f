"""Which features run on a PostgreSQL store (``Feature.postgres``): their migrations all have
a ``postgres`` form, a PostgreSQL store applies them, and traffic learning waits for the
transcript its evidence names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ember.config import load_settings
from ember.features import Composition, not_on_postgres, registered
from ember.store.schema import PG_PROJECT, PG_STATS, PROJECT, STATS
from ember.traffic import feature as traffic

PORTED = ("budget", "shaping", "memory", "traffic", "learn")


def test_the_ported_features_run_there_with_every_migration_in_both_forms() -> None:
    assert not set(PORTED) & set(not_on_postgres())
    for schema, pg in ((PROJECT, PG_PROJECT), (STATS, PG_STATS)):
        assert pg.unported() == []
        names = {m.name for m in pg.migrations}
        ported = [f for f in registered() if f.postgres]
        for feature in ported:
            part = feature.project_migrations if schema is PROJECT else feature.stats_migrations
            assert {m.name for m in part()} <= names, feature.name
    assert {"traffic_0001_sightings"} <= {m.name for m in PG_PROJECT.migrations}
    assert {"shaping_0001_state", "toin_0001_patterns"} <= {m.name for m in PG_STATS.migrations}


class _Storage:
    postgres = True


def test_traffic_learning_waits_for_the_transcript_on_postgresql(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(env={"EMBER_HOME": str(tmp_path)})
    comp = Composition(settings, _Storage(), offered={"memories": None})  # type: ignore[arg-type]
    waiting = traffic.transcript_on_postgres()
    stages: Any = traffic.FEATURE.stages(comp)
    if not waiting:
        assert stages == () and "traffic learning: off" in caplog.text
    monkeypatch.setattr(traffic, "transcript_on_postgres", lambda: True)
    assert [s.name for s in traffic.FEATURE.stages(comp)] == ["traffic"]
