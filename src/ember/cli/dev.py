"""``ember dev ...``: tools for developing against ember offline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

import click

if TYPE_CHECKING:
    from ember.testing import Emulator, Reply


@click.group()
def dev() -> None:
    """Developer tools (the built-in provider emulator)."""


def upstream_emulator(log: TextIO | None = None, shadow_delay: float = 0.0) -> Emulator:
    """The emulator ``ember dev upstream`` serves: it answers ember's shadow question (hot and
    cold, every wire format and transport) by proposing what the user stated, so shadow memory
    works offline, ``shadow_delay`` seconds late (a provider slow to answer it); an ask holding
    ``run: `COMMAND` `` gets a call of the client's shell tool (``ember.testing.commands``);
    any other request gets the emulator's deterministic answer. With ``log``, one JSON line per
    request it receives (``ember.testing.request_log``)."""
    from ember.testing import Emulator
    from ember.testing.commands import command_replies
    from ember.testing.request_log import RequestLog
    from ember.testing.shadow import shadow_replies, user_statements

    answer = shadow_replies(user_statements)

    def reply(body: dict[str, Any], path: str) -> Reply | None:
        found = answer(body, path)
        if found is None:
            return command_replies(body, path)
        if shadow_delay <= 0:
            return found
        return found.replace(delay_headers=shadow_delay)

    emulator = Emulator()
    emulator.reply_fn = reply
    emulator.log = RequestLog(log) if log is not None else None
    return emulator


@dev.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=8788, show_default=True, help="Port to listen on.")
@click.option(
    "--log",
    "log",
    type=click.File("a", encoding="utf-8", lazy=False),
    default=None,
    metavar="FILE",
    help="Append one JSON line per request received (each HTTP request, WebSocket handshake "
    "and WebSocket message), flushed at once: time, transport, method, path, model, stream, "
    "shadow question (hot/cold/none), facts proposed and the usage answered. Never a header "
    "or a body, so never a credential.",
)
@click.option(
    "--backlog",
    type=click.IntRange(min=1),
    default=2048,
    show_default=True,
    help="Listen backlog: a small one plays a provider that drops connections under a burst.",
)
@click.option(
    "--shadow-delay",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="Answer shadow questions this many seconds late: a provider slow to answer the read "
    "ember makes when a session ends (try `ember wrap` against it).",
)
def upstream(host: str, port: int, log: TextIO | None, backlog: int, shadow_delay: float) -> None:
    """Run the provider emulator: Anthropic Messages, OpenAI Chat Completions and Responses
    (over HTTP, and Responses over WebSocket) and Gemini's generateContent and
    streamGenerateContent, with prompt caching modelled (Gemini's implicit prefix caching
    too), deterministic answers and no network, so ember can be tried without an API key.

    It plays the model for shadow memory too: a shadow question (hot or cold) is answered by
    proposing what the user stated in the listed messages (declarative sentences such as "The
    database is PostgreSQL 16." or "Use tabs in Makefiles."; not questions, requests or
    chit-chat), each citing the id of the message that said it. Any other request gets a
    deterministic reply that echoes the start of the latest user text.

    \b
    Then:  ember proxy --anthropic-url http://127.0.0.1:8788 --openai-url http://127.0.0.1:8788/v1
    (and EMBER_GEMINI_URL=http://127.0.0.1:8788 for Gemini)
    """
    from ember import logs
    from ember.server import serve_forever

    logs.configure("info")
    click.echo(f"ember provider emulator on http://{host}:{port}", err=True)
    serve_forever(upstream_emulator(log, shadow_delay), host, port, "info", backlog)
