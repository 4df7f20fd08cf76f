"""Secrets are found and masked wherever a user may say them, and nothing else is touched.

The keys here are made up at run time from a seeded generator (no literal key sits in the
repository for a scanner to flag), in each provider's published format.
"""

from __future__ import annotations

import base64
import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember import redaction
from ember.redaction import redact

_rng = random.Random(7)


def _rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


GITHUB = "ghp_" + _rand(36)
FINE_GRAINED = "github_pat_" + _rand(22) + "_" + _rand(59)
ANTHROPIC = "sk-ant-api03-" + _rand(93, string.ascii_letters + string.digits + "-_")
OPENAI = "sk-proj-" + _rand(48, string.ascii_letters + string.digits + "-_")
AWS_ID = "AKIA" + _rand(16, string.ascii_uppercase + string.digits)
AWS_SECRET = _rand(40, string.ascii_letters + string.digits + "/+")
GOOGLE = "AIza" + _rand(35, string.ascii_letters + string.digits + "-_")
SLACK = "xoxb-" + _rand(11, string.digits) + "-" + _rand(24, string.ascii_lowercase)
STRIPE = "sk_live_" + _rand(24)
JWT = ".".join(
    [
        base64.urlsafe_b64encode(b'{"alg":"HS256"}').decode().rstrip("="),
        base64.urlsafe_b64encode(b'{"sub":"' + _rand(12).encode() + b'"}').decode().rstrip("="),
        _rand(43, string.ascii_letters + "-_"),
    ]
)
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "\n".join(_rand(64, string.ascii_letters + string.digits + "+/") for _ in range(5))
    + "\n-----END OPENSSH PRIVATE KEY-----"
)
RANDOM_KEY = _rand(40)

# (what a user says, the secret in it, the kind ember names)
SAID = [
    ("The deploy token is " + GITHUB, GITHUB, "GitHub token"),
    ("use " + FINE_GRAINED + " to push the release tags", FINE_GRAINED, "GitHub token"),
    ("export ANTHROPIC_API_KEY=" + ANTHROPIC, ANTHROPIC, "Anthropic key"),
    ("OPENAI_API_KEY=" + OPENAI + " in CI", OPENAI, "OpenAI key"),
    ("aws_access_key_id = " + AWS_ID, AWS_ID, "AWS key"),
    ("aws_secret_access_key = " + AWS_SECRET, AWS_SECRET, "AWS secret key"),
    ("maps key " + GOOGLE + " for the geocoder", GOOGLE, "Google API key"),
    ("slack bot " + SLACK, SLACK, "Slack token"),
    ("stripe: " + STRIPE, STRIPE, "Stripe key"),
    ("session cookie was " + JWT, JWT, "JSON web token"),
    ("curl -H 'Authorization: Bearer " + RANDOM_KEY + "' https://api.internal", RANDOM_KEY, None),
    (
        "Remember the staging DATABASE_URL is "
        "postgres://shop:Xk9-pa55w0rd@staging-db.internal:5432/shop",
        "Xk9-pa55w0rd",
        "password in a URL",
    ),
    ("db_password: 'n0t-a-real-Passw0rd'", "n0t-a-real-Passw0rd", "secret"),
    ("The admin password is hunter2, for the staging panel", "hunter2", "secret"),
    ("the vendor gave us " + RANDOM_KEY + " as the sandbox credential", RANDOM_KEY, "secret"),
    ("here is the deploy key\n" + PEM + "\nkeep it safe", PEM, "private key"),
]

# Things that look a little like secrets and are not: they must come back unchanged.
NOT_SECRETS = [
    "We deploy to Fly.io with `flyctl deploy --remote-only`",
    "The release commit is 3acff8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6",
    "tenant id 550e8400-e29b-41d4-a716-446655440000 is the staging tenant",
    "The password is stored in 1Password under 'staging'",
    "config: password: ${DB_PASSWORD}",
    "set password = <your password> in .env.example",
    "src/ember/memory/retrieval/rank.py holds the fusion of BM25 and vectors",
    "tests/test_mod12.py::test_case_12 PASSED [ 12%] in 0.01s",
    "The API key lives in the KEY_FILE environment variable",
    "def get_mapping_from_secret_type_to_class(self, value): return self._cache[value]",
    "Use python3.11/site-packages/numpy-1.26.4.dist-info for the wheel",
    "",
]


@pytest.mark.parametrize(("text", "secret", "kind"), SAID)
def test_a_secret_said_is_masked_and_named(text: str, secret: str, kind: str | None) -> None:
    r = redact(text)
    assert secret not in r.text
    assert r.found
    if kind is not None:
        assert kind in r.kinds
    assert "[redacted " in r.text


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_what_is_no_secret_is_left_exactly_as_it_was(text: str) -> None:
    r = redact(text)
    assert r.text == text
    assert not r.found
    assert not redaction.has_secret(text)


def test_the_rest_of_the_text_is_kept_around_the_secret() -> None:
    r = redact("Remember the staging DATABASE_URL is postgres://shop:Xk9-pa55w0rd@db.internal/shop")
    assert r.text == (
        "Remember the staging DATABASE_URL is "
        "postgres://shop:[redacted password in a URL]@db.internal/shop"
    )
    assert not r.only_secret
    assert r.reason() == "redacted a password in a URL"


@pytest.mark.parametrize(
    ("text", "only"),
    [
        ("The deploy token is " + GITHUB, True),
        ("export OPENAI_API_KEY=" + OPENAI, True),
        (GITHUB, True),
        ("api_key: '" + RANDOM_KEY + "'", True),
        ("The admin password is hunter2, for the staging panel", False),
        ("Staging DB is postgres://shop:Xk9-pa55w0rd@staging-db.internal:5432/shop", False),
        ("We deploy to Fly.io", False),
    ],
)
def test_a_fact_that_is_only_a_secret_is_told_apart(text: str, only: bool) -> None:
    r = redact(text)
    assert r.only_secret is only
    if only:
        assert r.reason().startswith("refused: a memory never holds ")


def test_the_reason_names_each_kind_once_with_its_article() -> None:
    r = redact(f"id {AWS_ID} and {AWS_ID} with secret {RANDOM_KEY}")
    assert r.reason() == "refused: a memory never holds an AWS key and a secret"


def test_a_key_found_twice_is_masked_once_under_its_own_name() -> None:
    r = redact("ANTHROPIC_API_KEY=" + ANTHROPIC)
    assert r.text == "ANTHROPIC_API_KEY=[redacted Anthropic key]"
    assert r.kinds == ("Anthropic key",)


def test_masking_twice_changes_nothing_more() -> None:
    for text, _, _ in SAID:
        once = redact(text).text
        assert redact(once).text == once


def test_a_large_tool_output_keeps_every_line_but_the_secrets() -> None:
    lines = [f"tests/test_{i}.py::test_{i} PASSED" for i in range(2000)]
    lines[1234] = "DEBUG connecting with token=" + GITHUB
    r = redact("\n".join(lines))
    out = r.text.split("\n")
    assert len(out) == 2000
    assert out[1234] == "DEBUG connecting with token=[redacted GitHub token]"
    assert out[:1234] == lines[:1234]
    assert out[1235:] == lines[1235:]


_filler = st.text(alphabet=string.ascii_letters + string.digits + " ._-:/=\n'\"", max_size=80)


@settings(max_examples=200, deadline=None)
@given(before=_filler, pick=st.sampled_from(SAID), after=_filler)
def test_the_line_screen_never_hides_a_secret(
    before: str, pick: tuple[str, str, str], after: str
) -> None:
    """Only lines the screen flags are examined: every line in which the full examination
    finds a secret must be flagged, whatever surrounds it."""
    text = before + pick[0] + after
    flagged = {start for start, _ in redaction._flagged_lines(text)}
    start = 0
    for line in text.split("\n"):
        if any(True for _ in redaction._in_line(line)):
            assert start in flagged, line
        start += len(line) + 1
