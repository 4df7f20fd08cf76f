from __future__ import annotations

from ember.clients.address import ProxyAddress, bypass_proxies, project_header


def test_wildcard_listen_address_is_dialled_on_loopback() -> None:
    assert ProxyAddress.for_listener("0.0.0.0", 8787).origin == "http://127.0.0.1:8787"
    assert ProxyAddress.for_listener("::", 9000).openai_base == "http://[::1]:9000/v1"
    assert ProxyAddress.for_listener("10.1.2.3", 1).origin == "http://10.1.2.3:1"


def test_path_a_header_cannot_carry_is_left_to_prompt_detection() -> None:
    assert project_header("/home/ana/code/api") == "/home/ana/code/api"
    assert project_header("/home/josé/api") is None  # would reach ember as mojibake
    assert project_header("/tmp/a\nx-ember-project-id: other") is None  # header injection
    assert project_header(None) is None


def test_loopback_bypasses_a_corporate_http_proxy() -> None:
    env = {"HTTPS_PROXY": "http://corp:3128", "no_proxy": "example.com, .internal"}
    assert bypass_proxies(env, "127.0.0.1") == {
        "NO_PROXY": "example.com,.internal,127.0.0.1",
        "no_proxy": "example.com,.internal,127.0.0.1",
    }


def test_no_proxy_is_left_alone_without_a_proxy() -> None:
    assert bypass_proxies({"NO_PROXY": "x"}, "127.0.0.1") == {}
    both = {"http_proxy": "http://p", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    assert bypass_proxies(both, "127.0.0.1") == {}
