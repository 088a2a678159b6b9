"""The "Evidence" block `memagent ask` and `memagent demo` print: each citation as ``file:line`` with the text
it points at, and the memory spans found nowhere in the document."""

from __future__ import annotations

from memagent_graph.agent import MemAgent
from memagent_graph.state import MemAgentResult

QUOTE_CHARS = 120


def evidence_lines(agent: MemAgent, result: MemAgentResult) -> list[str]:
    """The block's lines (none when there is nothing to show); the document must still be registered."""
    lines = []
    if result.citations:
        lines.append("Evidence:")
        for source in result.citations:
            text, _ = agent.passage(source)
            quote = " ".join(text.split())
            quote = quote if len(quote) <= QUOTE_CHARS else quote[: QUOTE_CHARS - 3] + "..."
            lines.append(f'  {source["source"] or source["doc_id"]}:{source["line"]}: "{quote}"')
    elif result.answer:
        lines.append("Evidence: none (the memory that holds the answer was not found in the document)")
    if result.unsupported:
        lines.append("Unsupported memory (found nowhere in what was read):")
        lines.extend(f"  - {span}" for span in result.unsupported)
    return lines
