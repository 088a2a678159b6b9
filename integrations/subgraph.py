"""`memagent_node`: the MemAgent graph as a node of a parent graph that has its own state keys.

The node maps the parent's keys to the MemAgent input, runs ``agent.graph`` as a nested graph and maps the
answer (and optionally the memory) back. It gives the inner run its own recursion limit, sized to the
document, because the parent's would otherwise apply to it, and its own context (`RunSettings`), because the
parent's context would otherwise reach the inner nodes. Progress events appear in the parent's
``stream(..., stream_mode="custom", subgraphs=True)``; a checkpointed parent resumes an interrupted read at
the chunk it stopped at.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.runnables import RunnableConfig, RunnableLambda

from memagent_graph.agent import MemAgent
from memagent_graph.errors import EmptyQuestionError
from memagent_graph.graph import recursion_limit_for
from memagent_graph.state import RunSettings


def memagent_node(
    agent: MemAgent,
    *,
    question_key: str = "question",
    document_key: str = "doc_id",
    answer_key: str = "answer",
    memory_key: str | None = None,
    citations_key: str | None = None,
    settings: RunSettings | None = None,
    name: str = "memagent",
) -> RunnableLambda:
    """A sync + async node: reads the document whose id is in ``state[document_key]`` to answer
    ``state[question_key]``, and writes the answer to ``answer_key`` (the memory to ``memory_key`` and the
    answer's citations, `MemAgentResult.citations`, to ``citations_key`` if given).

    >>> builder.add_node("investigate", memagent_node(agent, question_key="ticket", answer_key="finding"))
    """
    context = settings or RunSettings()

    def prepare(state: dict[str, Any]) -> tuple[dict[str, str], RunnableConfig]:
        question = state[question_key]
        if not question or not question.strip():
            raise EmptyQuestionError(f"state[{question_key!r}] is empty; ask something about the document")
        chunked = agent.chunk(state[document_key])
        return {"question": question, "doc_id": chunked.doc_id}, {
            "recursion_limit": recursion_limit_for(chunked.num_chunks)
        }

    def update(output: dict[str, Any]) -> dict[str, Any]:
        extra = {memory_key: output["memory"], citations_key: output["citations"]}
        return {answer_key: output["answer"]} | {key: value for key, value in extra.items() if key is not None}

    def sync(state: dict[str, Any]) -> dict[str, Any]:
        return update(agent.graph.invoke(*prepare(state), context=context))

    async def async_(state: dict[str, Any]) -> dict[str, Any]:
        graph_input, config = await asyncio.to_thread(prepare, state)
        return update(await agent.graph.ainvoke(graph_input, config, context=context))

    return RunnableLambda(sync, afunc=async_, name=name)
