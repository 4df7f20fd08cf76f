"""What a user's message states: the emulated model's extraction heuristic, over real lines."""

from __future__ import annotations

import pytest

from ember.shadow.question import render_line
from ember.store.transcript_rows import Message
from ember.testing.stated import sentences, stated_facts, statement


@pytest.mark.parametrize(
    ("line", "facts"),
    [
        ("The database is PostgreSQL 16.", ["The database is PostgreSQL 16."]),
        ("We always use uv, never pip.", ["We always use uv, never pip."]),
        ("deploys go to fly.io", ["Deploys go to fly.io."]),
        # a standing instruction holds for later sessions: a fact
        ("Use tabs for indentation in Makefiles.", ["Use tabs for indentation in Makefiles."]),
        ("Don't push to main.", ["Don't push to main."]),
        ("Please always run ruff before committing.", ["Always run ruff before committing."]),
        ("Ok, the API is served by FastAPI.", ["The API is served by FastAPI."]),
    ],
)
def test_a_durable_statement_is_a_fact_in_the_users_words(line: str, facts: list[str]) -> None:
    assert stated_facts(line) == facts


@pytest.mark.parametrize(
    "line",
    [
        "Please read notes.txt and tell me what it says.",
        "hello",
        "thanks!",
        "Thanks a lot for the help!",
        "Can you run the tests?",
        "what is in this directory",  # a question, even without its question mark
        "ok",
        "Good morning, team!",
        "Let's add a test for this.",
        "I'd like you to add tests for the parser.",
        "Run the test suite and the linter.",
        # the moment, not a durable fact: why the user asks for help
        "The release job failed on tag v2.3.0.",
        "We just tagged v2.4.0.",
        "[Request interrupted by user]",
        "The password is hunter2.",
        "detail " * 40,  # padding, not a statement
    ],
)
def test_questions_requests_chit_chat_and_reports_are_not_facts(line: str) -> None:
    assert stated_facts(line) == []


def test_a_message_is_split_into_sentences_each_citing_the_same_message() -> None:
    line = "Deploys go to fly.io. Tests run with pytest -x. What is in this directory?"
    assert stated_facts(line) == ["Deploys go to fly.io.", "Tests run with pytest -x."]


def test_remember_gives_what_follows_it() -> None:
    assert stated_facts("Remember: releases deploy to eu-west-1 on tags.") == [
        "Releases deploy to eu-west-1 on tags."
    ]
    assert stated_facts("Fix it. And remember that staging is read-only.") == [
        "Staging is read-only."
    ]
    assert stated_facts("Please remember to run ruff before committing.") == [
        "Always run ruff before committing."
    ]
    assert stated_facts("Do you remember which port we use?") == []


def test_client_context_wrappers_are_not_the_users_words() -> None:
    line = (
        "<system-reminder>The user is on a Mac. Today is Monday.</system-reminder> "
        "The API is served by FastAPI. <environment_context><cwd>/srv</cwd>"
        "</environment_context>"
    )
    assert stated_facts(line) == ["The API is served by FastAPI."]
    # one left open by a cut runs to the end; markup in the user's own words is kept
    assert stated_facts("The API is served by FastAPI. <system-reminder>Today is") == [
        "The API is served by FastAPI."
    ]
    assert stated_facts("We render <b>names</b> in bold.") == ["We render <b>names</b> in bold."]
    assert stated_facts("Pages are wrapped in <app-shell>.") == [
        "Pages are wrapped in <app-shell>."
    ]


def test_a_line_cut_short_by_ember_never_gives_its_fragment() -> None:
    text = (
        "We always use uv, never pip. The staging database is reset every night at 02:00 UTC "
        "by the cron job in ops/cron.yaml, so keep nothing there that you need the next day."
    )
    line = render_line(Message(1, "m000000000001", "s", 1, 0, "user", "user", text), 80)
    body = line.split(": ", 1)[1]
    assert body.endswith(" …")
    assert stated_facts(body) == ["We always use uv, never pip."]
    # even a cut that falls right after a full stop drops that sentence: it may go on
    assert sentences("The database is PostgreSQL 16. Tests run with pytest -x. …") == [
        "The database is PostgreSQL 16."
    ]


def test_the_same_fact_is_given_once_and_the_answer_is_deterministic() -> None:
    line = "Deploys go to fly.io. deploys go to fly.io! Deploys go to fly.io."
    assert stated_facts(line) == ["Deploys go to fly.io."] == stated_facts(line)


def test_statement_keeps_the_users_words_and_ends_with_one_full_stop() -> None:
    assert statement("Tests run with pytest -x!") == "Tests run with pytest -x."
    assert statement("fly.io hosts the staging app") == "fly.io hosts the staging app."
    assert statement("Also, the cache lives in Redis") == "The cache lives in Redis."
