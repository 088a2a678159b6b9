"""A LangGraph/LangChain program reading through `memagent mcp`: the server's tools as LangChain tools
(langchain-mcp-adapters), the read's progress printed as it arrives, then the answer and where it was read.

    memagent mcp --allowed-root ~/papers --http 8765 &
    python examples/mcp_client.py http://127.0.0.1:8765/mcp report.txt "Who signed the report?"

Hand ``tools`` to any agent (``create_agent(chat_model, tools=tools)``) to let its model choose when to read.
"""

from __future__ import annotations

import asyncio
import sys

from langchain_mcp_adapters.client import MultiServerMCPClient
from mcp.types import CallToolResult


async def main(url: str, document: str, question: str) -> None:
    client = MultiServerMCPClient({"memagent": {"url": url, "transport": "streamable_http"}})
    tools = await client.get_tools()
    print("tools:", ", ".join(tool.name for tool in tools))

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        print(f"  {message}", file=sys.stderr)

    async with client.session("memagent") as session:  # a direct call, for its progress and structured content
        result: CallToolResult = await session.call_tool(
            "read_document", {"question": question, "document": document}, progress_callback=on_progress
        )
    if result.isError:
        sys.exit(f"error: {result.content[0].text}")
    output = result.structuredContent
    print("answer:", output["answer"])
    for citation in output["citations"]:
        print(f"  read at {citation['document']}:{citation['line']} (characters {citation['start']}-{citation['end']})")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python examples/mcp_client.py URL DOCUMENT QUESTION")
    asyncio.run(main(*sys.argv[1:]))
