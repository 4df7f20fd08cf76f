"""``ember features``: what is plugged in — ember's own features and installed ones."""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape

from ember.cmdkit import render
from ember.cmdkit.options import json_option
from ember.compose import spec
from ember.features import Registered


def describe(entry: Registered) -> dict[str, Any]:
    """One feature as ``--json`` prints it."""
    f = entry.feature
    return {
        "name": f.name,
        "source": entry.source,
        "reference": entry.reference,
        "commands": sorted(c.name or "" for c in f.commands()),
        "project_migrations": [m.name for m in f.project_migrations()],
        "stats_migrations": [m.name for m in f.stats_migrations()],
        "settings": sorted(f.settings.model_fields) if f.settings is not None else [],
        "flat_settings": f.flat_settings,
        "table": _table(entry),
    }


def _table(entry: Registered) -> dict[str, str]:
    """``field -> its key in the feature's table`` (``memory_mode -> memory.mode``), which
    is also ``EMBER_MEMORY__MODE`` (``ember.sections``)."""
    f = entry.feature
    section = spec().sections.get(f.name)
    if section is None:
        return {}
    return {field: f"{f.name}.{key}" for key, field in sorted(section.fields.items())}


@click.command()
@json_option
def features(as_json: bool) -> None:
    """The features ember runs, in pipeline order: ember's own, then those other packages
    install (entry point group `ember.features`), with their commands, tables and settings.

    A feature that cannot be loaded is an error naming it and what to do.
    """
    docs = [describe(entry) for entry in spec().registered]
    if as_json:
        render.echo_json({"features": docs})
        return
    table = render.table("features, in pipeline order")
    for column in ("feature", "source", "commands", "tables (migrations)", "settings"):
        table.add_column(column)
    for d in docs:
        migrations = len(d["project_migrations"]) + len(d["stats_migrations"])
        settings = _names(d) or "-"
        table.add_row(
            d["name"], d["source"], ", ".join(d["commands"]) or "-", str(migrations), settings
        )
    render.console().print(table)
    click.echo(
        "Settings: [feature] name is a key of that feature's table (EMBER_FEATURE__NAME in the "
        "environment). ember's own features' are also top-level keys (EMBER_NAME): the name in "
        "parentheses, else the same name; one setting written both ways in one place is an error."
    )


def _names(d: dict[str, Any]) -> str:
    """``[memory] mode (memory_mode), ...``: each setting's key in the table, and its
    top-level name when it is another (a flat section's)."""
    keys = []
    for key, field in sorted((k.partition(".")[2], f) for f, k in d["table"].items()):
        top = f" ({field})" if d["flat_settings"] and field != key else ""
        keys.append(key + top)
    return escape(f"[{d['name']}] ") + ", ".join(keys) if keys else ""
