"""Every table command fits an 80-column terminal with the data a user has after a few days
(``realistic``: long session ids, token counts in the millions, a model without a price,
skip reasons, CJK text): no line is wider than 80 cells, words are not cut in two, and a
table that had to cut a cell says where the full rows are.

At 80 columns the runs table used to read "comple / ted" and "claude / -sonne / t-4-5",
and the budget sentence ran 116 characters past the edge.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from ember.cli import cli
from tests.cli import realistic
from tests.memory.conftest import HashEmbedder

P = ("--project-id", realistic.PROJECT_ID)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("wide") / "home"
    return path, realistic.build(path)


def render(home: Path, *args: str, columns: int = 80) -> str:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EMBER_")}
    env |= {"EMBER_HOME": str(home), "COLUMNS": str(columns)}
    r = CliRunner().invoke(cli, list(args), env=env, obj={"embedder": HashEmbedder})
    assert r.exit_code == 0, r.output
    return r.stdout


COMMANDS = {
    "stats": ("stats", *P),
    "stats (unresolved requests)": ("stats",),
    "memory list": ("memory", "list", *P),
    "memory show": ("memory", "show", *P, "{memory}"),
    "memory search": ("memory", "search", *P, "--explain", "deploys", "部署"),
    "shadow runs": ("shadow", "runs", *P),
    "shadow runs --steward": ("shadow", "runs", *P, "--steward"),
    "shadow proposals": ("shadow", "proposals", *P),
    "shadow proposals --steward": ("shadow", "proposals", *P, "--steward"),
    "shadow compare": ("shadow", "compare", *P),
    "toin show": ("toin", "show"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_line_is_wider_than_80_columns(home: tuple[Path, dict[str, str]], command: str) -> None:
    path, ids = home
    out = render(path, *(a.format(**ids) for a in COMMANDS[command]))
    wide = [line for line in out.splitlines() if cell_len(line) > 80]
    assert wide == [], "\n".join(wide)
    assert out.strip()


def test_the_runs_table_keeps_words_whole_and_says_where_the_rest_is(
    home: tuple[Path, dict[str, str]],
) -> None:
    out = render(home[0], "shadow", "runs", *P)
    for word in ("completed", "skipped [", "failed [", "generation-ended", "123,456 ms"):
        assert word in out, word
    assert "--json for the full rows" in out
    assert "[2] the shadow budget is spent" in out  # a skip reason is a note, not a column
    assert "12.3M" in out and "1.2M/12.3M" in out  # counts that fit a cell


def test_stats_tokens_fit_and_an_unpriced_session_says_so(
    home: tuple[Path, dict[str, str]],
) -> None:
    out = render(home[0], "stats", *P)
    assert "312k" in out and "12.5M" in out and "$12.3456" in out
    assert "unknown" in out and "1 unpriced" in out
    assert "k = thousand, M = million" in out


def test_a_wide_terminal_cuts_nothing(home: tuple[Path, dict[str, str]]) -> None:
    out = render(home[0], "memory", "list", *P, columns=250)
    assert realistic.LONG in out  # one line per memory when there is room
