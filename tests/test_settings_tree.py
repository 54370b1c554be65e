"""The settings tree: every variable lives in exactly one section, each section is the very
object its part of gistbot takes (no copies), and one ``Budget`` serves the reply, catch-up
and compaction with the numbers the old per-place formulas gave."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from adapters.discord.launch import create_client
from bot.app import Runtime, make_llm
from bot.conversation.prompts import fixed_overhead
from bot.llm.client import OpenAILLM, UsageMeter
from bot.settings import Settings, fields, load_settings
from memory.config import MemoryConfig
from memory.summarizer import fold_limit
from memory.tokens import TokenCounter
from memory.window import WindowPolicy
from tests.harness.slack import make_adapter

BUDGETS = [
    {},
    {"CONTEXT_TOKENS": "4096", "REPLY_TOKENS": "512"},
    {"CONTEXT_TOKENS": "32000", "REPLY_TOKENS": "2000", "SYSTEM_PROMPT": "Be terse."},
    {"CONTEXT_TOKENS": "2048", "SUMMARY_TOKENS": "150", "FACTS_TOKENS": "100"},
]


def env(tmp_path: Path, **values: str) -> dict[str, str]:
    return {"DATABASE_URL": f"sqlite:///{tmp_path}/tree.db", **values}


def test_every_setting_lives_in_exactly_one_section() -> None:
    found = list(fields(Settings))
    variables = [f.variable for f in found]
    assert len(variables) == len(set(variables)) >= 62, "a variable named twice"
    for section, info in Settings.model_fields.items():  # the root holds sections only
        assert isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel), section
    types = [info.annotation for info in Settings.model_fields.values()]
    assert len(types) == len(set(types)), "one section type used twice"
    assert Settings.model_fields["memory"].annotation is MemoryConfig  # memory's own type
    assert {"EMBEDDING_MODEL", "EMBEDDING_TIMEOUT"} <= {
        f.variable for f in found if f.section == "llm"}
    # Fields that are not settings (tunables) have no variable.
    assert "RETRY_BASE" not in variables and "STREAM_INTERVAL" not in variables


def test_a_root_field_outside_every_section_is_refused() -> None:
    class Flat(Settings):
        stray_knob: int = 3

    with pytest.raises(TypeError, match="stray_knob is not a section"):
        list(fields(Flat))


def test_each_variable_lands_in_its_section() -> None:
    s = load_settings({"MODEL_NAME": "m9", "context_tokens": "9000", "RECALL_TOKENS": "70",
                       "TIMEZONE": "Europe/Berlin", "PORT": "3100", "ADMIN_HOST": "0.0.0.0",
                       "SHARD_COUNT": "4", "VISION": "off", "NOT_A_SETTING": "x"})
    assert (s.llm.model_name, s.budget.context_tokens, s.memory.recall_tokens) == ("m9", 9000, 70)
    assert (s.catchup.timezone, s.slack.port, s.admin.admin_host) == (
        "Europe/Berlin", 3100, "0.0.0.0")
    assert (s.discord.shard_count, s.attachments.vision) == (4, "off")
    assert s.flat()["MODEL_NAME"] == "m9" and "NOT_A_SETTING" not in s.flat()


def test_a_bad_value_in_a_section_is_named_by_its_variable() -> None:
    from bot.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        load_settings({"FACTS_TOKENS": "-1", "EMBEDDING_TIMEOUT": "0"})
    text = str(info.value)
    assert "FACTS_TOKENS: Input should be greater than or equal to 0" in text
    assert "EMBEDDING_TIMEOUT: Input should be greater than 0" in text
    assert "MEMORY" not in text and "LLM/" not in text


async def test_the_sections_are_the_objects_the_parts_take(tmp_path: Path) -> None:
    settings = load_settings(env(
        tmp_path, FACTS_TOKENS="123", RETENTION_DAYS="9", RECALL_TOKENS="77",
        MAX_INPUT_CHARS="999", USER_RATE_LIMIT="3", SYSTEM_PROMPT="Be brief.",
        ATTACHMENT_MAX_CHARS="55", VISION="on", TIMEZONE="Asia/Tokyo", LLM_CONCURRENCY="3",
        REPLY_CLAIM_SECONDS="44", ANSWER_MISSED_SECONDS="66"))
    async with Runtime.open(settings, start_background=False, warn_offline=False) as rt:
        assert rt.memory.config is settings.memory
        assert (rt.memory.config.facts_tokens, rt.memory.config.retention_days) == (123, 9)
        assert rt.memory.config.split.recall_tokens == 77
        parts = rt.features  # the service is handed the same (MAX_INPUT_CHARS and
        # USER_RATE_LIMIT as the service applies them: tests/test_abuse.py)
        assert rt.settings.chat is settings.chat
        assert (settings.chat.max_input_chars, settings.chat.user_rate_limit) == (999, 3)
        assert parts.attachments.limits is settings.attachments
        assert (parts.attachments.limits.attachment_max_chars, parts.attachments.vision) == (
            55, "on")
        catchups = parts.catchup_commands.catchups
        assert catchups is not None
        assert catchups.engine.config is settings.catchup and catchups.zone.key == "Asia/Tokyo"
        assert catchups.engine.parallel == 6  # twice LLM_CONCURRENCY
        assert parts.owed is not None
        assert (parts.owed.claim_seconds, parts.owed.answer_missed_seconds) == (44, 66)
        assert parts.channels.defaults.persona == "Be brief."


def test_the_llm_section_reaches_the_client() -> None:
    settings = load_settings({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "MODEL_NAME": "m2",
                              "SUMMARY_MODEL_NAME": "m3", "LLM_TIMEOUT": "7"})
    llm = make_llm(settings, TokenCounter("m2"), UsageMeter())
    assert isinstance(llm, OpenAILLM)
    assert (llm.model, llm.summary_model) == ("m2", "m3")


async def test_the_adapters_take_the_tree(tmp_path: Path) -> None:
    settings = load_settings(env(
        tmp_path, DISCORD_TOKEN="abc.def.ghi", STREAM_REPLIES="true",
        BACKFILL_MAX_MESSAGES="0", SLACK_BOT_TOKEN="xoxb-1", SLACK_SIGNING_SECRET="s3",
        SLACK_ADMIN_USER_IDS="U7"))
    async with Runtime.open(settings, start_background=False, warn_offline=False) as rt:
        client = create_client(rt.features, rt.settings)  # not logged in: nothing to close
        assert client.settings.discord is settings.discord
        assert client.flow.outlet.stream_interval == 1.0  # type: ignore[attr-defined]
        assert client.backfill is None  # BACKFILL_MAX_MESSAGES=0
        adapter = make_adapter(rt, "http://127.0.0.1:9/api/", stream_interval=0.25)
        try:
            assert adapter.commands.settings is settings.slack
            assert await adapter.commands.may_reset("U7")  # listed: no Web API call
            outlet = adapter.events.flow.outlet
            assert outlet.stream_interval == 0.25  # type: ignore[attr-defined]
        finally:
            await adapter.close()


@pytest.mark.parametrize("values", BUDGETS, ids=lambda v: ",".join(v.values()) or "defaults")
async def test_one_budget_serves_the_reply_catchup_and_compaction(
    tmp_path: Path, values: dict[str, str]
) -> None:
    settings = load_settings(env(tmp_path, **values))
    async with Runtime.open(settings, start_background=False, warn_offline=False) as rt:
        tok = rt.memory.tokenizer
        context, reply = settings.budget.context_tokens, settings.budget.reply_tokens
        prompt = settings.chat.system_prompt
        # The formulas each place used before there was one Budget.
        bound = settings.budget.summary_tokens or min(600, max(100, (context - reply) // 10))
        memory = context - reply - fixed_overhead(prompt, tok)
        window = WindowPolicy.for_budget(memory, summary_tokens=bound)
        catchups = rt.features.catchup_commands.catchups
        assert catchups is not None
        assert rt.budget is catchups.engine.limits  # the service is handed it too (bot.app)
        assert rt.budget.memory_with(prompt, tok) == rt.budget.memory_tokens == memory
        assert catchups.engine.budget == rt.budget.prompt_tokens == context - reply
        assert rt.memory.summarizer.summary_tokens == rt.budget.summary_tokens == bound
        assert rt.memory.policy.window_tokens == window.window_tokens
        assert rt.memory.policy.max_fold_tokens == min(window.max_fold_tokens,
                                                       fold_limit(context, bound, tok))
        persona = "You are a pirate. " * 20
        assert rt.budget.memory_with(persona, tok) == (
            context - reply - fixed_overhead(persona, tok))
