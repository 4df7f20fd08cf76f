"""The policy every server of ember answers by (``ember.hosts``), and its settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.config import load_settings
from ember.errors import ConfigError
from ember.hosts import HostPolicy, allowed_host, allowed_origin, bearer, is_loopback_name

TOKEN = "a-token-of-sixteen-or-more"


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.0.0.1:8787",
        "127.5.6.7:1",
        "localhost",
        "LocalHost:8787",
        "localhost.",
        "[::1]",
        "[::1]:8787",
        "[::ffff:127.0.0.1]:8787",
    ],
)
def test_loopback_names_with_or_without_a_port_are_this_machines(host: str) -> None:
    assert allowed_host(host, "127.0.0.1")


@pytest.mark.parametrize(
    "host",
    [
        None,
        "",
        "evil.example.com",
        "evil.example.com:8787",
        "localhost.evil.example.com",
        "127.0.0.1.evil.example.com",
        "0.0.0.0:8787",  # what a browser sends for http://0.0.0.0 ("0.0.0.0 day")
        "[::]:8787",
        "192.168.1.20:8787",
        "127.1",
    ],
)
def test_every_other_name_is_not(host: str | None) -> None:
    assert not allowed_host(host, "127.0.0.1")


def test_the_bound_address_and_configured_names_are_served_wildcards_are_not() -> None:
    assert allowed_host("192.168.1.20:8787", "192.168.1.20")
    assert not allowed_host("0.0.0.0:8787", "0.0.0.0")
    assert not allowed_host("[::]:8787", "::")
    assert allowed_host("Box.Lan:8787", "0.0.0.0", ("box.lan",))
    assert not allowed_host("box.lan.evil.com", "0.0.0.0", ("box.lan",))


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        (None, True),  # not a browser
        ("http://127.0.0.1:8787", True),
        ("http://localhost:3000", True),
        ("https://box.lan", True),
        ("http://evil.example.com", False),
        ("http://localhost.evil.example.com", False),
        ("null", False),  # a sandboxed frame or a file
        ("file://", False),
        ("chrome-extension://abc", False),
        ("http://user@127.0.0.1", False),
        ("http://127.0.0.1/path", False),
    ],
)
def test_an_origin_is_allowed_only_on_a_served_name(origin: str | None, allowed: bool) -> None:
    assert allowed_origin(origin, "127.0.0.1", ("box.lan",)) is allowed


def test_bearer_takes_the_token_of_a_bearer_header_only() -> None:
    assert bearer("Bearer abc") == "abc" and bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None and bearer("Bearer ") is None and bearer(None) is None


def test_loopback_addresses_as_binds() -> None:
    assert is_loopback_name("::1") and is_loopback_name("[::1]") and is_loopback_name("127.0.0.2")
    assert not is_loopback_name("0.0.0.0") and not is_loopback_name("my-box.local")


PROXY = HostPolicy("this proxy", "0.0.0.0", token=TOKEN, token_how="send it in x-ember-proxy-token")
LOCAL = ("127.0.0.1", 5000)
REMOTE = ("192.168.1.9", 5000)


def check(policy: HostPolicy, **request: object) -> tuple[int, str] | None:
    given: dict[str, object] = {
        "method": "POST", "host": "127.0.0.1:8787", "origin": None, "peer": LOCAL, "token": None,
    }  # fmt: skip
    refused = policy.check(**(given | request))  # type: ignore[arg-type]
    return None if refused is None else (refused.status, refused.reason)


def test_this_machine_needs_no_token_another_needs_the_right_one() -> None:
    assert check(PROXY) is None
    assert check(PROXY, peer=REMOTE) == (401, "token")
    assert check(PROXY, peer=REMOTE, token="wrong-token-of-sixteen") == (401, "token")
    assert check(PROXY, peer=REMOTE, token=TOKEN) is None
    assert check(PROXY, peer=None) == (401, "token")  # an unknown peer is not this machine


def test_without_a_token_or_with_remote_off_another_machine_is_refused_outright() -> None:
    tokenless = HostPolicy("this proxy", "0.0.0.0")
    assert check(tokenless, peer=REMOTE, token=TOKEN) == (403, "peer")
    local_only = HostPolicy("the dashboard", "0.0.0.0", token=TOKEN, remote=False)
    assert check(local_only, peer=REMOTE, token=TOKEN) == (403, "peer")


def test_a_token_from_every_peer_when_asked_so() -> None:
    mcp = HostPolicy("ember mcp", "127.0.0.1", token=TOKEN, token_from="every", remote=False)
    assert check(mcp) == (401, "token")
    assert check(mcp, token=TOKEN) is None


def test_host_then_origin_and_origin_only_where_state_can_change() -> None:
    assert check(PROXY, host="evil.test:8787") == (421, "host")
    assert check(PROXY, method="GET", host="evil.test") == (421, "host")
    assert check(PROXY, origin="http://evil.test") == (403, "origin")
    assert check(PROXY, method="GET", origin="http://evil.test") is None
    assert check(PROXY, method="OPTIONS", origin="http://evil.test") == (403, "origin")
    assert check(PROXY, method="GET", origin="http://evil.test", upgrade=True) == (403, "origin")


def test_refusals_say_what_to_do_and_never_quote_the_token() -> None:
    refused = PROXY.check(method="POST", host="evil.test:8787", origin=None, peer=LOCAL, token=None)
    assert refused is not None
    assert "Host 'evil.test:8787' is not this proxy's" in refused.message
    assert "add 'evil.test' to allowed_hosts (EMBER_ALLOWED_HOSTS)" in refused.message
    wrong = PROXY.check(method="GET", host=None, origin=None, peer=REMOTE, token=TOKEN + "x")
    assert wrong is not None and TOKEN not in wrong.message and "does not match" in wrong.message
    long = PROXY.check(method="GET", host="x" * 5000, origin=None, peer=LOCAL, token=None)
    assert long is not None and len(long.message) < 400


# -- the settings ------------------------------------------------------------------------------


def test_allowed_hosts_from_the_environment_or_the_file(tmp_path: Path) -> None:
    env = {"EMBER_HOME": str(tmp_path), "EMBER_ALLOWED_HOSTS": " Box.lan, 192.168.1.20:8787,,"}
    assert load_settings(env=env).allowed_hosts == ("box.lan", "192.168.1.20")
    config = tmp_path / "config.toml"
    config.write_text('allowed_hosts = ["ember.internal"]\n', encoding="utf-8")
    settings = load_settings(config, env={"EMBER_HOME": str(tmp_path)})
    assert settings.allowed_hosts == ("ember.internal",)


def test_an_allowed_host_that_is_a_url_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as bad:
        load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_ALLOWED_HOSTS": "http://box/"})
    assert "EMBER_ALLOWED_HOSTS" in str(bad.value) and "without http://" in str(bad.value)


@pytest.mark.parametrize("key", ["EMBER_PROXY_TOKEN", "EMBER_MCP_TOKEN"])
def test_a_short_token_is_refused_without_being_echoed(tmp_path: Path, key: str) -> None:
    with pytest.raises(ConfigError) as bad:
        load_settings(env={"EMBER_HOME": str(tmp_path), key: "hunter2"})
    assert key in str(bad.value) and "at least 16" in str(bad.value)
    assert "hunter2" not in str(bad.value)


def test_tokens_stay_out_of_the_settings_repr(tmp_path: Path) -> None:
    env = {"EMBER_HOME": str(tmp_path), "EMBER_PROXY_TOKEN": TOKEN, "EMBER_MCP_TOKEN": TOKEN}
    settings = load_settings(env=env)
    assert settings.proxy_token == TOKEN and TOKEN not in repr(settings)
