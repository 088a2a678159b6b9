"""The ``generate`` memory policy (MemAgent's): the model reads the update prompt and writes its new notes."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.nodes.memory_policy import MemoryPolicy, MemoryRequest
from memagent_graph.nodes.model_call import CallOptions, Completion, acomplete_all, complete_all


def generate_policy(model: BaseChatModel, tokenizer: Tokenizer, config: MemAgentConfig) -> MemoryPolicy:
    """One update-prompt call per question (one batched call for many), its reply the new memory."""

    def prompts(requests: Sequence[MemoryRequest]) -> list[str]:
        return [config.prompts.render_update(question=r.question, memory=r.memory, section=r.section) for r in requests]

    def write(requests: Sequence[MemoryRequest], options: CallOptions, run: RunnableConfig) -> list[Completion]:
        return complete_all(model, prompts(requests), options, tokenizer=tokenizer, config=run)

    async def awrite(requests: Sequence[MemoryRequest], options: CallOptions, run: RunnableConfig) -> list[Completion]:
        return await acomplete_all(model, prompts(requests), options, tokenizer=tokenizer, config=run)

    return MemoryPolicy(write, awrite)
