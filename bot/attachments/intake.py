"""``AttachmentIntake``: the service's side of attachments.

Reading never holds up recording: the service records the message (its files named by
placeholders) and then calls ``start``, which reads the files in the background and amends
the turn so their text replaces the placeholders (``MemoryManager.amend``: the text joins
its turn even when compaction folded the turn first, and the next summary folds it in).

A reply waits for reads still pending on the messages its prompt shows, its own
(``settle``) and earlier ones (``wait_for``), until one deadline (``deadline``:
``ATTACHMENT_WAIT_SECONDS`` from the reply's start); a file still on its way then is said
to be in the prompt (``mark_unread``), and its text lands in memory when it arrives. A
platform edit of the message keeps the files' text (``reapply``), and a read or an image's
description finishing after an edit completes the edited text, not the original. Each
adapter registers its ``FileSource`` (hosts and auth); a platform with none has its files
named only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from bot.attachments.fetch import DownloadFailed, FileSource, Refused, fetch
from bot.attachments.model import UNREADABLE_IMAGE, Reading
from bot.attachments.read import read_bytes
from bot.attachments.refusal import is_refused, mark_refused
from bot.attachments.render import compose, image_line, render_all
from bot.attachments.vision import ImagePart, fit_images, sees_images
from bot.attachments.workers import Extractor
from bot.errors import LLMInputRejected
from bot.messages import Attachment, IncomingMessage
from bot.settings.sections import AttachmentSettings
from memory.errors import StoreError
from memory.manager import MemoryManager
from memory.models import ChannelKey, MemoryView, Turn

__all__ = ["MAX_FILES", "STILL_READING", "AttachmentIntake", "Settled"]

log = logging.getLogger(__name__)
MAX_FILES = 10  # per message, as Discord and Slack allow
_KEPT = 512  # settled messages remembered for replies and edits
_IMAGE_BYTES = 64 << 20  # image bytes held for later replies; the oldest images go first
EARLIER_MESSAGES = 3  # earlier messages whose images a reply may show

Key = tuple[ChannelKey, str]
Describer = Callable[[ChannelKey, Reading], Awaitable[str | None]]
DESCRIBE_SECONDS = 120.0  # the model's own timeout ends a call sooner
STILL_READING = "still being read; its text is not here yet"
"""What a prompt says in place of a file a reply stopped waiting for."""
_NOTE_TOKENS = 12  # what saying so costs a prompt, per file


@dataclass(frozen=True, slots=True)
class Settled:
    """A message's files once read: the turn's text with them, the images among them, and
    each placeholder's block (to put back after a platform edit)."""

    text: str
    images: tuple[Reading, ...] = ()
    blocks: tuple[tuple[str, str], ...] = ()


class AttachmentIntake:
    """Reads the files of recorded messages into their turns (see the module docstring)."""

    def __init__(self, memory: MemoryManager | None = None,
                 limits: AttachmentSettings | None = None) -> None:
        # Without settings (a bare service in tests): the defaults, and no images sent.
        self.memory = memory
        self.limits = limits or AttachmentSettings(vision="off")
        self.vision = self.limits.vision
        self.vision_models = frozenset(self.limits.vision_models)
        self.sources: dict[str, FileSource] = {}
        self._tasks: dict[Key, asyncio.Task[Settled]] = {}
        self._files: dict[Key, Sequence[Attachment]] = {}  # of the messages being read
        self.waiting = 0
        """Replies waiting for files now."""
        self._settled: OrderedDict[Key, Settled] = OrderedDict()
        # the latest platform edit of each message (its placeholders, not its files' text):
        # what a read or a description finishing later completes, so it keeps the edit
        self._edits: OrderedDict[Key, str] = OrderedDict()
        self._slots: asyncio.Semaphore | None = None
        # the worker processes that parse files (bot.attachments.workers)
        self.extractor = Extractor(self.limits)
        # one line about each new image, by a vision model (bot.attachments.describe); set
        # by Runtime when the reply model sees images
        self.describe: Describer | None = None
        self._describing: set[asyncio.Task[None]] = set()

    def register(self, source: FileSource) -> None:
        """Let ``source.platform``'s files be fetched from its hosts, with its headers."""
        self.sources[source.platform] = source

    @property
    def reading(self) -> int:
        """How many messages' files are being read now."""
        return len(self._tasks)

    def wants(self, msg: IncomingMessage) -> bool:
        """Whether ``msg`` has files to read (``ATTACHMENT_MAX_CHARS`` 0: never)."""
        return bool(msg.attachments) and self.limits.attachment_max_chars > 0

    def start(self, msg: IncomingMessage, stored: str, *, store: bool = True) -> None:
        """Read ``msg``'s files in the background; ``stored`` is the turn's text as
        recorded, edited in place when ``store`` (not for a message kept nowhere)."""
        key = (msg.key, msg.message_id)
        if not self.wants(msg) or key in self._tasks or key in self._settled:
            return
        task = asyncio.create_task(self._work(msg, stored, store), name=f"files {msg.message_id}")
        self._tasks[key] = task
        self._files[key] = msg.attachments[:MAX_FILES]

        def done(t: asyncio.Task[Settled]) -> None:
            if self._tasks.get(key) is t:
                del self._tasks[key]
                self._files.pop(key, None)

        task.add_done_callback(done)

    def deadline(self) -> float:
        """When a reply starting now stops waiting for files (``ATTACHMENT_WAIT_SECONDS``
        on the monotonic clock): one bound for all the files its prompt shows."""
        return time.monotonic() + self.limits.attachment_wait_seconds

    async def settle(self, msg: IncomingMessage, stored: str, *, store: bool = True,
                     until: float | None = None) -> Settled | None:
        """``msg``'s files read (started now if they were not), waiting at most until
        ``until`` (default: ``deadline()``); None when it has none or they are still on
        their way."""
        key = (msg.key, msg.message_id)
        if key in self._settled:
            return self._settled[key]
        self.start(msg, stored, store=store)
        task = self._tasks.get(key)
        if task is None:
            return self._settled.get(key)
        if not await self._wait([task], self.deadline() if until is None else until):
            log.info("files of %s in %s still arriving; replying without them",
                     msg.message_id, msg.key)
            return None
        if task.cancelled() or task.exception() is not None:  # logged by _work; reply anyway
            return None
        return task.result()

    def _reading(self, turns: Iterable[Turn]) -> list[asyncio.Task[Settled]]:
        """The reads still pending on ``turns``."""
        found = (self._tasks.get((t.key, t.message_id)) for t in turns if t.role == "user")
        return [t for t in found if t is not None]

    def note_tokens(self, key: ChannelKey) -> int:
        """Tokens a prompt of ``key`` may need to say that files are still being read
        (``mark_unread``): a reply keeps them out of its memory budget."""
        return _NOTE_TOKENS * sum(len(f) for k, f in self._files.items() if k[0] == key)

    async def wait_for(self, view: MemoryView, until: float) -> bool:
        """Wait until ``until`` at most for the reads still pending on the turns ``view``
        shows (verbatim or recalled); True when any finished, so the view is out of date."""
        tasks = self._reading((*view.turns, *view.recall.turns))
        if not tasks:
            return False
        await self._wait(tasks, until)
        return any(t.done() for t in tasks)

    async def _wait(self, tasks: Sequence[asyncio.Task[Settled]], until: float) -> bool:
        """Wait for ``tasks`` until the monotonic time ``until``; whether all are done."""
        left = until - time.monotonic()
        if left > 0 and not all(t.done() for t in tasks):
            self.waiting += 1
            try:
                await asyncio.wait(tasks, timeout=left)
            finally:
                self.waiting -= 1
        return all(t.done() for t in tasks)

    def mark_unread(self, view: MemoryView) -> MemoryView:
        """``view`` with the placeholder of each file still being read saying so
        (``STILL_READING``), in the turns the prompt shows."""
        if not self._tasks:
            return view
        turns = tuple(map(self._marked, view.turns))
        recalled = tuple(map(self._marked, view.recall.turns))
        if turns == view.turns and recalled == view.recall.turns:
            return view
        return replace(view, turns=turns, recall=replace(view.recall, turns=recalled))

    def _marked(self, turn: Turn) -> Turn:
        files = self._files.get((turn.key, turn.message_id)) if turn.role == "user" else None
        present = [a for a in files or () if a.placeholder and a.placeholder in turn.text]
        if not present:
            return turn
        notes = render_all([(a, Reading("refused", reason=STILL_READING)) for a in present],
                           self.limits.attachment_max_chars)
        return replace(turn, text=compose(turn.text, present, notes))

    def reapply(self, key: ChannelKey, message_id: str, text: str) -> str:
        """An edited message's ``text`` with its files' blocks back in place of the
        placeholders it still has (a file removed by the edit stays out)."""
        self._edits[(key, message_id)] = text
        self._edits.move_to_end((key, message_id))
        while len(self._edits) > _KEPT:
            self._edits.popitem(last=False)
        settled = self._settled.get((key, message_id))
        if settled is None:
            return text
        present = [(p, b) for p, b in settled.blocks if p and p in text]
        files = [Attachment("", "", placeholder=p) for p, _ in present]
        return compose(text, files, [b for _, b in present])

    def sees(self, model: str) -> bool:
        """Whether ``model`` is sent images (``VISION``, ``VISION_MODELS``)."""
        return sees_images(self.vision, model, self.vision_models)

    def images_for(self, settled: Settled | None, model: str, budget: int) -> list[ImagePart]:
        """The images of ``settled`` a vision ``model`` gets within ``budget`` tokens."""
        if settled is None or not settled.images or not model or not self.sees(model):
            return []
        return fit_images(settled.images, budget, self.limits.max_pixels)

    def earlier_images(self, turns: Sequence[Turn], model: str, budget: int
                       ) -> dict[int, list[ImagePart]]:
        """Images of the newest few earlier messages among ``turns`` (a reply's view, the
        message answered last) that ``budget`` tokens pay for, by message index of the
        request (the system message is 0, ``turns[i]`` is ``i + 1``)."""
        if not model or budget <= 0 or not self.sees(model):
            return {}
        out: dict[int, list[ImagePart]] = {}
        for i in range(len(turns) - 2, -1, -1):
            turn = turns[i]
            settled = self._settled.get((turn.key, turn.message_id))
            if turn.role != "user" or settled is None or not settled.images:
                continue
            usable = [r for r in settled.images  # the stored line says whether it was refused
                      if not is_refused(turn.text, image_line(r.name, r.width, r.height))]
            parts = fit_images(usable, budget, self.limits.max_pixels)
            if parts:
                out[i + 1] = parts
                budget -= sum(p.tokens for p in parts)
            if len(out) >= EARLIER_MESSAGES:
                break
        return out

    async def refused(self, key: ChannelKey, message_id: str, text: str,
                      parts: Sequence[ImagePart], *, store: bool = True) -> str:
        """The model endpoint refused a request carrying ``parts`` of message
        ``message_id`` (whose turn reads ``text``): never send them again, and say so in
        the turn (``bot.attachments.refusal``). The turn's new text; stored when ``store``,
        also in a turn compaction folded already (``MemoryManager.amend``)."""
        lines = [p.line for p in parts if p.line]
        marked = mark_refused(text, lines)
        held = self._settled.get((key, message_id))
        if held is not None:
            self._settled[(key, message_id)] = replace(
                held, text=mark_refused(held.text, lines),
                images=tuple(replace(r, reason=UNREADABLE_IMAGE)
                             if image_line(r.name, r.width, r.height) in lines else r
                             for r in held.images),
                blocks=tuple((p, mark_refused(b, lines)) for p, b in held.blocks))
        if store and self.memory is not None and marked != text:
            try:
                await self.memory.amend(key, message_id, marked)
            except StoreError as e:
                log.error("could not mark a refused image of %s in %s: %s", message_id, key, e)
        return marked

    async def idle(self) -> None:
        """Return once no files are being read (those started meanwhile included)."""
        while self._tasks or self._describing:
            await asyncio.gather(*self._tasks.values(), *self._describing,
                                 return_exceptions=True)

    async def close(self) -> None:
        """Stop reading (shutdown): a turn keeps its placeholders."""
        tasks = [*self._tasks.values(), *self._describing]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.extractor.close()

    # ------------------------------------------------------------------ the work

    async def _work(self, msg: IncomingMessage, stored: str, store: bool) -> Settled:
        try:
            return await self._read_all(msg, stored, store)
        except Exception:
            log.exception("reading the files of %s in %s failed", msg.message_id, msg.key)
            raise

    async def _read_all(self, msg: IncomingMessage, stored: str, store: bool) -> Settled:
        files: Sequence[Attachment] = msg.attachments[:MAX_FILES]
        readings = [replace(r, name=a.name) for a, r in zip(files, await asyncio.gather(
            *(self._read(msg.key.platform, a) for a in files)), strict=True)]
        blocks = render_all(list(zip(files, readings, strict=True)),
                            self.limits.attachment_max_chars)
        text = self._completed(msg, stored, files, blocks)
        settled = Settled(text, tuple(r for r in readings if r.kind == "image"),
                          tuple((a.placeholder, b) for a, b in zip(files, blocks, strict=True)))
        if store and self.memory is not None and text != stored:
            written = stored
            try:  # folded meanwhile or not, the text joins its turn, written again if an
                while text != written:  # edit arrived during the write
                    outcome = await self.memory.amend(msg.key, msg.message_id, text)
                    log.debug("files of %s in %s: %s", msg.message_id, msg.key, outcome)
                    written, text = text, self._completed(msg, stored, files, blocks)
            except StoreError as e:
                log.error("could not add the files of %s in %s: %s", msg.message_id, msg.key, e)
            settled = replace(settled, text=text)
        self._keep(msg, settled)
        if store and self.describe is not None and settled.images:
            task = asyncio.create_task(self._describe(msg, stored, files, readings))
            self._describing.add(task)
            task.add_done_callback(self._describing.discard)
        return settled

    def _completed(self, msg: IncomingMessage, stored: str, files: Sequence[Attachment],
                   blocks: Sequence[str]) -> str:
        """The message's text with its files' ``blocks``: its latest platform edit's text
        if it was edited while they were read (with the files it still names), else the
        text it was stored with."""
        edited = self._edits.get((msg.key, msg.message_id))
        if edited is None:
            return compose(stored, files, blocks)
        kept = [(a, b) for a, b in zip(files, blocks, strict=True)
                if a.placeholder and a.placeholder in edited]
        return compose(edited, [a for a, _ in kept], [b for _, b in kept])

    def _keep(self, msg: IncomingMessage, settled: Settled) -> None:
        """Remember ``settled``; beyond ``_IMAGE_BYTES`` the oldest images are let go."""
        self._settled[(msg.key, msg.message_id)] = settled
        while len(self._settled) > _KEPT:
            self._settled.popitem(last=False)
        held = sum(len(r.data) for s in self._settled.values() for r in s.images)
        for key, old in list(self._settled.items()):
            if held <= _IMAGE_BYTES:
                break
            if old.images and key != (msg.key, msg.message_id):
                held -= sum(len(r.data) for r in old.images)
                self._settled[key] = replace(old, images=())

    async def _describe(self, msg: IncomingMessage, stored: str, files: Sequence[Attachment],
                        readings: Sequence[Reading]) -> None:
        """Ask the model about each image, then edit the turn once with what it said."""
        described: list[Reading] = []
        for r in readings:
            line = None
            if r.kind == "image" and self.describe is not None:
                try:
                    line = await asyncio.wait_for(self.describe(msg.key, r), DESCRIBE_SECONDS)
                except TimeoutError:
                    log.info("describing an image of %s in %s took too long",
                             msg.message_id, msg.key)
                except LLMInputRejected:  # the model cannot read it: never sent again
                    log.warning("the model endpoint refused an image of %s in %s; it is not "
                                "sent again", msg.message_id, msg.key)
                    described.append(replace(r, reason=UNREADABLE_IMAGE))
                    continue
            described.append(replace(r, text=line) if line else r)
        if described == list(readings) or self.memory is None:
            return
        blocks = render_all(list(zip(files, described, strict=True)),
                            self.limits.attachment_max_chars)
        text = self._completed(msg, stored, files, blocks)
        try:
            await self.memory.amend(msg.key, msg.message_id, text)
        except StoreError as e:
            log.error("could not add image descriptions to %s in %s: %s", msg.message_id,
                      msg.key, e)
            return
        self._keep(msg, Settled(text, tuple(r for r in described if r.kind == "image"),
                                tuple((a.placeholder, b) for a, b in zip(files, blocks,
                                                                          strict=True))))

    async def _read(self, platform: str, att: Attachment) -> Reading:
        """One file, never raising: a refusal or failure is a ``Reading`` saying so."""
        source = self.sources.get(platform)
        if source is None:
            return Reading("refused", reason="not fetched")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limits.concurrency)
        try:
            async with self._slots:
                data, declared = await fetch(source, att, self.limits)
            return await read_bytes(data, declared or att.content_type, self.extractor)
        except Refused as e:
            return Reading("refused", reason=f"not fetched: {e}")
        except TimeoutError:
            return Reading("refused", reason="not fetched: timed out")
        except (DownloadFailed, OSError, ValueError) as e:
            log.info("download of %s failed: %s", att.name, type(e).__name__)
            return Reading("refused", reason="not fetched: the download failed")
        except Exception:
            log.exception("reading %s failed", att.name)
            return Reading("unreadable", reason="unreadable")
