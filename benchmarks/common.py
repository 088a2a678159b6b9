"""Shared by the benchmark scripts: the tokenizer, haystack text of a given length, a reading config, result
files."""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.haystack import haystack_paragraphs
from memagent_graph.documents.tokenization import Tokenizer

RESULTS = Path(__file__).parent / "results"


def benchmark_tokenizer() -> Tokenizer:
    """SmolLM2's real tokenizer when the embedded engine is installed, else a BPE trained on the haystack."""
    try:
        from memagent_graph.integrations.models.embedded_chat import embedded_tokenizer

        return embedded_tokenizer()
    except ImportError:
        from memagent_graph.testing import train_bpe_tokenizer

        return train_bpe_tokenizer(haystack_paragraphs(), vocab_size=16_384, name="haystack-bpe-16k")


_SIMULATED_SERVER = """
import sys, time
sys.path.insert(0, {benchmarks!r})
from common import benchmark_tokenizer
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer
with SimulatedOpenAIServer(tokenizer=benchmark_tokenizer(), delay_s={delay}, max_concurrency={slots}) as server:
    print(server.base_url, flush=True)
    time.sleep(1e9)
"""


@contextlib.contextmanager
def simulated_server_process(*, delay_s: float, slots: int | None = None) -> Iterator[str]:
    """The base URL of the simulated OpenAI-compatible server running in its own process (as a model server
    does: its work does not share the client's interpreter), ``delay_s`` per call, ``slots`` calls at once."""
    code = _SIMULATED_SERVER.format(benchmarks=str(Path(__file__).parent), delay=delay_s, slots=slots)
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as server:
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            if not url:
                raise SystemExit(f"the simulated server did not start (exit code {server.wait()})")
            yield url
        finally:
            server.kill()


def greedy_config(args: argparse.Namespace, **options: Any) -> MemAgentConfig:
    """Greedy reads at the script's ``--chunk-tokens`` and ``--memory-tokens`` with a 16-token answer (for the
    benchmarks that time the reading, not the answer), and ``options``."""
    return MemAgentConfig(
        chunk_tokens=args.chunk_tokens, memory_tokens=args.memory_tokens, answer_tokens=16, temperature=0.0, **options
    )


def haystack_text(tokens: int, tokenizer: Tokenizer) -> str:
    """Repeated haystack paragraphs, cut to about ``tokens`` tokens (density measured on a sample)."""
    one_pass = "\n\n".join(haystack_paragraphs())
    sample = one_pass[:400_000]
    chars = int(tokens * len(sample) / tokenizer.count(sample))
    return "\n\n".join([one_pass] * (chars // len(one_pass) + 1))[:chars]


def save(name: str, payload: dict[str, Any]) -> Path:
    """Write ``results/<name>.json`` with the machine and date."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "machine": f"{platform.processor() or platform.machine()}, {_cores()} cores",
        "date": time.strftime("%Y-%m-%d"),
        **payload,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))
