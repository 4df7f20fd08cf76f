"""``ember demo``: an offline tour through the real proxy."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the demo keeps its data (default: a new temporary directory, so your "
    "real ~/.ember is never touched).",
)
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the temporary directory at the end (it is removed otherwise) and print the "
    "commands that show its data again.",
)
def demo(home: Path | None, keep: bool) -> None:
    """Run a complete offline session through the real proxy and print what happened.

    Starts the built-in provider emulator and the proxy on free loopback ports, drives a
    scripted coding agent through the official anthropic SDK, and prints requests, cache reads
    and cost. No network and no API key needed. Its temporary directory is removed at the end
    unless --keep; a --home is always kept.
    """
    from ember.demo import run_demo

    run_demo(home, keep=keep)
