"""A memory policy of your own, registered by name: no change to the graph.

This one keeps, of each chunk, the sentences that share a content word with the question (a cheap lexical
filter: no model call while reading), newest first, within the memory budget; the model still answers.
Uses the endpoint in MEMAGENT_BASE_URL when set, else the embedded SmolLM2 engine.

    python examples/custom_memory_policy.py contract.txt "Who may terminate the agreement?"
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from memagent_graph import FileDocument, MemAgent, MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.integrations.model_choice import choose_model
from memagent_graph.nodes import MemoryPolicy, MemoryRequest, register_memory_policy
from memagent_graph.nodes.model_call import CallOptions, Completion

FUNCTION_WORDS = {"a", "an", "and", "for", "in", "is", "mentioned", "of", "provided", "the", "to", "what", "who"}


def content_words(text: str) -> set[str]:
    """The lower-cased words of ``text`` that carry meaning."""
    return set(re.findall(r"[a-z0-9-]+", text.lower())) - FUNCTION_WORDS


@register_memory_policy("shared-words")
def shared_words(model: BaseChatModel, tokenizer: Tokenizer, config: MemAgentConfig) -> MemoryPolicy:
    """Memory: this chunk's sentences that share a content word with the question, then the previous notes."""

    def write(requests: Sequence[MemoryRequest], options: CallOptions, run: RunnableConfig) -> list[Completion]:
        memories = []
        for request in requests:
            asked = content_words(request.question)
            kept = [s for s in re.split(r"(?<=[.!?])\s+", request.section) if content_words(s) & asked]
            memory = "\n".join([*kept, request.memory]).strip()  # the budget cuts the oldest notes, at the end
            memories.append(Completion(memory, 0, 0, 0.0, "shared-words"))
        return memories

    return MemoryPolicy(write, uses_update_prompt=False)


def main(path: str, question: str) -> None:
    choice = choose_model()
    config = MemAgentConfig(chunk_tokens=2000, memory_tokens=256, memory_policy="shared-words")
    agent = MemAgent(choice.model, tokenizer=choice.tokenizer, config=config)
    print(agent.invoke(question, FileDocument(path)).answer)


if __name__ == "__main__":
    main(*sys.argv[1:3])
