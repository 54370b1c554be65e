"""The LLM gateway: the ``LLM`` protocol and ``OpenAILLM`` (``client``), per-endpoint concurrency
with replies first (``gate``), request fields (``params``), several endpoints picked by model
(``providers``), ``OfflineLLM`` and stripping reasoning blocks.
"""
