"""Scenario 7: recall on dialogue as hard as real conversation.

A seeded generator (``generate``, word lists in ``words``) writes four-person group chats
over many dated sessions: nicknames and pronouns, questions in other words than their
answers, multi-hop chains across sessions, relative dates, inference, long turns and small
talk. ``scenario`` scores gistbot (``traced``: the real runtime, its recall candidates
seen) against BM25 over the raw turns at the same tokens, by kind of question, and places
every missing evidence turn (never a candidate, passed over, cut).
``python -m benchmarks.dialogue`` runs it alone; ``python -m benchmarks --scenarios 7``
adds it to the results.
"""
