"""Secrets found in text, and the text with them masked (pure; no I/O).

Every door that keeps words a session said — memories from any writer, transcript messages,
proposals, lessons, exports, log lines — asks ``redact`` first: a password in a URL, a cloud
or API key, a token, a private key or a secret assigned in config style is replaced by
``[redacted <kind>]`` before it is stored, so it cannot be injected into a later session,
shown on the dashboard or shared through a team store. ``Redacted.only_secret`` says when
nothing is left worth keeping once the secret is gone ("The deploy token is ghp_…"): such a
fact is refused, not stored as an empty shell.

The token formats and the keyword assignments come from ``detect-secrets`` (its plugins'
patterns and heuristic filters); ember adds the formats it predates (Anthropic and
project-scoped OpenAI keys, fine-grained GitHub tokens, ...), whole PEM private-key blocks,
secrets said in prose ("the password is hunter2") and long random-looking tokens. Text is
first screened by one cheap pattern; only the lines it flags are examined further, so a
50 KB tool result without a secret costs one scan.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: What a secret is replaced with (the kind in the middle), e.g. ``[redacted GitHub token]``.
PLACEHOLDER = "[redacted {kind}]"
_PLACEHOLDER_RE = re.compile(r"\[redacted [^\]]{1,40}\]")

#: detect-secrets' names, as a user reads them.
_KIND_NAMES = {
    "Basic Auth Credentials": "password in a URL",
    "Secret Keyword": "secret",
    "Base64 High Entropy String": "secret",
    "Hex High Entropy String": "secret",
    "Private Key": "private key",
    "AWS Access Key": "AWS key",
    "GitHub Token": "GitHub token",
    "GitLab Token": "GitLab token",
    "OpenAI Token": "OpenAI key",
    "JSON Web Token": "JSON web token",
    "Slack Token": "Slack token",
}
#: detect-secrets plugins that find no credential (a public IP address is an address).
_SKIPPED_PLUGINS = frozenset({"Public IP (ipv4)"})

#: Formats newer than detect-secrets' patterns, or missing from them: (kind, pattern).
_OWN_FORMATS: tuple[tuple[str, str], ...] = (
    ("Anthropic key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    ("OpenAI key", r"\bsk-(?:proj|svcacct|admin|live)-[A-Za-z0-9_-]{20,}"),
    ("OpenAI key", r"\bsk-[A-Za-z0-9]{32,}\b"),
    ("Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("GitHub token", r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    ("GitHub token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}"),
    ("Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("npm token", r"\bnpm_[A-Za-z0-9]{36}"),
    ("Stripe key", r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{20,}"),
    ("bearer token", r"(?i:\bbearer\s+)([A-Za-z0-9._~+/=-]{16,})"),
    ("AWS secret key", r"(?i:aws_?secret_?access_?key\W{1,4})([A-Za-z0-9/+=]{40})"),
)
_PEM_BLOCK = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
#: "the password is hunter2", "my token was: abc123XYZ" (the value must look made up: a
#: digit or a symbol in it, so "the password is stored in the vault" is no secret).
_SAID_NOUNS = (
    r"pass(?:word|phrase|wd)|pwd|secret|token|api[ _-]?key|access[ _-]?key|"
    r"private[ _-]?key|credentials?"
)
_SAID = re.compile(
    rf"(?i:\b(?:{_SAID_NOUNS})\b(?:\s+(?:for|of|to)\s+[\w.@/-]+)?\s*(?:is|was|are|=|:)\s*)"
    r"[`'\"]?([^\s`'\"]{6,})"
)
#: A long token that may be a key of a format nobody listed (``=`` only as base64's padding,
#: so ``NAME=value`` keeps its name).
_RANDOM_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_.=-])[A-Za-z0-9+/_-]{24,}={0,2}(?![A-Za-z0-9+/_=-])")
#: What the line screen takes for a possible key: a long run of key characters with digits
#: or capitals in it (a path's parts are cut at its slashes and dots).
_LONG_TOKEN = re.compile(r"[A-Za-z0-9_=+-]{16,}")
#: The words (lower case) one of which each detect-secrets plugin's patterns need: a plugin
#: is run on a line only when the line has one (its lookbehind-laden patterns cost 0.2 ms a
#: line). Plugins not named here look for fixed-length tokens and run on every flagged line.
_PLUGIN_ANCHORS: dict[str, tuple[str, ...]] = {
    "AWS Access Key": ("aws", "a3t", "abia", "acca", "akia", "asia"),
    "Azure Storage Account access key": ("accountkey",),
    "Basic Auth Credentials": ("://",),
    "Cloudant Credentials": ("cloudant", "cl"),
    "GitHub Token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "GitLab Token": (
        "glpat-",
        "gldt-",
        "glft-",
        "glsoat-",
        "glrt-",
        "gr1348941",
        "glcbt-",
        "glimt-",
    ),
    "IBM COS HMAC Credentials": ("cos", "hmac"),
    "IBM Cloud IAM Key": ("iam", "ibm"),
    "JSON Web Token": ("eyj",),
    "NPM tokens": ("_authtoken",),
    "OpenAI Token": ("t3blbkfj",),
    "Private Key": ("private key",),
    "PyPI Token": ("pypi-",),
    "SendGrid API Key": ("sg.",),
    "Slack Token": ("xox", "hooks.slack.com"),
    "SoftLayer Credentials": ("softlayer", "sl"),
    "Square OAuth Secret": ("sq0csp-",),
    "Stripe Access Key": ("k_live_",),
}
#: The words the keyword detector's names all contain.
_KEYWORD_ANCHORS = (
    "key",
    "password",
    "passwd",
    "_pass",
    "keypass",
    "dbpass",
    "pwd",
    "secret",
    "contrase",
)
#: Words (lower case) without which no pattern here matches a line: the token formats'
#: fixed parts, the secret-sounding names detect-secrets' keyword detector looks for, the
#: nouns of a secret said in prose, a URL's credentials.
_ANCHORS = tuple(
    sorted(
        _words(
            """sk- aiza github_pat_ ghp_ gho_ ghu_ ghs_ ghr_ hf_ glpat- gldt- glft- glsoat- glrt-
            gr1348941 glcbt- glimt- xox hooks.slack.com npm_ _authtoken k_live_ k_test_ bearer
            aws akia asia abia acca a3t eyj :// sq0csp- sg. pypi- akc accountkey cloudant
            softlayer ibm cos_hmac password passwd passphrase db_pass dbpass database_pass
            key_pass keypass pwd secret token credential contrase api_key apikey api-key
            auth_key authkey service_key servicekey account_key db_key dbkey database_key
            databasekey priv_key privkey private_key privatekey client_key clientkey
            access_key"""
        )
        | {"api key", "private key", "access key"}
    )
)

_BASE64_LIMIT = 4.5
_PROSE_SECRET_CHARS = re.compile(r"[0-9!#$%&*+/=?@^_~-]")

#: Words that only say a secret is there: a fact left with nothing else is refused.
_SECRET_WORDS = _words(
    """password passwords passphrase pwd passwd secret secrets token tokens key keys api
    apikey credential credentials auth deploy access private bearer login value string env
    variable github gitlab openai anthropic aws slack stripe npm google hugging face"""
)
_STOPWORDS = _words(
    """a an the is was are be our my your their its this that these those it to of for in on
    at with by from and or as use used uses remember note here there new old current please
    save keep store stored"""
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]*")


@dataclass(frozen=True)
class Finding:
    """One secret: what kind, and where in the original text (``start``..``end``)."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class Redacted:
    """A text with its secrets masked, and what was masked."""

    text: str
    findings: tuple[Finding, ...] = ()

    @property
    def found(self) -> bool:
        return bool(self.findings)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds found, each once, in order of appearance."""
        return tuple(dict.fromkeys(f.kind for f in self.findings))

    @property
    def only_secret(self) -> bool:
        """Nothing worth keeping is left without the secret: fewer than two words that
        neither name the secret nor are filler ("The deploy token is …" keeps only
        "deploy")."""
        if not self.findings:
            return False
        rest = _PLACEHOLDER_RE.sub(" ", self.text)
        words = [w.lower() for w in _WORD.findall(rest)]
        meaningful = [w for w in words if w not in _SECRET_WORDS and w not in _STOPWORDS]
        return len(meaningful) < 2

    def reason(self) -> str:
        """What was done, in a sentence a user reads ("a GitHub token was redacted")."""
        named = [("an " if k[0] in "AEIOUaeiou" else "a ") + k for k in self.kinds]
        if not named:
            return "no secret found"
        listed = " and ".join(named) if len(named) <= 2 else ", ".join(named)
        verb = "refused: a memory never holds" if self.only_secret else "redacted"
        return f"{verb} {listed}"


def redact(text: str) -> Redacted:
    """``text`` with every secret found replaced by ``[redacted <kind>]``."""
    if not text:
        return Redacted(text)
    findings = _merge(list(_find(text)))
    if not findings:
        return Redacted(text)
    parts, last = [], 0
    for f in findings:
        parts.append(text[last : f.start])
        parts.append(PLACEHOLDER.format(kind=f.kind))
        last = f.end
    parts.append(text[last:])
    return Redacted("".join(parts), tuple(findings))


def mask(text: str) -> str:
    """``redact(text).text``: for places that keep the rest whatever was found."""
    return redact(text).text


def has_secret(text: str) -> bool:
    return bool(text) and any(True for _ in _find(text))


# -- finding ----------------------------------------------------------------------------------


def _find(text: str) -> Iterator[Finding]:
    for m in _PEM_BLOCK.finditer(text):
        yield Finding("private key", m.start(), m.end())
    for start, line in _flagged_lines(text):
        for kind, s, e in _in_line(line):
            yield Finding(kind, start + s, start + e)


def _flagged_lines(text: str) -> Iterator[tuple[int, str]]:
    """(offset, line) of each line that may hold a secret, each once, in order: a line with
    one of the words every pattern needs (``_ANCHORS``) or a long token with digits in it
    (every fixed-length key format is one). A superset, found by C-speed substring
    searches: a regex of every pattern run over a 90 KB tool result took 85 ms."""
    starts: set[int] = set()
    low = text.lower()
    for anchor in _ANCHORS:
        at = low.find(anchor)
        while at >= 0:
            starts.add(text.rfind("\n", 0, at) + 1)
            at = low.find(anchor, at + len(anchor))
    for m in _LONG_TOKEN.finditer(text):
        token = m.group(0)
        if sum(c.isdigit() for c in token) >= 2 or not (token.islower() or token.isupper()):
            starts.add(text.rfind("\n", 0, m.start()) + 1)
    for start in sorted(starts):
        end = text.find("\n", start)
        yield start, text[start : len(text) if end < 0 else end]


def _in_line(line: str) -> Iterator[tuple[str, int, int]]:
    """(kind, start, end) of the secrets in one line."""
    for kind, pattern in _patterns():
        for m in pattern.finditer(line):
            g = 1 if pattern.groups else 0
            value = m.group(g)
            if value and not _harmless(value, kind):
                yield kind, m.start(g), m.end(g)
    for kind, value in _detect_secrets_values(line):
        if _harmless(value, kind):
            continue
        for m in re.finditer(re.escape(value), line):
            yield kind, m.start(), m.end()
    for m in _SAID.finditer(line):
        value = m.group(1).rstrip(".,;)")
        if _PROSE_SECRET_CHARS.search(value) and not _harmless(value, "secret"):
            yield "secret", m.start(1), m.start(1) + len(value)
    for m in _RANDOM_TOKEN.finditer(line):
        if _looks_random(m.group(0)):
            yield "secret", m.start(), m.end()


def _detect_secrets_values(line: str) -> Iterator[tuple[str, str]]:
    """(kind, value) found by detect-secrets' plugins: token formats, and secrets assigned
    to secret-sounding names in config or code style."""
    plugins, keyword, styles = _detect_secrets()
    low = line.lower()
    for plugin in plugins:
        needs = _PLUGIN_ANCHORS.get(plugin.secret_type)
        if needs is not None and not any(a in low for a in needs):
            continue  # the plugin's patterns all need one of these words
        kind = _KIND_NAMES.get(plugin.secret_type, plugin.secret_type)
        for value in plugin.analyze_string(line):
            yield kind, value
    if any(a in low for a in _KEYWORD_ANCHORS):
        for style in styles:
            for value in keyword.analyze_string(line, style):
                yield "secret", value


def _harmless(value: str, kind: str) -> bool:
    """A placeholder, a reference or a made-up example, not a value (``${DB_PASS}``,
    ``<your password>``, ``abcdefgh``, a UUID, an already redacted value)."""
    from detect_secrets.filters import heuristic

    if len(value) < 4 or value.startswith("[redacted"):
        return True
    if kind in ("secret", "password in a URL"):
        return bool(
            heuristic.is_templated_secret(value)
            or heuristic.is_prefixed_with_dollar_sign(value)
            or heuristic.is_sequential_string(value)
            or heuristic.is_potential_uuid(value)
            or heuristic.is_not_alphanumeric_string(value)
            or value.lower() in ("none", "null", "true", "false", "undefined", "redacted")
        )
    return False


def _looks_random(token: str) -> bool:
    """A made-up string, not a word, path or name: letters of both cases and digits, and the
    entropy detect-secrets takes for a base64 secret. A git hash (hex, one case) is not."""
    has_upper = any(c.isupper() for c in token)
    has_lower = any(c.islower() for c in token)
    mixed = any(c.isdigit() or c in "+/" for c in token)
    if not (has_upper and has_lower and mixed):
        return False
    counts = Counter(token)
    n = len(token)
    entropy = -sum(c / n * math.log2(c / n) for c in counts.values())
    return entropy > _BASE64_LIMIT


def _merge(found: list[Finding]) -> list[Finding]:
    """Overlapping findings as one span, named by the most specific kind among them (a key
    found by its format and as a value assigned to ``API_KEY`` is an "OpenAI key", masked
    once)."""
    found.sort(key=lambda f: (f.start, -(f.end - f.start)))
    out: list[Finding] = []
    for f in found:
        if out and f.start < out[-1].end:
            last = out[-1]
            kind = last.kind if last.kind != "secret" else f.kind
            out[-1] = Finding(kind, last.start, max(last.end, f.end))
            continue
        out.append(f)
    return out


# -- the patterns, built once ------------------------------------------------------------------


@functools.cache
def _patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((kind, re.compile(p)) for kind, p in _OWN_FORMATS)


@functools.cache
def _detect_secrets() -> tuple[tuple[Any, ...], Any, tuple[dict[re.Pattern[str], int], ...]]:
    """detect-secrets' token plugins, its keyword detector and the assignment styles it knows
    (config files and code), loaded on first use (the library takes ~0.1 s to import)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins import keyword as kw
    from detect_secrets.plugins.base import RegexBasedDetector

    found: dict[str, Any] = dict(get_mapping_from_secret_type_to_class())
    plugins = tuple(
        found[name]()
        for name in sorted(found)
        if issubclass(found[name], RegexBasedDetector) and name not in _SKIPPED_PLUGINS
    )
    styles = (kw.CONFIG_DENYLIST_REGEX_TO_GROUP, kw.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP)
    return plugins, kw.KeywordDetector(), styles
