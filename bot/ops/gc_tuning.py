"""The garbage collector of a long-running gistbot process, tuned once start-up is done.

CPython's cyclic collector runs when container allocations outnumber deallocations by a
threshold (700 by default); a full collection walks every tracked object of the process,
the imported libraries' hundreds of thousands included, and pauses the event loop that
serves every channel in whichever reply trips it.

``tune`` does what a long-running service does once it has started:

* ``gc.freeze()`` moves everything allocated so far into the permanent generation, which
  no collection walks again: the start-up heap is never garbage (docs/decisions/0038);
* ``gc.set_threshold(*THRESHOLDS)`` lets a reply's view (a few hundred candidate turns,
  their word sets and rendered lines, mostly freed by reference counting when the view is
  composed) run without a young collection in the middle, and makes older generations'
  collections rarer.

Reference counting still frees everything that is not part of a cycle at once; the
thresholds only decide how often cycles are looked for. ``restore`` puts the interpreter's
own setting back (the reply benchmark measures both in one run).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

__all__ = ["DEFAULT_THRESHOLDS", "THRESHOLDS", "GcSetting", "current", "restore", "tune"]

THRESHOLDS = (10_000, 20, 20)
"""Young collection after 10,000 net container allocations (a view's working set stays
below it), a middle one every 20 young ones, a full one every 20 middle ones (and, as
always in CPython, only once the objects that survived since the last full collection
outnumber a quarter of those it kept)."""

DEFAULT_THRESHOLDS = gc.get_threshold()
"""The interpreter's own thresholds, as they were when this module was imported."""


@dataclass(frozen=True, slots=True)
class GcSetting:
    """The collector's thresholds and how many objects are frozen."""

    thresholds: tuple[int, int, int]
    frozen: int


def tune() -> GcSetting:
    """Freeze the heap allocated so far and set ``THRESHOLDS``; call once start-up is
    done (the runtime opened, before serving). Returns the setting applied."""
    gc.collect()  # what start-up left as garbage is freed, not frozen with the rest
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    return current()


def restore() -> GcSetting:
    """The interpreter's own setting: nothing frozen, ``DEFAULT_THRESHOLDS``."""
    gc.unfreeze()
    gc.set_threshold(*DEFAULT_THRESHOLDS)
    return current()


def current() -> GcSetting:
    """The collector's setting now."""
    return GcSetting(gc.get_threshold(), gc.get_freeze_count())
