"""``Budget``: the context budget, computed once from the settings and passed to every part
that spends it (the reply's view, catch-up prompts, compaction's fold limit).

``CONTEXT_TOKENS − REPLY_TOKENS`` is what one prompt may hold (``prompt_tokens``); the
system prompt and the fence framing take their part (``bot.conversation.prompts.fixed_overhead``)
and the rest is the *memory budget*. By default everything else follows from it, so raising
``CONTEXT_TOKENS`` buys a larger verbatim window and more recall:

* compaction (``window_policy``): compact when the unsummarized turns pass 45% of what the
  summary leaves, fold down to 10%, never more than a summary request can hold
  (``fold_tokens``); ``MAX_HISTORY_MESSAGES`` / ``KEEP_RECENT_MESSAGES`` select the
  original sliding window of messages instead, ``WINDOW_TOKENS`` / ``KEEP_TOKENS`` set a
  token window explicitly;
* the view (``MemoryConfig.split``): the newest turns, carried identifiers up to
  ``FACTS_TOKENS``, recall the rest (``RECALL_TOKENS`` caps it; ``0`` turns it off).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot.conversation.prompts import fixed_overhead
from bot.settings.sections import BudgetSettings
from memory.config import MemoryConfig
from memory.summarizer import fold_limit
from memory.tokens import Tokenizer
from memory.window import WindowPolicy

__all__ = ["Budget", "window_policy"]


@dataclass(frozen=True, slots=True)
class Budget:
    """Token budgets of one configuration (see the module docstring)."""

    context_tokens: int
    reply_tokens: int
    summary_tokens: int  # the rolling summary's bound (SUMMARY_TOKENS, or derived)
    overhead_tokens: int  # the configured system prompt and the framing
    fold_tokens: int  # most turn tokens one compaction folds and still fits the context

    @classmethod
    def compute(cls, section: BudgetSettings, system_prompt: str,
                tokenizer: Tokenizer) -> Budget:
        """The budget of ``section`` with ``system_prompt`` as the default persona."""
        summary = section.summary_bound
        return cls(section.context_tokens, section.reply_tokens, summary,
                   fixed_overhead(system_prompt, tokenizer),
                   fold_limit(section.context_tokens, summary, tokenizer))

    @property
    def prompt_tokens(self) -> int:
        """What one prompt may hold: the context less the reply's share."""
        return self.context_tokens - self.reply_tokens

    @property
    def memory_tokens(self) -> int:
        """What a reply with the configured system prompt may spend on memory."""
        return self.prompt_tokens - self.overhead_tokens

    def memory_with(self, system_prompt: str, tokenizer: Tokenizer) -> int:
        """What a reply with another system prompt (a channel's persona) may spend on memory."""
        return self.prompt_tokens - fixed_overhead(system_prompt, tokenizer)


def window_policy(memory: MemoryConfig, budget: Budget) -> WindowPolicy:
    """The compaction window ``memory`` asks for (by default derived from the budget),
    folding at most ``budget.fold_tokens``, however far compaction fell behind."""
    policy = _window(memory, budget)
    return replace(policy, max_fold_tokens=min(policy.max_fold_tokens, budget.fold_tokens))


def _window(memory: MemoryConfig, budget: Budget) -> WindowPolicy:
    if memory.max_history_messages is not None or memory.keep_recent_messages is not None:
        most = memory.max_history_messages or 10
        keep = memory.keep_recent_messages
        return WindowPolicy(
            max_messages=most,
            keep_messages=min(4, most - 1) if keep is None else keep,
            window_tokens=memory.window_tokens,
            keep_tokens=memory.keep_tokens,
        )
    if memory.window_tokens:
        return WindowPolicy(max_messages=0, keep_messages=0,
                            window_tokens=memory.window_tokens, keep_tokens=memory.keep_tokens)
    return WindowPolicy.for_budget(budget.memory_tokens, summary_tokens=budget.summary_tokens)
