"""How the context budget becomes a memory budget, a compaction window and a view split.

``CONTEXT_TOKENS − REPLY_TOKENS`` is what a reply's prompt may hold; the system prompt and
the fence framing take their part (``bot.prompts.fixed_overhead``) and the rest is the
*memory budget*. By default everything else follows from it, so raising
``CONTEXT_TOKENS`` buys a larger verbatim window and more recall:

* compaction (``WindowPolicy.for_budget``): compact when the unsummarized turns pass 40% of
  what the summary leaves, fold down to 10%; ``MAX_HISTORY_MESSAGES`` /
  ``KEEP_RECENT_MESSAGES`` select the original sliding window of messages instead, and
  ``WINDOW_TOKENS`` / ``KEEP_TOKENS`` set a token window explicitly;
* the view (``memory.view.ViewSplit``): the newest turns up to a share of what the summary
  leaves that grows from 10% (a tiny budget) to 45% (8,000 tokens and more), carried
  identifiers up to ``FACTS_TOKENS`` (or 10%; at most 15% in a small view), recall the
  rest (``RECALL_TOKENS`` caps it; ``0`` turns it off).
"""

from __future__ import annotations

from dataclasses import replace

from bot.prompts import fixed_overhead
from bot.settings import Settings
from memory.summarizer import fold_limit
from memory.tokens import Tokenizer
from memory.view import ViewSplit
from memory.window import WindowPolicy

__all__ = ["memory_budget", "view_split", "window_policy"]


def memory_budget(
    settings: Settings, tokenizer: Tokenizer, system_prompt: str | None = None
) -> int:
    """Tokens a reply may spend on memory with ``system_prompt`` (default: the settings')."""
    prompt = settings.system_prompt if system_prompt is None else system_prompt
    return settings.context_tokens - settings.reply_tokens - fixed_overhead(prompt, tokenizer)


def window_policy(settings: Settings, tokenizer: Tokenizer) -> WindowPolicy:
    """The compaction window the settings ask for (by default derived from the budget),
    folding at most what lets a summary request fit ``CONTEXT_TOKENS``
    (``memory.summarizer.fold_limit``), however far compaction fell behind."""
    policy = _window(settings, tokenizer)
    most = fold_limit(settings.context_tokens, settings.summary_bound, tokenizer)
    return replace(policy, max_fold_tokens=min(policy.max_fold_tokens, most))


def _window(settings: Settings, tokenizer: Tokenizer) -> WindowPolicy:
    if settings.max_history_messages is not None or settings.keep_recent_messages is not None:
        most = settings.max_history_messages or 10
        keep = settings.keep_recent_messages
        return WindowPolicy(
            max_messages=most,
            keep_messages=min(4, most - 1) if keep is None else keep,
            window_tokens=settings.window_tokens,
            keep_tokens=settings.keep_tokens,
        )
    if settings.window_tokens:
        return WindowPolicy(max_messages=0, keep_messages=0,
                            window_tokens=settings.window_tokens, keep_tokens=settings.keep_tokens)
    return WindowPolicy.for_budget(
        memory_budget(settings, tokenizer), summary_tokens=settings.summary_bound
    )


def view_split(settings: Settings) -> ViewSplit:
    """How a reply's view divides its budget."""
    return ViewSplit(facts_tokens=settings.facts_tokens, recall_tokens=settings.recall_tokens)
