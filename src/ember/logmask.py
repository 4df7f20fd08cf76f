"""Credentials masked in a log line (pure; no I/O).

A line is written to a file or a terminal other people and tools read, so it never holds an
API key, at any level. At debug level the WebSocket library prints every handshake header
(``< authorization: Bearer sk-proj-…``); an exception's text can carry a header dict or a URL
with ``?key=``. ``mask_line`` replaces, whatever the key's format:

- the value of a credential header (``CREDENTIAL_HEADERS``) written as a header line
  (``authorization: Bearer …``), a ``name=value`` pair, a dict or JSON entry
  (``'x-api-key': '…'``) or an ASGI header tuple (``(b'authorization', b'Bearer …')``); an
  auth scheme (``Bearer``) is kept, so the line still says how the client authenticated;
- a credential query parameter (Gemini's ``?key=…``, ``access_token=…``);
- anything else ``ember.redaction`` finds (a key of a known format, a password in a URL, a
  token in prose).

Cost: a line without any of a few cheap hints (``_HINT``, one regex search, ~2 µs) is
returned as it is; only a hinted line pays for the detector (tens of µs;
``bench/edge_costs.py``).
"""

from __future__ import annotations

import re

from ember.redaction import PLACEHOLDER, mask

#: Headers whose value is a credential (lower case).
CREDENTIAL_HEADERS = (
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "cookie",
    "set-cookie",
    "x-ember-token",
    "x-ember-proxy-token",
)
#: Query parameters whose value is a credential.
CREDENTIAL_PARAMS = ("key", "api_key", "apikey", "api-key", "access_token", "token", "password")

HIDDEN = PLACEHOLDER.format(kind="credential")

_NAMES = "|".join(re.escape(n) for n in sorted(CREDENTIAL_HEADERS, key=len, reverse=True))
_NAME = rf"(?<![\w-])(?:{_NAMES})(?![\w-])"
_SCHEME = r"(?:(?:bearer|basic|token|digest)\s+)?"
#: ``'authorization': 'Bearer …'``, ``"x-api-key":"…"``, ``(b'cookie', b'…')``.
_QUOTED = re.compile(
    rf"(?i)(?P<head>(?P<q1>['\"]){_NAME}(?P=q1)\s*[:,]\s*b?(?P<q2>['\"]){_SCHEME})"
    r"(?P<value>(?:\\.|(?!(?P=q2)).)+)"
)
#: ``authorization: Bearer …`` to the end of the line; ``x-api-key=…`` to the next space.
_LINE = re.compile(rf"(?i)(?P<head>{_NAME}\s*:[ \t]*{_SCHEME})(?P<value>[^\r\n]+)")
_PAIR = re.compile(rf"(?i)(?P<head>{_NAME}={_SCHEME})(?P<value>[^\s&'\",;)\]}}]+)")
_PARAMS = "|".join(re.escape(p) for p in CREDENTIAL_PARAMS)
_QUERY = re.compile(rf"(?i)(?P<head>[?&;](?:{_PARAMS})=)(?P<value>[^\s&#'\"]+)")
#: Without one of these (in the line as lower case) a line holds no credential any rule here
#: finds: the header names, the query parameters (``key``, ``token``, ``password``), and the
#: detector's words. Searched in the lowered line: the same pattern with ``(?i)`` took 17 µs a
#: line, this takes 2.
_HINT = re.compile(
    r"auth|key|cookie|token|passw|pwd|secret|credential|bearer|private|sk-|aiza|akia|asia|"
    r"gh[opusr]_|github_pat|glpat|xox|hf_|npm_|eyj"
)


def mask_line(text: str) -> str:
    """``text`` with every credential in it replaced by ``[redacted credential]`` (or the
    detector's ``[redacted <kind>]``); the same object when there is none to find."""
    if not _HINT.search(text.lower()) and not ("://" in text and "@" in text):
        return text
    masked = text
    for pattern in (_QUOTED, _LINE, _PAIR, _QUERY):
        masked = pattern.sub(_hide, masked)
    masked = mask(masked)
    return text if masked == text else masked


def _hide(m: re.Match[str]) -> str:
    if m.group("value").startswith("[redacted"):
        return m.group(0)
    return m.group("head") + HIDDEN
