"""Answer a question about a long text file with MemAgent.

Uses the endpoint in MEMAGENT_BASE_URL (vLLM, OpenAI, ...) when set, else the embedded SmolLM2 engine.

    python examples/ask_a_file.py contract.txt "Who may terminate the agreement?"
"""

from __future__ import annotations

import sys

from memagent_graph import FileDocument, MemAgent, MemAgentConfig
from memagent_graph.integrations import chat_model_from_env, endpoint_from_env


def main(path: str, question: str) -> None:
    if endpoint_from_env():
        model, tokenizer = chat_model_from_env(), None  # approximate token counts unless you pass a tokenizer
    else:
        from memagent_graph.integrations.local_engine import embedded_chat_model

        model = embedded_chat_model()
        tokenizer = model.tokenizer()
    agent = MemAgent(model, tokenizer=tokenizer, config=MemAgentConfig(chunk_tokens=2000, memory_tokens=256))
    for item in agent.stream(question, FileDocument(path)):
        if isinstance(item, dict):
            print(f"chunk {item['chunk']}/{item['total']}: memory {item['memory_tokens']} tokens", file=sys.stderr)
        else:
            print(item.answer)


if __name__ == "__main__":
    main(*sys.argv[1:3])
