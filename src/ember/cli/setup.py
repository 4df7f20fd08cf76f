"""``ember setup <client> [--mcp] [--write]``: the lasting configuration that points a client at
ember — at the proxy, or (``--mcp``, Claude Code and Codex) at ``ember mcp``, which the client
then starts itself.

Without ``--write`` nothing is written: it prints the configuration, the file it belongs in and
the change it would make there. With ``--write`` it merges into that file: every other setting
(and, in TOML, every comment) stays as it was, the previous file is kept as ``<file>.bak``, the
diff is printed, and a second run changes nothing.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import click

from ember.clients import CLIENTS, aider, claude, codex, gemini, opencode, qwen
from ember.clients.address import ProxyAddress
from ember.clients.mcp import ember_argv
from ember.cmdkit.options import config_option
from ember.config import load_settings
from ember.errors import ClientError


@dataclass(frozen=True)
class Plan:
    """One configuration: the file it goes in, what that file holds now and after the merge,
    and what to tell the user around it."""

    path: Path
    current: str | None
    merged: str
    intro: str  #: what to print before the diff when not writing
    done: str  #: the line when the file already holds it
    after: str  #: the line after a write
    warn_before: bool = False  #: ``after`` is said before a write too (a limit to know first)


@click.command()
@click.argument(
    "client",
    type=click.Choice(sorted(CLIENTS)),
    required=False,
    metavar=f"{{{'|'.join(sorted(CLIENTS))}}}",
)
@click.option("--write", is_flag=True, help="Merge it into the client's file (backup kept).")
@click.option(
    "--mcp",
    "for_mcp",
    is_flag=True,
    help="Configure the client to start `ember mcp` (memory over MCP) instead of the proxy.",
)
@click.option("--port", type=int, default=None, help="The proxy's port (EMBER_PORT, default 8787).")
@click.option(
    "--env-key",
    default=None,
    help=f"Codex only: the variable holding your OpenAI API key (default {codex.DEFAULT_ENV_KEY}).",
)
@config_option
def setup(
    client: str | None,
    write: bool,
    for_mcp: bool,
    port: int | None,
    env_key: str | None,
    config_file: Path | None,
) -> None:
    """Print (or with --write, merge) the configuration that sends a client through ember.

    \b
      ember setup claude            # ~/.claude/settings.json: env.ANTHROPIC_BASE_URL
      ember setup codex --write     # ~/.codex/config.toml: the "ember" model provider
      ember setup claude --mcp      # `claude mcp add ...`, or ./.mcp.json with --write
      ember setup codex --mcp       # [mcp_servers.ember] in ~/.codex/config.toml
      ember setup opencode          # ~/.config/opencode/opencode.json: provider baseURLs
      ember setup gemini            # ~/.gemini/settings.json (API key) and ~/.gemini/.env
      ember setup qwen              # ~/.qwen/settings.json: security.auth.baseUrl
      ember setup aider             # ~/.aider.conf.yml: set-env base URLs

    Afterwards the client needs the proxy running (`ember proxy`). `ember wrap` needs no setup;
    with --mcp the client starts `ember mcp` itself.
    """
    if client is None:
        raise click.UsageError(which_client())
    if env_key is not None and client != "codex":
        raise click.UsageError("--env-key is for codex only")
    if for_mcp and (port is not None or env_key is not None):
        raise click.UsageError("--port and --env-key configure the proxy; --mcp needs neither")
    if for_mcp and client not in ("claude", "codex"):
        raise click.UsageError(
            f"--mcp is for claude and codex; {CLIENTS[client].title} goes through the proxy "
            f"(`ember setup {client}`) or `ember wrap {client}`"
        )
    env = dict(os.environ)
    plans = (
        [_mcp_plan(client, env)]
        if for_mcp
        else _proxy_plans(client, env, port, env_key, config_file)
    )
    command = f"ember setup {client}{' --mcp' if for_mcp else ''}"
    for plan in plans:
        _apply(plan, command, write)


def _apply(plan: Plan, command: str, write: bool) -> None:
    """Say (or with ``write``, make) one file's change."""
    if plan.merged == plan.current:
        click.echo(plan.done)
        return
    diff = _diff(plan.current, plan.merged, plan.path)
    if not write:
        click.echo(plan.intro)
        if plan.current is not None:
            click.echo(f"The change `{command} --write` would make:\n\n{diff}")
        click.echo(f"Run `{command} --write` to merge it; other settings are kept.")
        if plan.warn_before:
            click.echo(plan.after)
        return
    backup = _write(plan.path, plan.merged, plan.current)
    click.echo(diff)
    if backup is not None:
        click.echo(f"Merged into {plan.path}; the previous file is {backup}.")
    else:
        click.echo(f"Wrote {plan.path}.")
    click.echo(plan.after)


#: What each client needs besides its file, said after a write.
_AFTER = {
    "claude": "Claude Code then needs the proxy running: `ember proxy`.",
    "opencode": "OpenCode then needs the proxy running: `ember proxy`.",
    "qwen": "Qwen Code then needs the proxy running (`ember proxy`); an OPENAI_BASE_URL in its "
    "environment, or a model's own baseUrl in modelProviders, still wins over this one.",
    "gemini": "Gemini CLI then needs the proxy running (`ember proxy`) and your key in "
    "$GEMINI_API_KEY. It reads ~/.gemini/.env only in a trusted folder without a .env of its "
    "own; `export GOOGLE_GEMINI_BASE_URL=...` in your shell profile works everywhere.",
    "aider": "aider then needs the proxy running (`ember proxy`). Its requests name no project "
    "directory, so with this alone ember remembers and injects nothing for it: `ember wrap "
    "aider` sends the project with every request.",
}


def _proxy_plans(
    client: str, env: dict[str, str], port: int | None, env_key: str | None, config: Path | None
) -> list[Plan]:
    """The client's requests sent to the proxy: one plan per file."""
    settings = load_settings(config, port=port)
    address = ProxyAddress.for_listener(settings.host, settings.port)
    home = Path.home()
    if client == "codex":
        key = codex.check_env_key(env_key or codex.DEFAULT_ENV_KEY)
        path = codex.config_path(env, home)
        current = _read(path)
        merged = codex.merge(current, address, key, str(path))
        after = f"Codex then needs the proxy running (`ember proxy`) and your key in ${key}."
        return [_plan(client, path, current, merged, codex.snippet(address, key), after, address)]
    module = {"claude": claude, "opencode": opencode, "qwen": qwen, "gemini": gemini}.get(client)
    if module is None:
        module = aider
    path = module.config_path(env, home)
    current = _read(path)
    merged = module.merge(current, address, str(path))
    after = _AFTER[client]
    plans = [_plan(client, path, current, merged, module.snippet(address), after, address)]
    if client == "gemini":
        env_file = gemini.env_path(home)
        text = _read(env_file)
        fresh = gemini.merge_env(None, address)
        plans.append(
            _plan(client, env_file, text, gemini.merge_env(text, address), fresh, after, address)
        )
    return plans


def _plan(
    client: str,
    path: Path,
    current: str | None,
    merged: str,
    snippet: str,
    after: str,
    address: ProxyAddress,
) -> Plan:
    title = CLIENTS[client].title
    return Plan(
        path,
        current,
        merged,
        intro=f"{title} reads {path}. This goes in it:\n\n{snippet}",
        done=f"{path} already sends {title} through ember at {address.origin}.",
        after=after,
        warn_before=client in ("aider", "gemini", "qwen"),
    )


def _mcp_plan(client: str, env: dict[str, str]) -> Plan:
    """The client starting ``ember mcp`` (in the project it runs in) for memory over MCP."""
    argv = ember_argv(
        shutil.which("ember"), Path(sys.executable).with_name("ember"), sys.executable
    )
    started = f"{CLIENTS[client].title} then starts `{shlex.join(argv)}` itself"
    if client == "claude":
        path = claude.mcp_config_path(Path.cwd())
        current = _read(path)
        merged = claude.mcp_merge(current, argv, str(path))
        intro = (
            f"For every project, run:\n\n  {claude.mcp_add_command(argv)}\n\n"
            f"For this project only, {path} holds it (Claude Code asks before starting it):"
            f"\n\n{claude.mcp_snippet(argv)}"
        )
    else:
        path = codex.config_path(env, Path.home())
        current = _read(path)
        merged = codex.mcp_merge(current, argv, str(path))
        intro = f"Codex reads {path}. This goes in it:\n\n{codex.mcp_snippet(argv)}"
    return Plan(
        path,
        current,
        merged,
        intro=f"{intro}\n{_mcp_approval(client)}\n",
        done=f"{path} already starts ember's MCP server ({shlex.join(argv)}).",
        after=f"{started}, serving the project of the directory it runs in.\n"
        + _mcp_approval(client),
    )


def _mcp_approval(client: str) -> str:
    """Who says yes to a tool call. Found with the real clients: Codex runs a tool by its MCP
    hints and ``codex exec``, with no one to ask, refuses any other; Claude Code ignores the
    hints and asks before every tool's first use, so ``claude -p`` refuses all five unless
    they are allowed."""
    from ember.memory.mcp_tools import TOOLS

    if client == "codex":
        runs = ", ".join(t.name for t in TOOLS if not t.destructive)
        asks = ", ".join(t.name for t in TOOLS if t.destructive)
        return (
            f"Codex runs {runs} on its own and asks before {asks} "
            "(`codex exec`, with no one to ask, refuses it)."
        )
    names = " ".join(f"mcp__ember__{t.name}" for t in TOOLS if not t.destructive)
    return (
        "Claude Code asks before each tool's first use. Print mode (-p) has no one to ask: "
        f"allow them with --allowedTools {names}\n(or the same names in "
        '"permissions": {"allow": [...]} of ~/.claude/settings.json).'
    )


def which_client() -> str:
    """What ``ember setup`` with no client says: the clients there are, and how to name one
    (click's own "Missing argument '{claude|codex}'" named neither what nor how)."""
    names = ", ".join(f"{name} ({CLIENTS[name].title})" for name in sorted(CLIENTS))
    examples = "\n".join(f"  ember setup {name}" for name in sorted(CLIENTS))
    return (
        f"name the client to point at ember: {names}. For example:\n{examples}\n"
        "Add --write to merge the configuration into the client's own file."
    )


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"cannot read {path}: {exc}") from exc


def _diff(before: str | None, after: str, path: Path) -> str:
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=str(path) if before is not None else "/dev/null",
        tofile=str(path),
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _write(path: Path, text: str, previous: str | None) -> Path | None:
    """Replace the file atomically, keeping its mode; a symlinked file (dotfiles kept in a
    repository) is written through the link rather than replaced by a plain file. Returns the
    backup of the previous content, never overwriting an older backup."""
    target = path.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if previous is not None:
        backup = _free_backup_name(target)
        backup.write_text(previous, encoding="utf-8")
    mode = target.stat().st_mode & 0o7777 if target.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return backup


def _free_backup_name(target: Path) -> Path:
    candidate = target.with_name(target.name + ".bak")
    n = 1
    while candidate.exists():
        candidate = target.with_name(f"{target.name}.bak.{n}")
        n += 1
    return candidate


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
