"""What every adapter shares about answering: the user's text for an error.

An adapter catches at its edge and logs with the stack; the user reads ``user_text``: a
short sentence from the ``bot.errors`` tree, never an exception's text. (A reply's pace
and the rest of its delivery are ``bot.conversation.reply_flow``'s.)
"""

from __future__ import annotations

from bot.platform import GistbotError, user_text

__all__ = ["FAILED", "user_text"]

FAILED = GistbotError.user_message  # for anything that is not a GistbotError
