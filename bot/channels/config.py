"""Per-channel settings: what each key means, its valid values, and the value in force.

Keys (``KEYS``): ``persona``, ``model``, ``summary_model``, ``reply_mode``, ``record``,
``language`` for a channel or its whole server/workspace, and ``daily_tokens_per_user`` /
``daily_tokens_per_server`` and the access lists (``allowed_users``, ``blocked_users`` …,
which add to the operator's: ``bot.access``) for a server only; a feature adds its own
(``Defaults.features``: the personal notes' ``personal_notes``). The value in force comes
from the channel, else the server, else the environment (``Defaults``, from
``Settings``): precedence channel → server → env.

Why a cache, and how it stays right across replicas: every message needs its channel's
settings before it is recorded (``record off`` stores nothing), so reading the database
each time would add a round trip to every message. ``ChannelConfig`` keeps the resolved
settings per channel and drops them all when the store's ``settings_version`` changes —
one small query every ``poll`` seconds (default 1 s) from a background task, so a change
made through any replica is in force everywhere within a couple of seconds; a change made
here drops the cache at once. Lookups are single-flight per channel and never suspend when
cached, so messages of one channel keep their arrival order (``ChatService.receive``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from bot.access import LIST_NAMES, NO_LISTS, Lists
from bot.messages import IncomingMessage
from bot.settings import Settings
from bot.settings.params import parse_params
from bot.settings.sections import check_ids
from bot.stores.settings import SERVER, Setting, SettingsStore, server_scope
from memory.errors import StoreError
from memory.models import ChannelKey
from memory.text import clean_text

__all__ = [
    "KEYS",
    "MAX_PERSONA_CHARS",
    "ChannelConfig",
    "ChannelSettings",
    "Defaults",
    "Invalid",
    "Key",
    "answers",
    "validate",
]

log = logging.getLogger(__name__)

MAX_PERSONA_CHARS = 2000
MAX_CACHED = 10_000
_LANGUAGE = re.compile(r"^[^\W\d_][\w\s()'-]{0,39}$")


class Invalid(ValueError):
    """A value ``/config set`` refuses; the message is shown to the person as it is."""


@dataclass(frozen=True, slots=True)
class Key:
    """One setting: its name, what it does, and where it may be set; ``default`` is the
    value where nobody chose one, for a feature's key (the core's come from ``Settings``)."""

    name: str
    help: str
    choices: tuple[str, ...] = ()
    server_only: bool = False
    default: str = ""


KEYS: dict[str, Key] = {k.name: k for k in (
    Key("persona", "the system prompt of this channel (gistbot's own rules stay after it)"),
    Key("model", "the model that writes replies (one of ALLOWED_MODELS)"),
    Key("summary_model", "the model that writes summaries (one of ALLOWED_MODELS)"),
    Key("reply_mode", "mentions: answer when addressed; all: answer every message; "
        "off: remember only", ("mentions", "all", "off")),
    Key("record", "all: remember every message; addressed: only those to me and my replies; "
        "off: remember nothing", ("all", "addressed", "off")),
    Key("language", "the language summaries are written in (default: the conversation's)"),
    Key("params", "request fields of replies over MODEL_PARAMS, as JSON or key=value "
        "pairs, e.g. temperature=0.2 (only MODEL_PARAMS_ALLOWED)"),
    Key("daily_tokens_per_user", "tokens one person may use a day here (0 = the default)",
        server_only=True),
    Key("daily_tokens_per_server", "tokens this server may use a day (0 = the default)",
        server_only=True),
    Key("allowed_users", "user ids who may talk to me on this server (besides allowed "
        "roles; none: everyone the operator allows)", server_only=True),
    Key("blocked_users", "user ids I ignore on this server", server_only=True),
    Key("allowed_roles", "role ids whose members may talk to me on this server",
        server_only=True),
    Key("blocked_roles", "role ids whose members I ignore on this server", server_only=True),
    Key("allowed_channels", "channel ids where I answer and remember on this server (none: "
        "every channel)", server_only=True),
    Key("blocked_channels", "channel ids where I neither answer nor remember anything",
        server_only=True),
)}
_LIST_OF: dict[str, Literal["user", "role", "channel"]] = {
    "allowed_users": "user", "blocked_users": "user", "allowed_roles": "role",
    "blocked_roles": "role", "allowed_channels": "channel", "blocked_channels": "channel"}


@dataclass(frozen=True, slots=True)
class Defaults:
    """The environment's values: what applies where no channel or server chose."""

    persona: str
    model: str
    summary_model: str
    allowed_models: tuple[str, ...]
    record: str = "all"
    always_reply_channels: frozenset[str] = frozenset()
    daily_tokens_per_user: int = 0
    daily_tokens_per_server: int = 0
    offline: bool = False  # no model configured: the offline model answers, whatever is set
    params: str = "{}"  # MODEL_PARAMS, as JSON
    params_allowed: tuple[str, ...] = ()  # MODEL_PARAMS_ALLOWED
    features: tuple[Key, ...] = ()  # the features' keys (bot.features.registry)

    @property
    def keys(self) -> dict[str, Key]:
        """Every key ``/config`` knows: ``KEYS`` and the features'."""
        return {**KEYS, **{k.name: k for k in self.features}}

    @classmethod
    def from_settings(cls, s: Settings, features: Sequence[Key] = ()) -> Defaults:
        """The defaults ``s`` implies (``ALWAYS_REPLY_CHANNELS`` become ``reply_mode all``;
        ``ALLOWED_MODELS`` unset allows ``MODEL_NAME`` and the models of ``PROVIDERS``)."""
        llm, chat, quotas, named = s.llm, s.chat, s.quotas, s.providers
        served = [m for p in named.providers.values() for m in p.models]
        allowed = tuple(dict.fromkeys(quotas.allowed_models or [llm.model_name, *served]))
        return cls(chat.system_prompt, llm.model_name, llm.summary_model_name or llm.model_name,
                   allowed, chat.record_mode, frozenset(chat.always_reply_channels),
                   quotas.daily_tokens_per_user, quotas.daily_tokens_per_server,
                   offline=s.model_provider == "offline",
                   params=json.dumps(named.model_params, sort_keys=True),
                   params_allowed=tuple(named.model_params_allowed),
                   features=tuple(features))

    def value(self, name: str, key: ChannelKey) -> str:
        """The environment's value of ``name`` for channel ``key``, as text."""
        if name == "reply_mode":
            return "all" if key.channel in self.always_reply_channels else "mentions"
        if name == "language" or name in LIST_NAMES:  # a server's lists add to the operator's
            return ""
        if name not in KEYS:
            return self.keys[name].default
        return str(getattr(self, "record" if name == "record" else name))


@dataclass(frozen=True, slots=True)
class ChannelSettings:
    """The settings in force in one channel, and where each came from."""

    key: ChannelKey
    persona: str
    model: str
    summary_model: str
    reply_mode: str
    record: str
    language: str
    params: str  # JSON object: request fields over MODEL_PARAMS ("{}": none)
    daily_tokens_per_user: int
    daily_tokens_per_server: int
    sources: Mapping[str, str] = field(default_factory=dict)  # "channel" | "server" | "default"
    access: Lists = NO_LISTS  # the server's own allow and block lists (bot.access)
    features: Mapping[str, str] = field(default_factory=dict)  # the features' keys

    def value(self, name: str) -> str:
        """The value in force of ``name`` as text (a feature's key too)."""
        return self.features[name] if name in self.features else str(getattr(self, name))

    def chosen(self, name: str) -> str | None:
        """The value of ``name`` when a channel or server chose it, else None (the model
        calls then use the configured default)."""
        if self.sources.get(name, "default") == "default":
            return None
        return str(getattr(self, name))


def resolve(key: ChannelKey, rows: Sequence[Setting], defaults: Defaults) -> ChannelSettings:
    """Channel → server → env, for every key; stored values that no longer pass
    ``validate`` (the operator narrowed ``ALLOWED_MODELS``) fall through to the next."""
    found: dict[tuple[str, str], str] = {(r.scope.channel, r.name): r.value for r in rows}
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    for name, spec in defaults.keys.items():
        scopes = [(SERVER, "server")] if spec.server_only else [
            (key.channel, "channel"), (SERVER, "server")]
        for channel, source in scopes:
            raw = found.get((channel, name))
            if raw is None:
                continue
            try:
                values[name] = validate(name, raw, defaults, server=source == "server")
                sources[name] = source
                break
            except Invalid:
                log.warning("ignoring stored %s=%r of %s: no longer valid", name, raw, key)
        else:
            values[name] = defaults.value(name, key)
            sources[name] = "default"
    return ChannelSettings(
        key, values["persona"], values["model"], values["summary_model"], values["reply_mode"],
        values["record"], values["language"], values["params"],
        int(values["daily_tokens_per_user"]),
        int(values["daily_tokens_per_server"]), sources,
        Lists.of({n: values[n].split(",") for n in LIST_NAMES if values[n]}),
        {k.name: values[k.name] for k in defaults.features},
    )


def validate(name: str, value: str, defaults: Defaults, *, server: bool) -> str:
    """``value`` made canonical, or ``Invalid`` saying what is allowed."""
    spec = defaults.keys.get(name)
    if spec is None:
        raise Invalid(f"There is no setting {name!r}; the settings are: "
                      f"{', '.join(defaults.keys)}.")
    if spec.server_only and not server:
        raise Invalid(f"{name} is set for the whole server: add scope server.")
    value = clean_text(value).strip()
    if spec.choices:
        value = value.lower()
        if value not in spec.choices:
            raise Invalid(f"{name} must be one of: {', '.join(spec.choices)}.")
        return value
    if name == "persona":
        if not value:
            raise Invalid("A persona needs some text (use unset to go back to the default).")
        if len(value) > MAX_PERSONA_CHARS:
            raise Invalid(f"A persona may be at most {MAX_PERSONA_CHARS:,} characters "
                          f"(this one has {len(value):,}).")
        return value
    if name in ("model", "summary_model"):
        if value not in defaults.allowed_models:
            raise Invalid(f"{value!r} is not an allowed model here; allowed models: "
                          f"{', '.join(defaults.allowed_models)}.")
        return value
    if name == "params":
        return _params(value, defaults)
    if name in LIST_NAMES:
        ids = [v for v in re.split(r"[\s,]+", value) if v]
        if not ids:
            raise Invalid(f"List some ids for {name}, separated by commas (unset it to "
                          "clear it).")
        try:
            return ",".join(check_ids(ids, _LIST_OF[name]))
        except ValueError as e:
            raise Invalid(f"{str(e)[0].upper()}{str(e)[1:]}.") from None
    if name == "language":
        if not _LANGUAGE.match(value):
            raise Invalid("A language is a name such as English, Korean or Brazilian "
                          "Portuguese (letters and spaces, at most 40 characters).")
        return value
    return _quota(name, value, defaults)


def _params(value: str, defaults: Defaults) -> str:
    """Request fields as canonical JSON, only those ``MODEL_PARAMS_ALLOWED`` names."""
    if not value.startswith("{"):  # key=value pairs; each value read as JSON if it is
        pairs = {}
        for word in value.split():
            name, eq, raw = word.partition("=")
            if not eq or not name:
                raise Invalid("Write params as JSON or as key=value pairs, such as "
                              "temperature=0.2 top_p=0.9.")
            pairs[name] = _json_or_text(raw)
        value = json.dumps(pairs)
    try:
        params = parse_params(value, allowed=defaults.params_allowed)
    except ValueError as e:
        raise Invalid(f"params {e}.") from None
    if not params:
        raise Invalid("params needs at least one field (use unset to go back to the default).")
    return json.dumps(params, sort_keys=True)


def _json_or_text(raw: str) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _quota(name: str, value: str, defaults: Defaults) -> str:
    """A server's daily token limit: a positive number, never above the operator's."""
    try:
        tokens = int(value.replace(",", "").replace("_", ""))
    except ValueError:
        raise Invalid(f"{name} must be a whole number of tokens, such as 200000.") from None
    ceiling = int(getattr(defaults, name))
    if tokens <= 0:
        raise Invalid(f"{name} must be a positive number of tokens (unset it for the default).")
    if ceiling and tokens > ceiling:
        raise Invalid(f"{name} may not be above the operator's limit of {ceiling:,} tokens.")
    return str(tokens)


class ChannelConfig:
    """Resolved settings per channel, cached until any replica changes a setting."""

    def __init__(self, store: SettingsStore | None, defaults: Defaults, *, poll: float = 1.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.defaults, self.poll, self.clock = store, defaults, poll, clock
        self._cache: dict[ChannelKey, ChannelSettings] = {}
        self._locks: dict[ChannelKey, asyncio.Lock] = {}
        self._waiting: dict[ChannelKey, int] = {}
        self._generation = 0
        self._version: int | None = None
        self._poller: asyncio.Task[None] | None = None

    def peek(self, key: ChannelKey) -> ChannelSettings | None:
        """The cached settings of ``key``, without waiting (None when not cached)."""
        if self.store is None:
            return resolve(key, (), self.defaults)
        return self._cache.get(key)

    async def get(self, key: ChannelKey) -> ChannelSettings:
        """The settings in force in ``key`` (defaults when the store cannot be read).

        Cached and nobody waiting: returns without suspending. Otherwise callers queue on
        the channel's lock (FIFO) and the first loads once, so callers resume in the order
        they called: a channel's messages keep their order (``ChatService.receive``).
        """
        hit = self.peek(key)
        if hit is not None and not self._waiting.get(key):
            return hit
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            async with self._locks.setdefault(key, asyncio.Lock()):
                hit = self._cache.get(key)
                if hit is None:
                    hit = await self._load(key)
                return hit
        finally:
            self._waiting[key] -= 1
            if not self._waiting[key]:
                del self._waiting[key]
                self._locks.pop(key, None)

    async def _load(self, key: ChannelKey) -> ChannelSettings:
        assert self.store is not None
        generation = self._generation
        try:
            loaded = resolve(key, await self.store.scope_settings(key), self.defaults)
        except StoreError:
            log.warning("could not read the settings of %s; using the defaults", key,
                        exc_info=True)
            return resolve(key, (), self.defaults)
        if generation == self._generation:  # not invalidated meanwhile
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            self._cache[key] = loaded
        return loaded

    async def put(
        self, scope: ChannelKey, name: str, value: str | None, *, actor: str
    ) -> str | None:
        """Set (validated; returns the stored form) or with None unset ``name`` in ``scope``
        (a channel, or ``server_scope``), log who did it, and drop the cache."""
        if self.store is None:
            raise Invalid("Settings need a database; this gistbot runs without one.")
        server = scope.channel == SERVER
        stored = None if value is None else validate(name, value, self.defaults, server=server)
        if value is None and name not in self.defaults.keys:
            raise Invalid(f"There is no setting {name!r}; the settings are: "
                          f"{', '.join(self.defaults.keys)}.")
        await self.store.put_setting(scope, name, stored, actor=actor, now=self.clock())
        log.info("setting %s of %s %s by %s", name, scope,
                 "unset" if stored is None else "changed", actor)
        self.invalidate()
        return stored

    async def stored(self, scope: ChannelKey) -> dict[str, Setting]:
        """The values stored for exactly ``scope`` (a channel or a server), by name."""
        if self.store is None:
            return {}
        rows = await self.store.scope_settings(scope)
        return {r.name: r for r in rows if r.scope.channel == scope.channel}

    def invalidate(self) -> None:
        """Forget every cached channel (a setting changed here or elsewhere)."""
        self._generation += 1
        self._cache.clear()

    async def check(self) -> bool:
        """Poll the store's version once; drop the cache when it moved. True if it did."""
        if self.store is None:
            return False
        version = await self.store.settings_version()
        moved = self._version is not None and version != self._version
        if moved:
            self.invalidate()
        self._version = version
        return moved

    async def start(self) -> None:
        """Start polling the version every ``poll`` seconds."""
        if self.store is not None and self._poller is None:
            await self.check()
            self._poller = asyncio.create_task(self._poll_loop())

    async def _poll_loop(self) -> None:
        while True:
            await asyncio.sleep(self.poll)
            try:
                await self.check()
            except Exception:  # a database hiccup must not end polling
                log.warning("could not poll the settings version", exc_info=True)

    async def close(self) -> None:
        """Stop polling."""
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller


def scope_of(key: ChannelKey, server: bool) -> ChannelKey:
    """The scope a command acts on: the channel, or its server."""
    return server_scope(key) if server else key


def answers(msg: IncomingMessage, settings: ChannelSettings) -> bool:
    """Whether ``msg`` gets a reply under its channel's ``reply_mode``: ``off`` never
    (remember only), ``all`` always, ``mentions`` when mentioned, DM'd or replied to."""
    if settings.reply_mode == "off":
        return False
    return (settings.reply_mode == "all" or msg.mentions_bot or msg.is_direct
            or msg.reply_to_bot)
