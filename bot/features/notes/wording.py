"""What the personal notes say to people, in one place."""

from __future__ import annotations

__all__ = [
    "ALL_FORGOTTEN",
    "CAP_REACHED",
    "EMPTY",
    "FORGOT",
    "HEADING",
    "KEPT",
    "KEPT_BEFORE",
    "LISTING",
    "NOTHING_TO_FORGET",
    "NO_SUCH_NOTE",
    "OFF_HERE",
    "STORE_FAILED",
    "TOO_LONG",
    "USAGE",
]

USAGE = ("Usage: /aboutme (your notes), /aboutme remember <text> (a note about you, used "
         "when you ask me something on this server), /aboutme forget <number|all>.")
HEADING = ("## Notes {name} asked me to keep about themselves (only for answering them; never "
           "repeat them to anyone else)")
KEPT = ("Noted (#{n}). I'll use it when you ask me something on this server; only you see "
        "your notes (/aboutme).")
KEPT_BEFORE = "You told me that already: it is note #{n}."
CAP_REACHED = ("You have {cap} notes, the most I keep for one person. Forget one first "
               "(/aboutme forget <number>).")
TOO_LONG = "A note may be at most {limit:,} characters (this one has {length:,})."
EMPTY = ("I keep no notes about you on this server. /aboutme remember <text> keeps one; nothing "
         "about you is kept until you ask.")
LISTING = "Your notes on this server (only you see them):"
FORGOT = "Forgot note #{n}."
ALL_FORGOTTEN = "Forgot all your notes on this server ({count})."
NOTHING_TO_FORGET = "You have no notes on this server."
NO_SUCH_NOTE = "You have no note #{n} (see /aboutme)."
OFF_HERE = ("Personal notes are turned off on this server, so I keep none and use none. You "
            "can still see (/aboutme) and forget (/aboutme forget all) the ones kept before.")
STORE_FAILED = "Sorry, I couldn't reach my notes just now. Please try again in a moment."
