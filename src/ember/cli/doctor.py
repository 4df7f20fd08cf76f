"""``ember doctor``: what is wrong with ember's files, and the fix (``--recover``)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ember.cmdkit.options import config_option, json_option, project_options
from ember.config import Settings, load_settings
from ember.errors import StorageError
from ember.project import project_from_cli
from ember.store.fileguard import in_use
from ember.store.inspect import Finding, examine, schema_for
from ember.store.problems import note_recovery
from ember.store.recover import RecoveryReport, recover

#: The storage layer words its fixes for the proxy, which does retry on its own; the doctor
#: is a command that runs once, and "ember retries on its own" there read as a promise that
#: the doctor (or the next command) would.
_PROXY_RETRIES = "ember retries on its own"
_SAID_BY_DOCTOR = "a running proxy retries on its own"


def _for_a_command(finding: Finding) -> Finding:
    """``finding`` with its fix said as it is true from the doctor's side."""
    fix = finding.fix.replace(_PROXY_RETRIES, _SAID_BY_DOCTOR)
    detail = finding.detail.replace(_PROXY_RETRIES, _SAID_BY_DOCTOR)
    return Finding(finding.subject, finding.ok, detail, fix)


@click.command()
@project_options
@click.option(
    "--db",
    "db_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Check (or recover) this database file.",
)
@click.option(
    "--recover",
    "do_recover",
    is_flag=True,
    help="Rebuild damaged databases into new files; the damaged ones are kept beside them.",
)
@json_option
@config_option
def doctor(
    project_id: str | None,
    cwd: Path | None,
    db_file: Path | None,
    do_recover: bool,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """Check EMBER_HOME and every database in it; say what is wrong and how to fix it.

    \b
    Read-only unless --recover: safe next to a running proxy. With --recover, each damaged
    database (or the one named by --db/--cwd/--project-id) is rebuilt from what can still be
    read, checked, and swapped in; the damaged file is kept as <name>.damaged-<time>.
    Stop the proxy first: a database in use is never swapped. Exit status 1 when a problem
    remains.

    With store_url set (EMBER_STORE_URL), it checks the PostgreSQL store instead: the server
    is reachable, pgvector is there, and each schema's migrations are applied.
    """
    settings = load_settings(config_file)
    target = db_file
    ref = project_from_cli(project_id, str(cwd) if cwd else None, settings.project_identity)
    if ref is not None:
        target = ref.db_path(settings.home)
    if settings.store_url is not None:
        _doctor_store(settings, target if db_file is None else None, db_file, do_recover, as_json)
        return
    findings = _examine(settings.home, target)
    recovered: list[RecoveryReport] = []
    if do_recover:
        recovered = _recover(settings.home, findings, target)
        findings = _examine(settings.home, target)
    findings += _kept(settings, findings)
    problems = [f for f in findings if not f.ok]
    if as_json:
        out = {
            "home": str(settings.home),
            "findings": [f.to_json() for f in findings],
            "recovered": [r.to_json() for r in recovered],
            "problems": len(problems),
        }
        click.echo(json.dumps(out, indent=2))
    else:
        _print(findings, recovered)
    if problems:
        raise click.exceptions.Exit(1)


def _doctor_store(
    settings: Settings, project: Path | None, db_file: Path | None, do_recover: bool, as_json: bool
) -> None:
    """The doctor of a PostgreSQL store (``store_url``): the proxy keeps nothing in the
    home's files then, so their findings would say nothing of its data. ``--recover`` and
    ``--db`` are about SQLite files: refused, saying how to reach the files."""
    from ember.store.pg.inspect import examine_store
    from ember.store.pg.names import schema_name
    from ember.store.pg.url import redacted

    assert settings.store_url is not None
    if do_recover or db_file is not None:
        flag = "--recover" if do_recover else "--db"
        raise click.UsageError(
            f"store_url is set (PostgreSQL {redacted(settings.store_url)}): ember keeps no "
            f"database files, and {flag} works on SQLite files only. Run `ember doctor` "
            "without it to check the PostgreSQL store; to check or recover files of "
            "EMBER_HOME, run it with store_url unset (EMBER_STORE_URL= ember doctor ...)."
        )
    only = schema_name(settings.home, project) if project is not None else None
    findings = examine_store(settings.store_url, settings.home, only)
    problems = [f for f in findings if not f.ok]
    if as_json:
        out = {
            "home": str(settings.home),
            "store": f"PostgreSQL {redacted(settings.store_url)}",
            "findings": [f.to_json() for f in findings],
            "recovered": [],
            "problems": len(problems),
        }
        click.echo(json.dumps(out, indent=2))
    else:
        click.echo(
            f"store_url is set: checking the PostgreSQL store {redacted(settings.store_url)} "
            "(EMBER_HOME's database files are not used)."
        )
        _print(findings, [])
    if problems:
        raise click.exceptions.Exit(1)


def _examine(home: Path, target: Path | None) -> list[Finding]:
    """The findings, worded for a command; a file the doctor itself cannot open (a lock file
    of another user, in a home it may not write) is one line saying so, not a traceback."""
    try:
        return [_for_a_command(f) for f in examine(home, target)]
    except OSError as exc:
        raise StorageError(
            f"the doctor cannot open {exc.filename} ({exc.strerror}): it opens each database's "
            "lock file to tell whether a proxy has it open; run `ember doctor` as the user who "
            "owns EMBER_HOME, or fix the permissions of EMBER_HOME's files first"
        ) from exc


def _kept(settings: Settings, findings: list[Finding]) -> list[Finding]:
    """What the healthy project databases keep for features with bounds (compression's
    originals), as findings that are not problems."""
    from ember.compress.doctor import originals

    healthy = [Path(f.subject) for f in findings if f.ok and f.subject.endswith(".db")]
    return [Finding(str(db), True, line) for db, line in originals(settings, healthy)]


def _recover(home: Path, findings: list[Finding], target: Path | None) -> list[RecoveryReport]:
    damaged = [Path(f.subject) for f in findings if not f.ok and Path(f.subject).is_file()]
    if target is not None:
        damaged = [target] if target.is_file() else []
    reports = []
    for path in damaged:
        if path.suffix != ".db":
            continue
        if in_use(path):
            raise StorageError(
                f"{path} is open by a running ember process (a proxy?); stop it, then run "
                "`ember doctor --recover` again"
            )
        report = recover(path, schema_for(path))
        reports.append(report)
        note_recovery(home, path, report)  # earlier losses stay counted, with this one's
    return reports


def _print(findings: list[Finding], recovered: list[RecoveryReport]) -> None:
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    for r in recovered:
        for line in recovery_lines(r):
            console.print(line, markup=False)
    for f in findings:
        mark = "[green]ok[/]     " if f.ok else "[red]problem[/]"
        console.print(f"{mark} {f.subject}\n         {f.detail}", markup=True)
        if not f.ok and f.fix:
            console.print(f"         fix: {f.fix}")
    bad = sum(not f.ok for f in findings)
    console.print(f"\n{bad} problem(s)." if bad else "\nNo problems found.")


def recovery_lines(r: RecoveryReport) -> list[str]:
    """What a recovery did, in lines: the counts first, then what they cannot include."""
    rescued = sum(t.rescued for t in r.tables.values())
    head = f"recovered {r.source}: {r.copied} rows copied, {r.lost} lost"
    if rescued:
        head += f" ({rescued} of the copied rows read from pages SQLite could no longer reach)"
    lines = [f"{head}; the damaged file is kept as {r.kept_as}"]
    lines.extend(f"         {note}" for note in r.notes)
    if r.uncounted:
        where = "the file" if r.uncounted == ["*"] else ", ".join(t for t in r.uncounted)
        lines.append(
            f"         more rows of {where} may be lost than the {r.lost} counted: "
            "nothing left in the file says how many"
        )
    if r.copied == 0:
        lines.append("         nothing could be read: the recovered file is new and empty")
    return lines
