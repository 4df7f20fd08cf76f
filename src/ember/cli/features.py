"""``ember features``: what is plugged in — ember's own features and installed ones."""

from __future__ import annotations

from typing import Any

import click

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
    }


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
        head = "" if d["flat_settings"] else f"[{d['name']}] "
        settings = ", ".join(head + k for k in d["settings"]) or "-"
        table.add_row(
            d["name"], d["source"], ", ".join(d["commands"]) or "-", str(migrations), settings
        )
    render.console().print(table)
    click.echo(
        "Settings: a plain name is a top-level key (EMBER_NAME in the environment); "
        "[feature] name is a key of that table (EMBER_FEATURE_NAME)."
    )
