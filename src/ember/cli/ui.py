"""``ember ui``: the dashboard on its own, over the home's data (the proxy need not run)."""

from __future__ import annotations

import threading
from pathlib import Path

import click

from ember.cmdkit.options import config_option


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Loopback address to bind (127.0.0.1, ::1 or localhost); nothing else is allowed.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8790,
    show_default=True,
    help="8790: beside the proxy (8787), the emulator (8788) and ember mcp --http (8789).",
)
@config_option
def ui(host: str, port: int, config_file: Path | None) -> None:
    """Serve the dashboard: spend over time by project, model and origin, sessions and what
    ember changed in each request, memories (search, edit, forget), shadow runs, and what
    shaping saved. Live: new requests show up without reloading.

    \b
    The running proxy serves the same page at http://127.0.0.1:8787/ui .
    Loopback only; changing data needs the token of the page this process served.
    """
    from ember import logs
    from ember.compose import spec
    from ember.config import load_settings
    from ember.hosts import is_loopback_name
    from ember.server import serve_forever
    from ember.store.home import check_home
    from ember.store.registry import storage_for
    from ember.ui.app import PREFIX, Dashboard

    if not is_loopback_name(host):
        raise click.BadParameter(
            f"{host!r} is not a loopback address: the dashboard can change your memories, "
            "so it only listens on 127.0.0.1, ::1 or localhost",
            param_hint="--host",
        )
    settings = load_settings(config_file)
    logs.configure(settings.log_level)  # its handlers mask credentials, uvicorn's lines too
    check_home(settings.home)
    storage = storage_for(settings)
    shown = f"[{host}]" if ":" in host else host
    click.echo(
        f"ember dashboard on http://{shown}:{port}{PREFIX}  (data: {settings.home})", err=True
    )
    dashboard = Dashboard(settings, storage, spec().views())
    threading.Thread(target=dashboard.warm, name="ui-warm", daemon=True).start()
    try:
        serve_forever(dashboard, host, port, settings.log_level)
    finally:
        storage.close()
