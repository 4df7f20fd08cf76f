"""Which features run on a PostgreSQL store (``Feature.postgres``): their migrations all have
a ``postgres`` form, a PostgreSQL store applies them, and traffic learning runs there with the
transcript its evidence names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ember.compose import spec
from ember.config import load_settings
from ember.facts import MEMORIES
from ember.features import Composition
from ember.store.schema import PG_PROJECT, PG_STATS, PROJECT, STATS
from ember.traffic import feature as traffic

PORTED = ("budget", "shaping", "memory", "shadow", "traffic", "learn")


def test_the_ported_features_run_there_with_every_migration_in_both_forms() -> None:
    assert not set(PORTED) & set(spec().not_on_postgres)
    for schema, pg in ((PROJECT, PG_PROJECT), (STATS, PG_STATS)):
        assert pg.unported() == []
        names = {m.name for m in pg.migrations}
        ported = [f for f in spec().features if f.postgres]
        for feature in ported:
            part = feature.project_migrations if schema is PROJECT else feature.stats_migrations
            assert {m.name for m in part()} <= names, feature.name
    assert {"traffic_0001_sightings"} <= {m.name for m in PG_PROJECT.migrations}
    assert {"shaping_0001_state", "toin_0001_patterns"} <= {m.name for m in PG_STATS.migrations}


class _Storage:
    postgres = True


def test_traffic_learning_runs_on_postgresql_where_its_transcript_does(tmp_path: Path) -> None:
    """Every lesson's evidence names a transcript message (shadow's tables): both run there."""
    settings = load_settings(env={"EMBER_HOME": str(tmp_path)})
    comp = Composition(settings, _Storage())  # type: ignore[arg-type]
    comp.provide(MEMORIES, lambda project: None)
    assert {"shadow", "traffic"} <= {f.name for f in spec().features if f.postgres}
    stages: Any = traffic.FEATURE.stages(comp)
    assert [s.name for s in stages] == ["traffic"]
