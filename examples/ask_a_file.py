"""Answer a question about a long text file with MemAgent.

Uses the endpoint in MEMAGENT_BASE_URL (vLLM, OpenAI, ...) when set, else the embedded SmolLM2 engine.

    python examples/ask_a_file.py contract.txt "Who may terminate the agreement?"
"""

from __future__ import annotations

import sys

from memagent_graph import FileDocument, MemAgent, MemAgentConfig
from memagent_graph.integrations.model_choice import choose_model


def main(path: str, question: str) -> None:
    choice = choose_model()  # MEMAGENT_BASE_URL's model if set, else the embedded engine
    agent = MemAgent(
        choice.model, tokenizer=choice.tokenizer, config=MemAgentConfig(chunk_tokens=2000, memory_tokens=256)
    )
    for item in agent.stream(question, FileDocument(path)):
        if isinstance(item, dict):
            print(f"chunk {item['chunk']}/{item['total']}: memory {item['memory_tokens']} tokens", file=sys.stderr)
        else:
            print(item.answer)


if __name__ == "__main__":
    main(*sys.argv[1:3])
