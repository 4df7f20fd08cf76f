"""A feature is one unit: its stages, its tables and its commands, registered together.

The app, the database schemas and the CLI iterate over the registered features instead of
naming them (``ember.compose`` reads the registry and hands each what it needs): adding a
feature touches its own folder and one line here (or, for a feature shipped by another
package, one entry point), never the proxy, the store or the CLI.

Registration is by reference (``"package.module:ATTRIBUTE"``), resolved on first use: the kernel
imports no feature, and a feature's module imports nothing heavy at the top (its stages and
commands are built by functions it names).

- ``BUILTIN``: ember's own, in pipeline order.
- Entry points of the group ``ember.features`` (``[project.entry-points."ember.features"]`` in
  a package's ``pyproject.toml``): a third-party feature, after the builtins. Its name must be
  new: a feature cannot replace another one by taking its name.

Order matters for the prompt cache: stages that edit stable content (the system tail) run
before stages that edit volatile content (the latest user turn), and the features that only
learn run after every edit, so they read the request as it went upstream. Accounting is the
kernel's and always runs last (``ember.compose``).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, TypeVar

from ember.errors import FeatureError
from ember.services import ServiceKey, unmet

if TYPE_CHECKING:
    import click
    from pydantic import BaseModel

    from ember.config import Settings
    from ember.exchange import Stage
    from ember.store.migrations import Migration
    from ember.store.registry import Storage
    from ember.views import Route

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The public part (README, Adding a feature); the rest is internal.
__all__ = ["ENTRY_POINT_GROUP", "Composition", "Feature", "Registered", "later", "registry"]

ENTRY_POINT_GROUP = "ember.features"

#: ember's own features, in pipeline order.
BUILTIN: tuple[str, ...] = (
    "ember.budget.feature:FEATURE",
    "ember.shaping.feature:FEATURE",
    "ember.memory.feature:FEATURE",
    "ember.compress.feature:FEATURE",
    "ember.shadow.feature:FEATURE",
    "ember.traffic.feature:FEATURE",
    "ember.learn.feature:FEATURE",
    "ember.store.retention:FEATURE",
    "ember.otel.feature:FEATURE",
)


@dataclass
class Composition:
    """What the features share while the app is built: the settings, the storage, and what
    one feature provides the others by typed key (``ember.services``: memory provides
    ``ember.facts.MEMORIES``, the stores facts are saved into). Features are built in order
    and each may need only what an earlier one declared it provides (checked when they are
    registered), so a value is there, with its type, when a later feature asks for it."""

    settings: Settings
    storage: Storage
    #: the feature whose stages are being built, named when a need is not met
    building: str = "ember"
    _provided: dict[ServiceKey[Any], Any] = field(default_factory=dict)
    _later: dict[ServiceKey[Any], Callable[[Composition], Any]] = field(default_factory=dict)

    def provide(self, key: ServiceKey[T], value: T) -> None:
        """``value`` is what ``key`` names, for the features after this one."""
        self._provided[key] = value

    def provide_later(self, key: ServiceKey[T], build: Callable[[Composition], T]) -> None:
        """What ``key`` names is ``build(self)``, built when a feature first needs it (not at
        all when none does)."""
        self._later[key] = build

    def need(self, key: ServiceKey[T]) -> T:
        """What an earlier feature provided as ``key``; ``FeatureError`` naming the feature
        being built and the key when none did."""
        if key not in self._provided:
            build = self._later.pop(key, None)
            if build is None:
                raise FeatureError(
                    f"feature {self.building!r} needs {key.name!r}, which no feature built "
                    "before it provided: declare it in Feature.needs and register the feature "
                    "that provides it first"
                )
            self._provided[key] = build(self)
        value: T = self._provided[key]
        return value


def _no_stages(comp: Composition) -> Sequence[Stage]:
    return ()


def _no_banner(settings: Settings) -> str | None:
    return None


@dataclass(frozen=True)
class Feature:
    """One feature as the app, the schemas and the CLI see it."""

    name: str
    #: the feature's stages for ``comp.settings`` (none when the settings switch it off)
    stages: Callable[[Composition], Sequence[Stage]] = _no_stages
    #: migrations of the project database (``ember.db``) and of the home's ``stats.db``,
    #: appended after the kernel's and the earlier features' (names never change)
    project_migrations: Callable[[], Sequence[Migration]] = tuple
    stats_migrations: Callable[[], Sequence[Migration]] = tuple
    #: the feature's CLI commands, built when the CLI is
    commands: Callable[[], Sequence[click.Command]] = tuple
    #: some of those commands by name, each ``"module:attribute"``: the CLI imports only that
    #: module to run one (``ember mcp``, which a client starts and waits for, must not pay
    #: for building ``ember memory`` and the other features' commands)
    command_refs: Mapping[str, str] = field(default_factory=dict)
    #: what its stages provide the features after it (``Composition.provide``) and what they
    #: need from the features before it (``Composition.need``): checked when registered
    provides: tuple[ServiceKey[Any], ...] = ()
    needs: tuple[ServiceKey[Any], ...] = ()
    #: its settings (a pydantic model): the file's ``[name]`` table and ``EMBER_NAME__FIELD``
    #: (or ``EMBER_NAME_FIELD``) variables, read as ``settings.section(Model)``
    #: (``ember.sections``)
    settings: type[BaseModel] | None = None
    #: its fields are also top-level keys and ``EMBER_FIELD`` variables (ember's own features:
    #: the names README's Configuration table gives users); in the table, a field loses the
    #: feature's name in front (``memory_mode`` is ``[memory] mode``)
    flat_settings: bool = False
    #: what ``ember proxy`` says of the feature when it starts, or None: for what a user must
    #: learn where they look first (shadow memory calls the model with the client's key)
    banner: Callable[[Settings], str | None] = _no_banner
    #: its part of the dashboard: JSON routes under ``/ui/api/f/<name>/`` (``ember.views``)
    views: Callable[[], Sequence[Route]] = tuple
    #: it runs on a PostgreSQL store (``store_url``): each of its migrations has a
    #: ``postgres`` form and its queries run there. Until it does, a PostgreSQL store leaves
    #: its tables out and the app builds none of its stages (said once at start-up), rather
    #: than letting it fail on missing tables inside requests.
    postgres: bool = False
    #: ``ember store copy``: its tables whose rows follow from its other tables
    #: (an index's postings), table -> why, never copied row for row...
    derived: Callable[[], Mapping[str, str]] = dict
    #: ...and what rebuilds them from the copied rows, in the target's one transaction
    #: (``rebuild()(conn, copied)``: the store's connection of either dialect, and the rows
    #: copied now by table; returns how many entries it added, by index). None: nothing to
    #: rebuild.
    rebuild: Callable[[], Callable[[Any, Mapping[str, int]], Mapping[str, int]]] | None = None


def later(reference: str) -> Callable[[], Any]:
    """A function that imports ``module:function`` when first called and returns its result:
    a feature declares its parts without importing them (``ember --help`` and the proxy's
    start-up load no dashboard code)."""

    def call() -> Any:
        module_name, _, attribute = reference.partition(":")
        return getattr(importlib.import_module(module_name), attribute)()

    return call


def resolve(reference: str) -> Feature:
    """The ``Feature`` a ``"module:attribute"`` reference names; ``FeatureError`` saying which
    reference is wrong and why."""
    module_name, _, attribute = reference.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), attribute or "FEATURE")
    except (ImportError, AttributeError) as exc:
        raise FeatureError(
            f"feature {reference!r} cannot be loaded: {exc}; reinstall or uninstall the "
            "package that declares it"
        ) from exc
    if not isinstance(found, Feature):
        raise FeatureError(f"feature {reference!r} is a {type(found).__name__}, not a Feature")
    return found


@dataclass(frozen=True)
class Registered:
    """A feature and where it came from: ``reference`` (``module:attribute``) and
    ``source`` (``builtin``, or the distribution that declares its entry point)."""

    feature: Feature
    reference: str
    source: str


def _installed() -> list[tuple[str, str]]:
    """(reference, distribution) of every entry point of the group, by reference."""
    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        found.append((ep.value, getattr(dist, "name", None) or "an installed package"))
    return sorted(found)


def registry() -> tuple[Registered, ...]:
    """Every feature with its source, builtins first, then installed ones by reference;
    ``FeatureError`` for one that cannot be loaded, takes a name already taken, declares flat
    settings, or needs a service no feature before it provides. Read by ``ember.compose``
    alone, which hands every part what it needs of it (``ember.compose.spec``)."""
    out = [Registered(resolve(r), r, "builtin") for r in BUILTIN]
    taken = {r.feature.name for r in out}
    for reference, dist in _installed():
        feature = resolve(reference)
        if feature.name in taken:
            raise FeatureError(
                f"feature {reference!r} is named {feature.name!r}, like one already "
                "registered: rename it (a feature cannot replace another)"
            )
        if feature.settings is not None and feature.flat_settings:
            raise FeatureError(
                f"feature {reference!r} declares flat settings: only ember's own features "
                f"may; put them in its [{feature.name}] table (flat_settings=False)"
            )
        taken.add(feature.name)
        out.append(Registered(feature, reference, dist))
    problems = unmet([(r.feature.name, r.feature.provides, r.feature.needs) for r in out])
    if problems:
        raise FeatureError("; ".join(problems))
    return tuple(out)
