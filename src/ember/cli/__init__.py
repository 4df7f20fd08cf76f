"""The ``ember`` command. One module per command group; this module only wires them up.

Errors ember raises on purpose (bad settings, unknown project, an unusable EMBER_HOME...) are
printed as one line that says what was wrong and exit with status 2; they never show a
traceback. A file-system or SQLite failure that no check foresaw (a folder made read-only
under a running command, a lock file of another user) is one line too, with the fix, rather
than a traceback: the commands check EMBER_HOME first (``ember.cmdkit.access``), this is the net
under them.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

import click

# The CLI is an entry point: loading the composition root installs the features'
# settings and tables for every command (``ember.installed``).
import ember.compose  # noqa: F401
from ember import __version__
from ember.errors import EmberError

if TYPE_CHECKING:
    from logging import LogRecord

    from ember.config import Settings
    from ember.exchange import OwnUpstream

#: The kernel's commands by reference, each imported when it is run (or the list is shown):
#: a command pays for its own modules only. ``ember mcp`` is started by a client that waits for
#: its tools before the first turn, and importing every command's modules (the doctor's, the
#: dashboard's, every feature's) would make it start 1.6x as slow as a bare server of its SDK.
KERNEL: dict[str, str] = {
    "proxy": "ember.cli.proxy:proxy",
    "dev": "ember.cli.dev:dev",
    "demo": "ember.cli.demo:demo",
    "stats": "ember.cli.stats:stats",
    "doctor": "ember.cli.doctor:doctor",
    "wrap": "ember.cli.wrap:wrap",
    "setup": "ember.cli.setup:setup",
    "features": "ember.cli.features:features",
    "ui": "ember.cli.ui:ui",
    "store": "ember.cli.store:store",
}


class _Commands(click.Group):
    """The root group: a kernel command is imported when asked for by name, and so is a
    feature's that its feature declares by name (``Feature.command_refs``); the features'
    other commands (``ember.compose.Spec.commands``: memory, output-savings, shadow, learn,
    toin, and any installed feature's) are all loaded for any other name, or when the list is
    shown."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._features_loaded = False

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            if cmd_name in KERNEL:
                self.add_command(_resolve(KERNEL[cmd_name]), cmd_name)
            elif (named := _feature_command(cmd_name)) is not None:
                self.add_command(named, cmd_name)
            else:
                self._add_feature_commands()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        for name, reference in KERNEL.items():
            if name not in self.commands:
                self.add_command(_resolve(reference), name)
        self._add_feature_commands()
        return super().list_commands(ctx)

    def _add_feature_commands(self) -> None:
        """Each feature's own commands, once. A feature that cannot be loaded is said on
        stderr and the other commands still work (``ember proxy`` refuses to start with it)."""
        if self._features_loaded:
            return
        self._features_loaded = True
        from ember.compose import spec

        try:
            found = spec().commands()
        except EmberError as exc:
            click.echo(f"ember: warning: {exc}", err=True)
            return
        for command in found:
            self.add_command(command)


def _feature_command(name: str) -> click.Command | None:
    """A feature's command declared by name (``Feature.command_refs``), alone; None when no
    feature declares it so, or a feature cannot be loaded (the full list says why)."""
    from ember.compose import spec

    try:
        return spec().command_named(name)
    except EmberError:
        return None


def _resolve(reference: str) -> click.Command:
    module, _, attribute = reference.partition(":")
    command: click.Command = getattr(importlib.import_module(module), attribute)
    return command


@click.group(
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="ember")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Ember: a local proxy that makes coding agents cheaper and lets them remember.

    \b
    Quick start:
      ember wrap claude                        # Claude Code through ember (or: codex)
      ember proxy                              # listen on 127.0.0.1:8787
      export ANTHROPIC_BASE_URL=http://127.0.0.1:8787
      export OPENAI_BASE_URL=http://127.0.0.1:8787/v1
      ember demo                               # an offline tour, no API key needed

    Settings come from --config FILE (TOML), EMBER_* environment variables and flags.
    """
    from ember.exchange import CommandServices

    ctx.obj = CommandServices(upstream=_upstream, learn_verbosity=_learn_verbosity)


def _upstream(settings: Settings) -> OwnUpstream:
    """ember's own client to the providers (imported when a command needs one)."""
    from ember.proxy.upstream import Upstream

    return Upstream.from_settings(settings)


def _learn_verbosity(*args: Any, **kwargs: Any) -> None:
    """``ember learn --verbosity``, joining learn and shaping (imported when it runs)."""
    from ember.cli.learn_verbosity import learn_verbosity

    learn_verbosity(*args, **kwargs)


def main() -> None:
    from ember.store.driver import errors
    from ember.store.home import describe_os_error

    mask_last_resort()
    try:
        # Outside standalone mode click returns (rather than raises) a command's exit code.
        code = cli.main(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except EmberError as exc:
        click.echo(f"ember: error: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"ember: error: {describe_os_error(exc)}", err=True)
        sys.exit(2)
    except errors.Error as exc:  # SQLite's own, past every check
        click.echo(f"ember: error: {exc}; `ember doctor` checks EMBER_HOME's databases", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


def mask_last_resort() -> None:
    """A command that sets up no logging (every one but the servers) prints its warnings
    through logging's last resort: those lines are masked too (``ember.logs``, imported only
    when a line is written, so a command that logs nothing does not pay for it)."""
    import logging

    if logging.lastResort is not None and _masked not in logging.lastResort.filters:
        logging.lastResort.addFilter(_masked)


def _masked(record: LogRecord) -> bool:
    from ember.logs import MaskCredentials

    return MaskCredentials().filter(record)
