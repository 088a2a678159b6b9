"""Shared by the benchmark scripts: the tokenizer, haystack text of a given length, result files."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

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
