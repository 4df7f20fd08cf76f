"""Features hand each other values by typed key (``ember.services``): memory provides the
project stores that shadow memory and traffic learning save facts into, and a feature that
needs something no earlier feature provides is refused when the features are registered,
naming both, instead of failing inside the app."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember import features
from ember.compose import spec
from ember.config import load_settings
from ember.errors import FeatureError
from ember.facts import MEMORIES
from ember.features import Composition
from ember.services import ServiceKey, unmet
from ember.store.registry import Storage

ANSWERS: ServiceKey[int] = ServiceKey("answers")


def built(tmp_path: Path, **env: str) -> dict[str, Any]:
    settings = load_settings(env={"EMBER_HOME": str(tmp_path), **env})
    return {s.name: s for s in spec().stages(Composition(settings, Storage(tmp_path)))}


def test_shadow_and_traffic_save_into_the_stores_the_memory_stage_reads(tmp_path: Path) -> None:
    stages = built(tmp_path)
    opener = stages["memory"].router.for_project
    assert stages["shadow"].memories == opener
    assert stages["traffic"].memories == opener


def test_with_memory_off_they_still_share_one_router_of_their_own(tmp_path: Path) -> None:
    from ember.memory.router import MemoryRouter

    stages = built(tmp_path, EMBER_MEMORY_MODE="off")
    assert "memory" not in stages
    shadow, traffic = stages["shadow"].memories, stages["traffic"].memories
    assert shadow == traffic and isinstance(shadow.__self__, MemoryRouter)


def test_what_nobody_needs_is_never_built(tmp_path: Path) -> None:
    settings = load_settings(env={"EMBER_HOME": str(tmp_path)})
    comp = Composition(settings, Storage(tmp_path))
    calls: list[int] = []
    comp.provide_later(ANSWERS, lambda c: calls.append(1) or 42)
    assert calls == []
    assert comp.need(ANSWERS) == 42 and comp.need(ANSWERS) == 42
    assert calls == [1]


def test_a_need_nobody_provided_names_the_feature_and_the_key(tmp_path: Path) -> None:
    settings = load_settings(env={"EMBER_HOME": str(tmp_path)})
    comp = Composition(settings, Storage(tmp_path), building="hello")
    with pytest.raises(FeatureError, match="feature 'hello' needs 'answers'"):
        comp.need(ANSWERS)
    # a key of the same name is another service
    comp.provide(ServiceKey[int]("answers"), 1)
    with pytest.raises(FeatureError, match="needs 'answers'"):
        comp.need(ANSWERS)


def test_the_order_check_says_who_provides_it_and_what_to_do() -> None:
    assert unmet([("memory", (ANSWERS,), ()), ("shadow", (), (ANSWERS,))]) == []
    assert unmet([("shadow", (), (ANSWERS,)), ("memory", (ANSWERS,), ())]) == [
        "feature 'shadow' needs 'answers', which no feature before it provides "
        "('memory' provides it later: register 'shadow' after it)"
    ]
    [alone] = unmet([("shadow", (), (ANSWERS,))])
    assert "no feature provides it: install the feature that does" in alone


def test_ember_s_own_features_declare_memory_s_stores() -> None:
    wiring = {f.name: (f.provides, f.needs) for f in spec().features}
    assert wiring["memory"] == ((MEMORIES,), ())
    assert wiring["shadow"] == ((), (MEMORIES,)) and wiring["traffic"] == ((), (MEMORIES,))


PLUGIN = """
from ember.features import Feature
from ember.services import ServiceKey

FEATURE = Feature("hello", needs=(ServiceKey("greetings"),))
"""


@pytest.fixture
def needy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A feature registered after ember's own that needs what none of them provides."""
    (tmp_path / "ember_needy.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(features, "BUILTIN", (*features.BUILTIN, "ember_needy:FEATURE"))
    spec.cache_clear()
    yield
    sys.modules.pop("ember_needy", None)
    spec.cache_clear()


def test_a_feature_needing_what_nobody_provides_is_refused_at_start_up(needy: None) -> None:
    with pytest.raises(FeatureError, match="feature 'hello' needs 'greetings'"):
        spec()
