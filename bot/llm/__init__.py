"""The LLM gateway: the ``LLM`` protocol and ``OpenAILLM`` (``client``), per-endpoint concurrency
with replies first (``gate``), ``OfflineLLM`` and stripping reasoning blocks.
"""
