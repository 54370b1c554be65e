"""The application: settings, the language model, the ``ChatService`` and the command line.

- ``cli`` and ``plugins``: the ``gistbot`` command; the platforms it starts are found by
  name through the ``gistbot.platforms`` entry points, so nothing here imports ``adapters/``.
- ``app``: ``Runtime``, store → memory → LLM → service from ``Settings``.
- ``service`` and ``messages``: what happens on a message and on each command, and the
  plain values adapters hand in and get back; ``prompts``: the prompt and its memory fence.
- ``llm``, ``llm_gate``, ``offline_llm``, ``thinking``: the ``LLM`` protocol and
  ``OpenAILLM``, per-endpoint concurrency with replies first, ``OfflineLLM``, and
  stripping reasoning blocks.
- ``settings``, ``errors``, ``logs``: one validated settings object, the error tree,
  secret scrubbing; ``dbtools`` and ``doctor``: ``migrate``/``copy-db`` and ``doctor``.
"""
