"""Cost is linear in length: seconds per document token at 32K, 512K and 3.5M tokens (fake model, no latency).

python benchmarks/linear_cost.py [--lengths 32000,512000,3500000]
"""

from __future__ import annotations

import argparse
import time

from common import benchmark_tokenizer, haystack_text, save

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.testing import RuleMemoryModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="32000,512000,3500000")
    args = parser.parse_args()
    tokenizer = benchmark_tokenizer()
    agent = MemAgent(RuleMemoryModel(pad_words=100), config=MemAgentConfig(temperature=0.0), tokenizer=tokenizer)
    rows = []
    for length in (int(x) for x in args.lengths.split(",")):
        document = TextDocument(haystack_text(length, tokenizer))
        started = time.perf_counter()
        chunked = agent.chunk(document)
        chunk_s = time.perf_counter() - started
        started = time.perf_counter()
        result = agent.invoke("What is the special magic number?", document)
        read_s = time.perf_counter() - started
        rows.append(
            {
                "tokens": chunked.num_tokens,
                "chunks": result.num_chunks,
                "chunking_s": round(chunk_s, 2),
                "read_s": round(read_s, 2),
                "us_per_token": round(1e6 * (chunk_s + read_s) / chunked.num_tokens, 3),
                "max_prompt_tokens": max(s["prompt_tokens"] for s in result.steps),
            }
        )
        row = rows[-1]
        print(
            f"{row['tokens']:>10,} tokens  {row['chunks']:4d} chunks  chunk {row['chunking_s']:6.2f} s  "
            f"read {row['read_s']:6.2f} s  {row['us_per_token']:.3f} us/token  "
            f"largest prompt {row['max_prompt_tokens']} tokens"
        )
    print(f"saved {save('linear_cost', {'tokenizer': tokenizer.name, 'rows': rows})}")


if __name__ == "__main__":
    main()
