"""What a command is, said once for every platform: ``Command`` (its parser, description,
arguments, permission, who sees the answer and what it does), ``Argument`` and
``Permission``; ``Context`` is what a platform hands a running command.

Each platform generates its own table from these: Discord application commands (an option
per ``Argument``), Slack slash commands and their manifest entries (the text form,
``CommandSpec.arguments``) and the console's commands. A command's ``run`` is the one place
that calls a feature (``Context.features``); the platform answers what it returns,
privately unless the parsed arguments ask for the channel (``CommandSpec.public``) and the
command did its work.
Platforms call a command through ``Command.respond``, the door where the access lists
(``bot.access``) are asked for every command, and a command whose answer shows stored
channel content (``shows``) asks the read check (``bot.read_check``) first.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from bot.access import NO_LISTS, REFUSED, AccessRules, Verdict
from bot.arguments import CommandSpec, Usage
from bot.messages import CommandResult
from bot.read_check import Access, refusal

if TYPE_CHECKING:
    from bot.catchup.since import CatchupArgs
    from bot.channels.config import ChannelConfig
    from bot.channels.config_command import Caller, ConfigRequest
    from memory.models import ChannelKey

__all__ = ["Argument", "Command", "CommandService", "Context", "FeatureSet", "Permission",
           "Registry", "Suggest"]

A = TypeVar("A")
Kind = Literal["text", "flag", "choice"]


class Permission(enum.Enum):
    """What a command (or its changing part) needs; each platform says who that is."""

    EVERYONE = "everyone"
    MODERATE = "moderate"  # forget a channel or its facts
    MANAGE_CHANNEL = "manage_channel"  # a channel's settings and digests
    MANAGE_SERVER = "manage_server"  # a server's (workspace's) settings


class MemoryFeature(Protocol):
    """The memory commands (``bot.memory_commands.feature.MemoryCommands`` is one)."""

    async def summary(self, key: ChannelKey, author_id: str = "") -> CommandResult: ...

    async def reset(self, key: ChannelKey, *, allowed: bool,
                    refusal: str | None = None) -> CommandResult: ...

    async def remember(self, key: ChannelKey, text: str, *, author: str = "") -> CommandResult:
        ...

    async def memory_list(self, key: ChannelKey) -> CommandResult: ...

    async def forget(self, key: ChannelKey, ref: str, *, allowed: bool,
                     refusal: str | None = None) -> CommandResult: ...


class ConfigFeature(Protocol):
    """``/config`` (``bot.channels.config_command.ConfigCommand`` is one)."""

    async def configure(self, key: ChannelKey, request: ConfigRequest,
                        caller: Caller) -> CommandResult: ...


class CatchupFeature(Protocol):
    """``/catchup`` and ``/digest`` (``bot.catchup.wiring.CatchupCommands`` is one). A place
    (``bot.catchup.command.Where``) and a digest request pass through as they are."""

    async def catchup(self, where: Any, author_id: str, text: CatchupArgs) -> CommandResult: ...

    async def digest(self, where: Any, text: Any, *, allowed: bool, by: str = "",
                     refusal: str = "") -> CommandResult: ...


class FeatureSet(Protocol):
    """The running features (``bot.features``): a feature's command finds its own object
    here by type."""

    def of(self, kind: type[A]) -> A: ...


class CommandService(Protocol):
    """The features commands use, handed to them by the platform (``bot.parts.Features``
    is one)."""

    @property
    def running(self) -> FeatureSet: ...

    @property
    def channels(self) -> ChannelConfig: ...

    @property
    def access(self) -> AccessRules: ...

    @property
    def memory_commands(self) -> MemoryFeature: ...

    @property
    def config_command(self) -> ConfigFeature: ...

    @property
    def catchup_commands(self) -> CatchupFeature: ...


class Suggest(Protocol):
    """Values to offer for an argument while it is typed (Discord's autocomplete)."""

    def __call__(self, features: CommandService, commands: Registry,
                 options: Mapping[str, str]) -> Sequence[str]: ...


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument: a Discord option, a word of the Slack and console text form.

    ``kind``: ``text`` (free text, read by the command's grammar), ``flag`` (a yes/no
    option; in text, the word ``name``) or ``choice`` (one of ``choices``). ``examples``
    are shown by ``/help``; ``suggest`` offers values while it is typed.
    """

    name: str
    description: str
    kind: Kind = "text"
    required: bool = False
    choices: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    suggest: Suggest | None = None


class Context(Protocol):
    """What a platform hands a running command: the features, the channel, the caller and
    the platform's answers to who may do what."""

    @property
    def features(self) -> CommandService: ...

    @property
    def key(self) -> ChannelKey: ...

    @property
    def user_id(self) -> str: ...

    @property
    def is_direct(self) -> bool: ...

    @property
    def roles(self) -> tuple[str, ...] | None:
        """The caller's role ids here (``bot.access``); None where the platform has none."""
        ...

    @property
    def parent(self) -> str:
        """The channel a thread is in ("" elsewhere), for ``bot.access``."""
        ...

    @property
    def commands(self) -> Registry: ...

    async def user_name(self) -> str:
        """The caller's display name."""
        ...

    def reader(self) -> Access:
        """What the caller may read (the platform's half of ``bot.read_check``)."""
        ...

    def everyone(self) -> Access:
        """What everyone who can see a post in this channel may read."""
        ...

    async def where(self) -> Any:
        """The channel as a catch-up reads it (``bot.catchup.command.Where``: its threads,
        its links, the caller's access)."""
        ...

    async def may(self, permission: Permission) -> bool:
        """Whether the caller has ``permission`` here."""
        ...

    def refusal(self, permission: Permission, action: str) -> str:
        """The sentence refusing ``action`` ("reset this channel's memory") to a caller
        without ``permission``."""
        ...

    def who(self, permission: Permission) -> str:
        """Who has ``permission`` on this platform, for ``/help``."""
        ...

    def readable(self, text: str) -> str:
        """Free text as people read it (Slack's ``<@U1>`` becomes the name)."""
        ...


Run = Callable[[Context, A], Awaitable[CommandResult]]


@dataclass(frozen=True, slots=True)
class Command(Generic[A]):
    """One command on every platform.

    ``permission``: what running it (or its changing part: ``needed_for``) takes; Discord
    hides a command whose whole use needs one (``hidden``). ``shows``: its answer shows what
    is stored of the channel, so only a caller who may read the channel's history gets it
    (and, posted publicly, only if everyone who can see the post may: ``bot.read_check``).
    ``manages_access``: it changes a server's own access lists, so those never refuse it
    (its managers can always undo them); the operator's lists still do.
    ``answer``: who sees the answer, for ``/help``; which answers go to the channel is
    ``spec.public``. ``waits``: the answer may take a while (a model call), so the console
    shows its spinner. ``from_options``:
    Discord's options read into arguments; by default the text options and the names of
    the flags that are on, joined, go through the command's grammar.
    """

    spec: CommandSpec[A]
    description: str
    run: Run[A]
    arguments: tuple[Argument, ...] = ()
    permission: Permission = Permission.EVERYONE
    needed_for: str = ""
    hidden: bool = False
    answer: str = "only you"
    note: str = ""
    waits: bool = False
    from_options: Callable[[Mapping[str, Any]], A | Usage] | None = None
    shows: bool = False
    manages_access: bool = False

    @property
    def name(self) -> str:
        """The command's name, without its slash."""
        return self.spec.name

    @property
    def usage(self) -> str:
        """``/name arguments``, as typed on Slack and at the console."""
        return f"/{self.name} {self.spec.arguments}".rstrip()

    async def respond(self, ctx: Context, args: A, *, public: bool = False) -> CommandResult:
        """Run the command for the caller in ``ctx`` (``public``: its answer is to be posted
        for everyone there): the read check first when it ``shows`` stored content. Every
        platform runs commands through here, never through ``run`` directly. A caller the
        access lists (``bot.access``) refuse gets one short sentence, whatever the command."""
        here = NO_LISTS if self.manages_access else (
            await ctx.features.channels.get(ctx.key)).access  # a server's own lists
        verdict = ctx.features.access.verdict(ctx.key, ctx.user_id, ctx.roles,
                                              direct=ctx.is_direct, parent=ctx.parent,
                                              server=here)
        if verdict is not Verdict.ADMITTED:
            return CommandResult(REFUSED, ok=False)
        if self.shows:
            refused = await refusal(ctx.key, ctx.reader(), ctx.everyone(), public=public)
            if refused is not None:
                return CommandResult(refused, ok=False)
        return await self.run(ctx, args)

    def read_options(self, options: Mapping[str, Any]) -> A | Usage:
        """Discord's option values as this command's arguments (or a ``Usage``)."""
        if self.from_options is not None:
            return self.from_options(options)
        words = [str(options.get(a.name) or "").strip() for a in self.arguments
                 if a.kind != "flag"]
        flags = [a.name for a in self.arguments if a.kind == "flag" and options.get(a.name)]
        return self.spec.parse(" ".join(w for w in [*words, *flags] if w))


@dataclass(frozen=True)
class Registry:
    """The commands every platform offers, in the order they are listed."""

    commands: tuple[Command[Any], ...]
    _by_name: dict[str, Command[Any]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {c.name: c for c in self.commands}
        if len(by_name) != len(self.commands):
            raise ValueError("two commands have the same name")
        object.__setattr__(self, "_by_name", by_name)

    def __iter__(self) -> Iterator[Command[Any]]:
        return iter(self.commands)

    def __len__(self) -> int:
        return len(self.commands)

    def get(self, name: str) -> Command[Any] | None:
        """The command called ``name`` (with or without its slash, any case), or None."""
        return self._by_name.get(name.removeprefix("/").lower())

    def names(self) -> list[str]:
        """Every command's name, in order."""
        return [c.name for c in self.commands]
