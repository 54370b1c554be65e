"""The settings and usage roles' contract (``bot.stores.settings``, ``bot.stores.usage``),
mixed into ``RolesContract`` so every backend runs it: per-channel settings with a server
scope, the change log, the version every change bumps, daily token counts and the
once-a-day quota notice."""

from __future__ import annotations

import asyncio

from bot.stores import Storage
from bot.stores.settings import SERVER, server_scope
from bot.stores.usage import UsageKey
from memory.models import ChannelKey

C1 = ChannelKey("discord", "g1", "c1")
C2 = ChannelKey("discord", "g1", "c2")
OTHER = ChannelKey("discord", "g2", "c1")


class SettingsContract:
    """Tests of the settings and usage roles; ``storage`` is the backend's fixture."""

    async def test_settings_of_a_channel_and_its_server(self, storage: Storage) -> None:
        v0 = await storage.settings.settings_version()
        await storage.settings.put_setting(C1, "model", "big", actor="alice", now=10.0)
        await storage.settings.put_setting(server_scope(C1), "model", "small", actor="bob",
                                           now=11.0)
        await storage.settings.put_setting(C2, "persona", "pirate", actor="carol", now=12.0)
        await storage.settings.put_setting(OTHER, "model", "other", actor="dave", now=13.0)
        assert await storage.settings.settings_version() == v0 + 4
        got = {(s.scope.channel, s.name): (s.value, s.updated_by, s.updated_at)
               for s in await storage.settings.scope_settings(C1)}
        assert got == {("c1", "model"): ("big", "alice", 10.0),
                       (SERVER, "model"): ("small", "bob", 11.0)}

    async def test_set_again_replaces_and_unset_removes_and_both_are_logged(
        self, storage: Storage
    ) -> None:
        await storage.settings.put_setting(C1, "reply_mode", "all", actor="alice", now=1.0)
        await storage.settings.put_setting(C1, "reply_mode", "off", actor="bob", now=2.0)
        [s] = await storage.settings.scope_settings(C1)
        assert (s.value, s.updated_by) == ("off", "bob")
        await storage.settings.put_setting(C1, "reply_mode", None, actor="carol", now=3.0)
        assert await storage.settings.scope_settings(C1) == []
        changes = await storage.settings.setting_changes(C1)
        assert [(c.value, c.actor, c.at) for c in changes] == [
            (None, "carol", 3.0), ("off", "bob", 2.0), ("all", "alice", 1.0)]
        assert await storage.settings.setting_changes(C2) == []
        assert len(await storage.settings.setting_changes(C1, limit=2)) == 2

    async def test_all_settings_and_import_round_trip(self, storage: Storage) -> None:
        await storage.settings.put_setting(C1, "persona", "a pirate; say arr", actor="alice",
                                           now=1.0)
        await storage.settings.put_setting(server_scope(C1), "language", "Korean", actor="bob",
                                           now=2.0)
        settings, changes = await storage.settings.all_settings()
        v = await storage.settings.settings_version()
        await storage.settings.put_setting(C2, "model", "x", actor="eve", now=3.0)
        await storage.settings.import_settings(settings, changes)
        assert await storage.settings.all_settings() == (settings, changes)
        assert await storage.settings.settings_version() > v  # replicas drop their caches

    async def test_token_counts_add_up_per_day_and_account(self, storage: Storage) -> None:
        alice, server = UsageKey("discord", "g1", "alice"), UsageKey("discord", "g1")
        await storage.usage.add_tokens("2026-01-01", [alice, server], 100)
        await asyncio.gather(*(storage.usage.add_tokens("2026-01-01", [alice, server], 10)
                               for _ in range(20)))
        await storage.usage.add_tokens("2026-01-02", [alice], 7)
        assert await storage.usage.tokens_used("2026-01-01", [alice, server]) == {
            alice: 300, server: 300}
        bob = UsageKey("discord", "g1", "bob")
        assert await storage.usage.tokens_used("2026-01-02", [alice, bob]) == {alice: 7, bob: 0}

    async def test_quota_notice_is_claimed_once_per_day(self, storage: Storage) -> None:
        alice = UsageKey("slack", "T1", "U1")
        await storage.usage.add_tokens("2026-01-01", [alice], 5)
        claims = await asyncio.gather(*(storage.usage.claim_quota_notice("2026-01-01", alice)
                                        for _ in range(5)))
        assert sorted(claims) == [False] * 4 + [True]
        assert await storage.usage.claim_quota_notice("2026-01-02", alice)
        assert await storage.usage.tokens_used("2026-01-01", [alice]) == {alice: 5}

    async def test_token_counts_are_kept_per_kind_beside_the_total(self, storage: Storage) -> None:
        alice, server = UsageKey("slack", "T1", "U1"), UsageKey("slack", "T1")
        await storage.usage.add_tokens("2026-01-01", [alice, server], 40, kind="reply")
        await asyncio.gather(*(storage.usage.add_tokens("2026-01-01", [alice, server], 5,
                                                        kind="catchup")
                               for _ in range(4)))
        await storage.usage.add_tokens("2026-01-01", [server], 30, kind="compaction")
        await storage.usage.add_tokens("2026-01-01", [server], 7)  # no kind: the total only
        await storage.usage.add_tokens("2026-01-02", [alice], 9, kind="summary")
        assert await storage.usage.tokens_used("2026-01-01", [alice, server]) == {
            alice: 60, server: 97}
        bob = UsageKey("slack", "T1", "U2")
        assert await storage.usage.tokens_by_kind("2026-01-01", [alice, server, bob]) == {
            alice: {"catchup": 20, "reply": 40},
            server: {"catchup": 20, "compaction": 30, "reply": 40},
            bob: {},
        }
        assert await storage.usage.tokens_by_kind("2026-01-02", [alice]) == {alice: {"summary": 9}}
