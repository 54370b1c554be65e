"""``gistbot migrate`` and ``gistbot copy-db``: moving memory between SQLite and PostgreSQL.

``copy-db`` copies channel by channel: turns in pages with their own seqs (idempotent, so
an interrupted copy resumes by running again with ``--resume``), then the summary state and
facts exactly. A channel whose content checksum already matches is skipped. At the end every
channel's turn count and SHA-256 content checksum are compared on both sides; any mismatch
fails the command. A target that already holds channels is refused unless ``--resume``
(continue a copy from the same source) or ``--force`` (replace differing channels).

The checksum covers what a user would call the memory: every turn's fields, the summary,
the fold pointer, version, counters, carried facts, episodes and long-term facts (with their
supersede links) and the summary history. It does not cover database ids of episodes,
long-term facts and history versions (the target assigns its own) nor the internal seq
counter (``next_seq``), which the target derives from the copied seqs. After the channels
come the parts in ``PARTS`` — the per-channel settings and their change log (``/config``),
the digest schedules — then each feature's storage role (``bot.stores.roles.Role.copy``:
the personal notes), each copied whole and compared; daily token counts are not copied
(they only matter for the day they count).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field

from bot.errors import GistbotError
from bot.stores import Storage
from bot.stores.roles import Role
from bot.stores.settings import SettingsStore
from bot.wording import plural
from memory.models import ChannelKey, Episode, LongTermFact, SummaryState
from memory.store import Store

__all__ = ["PARTS", "CopyReport", "channel_checksum", "copy_db", "export_rows", "migrate",
           "settings_rows"]

PAGE = 1000
ALL_FACTS = 10**9


class CopyError(GistbotError):
    """The copy was refused or did not verify."""

    user_message = "The database copy failed."


@dataclass
class CopyReport:
    """What ``copy_db`` did."""

    channels: int = 0
    copied_turns: int = 0
    skipped_channels: int = 0
    mismatched: list[str] = field(default_factory=list)


def _state_dict(state: SummaryState) -> dict[str, object]:
    data = asdict(state)
    data.pop("key")
    data["facts"] = sorted((asdict(f) for f in state.facts), key=lambda f: str(f["value"]))
    return data


async def channel_checksum(store: Store, key: ChannelKey) -> tuple[int, str]:
    """(turn count, SHA-256 over turns and state) of one channel, backend-independent."""
    digest = hashlib.sha256()
    state = await store.state(key, facts_limit=ALL_FACTS)
    digest.update(json.dumps(_state_dict(state), sort_keys=True, ensure_ascii=False).encode())
    count, after = 0, 0
    while batch := await store.turns(key, after_seq=after, limit=PAGE):
        for t in batch:
            row = asdict(t)
            row.pop("key")
            digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode())
        count += len(batch)
        after = batch[-1].seq
    for row in await _archive_rows(store, key):
        digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode())
    for version in await store.summary_history_of(key, limit=ALL_FACTS):
        row = asdict(version)
        del row["key"], row["id"]
        digest.update(json.dumps({"history": row}, sort_keys=True, ensure_ascii=False).encode())
    return count, digest.hexdigest()


async def _archive(store: Store, key: ChannelKey) -> tuple[list[Episode], list[LongTermFact]]:
    episodes = sorted(await store.episodes(key, limit=ALL_FACTS), key=lambda e: e.id)
    facts = sorted(await store.list_facts(key, limit=ALL_FACTS), key=lambda f: f.id)
    return episodes, facts


async def _archive_rows(store: Store, key: ChannelKey) -> list[dict[str, object]]:
    """Episodes and long-term facts without their database ids (a copy gets new ones);
    a supersede link is kept as the position of the newer fact."""
    episodes, facts = await _archive(store, key)
    position = {f.id: i for i, f in enumerate(facts)}
    rows: list[dict[str, object]] = []
    for e in episodes:
        row = asdict(e)
        del row["key"], row["id"]
        rows.append({"episode": row})
    for f in facts:
        row = asdict(f)
        del row["key"], row["id"]
        row["superseded_by"] = position.get(f.superseded_by) if f.superseded_by else None
        rows.append({"fact": row})
    return rows


async def migrate(storage: Storage) -> int:
    """Open (which applies forward migrations) and report the channel count."""
    await storage.open()
    try:
        return len(await storage.memory.channels())
    finally:
        await storage.close()


async def copy_settings(source: Storage, target: Storage) -> bool:
    """The per-channel settings and their change log, replacing the target's; True when
    both sides then hold the same."""
    await target.settings.import_settings(*await source.settings.all_settings())
    return await source.settings.all_settings() == await target.settings.all_settings()


async def copy_digests(source: Storage, target: Storage) -> bool:
    """Digest schedules and their slot claims (so a copied slot is not posted again);
    idempotent. True when both sides then hold the same schedules."""
    schedules = await source.digests.digest_schedules()
    for s in schedules:
        await target.digests.set_digest_schedule(s)
        for slot in reversed(await source.digests.digest_slots(s.key, limit=1000)):
            await target.digests.claim_digest_slot(s.key, slot.slot_at, slot.owner, 600)
            if slot.state != "claimed":
                await target.digests.finish_digest_slot(s.key, slot.slot_at, slot.owner, slot.state)
    return sorted(map(repr, schedules)) == sorted(map(repr,
                                                      await target.digests.digest_schedules()))


Part = tuple[str, Callable[[Storage, Storage], Awaitable[bool]]]
PARTS: tuple[Part, ...] = (("settings (/config)", copy_settings),
                           ("digest schedules", copy_digests))
"""What ``copy-db`` copies after the channels, by name, before the features' roles."""


def _role_copy(role: Role) -> Callable[[Storage, Storage], Awaitable[bool]]:
    """A feature role's copy, from one storage's object of it to the other's."""
    async def copy(source: Storage, target: Storage) -> bool:
        assert role.copy is not None
        return await role.copy(source.role(role.name), target.role(role.name))

    return copy


def _parts(source: Storage) -> list[Part]:
    """``PARTS`` and each feature role of ``source`` that says how it is copied."""
    return [*PARTS, *((r.name, _role_copy(r)) for r in source.roles if r.copy is not None)]


async def copy_db(
    source: Storage,
    target: Storage,
    *,
    force: bool = False,
    resume: bool = False,
    progress: Callable[[str], None] = lambda _: None,
) -> CopyReport:
    """Copy every channel from ``source`` to ``target`` (both open) and verify."""
    report = CopyReport()
    src, dst = source.memory, target.memory
    keys = await src.channels()
    existing = set(await dst.channels())
    if existing and not (force or resume):
        raise CopyError(
            f"the target already holds {plural(len(existing), 'channel')}; pass --resume to "
            "continue a copy from this source, or --force to replace channels that differ"
        )
    for i, key in enumerate(keys, 1):
        report.channels += 1
        want = await channel_checksum(src, key)
        if key in existing:
            if await channel_checksum(dst, key) == want:
                report.skipped_channels += 1
                progress(f"[{i}/{len(keys)}] {key}: already copied")
                continue
            if force:
                await dst.reset(key)
        after = 0
        while batch := await src.turns(key, after_seq=after, limit=PAGE):
            report.copied_turns += await dst.import_turns(key, batch)
            after = batch[-1].seq
        await dst.import_state(await src.state(key, facts_limit=ALL_FACTS))
        await dst.replace_archive(key, *await _archive(src, key))
        await dst.replace_history(key, await src.summary_history_of(key, limit=ALL_FACTS))
        progress(f"[{i}/{len(keys)}] {key}: {plural(want[0], 'message')}")
    for name, copy in _parts(source):
        if not await copy(source, target):
            report.mismatched.append(name)
    for key in keys:
        if await channel_checksum(src, key) != await channel_checksum(dst, key):
            report.mismatched.append(str(key))
    if report.mismatched:
        raise CopyError(
            f"verification failed for {plural(len(report.mismatched), 'channel')} "
            f"(e.g. {report.mismatched[0]}); the target differs from the source"
        )
    return report


async def export_rows(storage: Storage, key: ChannelKey) -> list[dict[str, object]]:
    """``export``'s lines after the turns: the settings (``settings_rows``), then what each
    feature role writes for ``key``'s channel (the personal notes of its server)."""
    rows = await settings_rows(storage.settings, key)
    for role in storage.roles:
        if role.export is not None:
            rows += await role.export(storage.role(role.name), key)
    return rows


async def settings_rows(store: SettingsStore, key: ChannelKey) -> list[dict[str, object]]:
    """``export``'s lines for the settings of ``key``'s channel and server and their log."""
    rows: list[dict[str, object]] = []
    for s in await store.scope_settings(key):
        scope = "server" if s.scope.channel == "" else "channel"
        rows.append({"type": "setting", "scope": scope, "name": s.name, "value": s.value,
                     "updated_by": s.updated_by, "updated_at": s.updated_at})
    for c in reversed(await store.setting_changes(key, limit=ALL_FACTS)):
        scope = "server" if c.scope.channel == "" else "channel"
        rows.append({"type": "setting_change", "scope": scope, "name": c.name,
                     "value": c.value, "actor": c.actor, "at": c.at})
    return rows
