"""Which handler answers a request (``ember.proxy.routes``): the first route whose path and
method match; a model endpoint asked with another method goes on to the pass-through."""

from __future__ import annotations

from typing import Any

from ember.proxy.routes import Mount, Route, Router, WebSocketRoute


async def _endpoint(scope: dict[str, Any], receive: Any, send: Any) -> None:
    return None


def _router() -> tuple[Router, dict[str, Route]]:
    named = {
        "health": Route("/healthz", _endpoint, methods=("GET", "HEAD")),
        "gemini": Route("/v1beta/models/{model}:generateContent", _endpoint, methods=("POST",)),
        "messages": Route("/v1/messages", _endpoint, methods=("POST",)),
        "socket": WebSocketRoute("/v1/responses", _endpoint),
        "ui": Mount("/ui", _endpoint, doors=False),
        "rest": Mount("", _endpoint),
    }
    return Router(list(named.values())), named


def test_the_first_matching_route_answers_and_a_wrong_method_passes_through() -> None:
    router, r = _router()
    assert router.http("/healthz", "GET") is r["health"]
    assert router.http("/v1/messages", "POST") is r["messages"]
    # GET on a model endpoint is not ember's to refuse: the provider answers it
    assert router.http("/v1/messages", "GET") is r["rest"]
    assert router.http("/healthz", "POST") is r["rest"]


def test_a_pattern_stands_for_one_path_segment() -> None:
    router, r = _router()
    assert router.http("/v1beta/models/gemini-3-pro:generateContent", "POST") is r["gemini"]
    assert router.http("/v1beta/models/a/b:generateContent", "POST") is r["rest"]
    assert router.http("/v1beta/models/x:generateContentz", "POST") is r["rest"]


def test_a_mount_holds_its_path_and_what_is_under_it_only() -> None:
    router, r = _router()
    assert router.http("/ui", "GET") is r["ui"]
    assert router.http("/ui/api/sessions", "POST") is r["ui"]
    assert router.http("/uix", "GET") is r["rest"]  # a sibling, not under /ui
    assert not r["ui"].doors and r["rest"].doors


def test_websocket_routes_answer_upgrades_only() -> None:
    router, r = _router()
    assert router.websocket("/v1/responses") is r["socket"]
    assert router.websocket("/v1/messages") is None  # the mounts never get an upgrade
    assert router.http("/v1/responses", "POST") is r["rest"]
    assert router.websocket_paths == ["/v1/responses"]
