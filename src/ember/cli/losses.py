"""What ``ember stats`` says of a database a proxy reported (``store.problems``), in one line.

The line gives the database's standing (switched off now, back, rebuilt by ``ember doctor
--recover``), then every count of what was lost — the entry's counts are totals over every
proxy and recovery, so the line says "lost", not "lost while it was off" — and how many
requests are missing from the totals printed below it: accounting rows dropped, answered
requests a killed proxy left without a row, and accounting rows a recovery could not copy.
"""

from __future__ import annotations

import time
from typing import Any

#: The table that holds the accounting rows (what ``recover`` counts by).
_ACCOUNTING_TABLE = "exchanges"


def _counts(problem: dict[str, Any], key: str) -> dict[str, int]:
    raw = problem.get(key) or {}
    return {str(k): int(v) for k, v in raw.items() if isinstance(v, int) and v}


def missing_requests(problem: dict[str, Any]) -> int:
    """Requests missing from the totals: their accounting rows were lost, whichever way."""
    return (
        _counts(problem, "dropped_by").get("accounting", 0)
        + int(problem.get("lost_at_kill") or 0)
        + _counts(problem, "unrecovered_by").get(_ACCOUNTING_TABLE, 0)
    )


def losses(problem: dict[str, Any]) -> list[str]:
    """Each count of what was lost, as a clause; empty when nothing was."""
    said = []
    dropped = _counts(problem, "dropped_by")
    if dropped:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(dropped.items()))
        said.append(f"{sum(dropped.values())} writes were lost ({kinds})")
    killed = int(problem.get("lost_at_kill") or 0)
    if killed:
        said.append(
            f"{killed} answered requests have no accounting row (the proxy was killed before "
            "writing them)"
        )
    unrecovered = _counts(problem, "unrecovered_by")
    if unrecovered:
        tables = ", ".join(f"{n} {t}" for t, n in sorted(unrecovered.items()))
        said.append(f"{sum(unrecovered.values())} rows could not be recovered ({tables})")
    uncounted = problem.get("unrecovered_uncounted") or []
    if uncounted:
        where = "the file" if uncounted == ["*"] else ", ".join(uncounted)
        said.append(f"more rows of {where} may have been lost in the damage than were counted")
    return said


def problem_line(problem: dict[str, Any]) -> str:
    """What proxies (and ``ember doctor --recover``) reported about this database, in one
    line: what is held in memory to be written when the file is back, what was lost, how many
    requests are missing from the totals, and what to do."""
    lost = losses(problem)
    missing = missing_requests(problem)
    totals = f"; {missing} requests are missing from the totals below" if missing else ""
    state = problem.get("state")
    if state == "ok":
        history = _history(problem)
        said = [history] if history else []
        said.append("; ".join(lost) or "nothing was lost")
        return f"warning: {'; '.join(said)}{totals}."
    told = f"; {'; '.join(lost)}" if lost else ""
    if state == "corrupt":
        return (
            f"warning: a proxy found this database damaged ({problem.get('detail')}) and stopped "
            f"writing to it{told}{totals}. Stop the proxy and run `ember doctor --recover`."
        )
    return (
        f"warning: a proxy switched this database off ({state}: {problem.get('detail')}); "
        f"{problem.get('held_writes', 0)} writes are held in memory and will be written when "
        f"it is back{told}{totals}. {problem.get('fix') or 'Run `ember doctor` for what to do.'}"
    )


def _history(problem: dict[str, Any]) -> str:
    """How a database that is fine now got its losses ("": it was never off, only a killed
    proxy's rows are missing)."""
    if problem.get("recovered_at"):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(problem["recovered_at"])))
        return f"this database was damaged and rebuilt by `ember doctor --recover` ({when})"
    if problem.get("was"):
        return f"this database was switched off ({problem.get('was')}) and is back"
    return ""
