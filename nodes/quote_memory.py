"""The quote memory policy: the memory is the sentences that make the question most likely, copied verbatim.

At each chunk the candidates are the previous notes and the chunk's sentences. The model scores each by
log p(question | sentence) (query likelihood, as UPR reranks passages: Sachan et al., 2022), and the new
memory is the candidates that beat an empty passage by ``quote_min_gain`` nats, best first, as many as the
memory budget holds. A small model that cannot be trusted to write notes (SmolLM2-135M invents values when
it does) is still good at this judgement, and nothing in its memory is invented: every note is a quote.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.nodes.memory_policy import MemoryPolicy, MemoryRequest
from memagent_graph.nodes.model_call import CallOptions, Completion

QUOTE_FINISH_REASON = "quote"
"""The ``finish_reason`` of a memory update chosen by quote selection."""
MAX_QUOTE_CHARS = 400
"""A longer sentence (code, tables, run-on text) is split at word boundaries into pieces of about this size."""
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")


@runtime_checkable
class PassageScorer(Protocol):
    """A chat model that can say how well each passage predicts a question, and whose calls accept
    ``quote_from`` (the reply must copy one line of it): the embedded engine is one."""

    accepts_quote_from: bool
    """True when the model's calls take ``quote_from``: the text one whole line of which the reply must copy."""

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        """log p(question | passage) for each passage, summed over the question's tokens."""
        ...


def require_scorer(model: object) -> PassageScorer:
    """``model`` as a `PassageScorer`, or a `ConfigError` naming the fix."""
    if not isinstance(model, PassageScorer) or not model.accepts_quote_from:
        raise ConfigError(
            f"`memory_policy` 'quote' needs a model that scores passages (score_passages) and copies a line of "
            f"them (accepts_quote_from), and {type(model).__name__} does not; use the embedded engine, or "
            "`memory_policy` 'generate'"
        )
    return model


def split_sentences(text: str, *, max_chars: int = MAX_QUOTE_CHARS) -> list[str]:
    """The sentences and lines of ``text``, stripped, with over-long ones cut at spaces into ``max_chars`` pieces."""
    sentences: list[str] = []
    for sentence in _SENTENCE_BREAK.split(text):
        piece = ""
        for word in sentence.split():
            if piece and len(piece) + 1 + len(word) > max_chars:
                sentences.append(piece)
                piece = ""
            piece = f"{piece} {word}" if piece else word
        if piece:
            sentences.append(piece)
    return sentences


def select_quotes(
    question: str,
    candidates: Sequence[str],
    scorer: PassageScorer,
    *,
    count: Callable[[str], int],
    budget: int,
    min_gain: float,
) -> list[str]:
    """The candidates that predict ``question`` at least ``min_gain`` nats better than an empty passage, best
    first, while their total (one per line, ``count`` tokens each) fits in ``budget`` tokens; a candidate too big
    to fit is skipped. This is the memory budget of a quote update: the memory never needs cutting."""
    unique = list(dict.fromkeys(candidates))
    *scores, baseline = scorer.score_passages(question, [*unique, ""])
    ranked = sorted(
        (pair for pair in zip(scores, unique, strict=True) if pair[0] - baseline >= min_gain),
        key=lambda pair: -pair[0],
    )
    kept: list[str] = []
    used = 0
    for _, quote in ranked:
        cost = count(quote) + (1 if kept else 0)  # the newline between notes
        if used + cost <= budget:
            kept.append(quote)
            used += cost
    return kept


def quote_update(
    scorer: PassageScorer,
    *,
    question: str,
    previous: str,
    section: str,
    tokenizer: Tokenizer,
    budget: int,
    min_gain: float,
) -> Completion:
    """One memory update by quote selection, reported like a model call (the tokens scored are its prompt).
    Each candidate is tokenized once: its count serves the budget and the usage."""
    started = time.perf_counter()
    candidates = list(
        dict.fromkeys([line for line in previous.splitlines() if line.strip()] + split_sentences(section))
    )
    tokens = {text: tokenizer.count(text) for text in [*candidates, question]}
    kept = select_quotes(question, candidates, scorer, count=tokens.__getitem__, budget=budget, min_gain=min_gain)
    scored = sum(tokens[text] for text in candidates) + (len(candidates) + 1) * tokens[question]
    return Completion(
        text="\n".join(kept),
        prompt_tokens=scored,
        completion_tokens=0,
        latency_s=time.perf_counter() - started,
        finish_reason=QUOTE_FINISH_REASON,
    )


def quote_policy(model: BaseChatModel, tokenizer: Tokenizer, config: MemAgentConfig) -> MemoryPolicy:
    """The ``quote`` policy: each question's memory chosen by `quote_update` (CPU-bound, so it has no async form),
    answered by copying one of its lines; one question per read (no lockstep)."""
    scorer = require_scorer(model)

    def write(requests: Sequence[MemoryRequest], options: CallOptions, run: RunnableConfig) -> list[Completion]:
        return [
            quote_update(
                scorer,
                question=request.question,
                previous=request.memory,
                section=request.section,
                tokenizer=tokenizer,
                budget=options.max_tokens,
                min_gain=config.quote_min_gain,
            )
            for request in requests
        ]

    return MemoryPolicy(write, quotes_answer=True, lockstep=False, uses_update_prompt=False)
