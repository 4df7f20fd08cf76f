"""What the composition root hands the kernel: the features' settings sections and tables.

The settings (``ember.config``) and the schemas (``ember.store.schema``) sit below every
feature, yet must know the features' sections (an ``EMBER_MEMORY_MODE`` is a setting, not a
typo) and their migrations (a project database holds every feature's tables). They do not
look for the features themselves: ``ember.compose``, the one reader of the feature registry,
installs its spec here (``install``) when it is loaded, and every entry point (the CLI, the
demo, library mode's modules, the test harness) loads it before settings or a database are
used. What is installed is a function, called on each use: the registry is still read once,
on first use, by ``ember.compose.spec``, so a feature that cannot be loaded fails there.

Used before any installation, a part stops with ``NotInstalled`` saying how to fix it:
settings read without the features' sections would refuse their keys, and a database built
without their tables would be built wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ember.sections import Section
    from ember.store.migrations import Migration

__all__ = ["NotInstalled", "Parts", "install", "parts"]


class Parts(Protocol):
    """What the kernel needs of the features (``ember.compose.Spec`` is one)."""

    @property
    def sections(self) -> Mapping[str, Section]:
        """The features' settings sections, by feature name."""
        ...

    def migrations(self, database: str, *, postgres: bool = False) -> tuple[Migration, ...]:
        """The features' migrations of ``database`` (``project`` or ``stats``), in order."""
        ...


class NotInstalled(RuntimeError):
    """Settings or a schema used in a process that never loaded ``ember.compose``."""


_provider: Callable[[], Parts] | None = None


def install(provider: Callable[[], Parts]) -> None:
    """Hand the kernel the features' parts: ``provider`` is called on each use (so a spec
    read afresh is seen); installing again replaces the previous one."""
    global _provider
    _provider = provider


def parts() -> Parts:
    """The installed features' parts; ``NotInstalled`` when nothing installed them."""
    if _provider is None:
        raise NotInstalled(
            "ember's features are not installed in this process: import ember.compose "
            "(the composition root) before loading settings or opening a database"
        )
    return _provider()
