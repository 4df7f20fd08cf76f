"""The Claude Code and Codex readers on session logs recorded from the real CLIs.

``tests/fixtures/agent-logs/<client>/<scenario>/`` holds what Claude Code 2.1.197 and Codex CLI
0.171.0 wrote under their home while ``scripts/record_client_fixtures.py`` ran them offline
against the provider emulator (its README says how, and what was scrubbed). Each scenario folder
is laid out as a user's home, so the readers find the logs where they would on a user's machine.
These are in the repository: unlike ``test_fixtures.py`` nothing here needs ``../shared``.

What the scenarios typed, and what the scripted model did, is known: a prompt asking to read
notes.txt (answered with a ``Read`` / ``exec_command`` call), an Explore sub-agent running ``ls``,
a ``/compact``, and a follow-up question in a second process (``--continue`` / ``resume --last``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.learn.logs import Scan, readers, scan, sources
from ember.learn.model import SessionData
from tests.client_fixtures import load_scenario

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "agent-logs"
PROJECT = Path("/work/proj")
ASK_READ = "Please read notes.txt and tell me what it says."
ASK_EXPLORE = "Use the Explore agent to find which file in this project holds the notes."
SUBAGENT_TASK = "List the files in the project directory and say which one holds notes."
ASK_FOLLOWUP = "Thanks. In one word: is it a todo list?"
NOTES = "# Notes\n\n- buy milk\n- fix the flaky test in test_session.py\n"

#: scenario -> (the prompts its user typed, the main session's model)
CLAUDE = {
    "print-then-continue": ([ASK_READ, ASK_FOLLOWUP], "claude-sonnet-4-5"),
    "subagent-then-continue": ([ASK_EXPLORE, ASK_FOLLOWUP], "claude-sonnet-4-5"),
    "compact-then-continue": ([ASK_READ, ASK_FOLLOWUP], "claude-sonnet-4-5"),  # and /compact
    "default-model-then-continue": ([ASK_READ, ASK_FOLLOWUP], "claude-opus-4-8"),
}
CODEX = {
    "exec-then-resume": ([ASK_READ, ASK_FOLLOWUP], "gpt-5.1"),
    "default-model-exec-then-resume": ([ASK_READ, ASK_FOLLOWUP], "gpt-6.2-sol"),
}
AGENT = {"claude-code": "claude", "codex": "codex"}


def read_home(client: str, scenario: str) -> tuple[Scan, list[SessionData]]:
    """Every session the reader finds where the CLI writes them, for a user whose home is the
    scenario's folder, kept to the project the CLI ran in."""
    available = readers()
    found = Scan(sources(available, [AGENT[client]], LOGS / client / scenario))
    return found, list(scan(available, found, project=PROJECT))


def main_session(sessions: list[SessionData]) -> SessionData:
    (main,) = [s for s in sessions if not s.is_subagent]
    return main


def records(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)


def session_id_of_requests(client: str, scenario: str) -> str:
    """The session id the same scenario's recorded requests carry (tests/fixtures/clients)."""
    ids = {r.session_id() for r in load_scenario(client, scenario) if r.is_model_call}
    (sid,) = ids
    assert sid is not None
    return sid


def typed(session: SessionData) -> list[str | None]:
    return [e.text for e in session.events if e.kind == "user_prompt"]


# -- what is recorded ------------------------------------------------------------------------


def test_every_recorded_log_is_found_by_its_reader() -> None:
    """Each scenario folder holds logs that its reader discovers (nothing else but the README
    and Claude Code's sub-agent ``.meta.json`` companions): a re-recording that adds a file
    nobody reads, or loses one, fails here."""
    expected = {("claude-code", name) for name in CLAUDE} | {("codex", name) for name in CODEX}
    assert {(d.parent.name, d.name) for d in LOGS.glob("*/*") if d.is_dir()} == expected
    available = readers()
    for client, scenario in sorted(expected):
        home = LOGS / client / scenario
        found = sources(available, [AGENT[client]], home)
        files = {p for p in home.rglob("*") if p.is_file()}
        companions = {s.companion for s in found if s.companion is not None}
        assert {s.path for s in found} | companions == files, f"{client}/{scenario}"


@pytest.mark.parametrize("client", sorted(AGENT))
def test_logs_hold_no_machine_path_and_no_key(client: str) -> None:
    """Scrubbed like the request fixtures: the project is /work/proj, the home /home/user."""
    for path in (LOGS / client).rglob("*"):
        if not path.is_file():
            continue
        text = path.relative_to(LOGS).as_posix() + "\n" + path.read_text(encoding="utf-8")
        for leak in ("/tmp/", "sk-test", "ember-clients"):
            assert leak not in text, f"{path.name}: {leak}"
        assert not re.search(r"""/root[/"]""", text), path.name  # the recording user's home
        assert not re.search(r"/(?:home|Users)/(?!user\b)", text), path.name
        cwds = {r.get("cwd") or (r.get("payload") or {}).get("cwd") for r in records(path)}
        assert cwds - {None} <= {str(PROJECT)}, path.name


# -- Claude Code -----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", sorted(CLAUDE))
def test_claude_finds_the_session_under_the_project_folder(scenario: str) -> None:
    """One session per scenario, two processes (``-p`` then ``--continue``) in one file, named
    by the session id Claude Code also sent with every request; its project is /work/proj."""
    found, sessions = read_home("claude-code", scenario)
    main = main_session(sessions)
    path = Path(main.source)
    assert path.parent.name == "-work-proj"
    assert main.session_id == path.stem == session_id_of_requests("claude-code", scenario)
    assert main.project == str(PROJECT) and main.model == CLAUDE[scenario][1]
    assert found.other_projects == 0
    assert found.stats.malformed == 0 and not found.stats.unknown
    elsewhere = Scan(sources(readers(), ["claude"], LOGS / "claude-code" / scenario))
    assert list(scan(readers(), elsewhere, project=Path("/work/other"))) == []
    assert elsewhere.other_projects == len(sessions)


@pytest.mark.parametrize("scenario", sorted(CLAUDE))
def test_claude_each_typed_prompt_is_a_user_turn(scenario: str) -> None:
    main = main_session(read_home("claude-code", scenario)[1])
    prompts = CLAUDE[scenario][0]
    assert [t for t in typed(main) if t in prompts] == prompts
    said = [m.text for m in main.turns if m.role == "user" and m.parts == ["text"]]
    assert [t for t in said if t in prompts] == prompts
    # the session opens with the first prompt, and Claude Code's injected context (skills,
    # agent listings, reminders) is not taken for the user speaking
    assert main.turns[0].role == "user" and main.turns[0].text == prompts[0]
    assert not any("<system-reminder>" in (t or "") for t in typed(main))


@pytest.mark.parametrize("scenario", ["print-then-continue", "default-model-then-continue"])
def test_claude_read_call_is_paired_with_its_result(scenario: str) -> None:
    main = main_session(read_home("claude-code", scenario)[1])
    (call,) = main.tool_calls
    assert (call.name, call.input) == ("Read", {"file_path": "/work/proj/notes.txt"})
    assert call.call_id and call.call_id.startswith("toolu_")
    assert not call.is_error
    # the result as Claude Code logged it: the file with line numbers
    numbered = "".join(f"{i}\t{line}\n" for i, line in enumerate(NOTES.split("\n"), 1))
    assert call.output_chars == len(numbered.rstrip("\n"))
    kinds = [(m.role, m.parts) for m in main.turns]
    assert kinds[:4] == [
        ("user", ["text"]),
        ("assistant", ["tool_use"]),
        ("user", ["tool_result"]),
        ("assistant", ["text"]),
    ]


@pytest.mark.parametrize("scenario", sorted(CLAUDE))
def test_claude_usage_is_counted_once_per_api_message(scenario: str) -> None:
    """Claude Code writes one API answer as several lines (thinking, then text or tool_use)
    that share ``message.id`` and each carry the whole usage: counted per line, this session's
    tokens would come out about twice too high."""
    for session in read_home("claude-code", scenario)[1]:
        lines = [
            r["message"]
            for r in records(Path(session.source))
            if r.get("type") == "assistant" and r["message"].get("model") != "<synthetic>"
        ]
        by_id = {m["id"]: m["usage"] for m in lines}
        if not session.is_subagent:  # Explore runs without thinking: one line per answer
            assert len(lines) > len(by_id), "the recording no longer splits messages"
        assert session.usage.output_tokens == sum(u["output_tokens"] for u in by_id.values())
        read = sum(u["cache_read_input_tokens"] for u in by_id.values())
        written = sum(u["cache_creation_input_tokens"] for u in by_id.values())
        assert (session.usage.cache_read_tokens, session.usage.cache_write_tokens) == (
            read,
            written,
        )
        answers = [m for m in session.turns if m.role == "assistant"]
        assert len(answers) == len(by_id)
        assert [a.output_tokens for a in answers] == [u["output_tokens"] for u in by_id.values()]


def test_claude_subagent_log_is_found_and_attributed_to_its_parent() -> None:
    """The Explore sub-agent's run is its own session under ``<session>/subagents/``, pointing
    at the session whose ``Agent`` call started it; its ``ls`` is its call, not the parent's."""
    _, sessions = read_home("claude-code", "subagent-then-continue")
    main = main_session(sessions)
    (sub,) = [s for s in sessions if s.is_subagent]
    agent_id = load_scenario("claude-code", "subagent-then-continue")[2].headers[
        "x-claude-code-agent-id"
    ]
    assert sub.session_id == f"agent-{agent_id}"
    assert sub.parent_session_id == main.session_id
    assert Path(sub.source).parent.parent.name == main.session_id
    assert sub.project == str(PROJECT) and sub.model == "claude-haiku-4-5-20251001"

    (spawn,) = main.tool_calls
    assert spawn.name == "Agent" and spawn.input["subagent_type"] == "Explore"
    assert spawn.input["prompt"] == SUBAGENT_TASK and not spawn.is_error
    assert spawn.output_chars > 0
    home = LOGS / "claude-code" / "subagent-then-continue"
    (source,) = [s for s in sources(readers(), ["claude"], home) if s.parent_session_id]
    assert source.companion is not None
    meta = json.loads(source.companion.read_text())
    assert (meta["agentType"], meta["toolUseId"]) == ("Explore", spawn.call_id)

    (ls,) = sub.tool_calls
    assert (ls.name, ls.input["command"], ls.is_error) == ("Bash", "ls", False)
    assert ls.output_chars == len("notes.txt")
    assert typed(sub) == [SUBAGENT_TASK]
    assert all(c.name != "Bash" for c in main.tool_calls)


def test_claude_compaction_is_an_event_between_the_prompts() -> None:
    """``/compact`` in a ``--continue`` process: the boundary is a compaction event after the
    first exchange; the command itself is not a prompt, and the session goes on in the same
    file with the same id."""
    main = main_session(read_home("claude-code", "compact-then-continue")[1])
    kinds = [e.kind for e in main.events]
    assert kinds.count("compaction") == 1
    before, after = kinds[: kinds.index("compaction")], kinds[kinds.index("compaction") :]
    assert before == ["user_prompt"] and "user_prompt" in after
    assert ASK_READ in typed(main) and ASK_FOLLOWUP in typed(main)
    assert not any("/compact" in (t or "") for t in typed(main))
    (call,) = main.tool_calls
    assert call.name == "Read" and not call.is_error and call.output_chars > 0
    # Claude Code's "No response requested." after the command is not an API answer
    answers = [m.text for m in main.turns if m.role == "assistant"]
    assert "No response requested." not in answers
    assert answers[-1] == "Yes."


def test_claude_compaction_summary_is_not_a_user_prompt() -> None:
    main = main_session(read_home("claude-code", "compact-then-continue")[1])
    assert typed(main) == [ASK_READ, ASK_FOLLOWUP]
    said = [m.text for m in main.turns if m.role == "user" and m.parts == ["text"]]
    assert said == [ASK_READ, ASK_FOLLOWUP]


def test_claude_title_is_read_when_the_cli_generated_one() -> None:
    """Only with non-essential traffic on does Claude Code ask for a title (and log it)."""
    assert main_session(read_home("claude-code", "default-model-then-continue")[1]).title == (
        "Read the notes file"
    )
    assert main_session(read_home("claude-code", "print-then-continue")[1]).title is None


# -- Codex -----------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", sorted(CODEX))
def test_codex_finds_one_rollout_for_exec_and_resume(scenario: str) -> None:
    """``codex exec`` then ``resume --last``: one rollout under sessions/YYYY/MM/DD, named and
    identified by the session id Codex also sent as ``prompt_cache_key``; project /work/proj."""
    found, sessions = read_home("codex", scenario)
    (session,) = sessions
    path = Path(session.source)
    assert path.relative_to(LOGS / "codex" / scenario).parts[:2] == (".codex", "sessions")
    assert path.name.startswith("rollout-") and path.stem.endswith(session.session_id)
    assert session.session_id == session_id_of_requests("codex", scenario)
    assert session.project == str(PROJECT) and session.model == CODEX[scenario][1]
    assert found.other_projects == 0 and found.stats.malformed == 0
    # newer record types the reader does not read (counted; `ember learn` says it skipped them)
    assert set(found.stats.unknown) <= {
        "world_state",
        "token_usage_record",
        "response_item/additional_tools",
    }


@pytest.mark.parametrize("scenario", sorted(CODEX))
def test_codex_exec_command_is_paired_with_its_output(scenario: str) -> None:
    (session,) = read_home("codex", scenario)[1]
    (call,) = session.tool_calls
    assert (call.name, call.input) == ("exec_command", {"cmd": "cat notes.txt"})
    (result,) = [
        r["payload"]
        for r in records(Path(session.source))
        if r["payload"].get("type") == "function_call_output"
    ]
    assert result["call_id"] == call.call_id
    assert NOTES in result["output"] and "exited with code 0" in result["output"]
    assert call.output_chars == len(result["output"]) and not call.is_error


@pytest.mark.parametrize("scenario", sorted(CODEX))
def test_codex_usage_is_the_sessions_total_over_both_processes(scenario: str) -> None:
    """Codex logs a running total after each API call; the last one, written by the
    ``resume`` process, covers the three calls of both processes, each once."""
    (session,) = read_home("codex", scenario)[1]
    counts = [
        r["payload"]["info"]
        for r in records(Path(session.source))
        if r["payload"].get("type") == "token_count"
    ]
    assert len(counts) == 3  # tool call, its answer, the follow-up
    calls = [c["last_token_usage"] for c in counts]
    fed = sum(c["input_tokens"] for c in calls)
    cached = sum(c["cached_input_tokens"] for c in calls)
    u = session.usage
    assert (u.input_tokens + u.cache_read_tokens, u.cache_read_tokens) == (fed, cached)
    assert u.output_tokens == sum(c["output_tokens"] for c in calls)


@pytest.mark.parametrize("scenario", sorted(CODEX))
def test_codex_each_typed_prompt_is_a_user_turn(scenario: str) -> None:
    (session,) = read_home("codex", scenario)[1]
    prompts = CODEX[scenario][0]
    assert typed(session) == prompts
    said = [m.text for m in session.turns if m.role == "user" and "text" in m.parts]
    assert said == prompts


@pytest.mark.parametrize("scenario", sorted(CODEX))
def test_codex_each_answer_carries_its_own_calls_usage(scenario: str) -> None:
    (session,) = read_home("codex", scenario)[1]
    calls = [
        r["payload"]["info"]["last_token_usage"]
        for r in records(Path(session.source))
        if r["payload"].get("type") == "token_count"
    ]
    answers = [m for m in session.turns if m.role == "assistant"]
    assert [a.parts for a in answers] == [["tool_use"], ["text"], ["text"]]
    assert [(a.input_tokens, a.output_tokens) for a in answers] == [
        (c["input_tokens"], c["output_tokens"]) for c in calls
    ]
