"""``ember proxy``: serve the proxy in the foreground."""

from __future__ import annotations

from pathlib import Path

import click

from ember.cmdkit.options import config_option
from ember.config import Settings, load_settings


@click.command()
@click.option("--host", default=None, help="Address to bind (EMBER_HOST, default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (EMBER_PORT, default 8787).")
@click.option(
    "--anthropic-url",
    default=None,
    help="Anthropic API base (EMBER_ANTHROPIC_URL, default https://api.anthropic.com).",
)
@click.option(
    "--openai-url",
    default=None,
    help="OpenAI API base, ending in /v1 (EMBER_OPENAI_URL, default https://api.openai.com/v1); "
    "a bare host gets /v1 appended.",
)
@click.option(
    "--project-root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Treat every request as belonging to this project (EMBER_PROJECT_ROOT).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default=None,
    help="EMBER_LOG_LEVEL, default info.",
)
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    hidden=True,  # ``ember wrap``'s background proxy: its log, appended to and rotated
    help="Append the log to FILE (rotated) instead of writing it to stderr.",
)
@config_option
def proxy(
    host: str | None,
    port: int | None,
    anthropic_url: str | None,
    openai_url: str | None,
    project_root: Path | None,
    log_level: str | None,
    log_file: Path | None,
    config_file: Path | None,
) -> None:
    """Run the local proxy in front of Anthropic, OpenAI and Google's Gemini.

    \b
    Point your agent at it:
      Claude Code / Anthropic SDK:  ANTHROPIC_BASE_URL=http://127.0.0.1:8787
      Codex / OpenAI SDK:           OPENAI_BASE_URL=http://127.0.0.1:8787/v1
      Gemini CLI:                   GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8787

    API keys are forwarded to the provider and never stored or logged.
    Send `x-ember-bypass: 1` to forward a request untouched.

    Shadow memory is on by default (EMBER_SHADOW=primary): once a session goes quiet, and when
    the proxy stops, ember asks the model — with the client's own key, at the client's cost —
    which facts of the session to remember. It may spend EMBER_SHADOW_MAX_SHARE (15%) of each
    project's client spend over 7 days plus a small allowance; `ember stats --cwd DIR` shows
    what it spent. EMBER_SHADOW=off turns it off.
    """
    settings = load_settings(
        config_file,
        host=host,
        port=port,
        anthropic_url=anthropic_url,
        openai_url=openai_url,
        project_root=project_root,
        log_level=log_level,
    )
    from ember import logs
    from ember.compose import build_app, spec
    from ember.launch.finisher import Finisher
    from ember.proxy.startup import review
    from ember.server import serve_forever
    from ember.store.home import check_home

    settings, warnings = review(settings)
    logs.configure(settings.log_level, log_file)  # first: the home's checks log what they did
    check_home(settings.home)  # refuse at once, in one line, rather than fail per request
    url = f"http://{settings.host}:{settings.port}"
    click.echo(
        f"ember proxy on {url}  (anthropic -> {settings.anthropic_url}, "
        f"openai -> {settings.openai_url}, gemini -> {settings.gemini_url})\n"
        f"  export ANTHROPIC_BASE_URL={url}\n  export OPENAI_BASE_URL={url}/v1\n"
        f"  export GOOGLE_GEMINI_BASE_URL={url}\n"
        + "\n".join([*_storage_banner(settings), *spec().banners(settings)]),
        err=True,
    )
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    app = build_app(settings)
    # ``ember wrap``'s last one out asks this proxy to finish its reads, then stop
    finisher = Finisher(app, settings)
    serve_forever(app, settings.host, settings.port, settings.log_level, on_serve=finisher.install)


def _storage_banner(settings: Settings) -> list[str]:
    """Where the data goes, when it is not EMBER_HOME's files: the server without its
    password, and the features that stay off there until they run on PostgreSQL."""
    if settings.store_url is None:
        return []
    from ember.compose import spec
    from ember.store.pg.url import redacted

    off = spec().not_on_postgres
    line = f"storage: PostgreSQL {redacted(settings.store_url)}, one schema per project"
    if off:
        line += f"; off there until they support it: {', '.join(off)}"
    return [line]
