"""Options shared by several commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def config_option(f: F) -> F:
    return click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="TOML settings file (default: $EMBER_CONFIG, else $EMBER_HOME/config.toml).",
    )(f)


def project_options(f: F) -> F:
    f = click.option(
        "--cwd",
        "cwd",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Project by its working directory (same resolution as the x-ember-cwd header).",
    )(f)
    return click.option(
        "--project-id",
        "project_id",
        default=None,
        help="Project by id (same as the x-ember-project-id header).",
    )(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(f)
