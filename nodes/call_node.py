"""`call_node`: a graph node whose body is blocking work, one model call, blocking work, written once for both
of LangGraph's ways to run a node.

A node of this graph prepares its call (the document's chunk, prompts: tokenizer work, which may be a server's
/tokenize), calls the model or the memory policy, and finishes (budget, provenance, progress: tokenizer work
again). The steps are plain functions; this module runs them: in a sync graph run, all in the calling thread
(LangGraph's worker thread, with no event loop); in an async run, the call awaited on the event loop and the
blocking steps in worker threads. A shared core with two thin shells rather than an async core run from sync:
a sync run must not need an event loop, and most of a step is CPU or blocking work either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig

from memagent_graph.nodes.graph_node import GraphNode

Prepared = TypeVar("Prepared")
Reply = TypeVar("Reply")


def call_node(
    name: str,
    *,
    prepare: Callable[[Mapping[str, Any]], Prepared],
    call: Callable[[Prepared, RunnableConfig], Reply],
    acall: Callable[[Prepared, RunnableConfig], Awaitable[Reply]] | None,
    finish: Callable[[Mapping[str, Any], Prepared, Reply], dict[str, Any]],
) -> GraphNode:
    """The node ``finish(state, p, call(p, config))`` with ``p = prepare(state)``; in async runs ``acall`` is
    awaited and the other steps run in worker threads (``call`` too, when ``acall`` is None: CPU-bound work)."""

    def run(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        prepared = prepare(state)
        return finish(state, prepared, call(prepared, config))

    async def arun(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        prepared = await asyncio.to_thread(prepare, state)
        if acall is None:
            reply = await asyncio.to_thread(call, prepared, config)
        else:
            reply = await acall(prepared, config)
        return await asyncio.to_thread(finish, state, prepared, reply)

    return GraphNode(run, arun, name=name)
