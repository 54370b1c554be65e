"""The access lists' rules (``bot.access``) and their settings: block wins over allow, a
thread is its channel, DMs by ``ALLOW_DMS`` alone, roles only where a platform has them,
and a list that holds a name instead of an id is refused naming the variable."""

from __future__ import annotations

import pytest

from bot.access import AccessRules, Lists, Verdict
from bot.errors import ConfigError
from bot.settings import load_settings
from memory.models import ChannelKey

GUILD = ChannelKey("discord", "1", "500")
THREAD = ChannelKey("discord", "1", "501")
DM = ChannelKey("discord", "dm", "600")
SLACK = ChannelKey("slack", "T1", "C1")


def rules(**env: str) -> AccessRules:
    return AccessRules(load_settings(env, env_file=None).access)


def test_nothing_set_admits_everyone_everywhere() -> None:
    r = rules()
    assert r.verdict(GUILD, "7", ("9",), direct=False) is Verdict.ADMITTED
    assert r.verdict(DM, "7", (), direct=True) is Verdict.ADMITTED
    assert r.verdict(SLACK, "U1", None, direct=False) is Verdict.ADMITTED


def test_block_wins_over_allow_for_users_roles_and_channels() -> None:
    r = rules(ALLOWED_USERS="7", BLOCKED_USERS="7")
    assert r.verdict(GUILD, "7", (), direct=False) is Verdict.PERSON
    r = rules(ALLOWED_ROLES="9", BLOCKED_ROLES="8")
    assert r.verdict(GUILD, "7", ("9", "8"), direct=False) is Verdict.PERSON
    assert r.verdict(GUILD, "7", ("9",), direct=False) is Verdict.ADMITTED
    r = rules(ALLOWED_CHANNELS="500", BLOCKED_CHANNELS="500")
    assert r.verdict(GUILD, "7", (), direct=False) is Verdict.CHANNEL


def test_either_allow_list_admits_and_roles_apply_only_where_a_platform_has_them() -> None:
    r = rules(ALLOWED_USERS="7,U1", ALLOWED_ROLES="9")
    assert r.verdict(GUILD, "7", (), direct=False) is Verdict.ADMITTED
    assert r.verdict(GUILD, "8", ("9",), direct=False) is Verdict.ADMITTED
    assert r.verdict(GUILD, "8", (), direct=False) is Verdict.PERSON
    assert r.verdict(DM, "8", (), direct=True) is Verdict.PERSON  # no roles in a DM
    assert r.verdict(SLACK, "U2", None, direct=False) is Verdict.PERSON  # not in ALLOWED_USERS
    assert rules(ALLOWED_ROLES="9").verdict(SLACK, "U2", None, direct=False) is Verdict.ADMITTED


def test_a_thread_is_its_channel_and_dms_are_governed_by_allow_dms_alone() -> None:
    r = rules(BLOCKED_CHANNELS="500")
    assert r.verdict(THREAD, "7", (), direct=False, parent="500") is Verdict.CHANNEL
    r = rules(ALLOWED_CHANNELS="500")
    assert r.verdict(THREAD, "7", (), direct=False, parent="500") is Verdict.ADMITTED
    assert r.verdict(THREAD, "7", (), direct=False) is Verdict.CHANNEL
    assert r.verdict(DM, "7", (), direct=True) is Verdict.ADMITTED
    assert rules(ALLOW_DMS="false").verdict(DM, "7", (), direct=True) is Verdict.DIRECT


def test_what_is_recorded_of_a_refused_message() -> None:
    r = rules()
    assert r.records(Verdict.PERSON) and r.records(Verdict.ADMITTED)
    assert not r.records(Verdict.CHANNEL) and not r.records(Verdict.DIRECT)
    assert not rules(RECORD_BLOCKED="false").records(Verdict.PERSON)


def test_the_console_operator_is_never_refused() -> None:
    r = rules(ALLOWED_USERS="7", ALLOW_DMS="false", ALLOWED_CHANNELS="500")
    console = ChannelKey("console", "local", "console")
    assert r.verdict(console, "you", None, direct=True) is Verdict.ADMITTED


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("BLOCKED_USERS", "123,alice", "'alice' is not a user id"),
    ("ALLOWED_ROLES", "Moderators", "'Moderators' is not a role id"),
    ("BLOCKED_CHANNELS", "<#200000000000000001>", "is not a channel id"),
    ("ALLOWED_CHANNELS", "#general", "'#general' is not a channel id"),
    ("ALLOW_DMS", "perhaps", "must be true or false, not 'perhaps'"),
    ("RECORD_BLOCKED", "sometimes", "must be true or false"),
])
def test_a_bad_list_is_refused_naming_the_variable(variable: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_settings({variable: value}, env_file=None)
    assert f"{variable}: " in str(e.value) and says in str(e.value)


def test_ids_are_read_with_spaces_and_duplicates_dropped() -> None:
    access = load_settings({"BLOCKED_USERS": " 123 , U0ABC,123,, "}, env_file=None).access
    assert access.blocked_users == ["123", "U0ABC"]


def test_a_servers_lists_only_narrow_the_operators() -> None:
    r = rules(BLOCKED_USERS="7", ALLOWED_CHANNELS="500,501")
    server = Lists.of({"allowed_users": ["7", "8"], "blocked_channels": ["501"]})
    assert r.verdict(GUILD, "7", (), direct=False, server=server) is Verdict.PERSON
    assert r.verdict(GUILD, "8", (), direct=False, server=server) is Verdict.ADMITTED
    assert r.verdict(GUILD, "9", (), direct=False, server=server) is Verdict.PERSON
    assert r.verdict(THREAD, "8", (), direct=False, server=server) is Verdict.CHANNEL
    assert r.verdict(THREAD, "8", (), direct=False) is Verdict.ADMITTED
