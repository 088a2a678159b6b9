"""`GraphNode`: a node of the MemAgent graph with a sync and an async body, called by LangGraph as they are."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, ensure_config

NodeBody = Callable[[Mapping[str, Any], RunnableConfig], dict[str, Any]]
AsyncNodeBody = Callable[[Mapping[str, Any], RunnableConfig], Awaitable[dict[str, Any]]]


class GraphNode(Runnable[Mapping[str, Any], dict[str, Any]]):
    """A graph node's sync and async bodies, each taking (state, config).

    Written here rather than using `RunnableLambda` because LangGraph already records every node as a traced
    run: a `RunnableLambda` adds a second, nested run of the same name (its callbacks) and inspects its
    function's signature on every call, once per chunk for nothing. LangGraph's own wrapper for sync+async
    bodies is internal (`langgraph._internal`).
    """

    def __init__(self, body: NodeBody, async_body: AsyncNodeBody, *, name: str) -> None:
        self.body, self.async_body, self.name = body, async_body, name

    def invoke(self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        """Run the sync body."""
        return self.body(input, ensure_config(config))

    async def ainvoke(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Run the async body."""
        return await self.async_body(input, ensure_config(config))
