"""Scenario 6: long-conversation recall at equal token budgets (issue 13).

A seeded generator (``generate``) writes LoCoMo-like multi-session conversations between
two people with planted facts and paraphrased questions; ``methods`` builds the prompt each
memory would send for a question (last-N window, last 4 turns + BM25 over the raw turns,
full history), ``gistbot_side`` replays the conversation through gistbot's real runtime and
captures the prompt a reply would send; ``score`` measures evidence-in-prompt and
answer-in-prompt per method, budget and question kind. ``python -m benchmarks.longmem``
runs it alone; ``python -m benchmarks --scenarios 6`` adds it to the results.
"""
