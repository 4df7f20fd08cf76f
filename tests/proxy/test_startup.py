"""What ``ember proxy`` says at start-up: an OpenAI base without its path is fixed with a
warning, a pasted endpoint is flagged, and a non-loopback host is refused without a token and
warned about with one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import ember
from ember.cli import cli
from ember.config import load_settings
from ember.errors import ConfigError
from ember.proxy.startup import exposure_warning, review, review_openai_url

TOKEN = "a-token-of-the-proxy-0123456789"
SRC = str(Path(ember.__file__).resolve().parents[1])


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("http://127.0.0.1:11434", "http://127.0.0.1:11434/v1"),
        ("https://api.example.com", "https://api.example.com/v1"),
    ],
)
def test_openai_url_without_a_path_gets_v1_and_a_warning(given: str, used: str) -> None:
    fixed, warning = review_openai_url(given)
    assert fixed == used
    assert warning is not None and used in warning


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1",
        "https://openrouter.ai/api/v1",
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "https://dashscope.aliyuncs.com/compatible-mode/v1",
    ],
)
def test_openai_url_with_a_provider_path_is_kept_silently(url: str) -> None:
    assert review_openai_url(url) == (url, None)


def test_openai_url_that_is_a_pasted_endpoint_is_flagged_not_rewritten() -> None:
    url = "https://api.openai.com/v1/chat/completions"
    fixed, warning = review_openai_url(url)
    assert fixed == url
    assert warning is not None and f"{url}/chat/completions" in warning


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]", "192.168.1.20", "my-box.local", ""])
def test_host_beyond_loopback_warns_that_the_network_is_served(host: str) -> None:
    warning = exposure_warning(host, 8787)
    assert warning is not None
    assert "8787" in warning and "x-ember-proxy-token" in warning and "memories" in warning


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_host_is_quiet(host: str) -> None:
    assert exposure_warning(host, 8787) is None


def test_review_leaves_good_settings_untouched(tmp_path: Path) -> None:
    settings = load_settings(env={"EMBER_HOME": str(tmp_path)})
    assert review(settings) == (settings, [])


def test_proxy_start_up_prints_the_warnings_and_serves_the_fixed_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: dict[str, Any] = {}

    def fake_serve(app: Any, host: str, port: int, log_level: str, **_: Any) -> None:
        served.update(app=app, host=host)

    monkeypatch.setattr("ember.server.serve_forever", fake_serve)
    for key in [k for k in os.environ if k.startswith("EMBER_")]:
        monkeypatch.delenv(key)
    env = {
        "EMBER_HOME": str(tmp_path),
        "EMBER_OPENAI_URL": "http://127.0.0.1:9",
        "EMBER_PROXY_TOKEN": TOKEN,
    }
    r = CliRunner().invoke(cli, ["proxy", "--host", "0.0.0.0", "--port", "9"], env=env)
    assert r.exit_code == 0, r.output
    assert TOKEN not in r.output
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2
    assert "http://127.0.0.1:9/v1" in warnings[0] and "0.0.0.0" in warnings[1]
    assert served["app"].settings.openai_url == "http://127.0.0.1:9/v1"
    assert served["host"] == "0.0.0.0"  # with a token: warned about, not refused


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "my-box.local"])
def test_a_host_beyond_loopback_needs_a_token(host: str, tmp_path: Path) -> None:
    bare = load_settings(env={"EMBER_HOME": str(tmp_path)}, host=host)
    with pytest.raises(ConfigError) as refused:
        review(bare)
    said = str(refused.value)
    assert f"{host} is not loopback and no proxy_token is set" in said
    assert "EMBER_PROXY_TOKEN" in said and "x-ember-proxy-token" in said
    tokened = load_settings(
        env={"EMBER_HOME": str(tmp_path), "EMBER_PROXY_TOKEN": TOKEN}, host=host
    )
    assert review(tokened)[0] == tokened


def test_ember_proxy_on_all_interfaces_without_a_token_stops_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env |= {"EMBER_HOME": str(tmp_path), "PYTHONPATH": SRC}
    done = subprocess.run(
        [sys.executable, "-m", "ember", "proxy", "--host", "0.0.0.0", "--port", "9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("ember: error: host: 0.0.0.0 is not loopback")
    assert "Traceback" not in done.stderr and "ember proxy on" not in done.stderr


def test_the_banner_says_shadow_memory_spends_with_your_key_and_how_to_turn_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ember.server.serve_forever", lambda *a, **k: None)
    for key in [k for k in os.environ if k.startswith("EMBER_")]:
        monkeypatch.delenv(key)
    r = CliRunner().invoke(cli, ["proxy", "--port", "9"], env={"EMBER_HOME": str(tmp_path)})
    assert r.exit_code == 0, r.output
    [line] = [x for x in r.stderr.splitlines() if x.startswith("shadow memory:")]
    assert "primary" in line and "client's own key" in line
    assert "15% of each project's client spend" in line and "EMBER_SHADOW=off" in line
    off = CliRunner().invoke(
        cli, ["proxy", "--port", "9"], env={"EMBER_HOME": str(tmp_path), "EMBER_SHADOW": "off"}
    )
    assert "shadow memory: off" in off.stderr
    helped = " ".join(CliRunner().invoke(cli, ["proxy", "--help"]).output.split())
    assert "with the client's own key" in helped and "EMBER_SHADOW=off" in helped
