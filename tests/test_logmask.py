"""Credentials are masked in a log line, whatever their format and however the line prints
them: a header line, a dict or JSON, an ASGI header tuple, a ``name=value`` pair, a query
parameter, or a key the secret detector knows."""

from __future__ import annotations

import pytest

from ember.logmask import HIDDEN, mask_line

KEY = "fake-credential-4e1f"  # a format no detector knows: only the header name gives it away


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        (f"< authorization: Bearer {KEY}", "< authorization: Bearer "),
        (f"< X-Api-Key: {KEY}", "< X-Api-Key: "),
        (f"> Proxy-Authorization: Basic {KEY}", "> Proxy-Authorization: Basic "),
        (f"headers={{'host': 'h', 'x-api-key': '{KEY}', 'accept': '*/*'}}", "'accept': '*/*'"),
        (f'{{"authorization": "Bearer {KEY}", "a": 1}}', '"a": 1'),
        (f"[(b'host', b'h'), (b'authorization', b'Bearer {KEY}')]", "(b'host', b'h')"),
        (f"<CIMultiDict('Cookie': 'session={KEY}; theme=dark')>", "<CIMultiDict('Cookie': '"),
        (f"sent x-goog-api-key={KEY} to upstream", " to upstream"),
        (f"api-key: {KEY}", "api-key: "),
        (f"GET /v1beta/models/g:generate?alt=sse&key={KEY} HTTP/1.1", " HTTP/1.1"),
        (f"x-ember-proxy-token: {KEY}", "x-ember-proxy-token: "),
    ],
)
def test_a_credential_header_or_parameter_is_masked_in_every_shape(line: str, kept: str) -> None:
    masked = mask_line(line)
    assert KEY not in masked
    assert HIDDEN in masked
    assert kept in masked  # the rest of the line still says what happened


def test_a_key_the_detector_knows_is_masked_without_a_header_name() -> None:
    key = "sk-ant-api03-" + "Zq8xV2m" * 8
    masked = mask_line(f"upstream said: invalid key {key} for this workspace")
    assert key not in masked
    assert "for this workspace" in masked


def test_a_line_without_credentials_is_the_same_line() -> None:
    line = "shadow: session s-dacbdef5474cbce6aee484e9 stored 2 facts (ids m_1, m_2)"
    assert mask_line(line) is line  # nothing to find: not even copied
    ws = "< sec-websocket-version: 13"
    assert mask_line(ws) == ws


def test_masking_twice_changes_nothing_more() -> None:
    once = mask_line(f"< authorization: Bearer {KEY}")
    assert mask_line(once) == once
