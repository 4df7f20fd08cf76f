"""Cache accounting of the pure cache models on known request sequences."""

from __future__ import annotations

from typing import Any

import pytest

from ember.testing import AnthropicCache, OpenAICache, count_tokens
from ember.testing.prompt_anthropic import CacheControlError
from ember.testing.prompt_openai import chat_tokens, responses_tokens

EPH = {"type": "ephemeral"}
EPH_1H = {"type": "ephemeral", "ttl": "1h"}
MODEL = "claude-sonnet-4-5"  # minimum cacheable prefix: 1024 tokens


def words(tag: str, n: int) -> str:
    """Exactly ``n`` tokens: a distinguishing tag (at most 4 chars) and n - 1 filler words."""
    return " ".join([tag] + ["word"] * (n - 1))


def block(text: str, marker: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "text", "text": text}
    if marker is not None:
        out["cache_control"] = marker
    return out


def request(
    messages: list[dict[str, Any]],
    system: Any = None,
    tools: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": messages, **extra}
    if system is not None:
        body["system"] = system
    if tools is not None:
        body["tools"] = tools
    return body


def user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def tool(name: str, marker: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "description": words("tool", 600),
        "input_schema": {"type": "object", "properties": {}},
    }
    if marker is not None:
        out["cache_control"] = marker
    return out


def test_token_rule_is_documented_and_additive() -> None:
    assert count_tokens("word " * 1000) == 1000
    assert count_tokens("hello, world") == 5  # hell o , worl d
    assert count_tokens("") == 0


class TestAnthropicReadWrite:
    def test_first_request_writes_second_reads(self) -> None:
        cache = AnthropicCache()
        body = request([user(block("hi"))], system=[block(words("sys", 2000), EPH)])
        first = cache.evaluate(body, now=0.0)
        assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (2000, 0)
        assert first.ephemeral_5m == 2000 and first.ephemeral_1h == 0
        assert first.input_tokens == 1
        second = cache.evaluate(body, now=1.0)
        assert (second.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, 2000)
        assert second.input_tokens == 1
        assert second.total_input_tokens == first.total_input_tokens == 2001

    def test_below_minimum_caches_nothing(self) -> None:
        cache = AnthropicCache()
        body = request([user(block(words("a", 1000), EPH))])
        for now in (0.0, 1.0):
            usage = cache.evaluate(body, now=now)
            assert usage.cache_creation_input_tokens == usage.cache_read_input_tokens == 0
            assert usage.input_tokens == 1000

    def test_automatic_breakpoint_moves_forward_each_turn(self) -> None:
        cache = AnthropicCache()
        turn1 = [user(block(words("u1", 1500)))]
        usage1 = cache.evaluate(request(turn1, cache_control=EPH), now=0.0)
        assert usage1.cache_creation_input_tokens == 1500 and usage1.input_tokens == 0
        turn2 = [*turn1, {"role": "assistant", "content": words("a1", 50)}, user(block("u2 go"))]
        usage2 = cache.evaluate(request(turn2, cache_control=EPH), now=1.0)
        assert usage2.cache_read_input_tokens == 1500
        assert usage2.cache_creation_input_tokens == 52
        assert usage2.input_tokens == 0

    def test_string_content_and_marker_moves_keep_identity(self) -> None:
        """A proxy may turn string content into a text block and move breakpoints."""
        cache = AnthropicCache()
        first = [{"role": "user", "content": words("u1", 1500)}]
        cache.evaluate(request(first, cache_control=EPH), now=0.0)
        second = [user(block(words("u1", 1500))), {"role": "assistant", "content": "ok"}]
        second.append(user(block("next", EPH)))
        usage = cache.evaluate(request(second), now=1.0)
        assert usage.cache_read_input_tokens == 1500

    def test_split_into_other_turns_is_a_different_prefix(self) -> None:
        cache = AnthropicCache(min_tokens=10)
        one_turn = [user(block(words("a", 20)), block(words("b", 20), EPH))]
        cache.evaluate(request(one_turn), now=0.0)
        two_turns = [user(block(words("a", 20))), user(block(words("b", 20), EPH))]
        assert cache.evaluate(request(two_turns), now=1.0).cache_read_input_tokens == 0


class TestAnthropicLookback:
    @staticmethod
    def conversation(marked: int, count: int = 30) -> dict[str, Any]:
        blocks = [block(words(f"b{i}", 10), EPH if i == marked else None) for i in range(count)]
        return request([user(*blocks)])

    def test_hit_within_twenty_blocks(self) -> None:
        cache = AnthropicCache(min_tokens=10)
        cache.evaluate(self.conversation(marked=5), now=0.0)
        usage = cache.evaluate(self.conversation(marked=24), now=1.0)  # looks at 24..5
        assert usage.cache_read_input_tokens == 60
        assert usage.cache_creation_input_tokens == 190

    def test_miss_beyond_twenty_blocks(self) -> None:
        cache = AnthropicCache(min_tokens=10)
        cache.evaluate(self.conversation(marked=5), now=0.0)
        usage = cache.evaluate(self.conversation(marked=25), now=1.0)  # looks at 25..6
        assert usage.cache_read_input_tokens == 0
        assert usage.cache_creation_input_tokens == 260

    def test_an_earlier_breakpoint_rescues_a_long_jump(self) -> None:
        cache = AnthropicCache(min_tokens=10)
        cache.evaluate(self.conversation(marked=5), now=0.0)
        blocks = [block(words(f"b{i}", 10), EPH if i in (10, 29) else None) for i in range(30)]
        usage = cache.evaluate(request([user(*blocks)]), now=1.0)
        assert usage.cache_read_input_tokens == 60
        assert usage.cache_creation_input_tokens == 300 - 60


class TestAnthropicInvalidation:
    @staticmethod
    def body(**extra: Any) -> dict[str, Any]:
        return request(
            [user(block(words("msg", 1200), EPH))],
            system=[block(words("sys", 1100), EPH)],
            tools=[tool("read"), tool("edit", EPH)],
            **extra,
        )

    def test_tool_choice_change_rewrites_messages_only(self) -> None:
        cache = AnthropicCache()
        first = cache.evaluate(self.body(tool_choice={"type": "auto"}), now=0.0)
        prefix = first.total_input_tokens - 1200
        assert first.cache_creation_input_tokens == first.total_input_tokens
        usage = cache.evaluate(self.body(tool_choice={"type": "any"}), now=1.0)
        assert usage.cache_read_input_tokens == prefix
        assert usage.cache_creation_input_tokens == 1200

    def test_thinking_change_rewrites_messages_only(self) -> None:
        cache = AnthropicCache()
        cache.evaluate(self.body(thinking={"type": "enabled", "budget_tokens": 2000}), now=0.0)
        usage = cache.evaluate(self.body(thinking={"type": "disabled"}), now=1.0)
        assert usage.cache_creation_input_tokens == 1200
        assert usage.cache_read_input_tokens == usage.total_input_tokens - 1200

    def test_tool_definition_change_invalidates_everything(self) -> None:
        cache = AnthropicCache()
        cache.evaluate(self.body(), now=0.0)
        changed = self.body()
        changed["tools"][0]["description"] += " (changed)"
        usage = cache.evaluate(changed, now=1.0)
        assert usage.cache_read_input_tokens == 0
        assert usage.cache_creation_input_tokens == usage.total_input_tokens

    def test_system_change_keeps_tools(self) -> None:
        cache = AnthropicCache()
        first = cache.evaluate(self.body(), now=0.0)
        changed = self.body()
        changed["system"][0]["text"] += " changed"
        usage = cache.evaluate(changed, now=1.0)
        tools_tokens = first.total_input_tokens - 1100 - 1200
        assert usage.cache_read_input_tokens == tools_tokens

    def test_key_order_and_markers_do_not_change_identity(self) -> None:
        cache = AnthropicCache()
        cache.evaluate(self.body(), now=0.0)
        reordered = self.body()
        reordered["tools"] = [dict(reversed(list(t.items()))) for t in reordered["tools"]]
        usage = cache.evaluate(reordered, now=1.0)
        assert usage.cache_creation_input_tokens == 0


class TestAnthropicTtl:
    @staticmethod
    def body(marker: dict[str, str]) -> dict[str, Any]:
        return request([user(block("question"))], system=[block(words("sys", 1500), marker)])

    @pytest.mark.parametrize(
        ("marker", "alive", "dead"), [(EPH, 299.0, 301.0), (EPH_1H, 3599.0, 3601.0)]
    )
    def test_expiry(self, marker: dict[str, str], alive: float, dead: float) -> None:
        cache = AnthropicCache()
        cache.evaluate(self.body(marker), now=0.0)
        probe = AnthropicCache()
        probe.evaluate(self.body(marker), now=0.0)
        assert cache.evaluate(self.body(marker), now=alive).cache_read_input_tokens == 1500
        assert probe.evaluate(self.body(marker), now=dead).cache_read_input_tokens == 0

    def test_read_refreshes_expiry(self) -> None:
        cache = AnthropicCache()
        cache.evaluate(self.body(EPH), now=0.0)
        assert cache.evaluate(self.body(EPH), now=240.0).cache_read_input_tokens == 1500
        assert cache.evaluate(self.body(EPH), now=480.0).cache_read_input_tokens == 1500
        assert cache.evaluate(self.body(EPH), now=781.0).cache_read_input_tokens == 0

    def test_creation_split_by_ttl(self) -> None:
        cache = AnthropicCache()
        body = request(
            [user(block(words("msg", 1200), EPH))], system=[block(words("sys", 1100), EPH_1H)]
        )
        usage = cache.evaluate(body, now=0.0)
        assert (usage.ephemeral_1h, usage.ephemeral_5m) == (1100, 1200)
        assert usage.cache_creation_input_tokens == 2300


class TestAnthropicValidation:
    def test_more_than_four_breakpoints(self) -> None:
        blocks = [block(f"b{i}", EPH) for i in range(5)]
        with pytest.raises(CacheControlError, match="A maximum of 4 blocks with cache_control"):
            AnthropicCache().evaluate(request([user(*blocks)]), now=0.0)

    def test_automatic_mode_uses_one_of_the_four(self) -> None:
        blocks = [block(f"b{i}", EPH) for i in range(4)]
        body = request([user(*blocks, block("tail"))], cache_control=EPH)
        with pytest.raises(CacheControlError, match="Found 5"):
            AnthropicCache().evaluate(body, now=0.0)

    def test_one_hour_after_five_minutes_is_refused(self) -> None:
        body = request([user(block("a", EPH), block("b", EPH_1H))])
        with pytest.raises(CacheControlError, match="1h"):
            AnthropicCache().evaluate(body, now=0.0)

    def test_invalid_ttl_is_refused(self) -> None:
        body = request([user(block("a", {"type": "ephemeral", "ttl": "2h"}))])
        with pytest.raises(CacheControlError):
            AnthropicCache().evaluate(body, now=0.0)

    def test_refused_request_commits_nothing(self) -> None:
        cache = AnthropicCache(min_tokens=1)
        good = [block(words(f"b{i}", 5), EPH) for i in range(4)]
        with pytest.raises(CacheControlError):
            cache.evaluate(request([user(*good, block("x", EPH))]), now=0.0)
        assert cache.evaluate(request([user(*good)]), now=1.0).cache_read_input_tokens == 0


class TestAnthropicScopes:
    def test_minimum_table_longest_prefix_wins(self) -> None:
        cache = AnthropicCache()
        assert cache.minimum("claude-opus-4-5-20251101") == 4096
        assert cache.minimum("claude-opus-4-1") == 1024
        assert cache.minimum("claude-sonnet-4-6") == 2048
        assert cache.minimum("claude-3-5-haiku-latest") == 2048
        assert cache.minimum("claude-haiku-4-5") == 4096
        assert cache.minimum("claude-opus-5") == 512
        assert cache.minimum("something-else") == 1024
        assert AnthropicCache({"claude-opus-4-5": 10}).minimum("claude-opus-4-5") == 10
        assert AnthropicCache(7).minimum("claude-opus-4-5") == 7

    def test_organisations_and_models_do_not_share(self) -> None:
        cache = AnthropicCache()
        body = request([user(block("q"))], system=[block(words("sys", 1500), EPH)])
        cache.evaluate(body, now=0.0, api_key="org-a")
        assert cache.evaluate(body, now=1.0, api_key="org-b").cache_read_input_tokens == 0
        other_model = {**body, "model": "claude-opus-4-1"}
        assert cache.evaluate(other_model, now=1.0, api_key="org-a").cache_read_input_tokens == 0
        assert cache.evaluate(body, now=1.0, api_key="org-a").cache_read_input_tokens == 1500

    def test_clear(self) -> None:
        cache = AnthropicCache()
        body = request([user(block("q"))], system=[block(words("sys", 1500), EPH)])
        cache.evaluate(body, now=0.0)
        cache.clear()
        assert cache.evaluate(body, now=1.0).cache_read_input_tokens == 0


def chat(system_tokens: int, *more: str, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "system", "content": words("sys", system_tokens)}]
    messages += [{"role": "user", "content": text} for text in more]
    return {"model": "gpt-5", "messages": messages, **extra}


class TestOpenAI:
    @staticmethod
    def cached(cache: OpenAICache, body: dict[str, Any], now: float, api_key: str = "") -> int:
        key = str(body.get("prompt_cache_key") or "")
        return cache.evaluate(body["model"], chat_tokens(body), now, key, api_key)

    def test_below_1024_is_never_cached(self) -> None:
        cache = OpenAICache()
        body = chat(1000)
        assert len(chat_tokens(body)) < 1024
        assert [self.cached(cache, body, t) for t in (0.0, 1.0)] == [0, 0]

    def test_hits_grow_in_128_token_steps(self) -> None:
        cache = OpenAICache()
        base = chat(1100)
        assert len(chat_tokens(base)) == 1101
        assert self.cached(cache, base, 0.0) == 0
        assert self.cached(cache, base, 1.0) == 1024
        longer = chat(1100, words("more", 200))
        assert len(chat_tokens(longer)) == 1302
        assert self.cached(cache, longer, 2.0) == 1024
        assert self.cached(cache, longer, 3.0) == 1280

    def test_prompt_cache_key_and_api_key_separate_stores(self) -> None:
        cache = OpenAICache()
        self.cached(cache, chat(1300, prompt_cache_key="a"), 0.0)
        assert self.cached(cache, chat(1300, prompt_cache_key="b"), 1.0) == 0
        assert self.cached(cache, chat(1300, prompt_cache_key="a"), 1.0, api_key="x") == 0
        assert self.cached(cache, chat(1300, prompt_cache_key="a"), 1.0) == 1280

    def test_idle_expiry_and_refresh(self) -> None:
        cache = OpenAICache()
        self.cached(cache, chat(1300), 0.0)
        assert self.cached(cache, chat(1300), 299.0) == 1280
        assert self.cached(cache, chat(1300), 598.0) == 1280
        assert self.cached(cache, chat(1300), 899.0) == 0

    def test_tools_come_first_and_instructions_lead_responses(self) -> None:
        body = chat(1300)
        with_tools = {**body, "tools": [{"type": "function", "function": {"name": "f"}}]}
        assert chat_tokens(with_tools)[-1301:] == chat_tokens(body)
        responses = {"model": "gpt-5", "instructions": "be brief", "input": "hello"}
        assert responses_tokens(responses)[:3] == ["<|instructions|>", "be", "brie"]
