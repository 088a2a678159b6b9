"""What a memory policy is: the function, chosen when the graph is built, that turns each question's
(question, previous memory, chunk) into its next memory. `update_memory` runs it as read -> policy -> budget ->
trace; `policy_registry` names the policies (``MemAgentConfig.memory_policy``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.nodes.model_call import CallOptions, Completion


@dataclass(frozen=True)
class MemoryRequest:
    """One question's memory update: its question, its memory so far, the chunk's text (sanitised), and the
    beginning of the next chunk (sanitised; "" after the last), for a policy that keeps whole sentences."""

    question: str
    memory: str
    section: str
    following: str = ""


Write = Callable[[Sequence[MemoryRequest], CallOptions, RunnableConfig], list[Completion]]
"""Each request's new memory (before the budget), reported like a model call; ``CallOptions.max_tokens`` is the
memory budget of this run."""
AsyncWrite = Callable[[Sequence[MemoryRequest], CallOptions, RunnableConfig], Awaitable[list[Completion]]]


@dataclass(frozen=True)
class MemoryPolicy:
    """A memory policy as the graph runs it.

    ``write`` makes the new memories; ``awrite`` does the same without blocking the event loop (None: ``write``
    runs in a worker thread). ``answer``: the policy answers from the memory itself, with no answer call
    (``answer(question, memory, run)``); ``quotes_answer``: the answer call must copy one line of the memory
    (``quote_from``);
    ``lockstep``: it can update many questions' memories over one chunk; ``uses_update_prompt``: it sends the
    update prompt (the read checks then make sure the prompt fits in a chunk).
    """

    write: Write
    awrite: AsyncWrite | None = None
    answer: Callable[[str, str, RunnableConfig], Completion] | None = None
    quotes_answer: bool = False
    lockstep: bool = True
    uses_update_prompt: bool = True


PolicyFactory = Callable[[BaseChatModel, Tokenizer, MemAgentConfig], MemoryPolicy]
"""Builds a policy for one graph from its chat model, tokenizer and config (``register_memory_policy``)."""
