"""``ember wrap <client> [-- client args]``: run an agent through the proxy, one command."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import click

from ember.clients import CLIENTS, ClientSpec, Launch, aider, claude, codex, gemini, opencode, qwen
from ember.clients.address import ProxyAddress
from ember.cmdkit.options import config_option
from ember.config import load_settings
from ember.errors import ClientError


class _WrapCommand(click.Command):
    """Say where the client's own options go when one is given before ``--``, and which
    clients there are when none is named (a bare "Missing argument" helped nobody)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not [a for a in args if not a.startswith("-")] and not {"-h", "--help"} & set(args):
            names = ", ".join(sorted(CLIENTS))
            raise click.UsageError(
                f"name the client to run through ember ({names}): `ember wrap claude`, or "
                '`ember wrap codex -- exec "hello"` (the client\'s own arguments go after --)',
                ctx,
            )
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            hint = "Options for the client go after --: `ember wrap claude -- -p hi`."
            raise click.UsageError(f"{exc.format_message()} {hint}", ctx) from exc


@click.command(cls=_WrapCommand)
@click.argument("client", type=click.Choice(sorted(CLIENTS)))
@click.argument("client_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--port", type=int, default=None, help="The proxy's port (EMBER_PORT, default 8787).")
@click.option(
    "--cwd",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="The project directory: the client starts there (default: the current directory).",
)
@click.option(
    "--bin",
    "binary",
    default=None,
    help="The client executable (default: the client's own name found on PATH).",
)
@click.option(
    "--env-key",
    default=None,
    help=f"Codex only: the variable holding your OpenAI API key (default {codex.DEFAULT_ENV_KEY}).",
)
@config_option
def wrap(
    client: str,
    client_args: tuple[str, ...],
    port: int | None,
    cwd: Path | None,
    binary: str | None,
    env_key: str | None,
    config_file: Path | None,
) -> None:
    """Run an agent CLI (claude, codex, opencode, gemini, qwen, aider) with every request
    going through the ember proxy.

    \b
      ember wrap claude                      # interactive Claude Code
      ember wrap claude -- -p "fix the test" # arguments for the client go after --
      ember wrap codex -- exec "hello"
      ember wrap opencode -- run fix the test
      ember wrap gemini -- -p "fix the test" # needs $GEMINI_API_KEY
      ember wrap qwen -- -p "fix the test"
      ember wrap aider -- --model sonnet

    Uses the ember proxy answering on the port, or starts one in the background (log in
    $EMBER_HOME/run/), which stops once the last `ember wrap` using it exits; a proxy you
    started yourself is left running. The exit status is the client's, at once: the proxy
    reads what the session said while the provider's cache is hot (shadow memory) in the
    background, for up to shadow_finish_seconds (120), still serving any new `ember wrap`,
    then stops by itself. Your configuration files are not touched (see `ember setup`).
    """
    from ember.launch import client as client_proc
    from ember.launch.proxyproc import READY_TIMEOUT
    from ember.launch.shared import SharedProxy
    from ember.launch.watch import HealthWatch
    from ember.store.home import check_home

    spec = CLIENTS[client]
    if env_key is not None and spec is not CLIENTS["codex"]:
        raise click.UsageError("--env-key is for codex only")
    settings = load_settings(config_file, port=port)
    if settings.port == 0:
        raise click.UsageError("ember wrap needs a fixed port: set --port or EMBER_PORT")
    project = (cwd or Path.cwd()).resolve()
    address = ProxyAddress.for_listener(settings.host, settings.port)
    check_home(settings.home)
    scratch = settings.home / "run"
    plan = _plan(spec, _find(spec, binary), client_args, address, project, env_key, scratch)
    shared = SharedProxy(settings.home / "run", settings.host, address)
    lease = shared.acquire(config_file, READY_TIMEOUT)
    try:
        if lease.started:
            _say(f"started the ember proxy on {address.origin} (log: {lease.log_path})")
        else:
            _say(f"using the ember proxy on {address.origin} (its own settings apply)")
        for note in plan.notes:
            _say(note)
        with HealthWatch(address, _say), _run_files(plan.files):
            code = client_proc.run(plan.argv, plan.env, project)
    finally:
        released = shared.release(lease, on_slow=_reading)
        if released.stopped:
            _say("stopped the ember proxy")
        elif released.reading:
            _say(_finishing(released.reading, released.seconds, lease.log_path))
    raise click.exceptions.Exit(code)


def _plan(
    spec: ClientSpec,
    binary: str,
    args: Sequence[str],
    address: ProxyAddress,
    project: Path,
    env_key: str | None,
    scratch: Path,
) -> Launch:
    env = dict(os.environ)
    home = Path.home()
    if spec.name == "claude":
        files = claude.settings_files(env, home, str(project))
        configured = claude.configured_env([(str(f), _read(f)) for f in files])
        managed = claude.configured_env(
            [(str(claude.MANAGED_SETTINGS), _read(claude.MANAGED_SETTINGS))]
        )
        return claude.launch(binary, args, address, str(project), env, configured, managed)
    if spec.name == "codex":
        key = codex.check_env_key(env_key or codex.DEFAULT_ENV_KEY)
        return codex.launch(binary, args, address, str(project), env, env_key=key)
    if spec.name == "opencode":
        return opencode.launch(binary, args, address, str(project), env)
    if spec.name == "qwen":
        files = qwen.settings_files(env, home, str(project))
        noted = qwen.provider_urls([(str(f), _read(f)) for f in files])
        return qwen.launch(binary, args, address, env, noted)
    run_id = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    if spec.name == "gemini":
        files = gemini.settings_files(env, home, str(project))
        selected = gemini.selected_auth([(str(f), _read(f)) for f in files])
        theirs = gemini.defaults_path(env)
        defaults = (scratch / f"gemini-{run_id}.system-defaults.json", _read(theirs))
        plan = gemini.launch(binary, args, address, str(project), env, selected, defaults)
        shared = _writable_by_others(scratch) if plan.files else None
        if shared is not None:
            plan.notes.append(
                f"Gemini CLI reads no settings file below {shared}, which others may write: "
                "select the API key in ~/.gemini/settings.json (`ember setup gemini --write`)"
            )
        return plan
    sources = aider.settings_files(args, home, project, _git_root(project))
    return aider.launch(
        binary,
        args,
        address,
        str(project),
        env,
        f"aider-{uuid.uuid4()}",
        scratch / f"aider-{run_id}.model.settings.yml",
        [(str(f), _read(f)) for f in sources],
    )


def _writable_by_others(folder: Path) -> Path | None:
    """The first of ``folder`` and its parents that group or others may write (``/tmp``), or
    None: Gemini CLI refuses a system settings file below one (checked with 0.61.0)."""
    for each in (folder, *folder.parents):
        try:
            if each.stat().st_mode & 0o022:
                return each
        except OSError:
            continue
    return None


def _git_root(start: Path) -> Path | None:
    """The git checkout holding ``start`` (aider reads its model settings there too)."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


@contextlib.contextmanager
def _run_files(files: dict[str, str]) -> Iterator[None]:
    """The run's own files (``Launch.files``: under ``$EMBER_HOME/run``), readable by the user
    only and removed when the client exits."""
    written = []
    try:
        for name, text in files.items():
            path = Path(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            written.append(path)
        yield
    finally:
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()


def _read(path: Path) -> str | None:
    """A settings file's text; None when it is absent or unreadable (Claude Code would read
    nothing there either)."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _find(spec: ClientSpec, binary: str | None) -> str:
    """The client's executable, or a ``ClientError`` that says how to install it."""
    name = binary or spec.binary
    found = shutil.which(name)
    if found:
        return found
    if binary:
        raise ClientError(f"--bin {binary}: no such executable")
    raise ClientError(
        f"{spec.title} is not installed (no `{spec.binary}` on PATH). Install it with "
        f"`{spec.install}`, or name the executable with --bin PATH"
    )


def _finishing(sessions: int, seconds: float, log_path: Path) -> str:
    whose = "1 session's" if sessions == 1 else f"{sessions} sessions'"
    return f"finishing {whose} memory read in the background (up to {seconds:g} s); log: {log_path}"


def _reading() -> None:
    """A proxy that did not answer the hand-over is being stopped the old way."""
    _say(
        "the proxy reads what this session said while the provider's cache is hot before it "
        "stops (a few seconds; Ctrl-C skips that)"
    )


def _say(message: str) -> None:
    click.echo(f"ember: {message}", err=True)
