"""Quote memory on a vLLM server: the served model scores the passages, the memory is the document's own
sentences, and the answer cites where it was read.

    memagent vllm serve &   # or any vLLM server of the model
    python examples/quote_on_vllm.py http://127.0.0.1:8000/v1 contract.txt "Who may terminate the agreement?"
"""

from __future__ import annotations

import sys
from pathlib import Path

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.tokenization import VLLMServerTokenizer
from memagent_graph.integrations import openai_compatible
from memagent_graph.integrations.models.openai_endpoint import served_model


def main(base_url: str, path: str, question: str) -> None:
    """Read ``path`` with quote memory scored by the server at ``base_url``; print the answer and its sources."""
    tokenizer = VLLMServerTokenizer(base_url, served_model(base_url))
    model = openai_compatible(base_url, tokenizer=tokenizer, scores_passages=True)
    config = MemAgentConfig(chunk_tokens=600, memory_tokens=64, answer_tokens=16, memory_policy="quote")
    text = Path(path).read_text(encoding="utf-8")
    result = MemAgent(model, config=config, tokenizer=tokenizer).invoke(question, TextDocument(text))
    print(f"answer: {result.answer}")
    for source in result.citations:
        print(f"cited (line {source['line']}): {text[source['start'] : source['end']]}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
