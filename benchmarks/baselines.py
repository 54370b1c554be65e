"""The memories gistbot is compared with, behind one small interface.

* ``FullHistory`` sends every message so far (``window=None``) or only the last ``window``
  messages (the fixed last-25 window), after the same system prompt gistbot uses.
* ``LangChainBuffer`` is LangChain's ``ConversationSummaryBufferMemory`` (langchain-classic)
  with a ``ChatOpenAI`` on the same endpoint, used the way a chain uses it: read the memory,
  call the model with system prompt + memory + the new message, then ``asave_context``,
  which prunes and summarizes *before the call returns*. Messages the bot only observes go
  into its chat history (LangChain prunes only on save). ``max_token_limit`` counts the
  buffered messages but not LangChain's own summary, so we give it the budget minus the
  summary's size.

All of them speak to the server through real clients (the ``openai`` SDK via ``OpenAILLM``,
or ``langchain-openai``), and each uses its own model name so the fake server can tell
their requests apart.
"""

from __future__ import annotations

import warnings
from typing import Any, Protocol

from pydantic import SecretStr

from benchmarks.conversation import Row
from bot.llm.client import OpenAILLM
from memory.completion import ChatMessage

__all__ = ["BenchMemory", "FullHistory", "LangChainBuffer", "user_content"]


class BenchMemory(Protocol):
    """What the benchmark drives: observe a message, reply to one, say what is remembered."""

    name: str
    model: str

    async def ready(self) -> None:
        """Wait until the next message may arrive (channel pace); not part of a reply."""

    async def observe(self, row: Row) -> None:
        """A message the bot sees but does not answer."""

    async def reply(self, row: Row) -> str:
        """A message that mentions the bot; returns the answer."""

    async def remembered(self) -> str:
        """Everything this memory could put in a future prompt, as text."""

    async def aclose(self) -> None:
        """Release clients."""


def user_content(row: Row) -> str:
    """How a human message appears in a prompt (gistbot's format: speaker in brackets)."""
    return f"[{row.author}]: {row.text}"


class FullHistory:
    """Every message (``window=None``) or the newest ``window`` messages, verbatim."""

    def __init__(self, *, name: str, model: str, base_url: str, system_prompt: str,
                 reply_tokens: int, window: int | None = None, api_key: str | None = None
                 ) -> None:
        self.name, self.model, self.window = name, model, window
        self.system_prompt, self.reply_tokens = system_prompt, reply_tokens
        self.llm = OpenAILLM(api_key=api_key, base_url=base_url, model=model, max_retries=0)
        self.history: list[ChatMessage] = []

    async def ready(self) -> None:
        """No background work to wait for."""

    async def observe(self, row: Row) -> None:
        """Append the message."""
        self.history.append({"role": "user", "content": user_content(row)})

    async def reply(self, row: Row) -> str:
        """Send system prompt + history (or its tail) and append the answer."""
        await self.observe(row)
        tail = self.history if self.window is None else self.history[-self.window:]
        messages: list[ChatMessage] = [{"role": "system", "content": self.system_prompt}, *tail]
        answer = await self.llm.complete(messages, max_tokens=self.reply_tokens, purpose="reply")
        self.history.append({"role": "assistant", "content": answer.text})
        return answer.text

    async def remembered(self) -> str:
        """The messages a next prompt would include."""
        tail = self.history if self.window is None else self.history[-self.window:]
        return "\n".join(m["content"] for m in tail)

    async def aclose(self) -> None:
        """Close the HTTP pool."""
        await self.llm.aclose()


class LangChainBuffer:
    """LangChain's ``ConversationSummaryBufferMemory``; see the module docstring."""

    def __init__(self, *, name: str, model: str, base_url: str, system_prompt: str,
                 reply_tokens: int, max_token_limit: int, api_key: str | None = None,
                 tiktoken_model_name: str | None = "gpt-4o") -> None:
        from langchain_classic.memory import ConversationSummaryBufferMemory
        from langchain_core._api import LangChainDeprecationWarning
        from langchain_openai import ChatOpenAI

        # The class (and the LLMChain it uses) is deprecated but still widely used. Importing
        # langchain re-enables its warnings, so the filter goes in after the imports.
        warnings.filterwarnings("ignore", category=LangChainDeprecationWarning)
        options: dict[str, Any] = dict(model=model, base_url=base_url,
                                       api_key=SecretStr(api_key or "bench"),
                                       max_tokens=reply_tokens, max_retries=0,
                                       tiktoken_model_name=tiktoken_model_name)
        self.chat = ChatOpenAI(**options)
        self.memory = ConversationSummaryBufferMemory(
            llm=self.chat, max_token_limit=max_token_limit, return_messages=True
        )
        self.name, self.model, self.system_prompt = name, model, system_prompt

    async def ready(self) -> None:
        """No background work: LangChain summarizes inside ``reply``."""

    async def observe(self, row: Row) -> None:
        """Add to the chat history (no pruning: LangChain prunes on save only)."""
        from langchain_core.messages import HumanMessage

        await self.memory.chat_memory.aadd_messages([HumanMessage(content=user_content(row))])

    async def reply(self, row: Row) -> str:
        """Load memory, call the model, save the exchange (which prunes and summarizes)."""
        from langchain_core.messages import HumanMessage, SystemMessage

        loaded: dict[str, Any] = await self.memory.aload_memory_variables({})
        question = user_content(row)
        messages = [SystemMessage(content=self.system_prompt), *loaded["history"],
                    HumanMessage(content=question)]
        answer = await self.chat.ainvoke(messages)
        text = str(answer.content)
        await self.memory.asave_context({"input": question}, {"output": text})
        return text

    async def remembered(self) -> str:
        """The moving summary plus the buffered messages."""
        buffered = [str(m.content) for m in self.memory.chat_memory.messages]
        return "\n".join([self.memory.moving_summary_buffer, *buffered])

    async def aclose(self) -> None:
        """Close the client's HTTP pool."""
        client = getattr(self.chat, "root_async_client", None)
        if client is not None:
            await client.close()
