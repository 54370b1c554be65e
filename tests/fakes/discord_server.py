"""A loopback Discord (REST + gateway websocket) that a real discord.py client connects to.

Serves ``/api/v10/...`` and a gateway at ``/gateway`` on 127.0.0.1, port 0. Point discord.py
at it in tests only::

    monkeypatch.setattr(discord.http.Route, "BASE", fake.api_base)
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", fake.gateway_url)

The gateway sends HELLO, takes IDENTIFY, sends READY and a GUILD_CREATE per guild,
answers heartbeats, and RESUME (``accept_resume``: RESUMED, else a new session); it can
ask clients to reconnect (``request_reconnect``) or drop them (``drop_connections``).
REST answers what the adapter uses: login, application info, the gateway URL and shard count
(``/gateway/bot``, for ``AutoShardedClient``), command sync, thread membership (``GET
/channels/{thread}/thread-members/{user}``: 404 for a non-member, from ``thread_members``),
a member of the server (``GET /guilds/{guild}/members/{user}``: 404 for ``left_guild``),
Alice's DM channel (``GET /channels/{dm}``),
messages (create/edit/delete, JSON or multipart with files; an enforced ``nonce`` seen in the
last few minutes returns the message created for it instead of creating one, as Discord
does), channel history (``GET /channels/{id}/messages`` with ``after``/``before``/``limit``,
newest first as Discord pages it; ``rate_limits`` makes the next reads answer 429), one
message (``GET /channels/{id}/messages/{id}``: 404 Unknown Message when it is not there), typing,
and interaction callbacks and follow-ups. Every REST call is recorded (method, path, query,
JSON body, files, arrival time) and created or edited messages are echoed over the gateway
like Discord does. Unknown routes answer 404 and are kept in ``unexpected``; leaving ``async
with`` fails on them. ``script`` is the fault switch (``tests.fakes.faults``): the next calls
of any endpoint (named like ``POST /channels/{id}/messages``) can fail before they take
effect, or take effect and then answer 500, reset the connection, hang, or answer 429; a
scripted fault never used also fails leaving ``async with``. Tests drive it with
``send_message`` (``deliver=False``: only the history has it), ``edit_message``,
``delete_message`` and ``interaction``, and wait with ``wait_for``.

The payload builders (``user``, ``guild_create``, ``message``…) are plain functions so unit
tests can build the same objects without a server.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import yarl
from aiohttp import WSMsgType, web

from tests.fakes.faults import Fault, cut
from tests.fakes.file_host import FileHost
from tests.harness.deadlines import scaled

__all__ = [
    "FakeDiscord", "Request", "World", "endpoint", "interaction_payload", "message",
    "resolve_permissions",
    "thread_from_message", "user",
]

JSON = dict[str, Any]
DISCORD_EPOCH_MS = 1_420_070_400_000
UNKNOWN_MEMBER = 10007  # Discord's error code for "not a member"
UNKNOWN_MESSAGE = 10008  # ... for a message that is not there (deleted, or never was)
_counter = itertools.count(1)

# Permission bits (https://discord.com/developers/docs/topics/permissions).
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
MANAGE_MESSAGES = 1 << 13
EMBED_LINKS = 1 << 14
ATTACH_FILES = 1 << 15
READ_MESSAGE_HISTORY = 1 << 16
ADMINISTRATOR = 1 << 3
USE_APPLICATION_COMMANDS = 1 << 31
SEND_MESSAGES_IN_THREADS = 1 << 38
EPHEMERAL, LOADING = 1 << 6, 1 << 7  # message flags: only the caller sees it; "thinking…"
NONCE_SECONDS = 300.0  # Discord: "the past few minutes" for an enforced nonce
EVERYONE_PERMISSIONS = (VIEW_CHANNEL | SEND_MESSAGES | READ_MESSAGE_HISTORY | ATTACH_FILES
                        | EMBED_LINKS | USE_APPLICATION_COMMANDS | SEND_MESSAGES_IN_THREADS)


def snowflake() -> int:
    """A fresh id whose timestamp is now (discord.py derives ``created_at`` from it)."""
    return ((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22) | (next(_counter) & 0x3FFFFF)


def iso_now() -> str:
    """Now as Discord writes timestamps."""
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000+00:00", time.gmtime())


def user(user_id: int, name: str, *, bot: bool = False, global_name: str | None = None) -> JSON:
    """A user object."""
    return {"id": str(user_id), "username": name, "discriminator": "0", "avatar": None,
            "global_name": global_name, "bot": bot, "public_flags": 0}


def member(u: JSON, *, roles: Iterable[int] = (), nick: str | None = None) -> JSON:
    """A guild member object (with its user)."""
    return {"user": u, "roles": [str(r) for r in roles], "nick": nick, "joined_at": iso_now(),
            "deaf": False, "mute": False, "flags": 0, "pending": False}


@dataclass
class World:
    """The fixed little Discord the fake serves: one server with three text channels (one
    where @everyone may not send; #lobby, where the Newcomers role may not read the
    history), a public thread and a private thread (type 12, Alice and the bot its members,
    not Bob) under #general, a moderator role, the bot's managed role, three people (Carol
    a newcomer), another bot, and a DM channel with Alice. Ids are 18 digits like real ones
    (discord.py only parses mentions of 15-20 digit ids)."""

    bot_id: int = 100_000_000_000_000_001
    app_id: int = 100_000_000_000_000_001
    bot_name: str = "gistbot"
    guild_id: int = 200_000_000_000_000_000
    general: int = 200_000_000_000_000_001
    readonly: int = 200_000_000_000_000_002
    thread: int = 200_000_000_000_000_003
    private_thread: int = 200_000_000_000_000_004
    lobby: int = 200_000_000_000_000_005
    mod_role: int = 210_000_000_000_000_000
    bot_role: int = 210_000_000_000_000_001
    newcomer_role: int = 210_000_000_000_000_002
    alice: JSON = field(
        default_factory=lambda: user(300_000_000_000_000_001, "alice", global_name="Alice"))
    bob: JSON = field(
        default_factory=lambda: user(300_000_000_000_000_002, "bob", global_name="Bob"))
    other_bot: JSON = field(
        default_factory=lambda: user(300_000_000_000_000_003, "otherbot", bot=True))
    carol: JSON = field(
        default_factory=lambda: user(300_000_000_000_000_004, "carol", global_name="Carol"))
    dm_channel: int = 400_000_000_000_000_001

    @property
    def bot_user(self) -> JSON:
        """The bot's own user object."""
        return user(self.bot_id, self.bot_name, bot=True)

    def member_of(self, u: JSON) -> JSON:
        """The member object of ``u`` in the guild (Bob is a moderator, Carol a newcomer)."""
        roles = {self.bob["id"]: [self.mod_role], str(self.bot_id): [self.bot_role],
                 self.carol["id"]: [self.newcomer_role]}
        return member(u, roles=roles.get(u["id"], []))

    def roles(self) -> list[JSON]:
        """The guild's roles, @everyone first."""
        g = self.guild_id
        return [
            _role(g, "@everyone", EVERYONE_PERMISSIONS, 0),
            _role(self.mod_role, "Moderators", MANAGE_MESSAGES, 1),
            _role(self.bot_role, self.bot_name, 0, 2, tags={"bot_id": str(self.bot_id)}),
            _role(self.newcomer_role, "Newcomers", 0, 3),
        ]

    def overwrites(self, channel_id: int) -> list[JSON]:
        """The permission overwrites of a text channel (a thread: its parent's)."""
        if channel_id in (self.thread, self.private_thread):
            channel_id = self.general
        if channel_id == self.readonly:
            return [{"id": str(self.guild_id), "type": 0, "allow": "0",
                     "deny": str(SEND_MESSAGES)}]
        if channel_id == self.lobby:
            return [{"id": str(self.newcomer_role), "type": 0, "allow": "0",
                     "deny": str(READ_MESSAGE_HISTORY)}]
        return []

    def channel_of(self, channel_id: int) -> int | None:
        """The guild a channel belongs to (``None`` for the DM channel)."""
        return None if channel_id == self.dm_channel else self.guild_id

    def private_members(self) -> set[str]:
        """The user ids of the private thread's members."""
        return {self.alice["id"], str(self.bot_id)}

    def guild_create(self) -> JSON:
        """The GUILD_CREATE payload."""
        g = self.guild_id
        text = {"type": 0, "guild_id": str(g), "topic": None, "nsfw": False,
                "parent_id": None, "rate_limit_per_user": 0, "last_message_id": None}
        return {
            "id": str(g), "name": "Test Server", "owner_id": self.alice["id"],
            "member_count": 4, "large": False, "unavailable": False, "features": [],
            "emojis": [], "stickers": [], "voice_states": [], "presences": [],
            "stage_instances": [], "guild_scheduled_events": [], "soundboard_sounds": [],
            "roles": self.roles(),
            "channels": [
                text | {"id": str(c), "name": name, "position": i,
                        "permission_overwrites": self.overwrites(c)}
                for i, (c, name) in enumerate([(self.general, "general"),
                                               (self.readonly, "announcements"),
                                               (self.lobby, "lobby")])
            ],
            "threads": [{
                "id": str(self.thread), "guild_id": str(g), "parent_id": str(self.general),
                "owner_id": self.alice["id"], "name": "design-thread", "type": 11,
                "message_count": 0, "member_count": 2, "rate_limit_per_user": 0,
                "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                                    "archive_timestamp": iso_now(), "locked": False},
            }, {
                "id": str(self.private_thread), "guild_id": str(g),
                "parent_id": str(self.general), "owner_id": self.alice["id"],
                "name": "hr-private", "type": 12, "message_count": 0, "member_count": 2,
                "rate_limit_per_user": 0,
                "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                                    "archive_timestamp": iso_now(), "locked": False,
                                    "invitable": False},
            }],
            "members": [self.member_of(u) for u in (self.alice, self.bob, self.carol,
                                                      self.other_bot, self.bot_user)],
        }


def resolve_permissions(world: World, channel_id: int, u: JSON) -> int:
    """``u``'s permissions in a guild channel as Discord resolves them for an interaction's
    ``member.permissions``: the owner has all; else @everyone's and the member's roles'
    permissions OR'd (Administrator: all), then the channel's @everyone overwrite, the
    roles' overwrites (denies, then allows) and the member's own; without View Channel,
    none."""
    if u["id"] == world.alice["id"]:  # the owner
        return (1 << 53) - 1
    roles = {int(r) for r in world.member_of(u)["roles"]}
    base = 0
    for role in world.roles():
        if int(role["id"]) in roles | {world.guild_id}:
            base |= int(role["permissions"])
    if base & ADMINISTRATOR:
        return (1 << 53) - 1
    overwrites = {int(o["id"]): o for o in world.overwrites(channel_id)}
    if (everyone := overwrites.get(world.guild_id)) is not None:
        base = (base & ~int(everyone["deny"])) | int(everyone["allow"])
    deny = allow = 0
    for role_id in roles:
        if (o := overwrites.get(role_id)) is not None and o["type"] == 0:
            deny, allow = deny | int(o["deny"]), allow | int(o["allow"])
    base = (base & ~deny) | allow
    if (own := overwrites.get(int(u["id"]))) is not None and own["type"] == 1:
        base = (base & ~int(own["deny"])) | int(own["allow"])
    return base if base & VIEW_CHANNEL else 0


def _role(role_id: int, name: str, permissions: int, position: int, **extra: Any) -> JSON:
    return {"id": str(role_id), "name": name, "permissions": str(permissions), "color": 0,
            "hoist": False, "position": position, "managed": "tags" in extra,
            "mentionable": True, "flags": 0} | extra


def message(
    world: World,
    channel_id: int,
    author: JSON,
    content: str,
    *,
    message_id: int | None = None,
    mentions: Iterable[JSON] = (),
    mention_roles: Iterable[int] = (),
    attachments: Iterable[str | JSON] = (),
    reply_to: JSON | None = None,
    webhook_id: int | None = None,
    msg_type: int | None = None,
    edited: bool = False,
) -> JSON:
    """A MESSAGE_CREATE payload (also the REST message object)."""
    guild_id = world.channel_of(channel_id)
    data: JSON = {
        "id": str(message_id or snowflake()), "channel_id": str(channel_id),
        "author": author, "content": content, "timestamp": iso_now(),
        "edited_timestamp": iso_now() if edited else None, "tts": False,
        "mention_everyone": False, "mention_roles": [str(r) for r in mention_roles],
        "attachments": [
            {"id": str(snowflake()), "filename": a, "size": 10, "url": f"https://cdn/{a}",
             "proxy_url": f"https://cdn/{a}"} if isinstance(a, str) else a
            for a in attachments
        ],
        "embeds": [], "pinned": False, "flags": 0,
        "type": msg_type if msg_type is not None else (19 if reply_to else 0),
    }
    if guild_id is not None:
        data["guild_id"] = str(guild_id)
        data["member"] = {k: v for k, v in world.member_of(author).items() if k != "user"}
        data["mentions"] = [u | {"member": {k: v for k, v in world.member_of(u).items()
                                            if k != "user"}} for u in mentions]
    else:
        data["mentions"] = list(mentions)
    if webhook_id is not None:
        data["webhook_id"] = str(webhook_id)
    if reply_to is not None:
        data["message_reference"] = {"message_id": reply_to["id"], "type": 0,
                                     "channel_id": reply_to.get("channel_id", str(channel_id))}
        # Discord nests one level only: the referenced message without its own referenced one
        data["referenced_message"] = {k: v for k, v in reply_to.items()
                                      if k != "referenced_message"}
    return data


def rest_message(data: JSON) -> JSON:
    """A message as REST returns it: like Discord, without the ``member`` objects that only
    MESSAGE_CREATE and MESSAGE_UPDATE events carry (the author's and the mentioned users')."""
    out = {k: v for k, v in data.items() if k != "member"}
    out["mentions"] = [{k: v for k, v in u.items() if k != "member"}
                       for u in data.get("mentions", [])]
    if isinstance(data.get("referenced_message"), dict):
        out["referenced_message"] = rest_message(data["referenced_message"])
    return out


def interaction_payload(
    world: World, name: str, *, invoker: JSON, channel_id: int, permissions: int | None,
    options: Mapping[str, Any] | None = None, locale: str = "en-US",
) -> JSON:
    """An INTERACTION_CREATE payload for slash command ``name`` from a client in ``locale``;
    ``permissions`` None: the invoker's, resolved from the world's roles and overwrites as
    Discord does (``resolve_permissions``)."""
    guild_id = world.channel_of(channel_id)
    data: JSON = {
        "id": str(snowflake()), "application_id": str(world.app_id), "type": 2,
        "token": "itok-" + secrets.token_hex(8), "version": 1,
        "data": {"id": str(snowflake()), "name": name, "type": 1,
                 "options": [{"name": k, "type": 5 if isinstance(v, bool) else 3, "value": v}
                             for k, v in (options or {}).items()]},
        "channel_id": str(channel_id), "locale": locale,
        "app_permissions": str(EVERYONE_PERMISSIONS),
        "entitlements": [], "authorizing_integration_owners": {"0": str(guild_id or 0)},
        "attachment_size_limit": 10 * 1024 * 1024,
    }
    if guild_id is not None:
        data["guild_id"] = str(guild_id)
        data["guild_locale"] = "en-US"
        data["context"] = 0
        data["channel"] = {"id": str(channel_id), "type": 0, "guild_id": str(guild_id),
                           "name": "general", "position": 0,
                           "permission_overwrites": world.overwrites(channel_id)}
        if channel_id in (world.thread, world.private_thread):  # as Discord sends a thread
            data["channel"] = {
                "id": str(channel_id), "guild_id": str(guild_id), "name": "thread",
                "type": 11 if channel_id == world.thread else 12,
                "parent_id": str(world.general), "owner_id": world.alice["id"],
                "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                                    "archive_timestamp": iso_now(), "locked": False}}
        if permissions is None:
            permissions = resolve_permissions(world, channel_id, invoker)
        data["member"] = world.member_of(invoker) | {"permissions": str(permissions)}
    else:
        data["context"] = 1
        data["channel"] = {"id": str(channel_id), "type": 1}
        data["user"] = invoker
    return data


def endpoint(method: str, path: str) -> str:
    """The name a call is scripted by: its method and path with ids and tokens as
    placeholders (``PATCH /webhooks/{id}/{token}/messages/@original``)."""
    parts = []
    for part in path.strip("/").split("/"):
        if part.isdigit():
            part = "{id}"
        elif part.startswith("itok-"):
            part = "{token}"
        parts.append(part)
    return f"{method} /{'/'.join(parts)}"


@dataclass(frozen=True)
class Request:
    """One REST call as the fake saw it (``path`` without ``/api/v10``)."""

    method: str
    path: str
    query: Mapping[str, str]
    json: Any
    files: tuple[tuple[str, bytes], ...]
    at: float


class FakeDiscord:
    """The server; ``async with FakeDiscord() as fake:``."""

    def __init__(self, world: World | None = None, *, echo_own_messages: bool = True,
                 token: str | None = None) -> None:
        self.world = world or World()
        self.token = token  # when set, any other bot token gets 401
        self.echo_own_messages = echo_own_messages
        self.requests: list[Request] = []
        self.unexpected: list[Request] = []
        self.forbidden_channels: set[int] = set()
        # thread id -> user ids of its members (Get Thread Member answers from it)
        self.left_guild: set[str] = set()  # user ids Get Guild Member answers 404 for
        self.thread_members: dict[int, set[str]] = {
            self.world.private_thread: self.world.private_members()}
        self.identifies: list[JSON] = []
        self.messages: dict[int, JSON] = {}
        # interaction responses: token -> its channel, its original response, its follow-ups
        self._invoked_in: dict[str, int] = {}
        self.originals: dict[str, JSON] = {}
        self.followups: defaultdict[str, list[JSON]] = defaultdict(list)
        self._nonces: dict[tuple[str, str], tuple[int, float]] = {}  # enforced nonces
        self.rate_limits = 0  # the next this many history reads answer 429 (retry_after)
        self.retry_after = 0.05
        self.accept_resume = False  # True: RESUME gets RESUMED; False: a new session
        self._scripts: defaultdict[str, deque[Fault | None]] = defaultdict(deque)
        self._closing = asyncio.Event()  # set on leaving: hung requests end
        self._sockets: list[web.WebSocketResponse] = []
        self._seq = 0
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.files = FileHost("/attachments")  # the CDN: attachment(...) puts files there

    # ------------------------------------------------------------------ lifecycle

    @property
    def api_base(self) -> str:
        """What ``discord.http.Route.BASE`` must be."""
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> yarl.URL:
        """What ``DiscordWebSocket.DEFAULT_GATEWAY`` must be."""
        return yarl.URL(f"ws://127.0.0.1:{self.port}/gateway")

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        self.files.mount(app)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        self.files.base_url = f"http://127.0.0.1:{self.port}"
        return self

    def script(self, name: str, *faults: Fault | None) -> None:
        """Answer the next calls of endpoint ``name`` (see ``endpoint``) with ``faults``, in
        order (None: a normal answer)."""
        self._scripts[name].extend(faults)

    def attachment(self, name: str, data: bytes, content_type: str = "text/plain", *,
                   size: int | None = None, url: str | None = None, **how: Any) -> JSON:
        """An attachment object for ``send_message(attachments=[...])``, its file on the
        fake's CDN (``url``: announce another URL; ``size``: declare another size)."""
        hosted = self.files.add(name, data, content_type, **how)
        return {"id": str(snowflake()), "filename": name, "size": len(data) if size is None
                else size, "url": url or hosted, "proxy_url": url or hosted,
                "content_type": content_type}

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        self._closing.set()
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if exc is None:
            assert not self.unexpected, f"unexpected Discord API calls: {self.unexpected}"
            left = {name: len(q) for name, q in self._scripts.items() if q}
            assert not left, f"scripted faults never requested: {left}"

    # ------------------------------------------------------------------ waiting

    async def wait_for(self, predicate: Callable[[FakeDiscord], Any], within: float = 10.0) -> Any:
        """Wait until ``predicate(self)`` is truthy (checked on every request and socket
        event) and return its value; ``TimeoutError`` after ``within`` seconds."""
        async with asyncio.timeout(scaled(within)), self._changed:
            while not (value := predicate(self)):
                await self._changed.wait()
            return value

    @property
    def connected(self) -> int:
        """How many clients are connected and identified."""
        return len(self._sockets)

    def calls(self, method: str, path_prefix: str) -> list[Request]:
        """Recorded calls with this method whose path starts with ``path_prefix``."""
        return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    def sent_to(self, channel_id: int) -> list[Request]:
        """Messages the bot created in a channel, in order."""
        return self.calls("POST", f"/channels/{channel_id}/messages")

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # ------------------------------------------------------------------ gateway

    async def dispatch(self, event: str, data: JSON) -> None:
        """Send a DISPATCH event to every identified client."""
        self._seq += 1
        frame = json.dumps({"op": 0, "t": event, "s": self._seq, "d": data})
        for ws in list(self._sockets):
            if not ws.closed:
                try:
                    await ws.send_str(frame)
                except ConnectionResetError:  # the client died (a SIGKILL test): not sent
                    self._sockets.remove(ws)

    async def send_message(self, channel_id: int, author: JSON, content: str, *,
                           deliver: bool = True, **kwargs: Any) -> JSON:
        """Someone posts a message; the clients get MESSAGE_CREATE (not with ``deliver``
        false: the event a disconnected client never sees; only the history has it)."""
        data = message(self.world, channel_id, author, content, **kwargs)
        self.messages[int(data["id"])] = data
        if deliver:
            await self.dispatch("MESSAGE_CREATE", data)
        return data

    async def edit_message(self, data: JSON, content: str) -> JSON:
        """Someone edits a message; the clients get MESSAGE_UPDATE."""
        new = data | {"content": content, "edited_timestamp": iso_now()}
        self.messages[int(data["id"])] = new
        await self.dispatch("MESSAGE_UPDATE", new)
        return new

    async def delete_message(self, data: JSON) -> None:
        """Someone deletes a message; the clients get MESSAGE_DELETE."""
        event = {"id": data["id"], "channel_id": data["channel_id"]}
        if "guild_id" in data:
            event["guild_id"] = data["guild_id"]
        await self.dispatch("MESSAGE_DELETE", event)

    async def drop_connections(self) -> None:
        """Close every gateway connection, as a network blip or a Discord restart does."""
        for ws in list(self._sockets):
            self._sockets.remove(ws)
            await ws.close()
        await self._notify()

    async def request_reconnect(self) -> None:
        """Send RECONNECT (op 7): clients drop the connection and RESUME (see
        ``accept_resume``) or identify anew."""
        for ws in list(self._sockets):
            self._sockets.remove(ws)
            await ws.send_json({"op": 7, "d": None, "s": None, "t": None})
        await self._notify()

    def history(self, channel_id: int) -> list[JSON]:
        """The channel's messages (people's and the bot's), oldest first."""
        return sorted((m for m in self.messages.values()
                       if int(m["channel_id"]) == channel_id), key=lambda m: int(m["id"]))

    def visible(self, channel_id: int) -> list[JSON]:
        """What everyone sees in the channel: its messages and the public responses to
        commands used there (an unanswered deferral shows "thinking…": content ""),
        oldest first."""
        shown = [m for m in (*self.originals.values(),
                             *(f for fs in self.followups.values() for f in fs))
                 if int(m["channel_id"]) == channel_id and not int(m["flags"]) & EPHEMERAL]
        return sorted([*self.history(channel_id), *shown], key=lambda m: int(m["id"]))

    async def autocomplete(self, name: str, *, invoker: JSON, channel_id: int,
                           options: Mapping[str, Any], focused: str) -> JSON:
        """Someone types into option ``focused`` of ``name``: an autocomplete interaction
        (type 4); the bot answers on its callback with type 8 and the choices."""
        data = interaction_payload(self.world, name, invoker=invoker, channel_id=channel_id,
                                   permissions=EVERYONE_PERMISSIONS, options=options)
        data["type"] = 4
        for option in data["data"]["options"]:
            if option["name"] == focused:
                option["focused"] = True
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    async def interaction(self, name: str, *, invoker: JSON, channel_id: int,
                          permissions: int | None = EVERYONE_PERMISSIONS,
                          options: Mapping[str, Any] | None = None,
                          locale: str = "en-US") -> JSON:
        """Someone runs a slash command; the clients get INTERACTION_CREATE (``permissions``
        None: the invoker's, resolved as Discord does)."""
        data = interaction_payload(self.world, name, invoker=invoker, channel_id=channel_id,
                                   permissions=permissions, options=options, locale=locale)
        self._invoked_in[data["token"]] = channel_id
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"op": 10, "d": {"heartbeat_interval": 41250}, "s": None, "t": None})
        try:
            async for frame in ws:
                if frame.type is not WSMsgType.TEXT:
                    continue
                payload = json.loads(frame.data)
                op = payload.get("op")
                if op == 1:
                    await ws.send_json({"op": 11, "d": None, "s": None, "t": None})
                elif op == 2:
                    self.identifies.append(payload["d"])
                    self._sockets.append(ws)
                    await self._ready()
                elif op == 6 and self.accept_resume:  # RESUME: the session continues
                    self._sockets.append(ws)
                    await self.dispatch("RESUMED", {})
                elif op == 6:  # RESUME refused: the client identifies anew
                    await ws.send_json({"op": 9, "d": False, "s": None, "t": None})
                await self._notify()
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
            await self._notify()
        return ws

    async def _ready(self) -> None:
        w = self.world
        await self.dispatch("READY", {
            "v": 10, "user": w.bot_user, "guilds": [{"id": str(w.guild_id), "unavailable": True}],
            "session_id": "fake-session-" + secrets.token_hex(4),
            "resume_gateway_url": str(self.gateway_url), "private_channels": [],
            "application": {"id": str(w.app_id), "flags": 0}, "shard": [0, 1],
        })
        await self.dispatch("GUILD_CREATE", w.guild_create())

    # ------------------------------------------------------------------ REST

    async def _rest(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["tail"]
        body: Any = None
        files: list[tuple[str, bytes]] = []
        if request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            async for part in reader:
                if part.name == "payload_json":
                    body = json.loads(await part.text())
                elif part.filename is not None:
                    files.append((part.filename, bytes(await part.read())))
        elif request.can_read_body:
            raw = await request.read()
            body = json.loads(raw) if raw else None
        seen = Request(request.method, path, dict(request.query), body, tuple(files),
                       time.monotonic())
        self.requests.append(seen)
        auth = request.headers.get("Authorization", "")
        if self.token is not None and auth.startswith("Bot ") and auth != f"Bot {self.token}":
            await self._notify()
            return web.Response(status=401, body=b'{"message": "401: Unauthorized", "code": 0}',
                                headers={"Content-Type": "application/json"})
        queue = self._scripts.get(endpoint(request.method, path))
        fault = queue.popleft() if queue else None
        if fault is Fault.RATE_LIMITED or fault is Fault.BEFORE:
            await self._notify()
            return self._fault_answer(fault)
        try:
            status, answer = await self._answer(seen)
        finally:
            await self._notify()
        if fault is not None:  # it took effect; the answer is lost
            return await cut(request, fault, self._closing) if fault.cuts else \
                self._fault_answer(fault)
        # a non-member, or a message looked up that is gone, is no surprise
        if status == 404 and answer.get("code") != UNKNOWN_MEMBER and not (
                answer.get("code") == UNKNOWN_MESSAGE and reads_one_message(seen)):
            self.unexpected.append(seen)
        if answer is None:
            return web.Response(status=status)
        if status == 429:  # discord.py trusts a 429 only from behind Discord's proxy
            return web.Response(status=429, body=json.dumps(answer).encode(), headers={
                "Content-Type": "application/json", "Via": "1.1 google",
                "Retry-After": str(answer["retry_after"]), "X-RateLimit-Scope": "user"})
        # discord.py parses JSON only when the Content-Type is exactly application/json.
        return web.Response(status=status, body=json.dumps(answer).encode(),
                            headers={"Content-Type": "application/json"})

    def _fault_answer(self, fault: Fault) -> web.Response:
        if fault is Fault.RATE_LIMITED:  # discord.py trusts a 429 only from Discord's proxy
            return web.Response(status=429, body=json.dumps({
                "message": "You are being rate limited.", "global": False,
                "retry_after": self.retry_after}).encode(), headers={
                "Content-Type": "application/json", "Via": "1.1 google",
                "Retry-After": str(self.retry_after), "X-RateLimit-Scope": "user"})
        return web.Response(status=500, body=b'{"message": "500: Internal Server Error", '
                            b'"code": 0}', headers={"Content-Type": "application/json"})

    async def _answer(self, r: Request) -> tuple[int, Any]:
        w = self.world
        parts = r.path.strip("/").split("/")
        route = (r.method, *parts)
        if route == ("GET", "users", "@me"):
            return 200, w.bot_user
        if route == ("GET", "channels", str(w.dm_channel)):  # Get Channel: Alice's DM
            return 200, {"id": str(w.dm_channel), "type": 1, "recipients": [w.alice],
                         "last_message_id": None}
        if route == ("POST", "users", "@me", "channels"):  # open a DM (only Alice has one)
            return 200, {"id": str(w.dm_channel), "type": 1, "recipients": [w.alice],
                         "last_message_id": None}
        if route == ("GET", "guilds", str(w.guild_id), "members", parts[-1]):
            people = {u["id"]: u for u in (w.alice, w.bob, w.carol)}  # Get Guild Member
            if parts[-1] not in people or parts[-1] in self.left_guild:
                return 404, {"message": "Unknown Member", "code": UNKNOWN_MEMBER}
            return 200, w.member_of(people[parts[-1]])
        if route == ("GET", "gateway", "bot"):
            limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
            return 200, {"url": str(self.gateway_url), "shards": 1, "session_start_limit": limit}
        if route == ("GET", "oauth2", "applications", "@me"):
            return 200, {"id": str(w.app_id), "name": w.bot_name, "description": "",
                         "icon": None, "bot_public": True, "bot_require_code_grant": False,
                         "owner": w.alice, "verify_key": "0" * 64, "flags": 0}
        if r.method == "PUT" and parts[0] == "applications" and parts[-1] == "commands":
            return 200, [c | {"id": str(snowflake()), "application_id": str(w.app_id),
                              "version": "1"} for c in r.json]
        if parts[0] == "channels" and len(parts) >= 3:
            channel_id = int(parts[1])
            if channel_id in self.forbidden_channels:
                return 403, {"message": "Missing Permissions", "code": 50013}
            if route == ("POST", "channels", parts[1], "typing"):
                return 204, None
            if route == ("GET", "channels", parts[1], "thread-members", parts[-1]):
                return self._thread_member(channel_id, parts[3])
            if route == ("POST", "channels", parts[1], "messages"):
                return 200, await self._create(channel_id, r)
            if route == ("GET", "channels", parts[1], "messages"):
                return self._history(channel_id, r.query)
            if route == ("GET", "channels", parts[1], "messages", parts[-1]):
                return self._one_message(channel_id, int(parts[3]))
            if route == ("POST", "channels", parts[1], "messages", parts[3], "threads"):
                return 201, thread_from_message(w, channel_id, int(parts[3]), r.json or {})
            if r.method == "PATCH" and parts[2] == "messages" and len(parts) == 4:
                return await self._edit(int(parts[3]), r)
            if r.method == "DELETE" and parts[2] == "messages" and len(parts) == 4:
                gone = self.messages.get(int(parts[3]))
                if gone is None:
                    return 404, {"message": "Unknown Message", "code": 10008}
                self.messages.pop(int(parts[3]))
                await self.delete_message(gone)
                return 204, None
        if route[:2] == ("POST", "interactions") and parts[-1] == "callback":
            flags = ((r.json or {}).get("data") or {}).get("flags", 0)
            self._respond(parts[2], r.json or {})
            return 200, {"interaction": {"id": parts[1], "type": 2,
                                         "response_message_loading": r.json["type"] == 5,
                                         "response_message_ephemeral": bool(flags & 64)},
                         "resource": {"type": r.json["type"]}}
        if route[:2] == ("POST", "webhooks") and len(parts) == 3:
            return 200, self._follow_up(parts[2], r)
        if route[:2] == ("PATCH", "webhooks") and parts[-1] == "@original":
            return 200, self._edit_original(parts[2], r)
        if route[:2] == ("GET", "webhooks") and parts[-1] == "@original":
            if parts[2] not in self.originals:
                return 404, {"message": "Unknown Message", "code": UNKNOWN_MESSAGE}
            return 200, self.originals[parts[2]]
        if route[:2] == ("DELETE", "webhooks") and parts[-1] == "@original":
            self.originals.pop(parts[2], None)
            return 204, None
        return 404, {"message": f"fake Discord has no route {r.method} {r.path}", "code": 0}

    async def _create(self, channel_id: int, r: Request) -> JSON:
        body = r.json or {}
        nonce = str(body["nonce"]) if body.get("nonce") is not None else None
        author = str(self.world.bot_user["id"])
        if nonce is not None and body.get("enforce_nonce"):
            # Like Discord: the same nonce by the same author within a few minutes returns
            # the message created for it, and nothing new is created (or echoed).
            known = self._nonces.get((author, nonce))
            if known is not None and time.monotonic() - known[1] < NONCE_SECONDS:
                return self.messages.get(known[0]) or {}
        data = message(self.world, channel_id, self.world.bot_user, body.get("content", ""),
                       attachments=[name for name, _ in r.files])
        if nonce is not None:
            data["nonce"] = nonce
            self._nonces[(author, nonce)] = (int(data["id"]), time.monotonic())
        if body.get("message_reference"):
            data["message_reference"] = body["message_reference"]
            data["type"] = 19
        self.messages[int(data["id"])] = data
        if self.echo_own_messages:
            await self.dispatch("MESSAGE_CREATE", data)
        return data

    async def _edit(self, message_id: int, r: Request) -> tuple[int, Any]:
        old = self.messages.get(message_id)
        if old is None:
            return 404, {"message": "Unknown Message", "code": 10008}
        new = old | {"content": (r.json or {}).get("content", old["content"]),
                     "edited_timestamp": iso_now()}
        self.messages[message_id] = new
        if self.echo_own_messages:
            await self.dispatch("MESSAGE_UPDATE", new)
        return 200, new

    def _thread_member(self, thread_id: int, user_id: str) -> tuple[int, Any]:
        """Get Thread Member: the thread member object, or 404 (Unknown Member)."""
        if user_id not in self.thread_members.get(thread_id, set()):
            return 404, {"message": "Unknown Member", "code": UNKNOWN_MEMBER}
        return 200, {"id": str(thread_id), "user_id": user_id, "join_timestamp": iso_now(),
                     "flags": 0}

    def _history(self, channel_id: int, query: Mapping[str, str]) -> tuple[int, Any]:
        """Like Discord: at most ``limit`` (1-100) messages, newest first; with ``after``
        the ones right after it, with ``before`` the ones right before it."""
        if self.rate_limits > 0:
            self.rate_limits -= 1
            return 429, {"message": "You are being rate limited.", "global": False,
                         "retry_after": self.retry_after}
        limit = min(max(int(query.get("limit", "50")), 1), 100)
        found = self.history(channel_id)
        if "before" in query:
            found = [m for m in found if int(m["id"]) < int(query["before"])][-limit:]
        elif "after" in query:
            found = [m for m in found if int(m["id"]) > int(query["after"])][:limit]
        else:
            found = found[-limit:]
        return 200, [rest_message(m) for m in reversed(found)]

    def _one_message(self, channel_id: int, message_id: int) -> tuple[int, Any]:
        """Get Channel Message: the message (with the one it replies to, one level, as
        Discord sends it), or 404 Unknown Message when it is not there."""
        found = self.messages.get(message_id)
        if found is None or int(found["channel_id"]) != channel_id:
            return 404, {"message": "Unknown Message", "code": UNKNOWN_MESSAGE}
        return 200, rest_message(found)

    def _webhook_message(self, r: Request, channel_id: int = 0, flags: int = 0) -> JSON:
        body = r.json or {}
        data = message(self.world, channel_id, self.world.bot_user, body.get("content", ""))
        data["webhook_id"] = str(self.world.app_id)
        data["flags"] = body.get("flags", flags)
        data.pop("guild_id", None)
        return data

    def _respond(self, token: str, body: JSON) -> None:
        """An interaction's callback: a message (type 4) or a deferral (type 5, "thinking…"
        until it is edited or followed up) becomes its original response."""
        if body.get("type") not in (4, 5):
            return
        data = body.get("data") or {}
        content = data.get("content", "") if body["type"] == 4 else ""
        original = message(self.world, self._invoked_in.get(token, 0), self.world.bot_user,
                           content)
        original |= {"webhook_id": str(self.world.app_id),
                     "flags": data.get("flags", 0) | (LOADING if body["type"] == 5 else 0)}
        original.pop("guild_id", None)
        self.originals[token] = original

    def _edit_original(self, token: str, r: Request) -> JSON:
        """Edit Original Interaction Response: its content replaced, no longer loading."""
        old = self.originals.get(token)
        if old is None:
            return self._webhook_message(r, self._invoked_in.get(token, 0))
        body = r.json or {}
        new = old | {"content": body.get("content", old["content"]),
                     "flags": int(old["flags"]) & ~LOADING, "edited_timestamp": iso_now()}
        self.originals[token] = new
        return new

    def _follow_up(self, token: str, r: Request) -> JSON:
        """Create Followup Message. Like Discord, the first one after a deferral fills the
        deferred response (with the deferral's visibility); any other is a new message."""
        old = self.originals.get(token)
        if old is not None and int(old["flags"]) & LOADING:
            new = old | {"content": (r.json or {}).get("content", ""),
                         "flags": int(old["flags"]) & ~LOADING}
            self.originals[token] = new
            return new
        data = self._webhook_message(r, self._invoked_in.get(token, 0))
        self.followups[token].append(data)
        return data


def reads_one_message(r: Request) -> bool:
    """Whether ``r`` reads one message (``GET /channels/{id}/messages/{id}``, or a command's
    original response)."""
    return endpoint(r.method, r.path) in ("GET /channels/{id}/messages/{id}",
                                          "GET /webhooks/{id}/{token}/messages/@original")


def thread_from_message(world: World, channel_id: int, message_id: int, body: JSON) -> JSON:
    """``POST /channels/{id}/messages/{id}/threads``: a public thread started from a message
    (its id is the message's, as on Discord)."""
    return {
        "id": str(message_id), "guild_id": str(world.guild_id), "parent_id": str(channel_id),
        "owner_id": str(world.bot_id), "name": body.get("name", "thread"), "type": 11,
        "message_count": 0, "member_count": 1, "rate_limit_per_user": 0,
        "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                            "archive_timestamp": iso_now(), "locked": False},
    }
