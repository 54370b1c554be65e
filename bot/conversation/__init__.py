"""The conversation feature: ``ChatService``, the thin pipeline a message goes through,
the one ``ReplyFlow`` and the outbox, the sweep that answers owed replies late, the prompt,
the budget, summaries' model route and the per-person rate limit.
"""
