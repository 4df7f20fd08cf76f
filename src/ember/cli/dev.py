"""``ember dev ...``: tools for developing against ember offline."""

from __future__ import annotations

import click


@click.group()
def dev() -> None:
    """Developer tools (the built-in provider emulator)."""


@dev.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=8788, show_default=True, help="Port to listen on.")
def upstream(host: str, port: int) -> None:
    """Run the provider emulator: Anthropic Messages, OpenAI Chat and Responses, with prompt
    caching modelled, deterministic answers and no network.

    \b
    Then:  ember proxy --anthropic-url http://127.0.0.1:8788 --openai-url http://127.0.0.1:8788/v1
    """
    from ember import logs
    from ember.server import serve_forever
    from ember.testing import Emulator

    logs.configure("info")
    click.echo(f"ember provider emulator on http://{host}:{port}", err=True)
    serve_forever(Emulator(), host, port, "info")
