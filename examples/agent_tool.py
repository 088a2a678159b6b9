"""A LangChain agent that reads long files with MemAgent, as a tool, and may only read files in one folder.

Needs an OpenAI-compatible endpoint whose model can call tools (OpenAI, or vLLM started with
``--enable-auto-tool-choice --tool-call-parser hermes``); the same model reads the documents:

    export MEMAGENT_BASE_URL=http://localhost:8000/v1
    python examples/agent_tool.py contracts/ "In lease.txt, who may terminate the agreement?"

Reading progress goes to stderr, the agent's final answer to stdout.
"""

from __future__ import annotations

import os
import sys

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langgraph.graph.state import CompiledStateGraph

from memagent_graph import MemAgent, MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.integrations import chat_model_from_env
from memagent_graph.integrations.tool import create_memagent_tool


def build_agent(
    model: BaseChatModel,
    *,
    folder: str | os.PathLike[str],
    reader: BaseChatModel | None = None,
    tokenizer: Tokenizer | None = None,
) -> CompiledStateGraph:
    """An agent on ``model`` with one tool that reads files under ``folder`` (with ``reader``, else ``model``)."""
    memagent = MemAgent(
        reader or model, tokenizer=tokenizer, config=MemAgentConfig(chunk_tokens=2000, memory_tokens=256)
    )
    tool = create_memagent_tool(memagent, allowed_root=folder)
    return create_agent(
        model,
        tools=[tool],
        system_prompt=f"Answer from the files in the folder; read a file with {tool.name}, naming it by its path.",
    )


def ask(agent: CompiledStateGraph, question: str) -> str:
    """Run ``agent`` on ``question``, report reading progress on stderr, and return its final answer."""
    final = ""
    for mode, data in agent.stream({"messages": [("user", question)]}, stream_mode=["custom", "values"]):
        if mode == "custom":
            print(f"{data['doc_id']}: chunk {data['chunk']}/{data['total']}", file=sys.stderr)
        else:
            final = data["messages"][-1].content
    return final


if __name__ == "__main__":
    folder, question = sys.argv[1:3]
    print(ask(build_agent(chat_model_from_env(), folder=folder), question))
