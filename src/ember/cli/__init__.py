"""The ``ember`` command. One module per command group; this module only wires them up.

Errors ember raises on purpose (bad settings, unknown project, an unusable EMBER_HOME...) are
printed as one line that says what was wrong and exit with status 2; they never show a
traceback. A file-system or SQLite failure that no check foresaw (a folder made read-only
under a running command, a lock file of another user) is one line too, with the fix, rather
than a traceback: the commands check EMBER_HOME first (``ember.cli.access``), this is the net
under them.
"""

from __future__ import annotations

import sys

import click

from ember import __version__
from ember.cli.demo import demo
from ember.cli.dev import dev
from ember.cli.doctor import doctor
from ember.cli.features import features
from ember.cli.proxy import proxy
from ember.cli.setup import setup
from ember.cli.stats import stats
from ember.cli.store import store
from ember.cli.ui import ui
from ember.cli.wrap import wrap
from ember.config import Settings
from ember.errors import EmberError
from ember.exchange import CommandServices, OwnUpstream
from ember.features import commands as feature_commands
from ember.store.driver import errors
from ember.store.home import describe_os_error


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
    ctx.obj = CommandServices(upstream=_upstream)


cli.add_command(proxy)
cli.add_command(dev)
cli.add_command(demo)
cli.add_command(stats)
cli.add_command(doctor)
cli.add_command(wrap)
cli.add_command(setup)
cli.add_command(features)
cli.add_command(ui)
cli.add_command(store)


def _upstream(settings: Settings) -> OwnUpstream:
    """ember's own client to the providers (imported when a command needs one)."""
    from ember.proxy.upstream import Upstream

    return Upstream.from_settings(settings)


def _add_feature_commands() -> None:
    """Each feature's own commands (``ember.features``: memory, output-savings, shadow,
    learn, toin, and any installed feature's). A feature that cannot be loaded is said on
    stderr and the other commands still work (``ember proxy`` refuses to start with it)."""
    try:
        found = feature_commands()
    except EmberError as exc:
        click.echo(f"ember: warning: {exc}", err=True)
        return
    for command in found:
        cli.add_command(command)


_add_feature_commands()


def main() -> None:
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
