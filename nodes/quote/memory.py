"""The quote memory policy: the memory is the sentences that make the question most likely, copied verbatim.

At each chunk the candidates are the previous notes and the chunk's sentences (those a BM25 first stage passes,
`quote_prefilter`). The model scores each by log p(question | sentence) (query likelihood, as UPR reranks
passages: Sachan et al., 2022); the new memory is the best candidate, then its *second hops* (candidates that
predict the names and values the best one adds to the question: "Dovan Maruk was born in Milltown" after
"Ilvara Tesk's mentor is Dovan Maruk"), then the other candidates that beat an empty passage by
``quote_min_gain`` nats, as many as the memory budget holds. A small model that cannot be trusted to write
notes (SmolLM2-135M invents values when it does) is still good at this judgement, and nothing in its memory is
invented: every note is a quote. The answer is taken from the memory the same way (`quote.answer`).

At ``quote_temperature`` > 0 the choices are drawn (`quote.choice`), each from its own generator (`draw_rng`:
seeded from the read's seed, its graph step and what it chooses from); a model that records them
(`ChoiceRecorder`: the trainer's recording policy) is handed each draw with the run's metadata.
"""

from __future__ import annotations

import functools
import random
import re
import time
from collections.abc import Callable, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.nodes.memory_policy import MemoryPolicy, MemoryRequest
from memagent_graph.nodes.model_call import CallOptions, Completion
from memagent_graph.nodes.quote.answer import quote_answerer
from memagent_graph.nodes.quote.choice import Draw
from memagent_graph.nodes.quote.extraction import require_span_scorer
from memagent_graph.nodes.quote.prefilter import prefilter
from memagent_graph.nodes.quote.scoring import ChoiceRecorder, GainCache, ScoreTally, bridge_terms, require_scorer
from memagent_graph.nodes.quote.selection import QuoteSettings, fit_budget, rank_quotes

QUOTE_FINISH_REASON = "quote"
"""The ``finish_reason`` of a memory update chosen by quote selection."""
MAX_QUOTE_CHARS = 400
"""A longer sentence (code, tables, run-on text) is split at word boundaries into pieces of about this size."""
DRAW_SEED = "quote_seed"
"""The run metadata key naming a read's draws (a string or number; a rollout worker gives each read its own, from
its seed and the reads it has begun); a read without it draws as seed 0 does."""
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")


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


def complete_last_sentence(section: str, following: str) -> str:
    """``section`` with the words of ``following`` up to its first sentence end, when ``section`` stops inside a
    sentence (a chunk boundary cuts sentences: "... number 810" | "2555. And ...")."""
    if not following or not section.strip() or section.rstrip()[-1] in ".!?" or section[-1] == "\n":
        return section
    if following.lstrip(" \t")[:1] == "\n":
        return section
    head = _SENTENCE_BREAK.split(following, maxsplit=1)[0]
    return section + head


def quote_candidates(question: str, previous: str, section: str, *, following: str, prefilter_keep: int) -> list[str]:
    """What a quote update chooses from: the previous notes, then the chunk's sentences (the last one completed
    from ``following`` when the chunk ends inside it) that the first stage passes (``prefilter_keep`` of them;
    0: all)."""
    notes = [line for line in previous.splitlines() if line.strip()]
    sentences = [
        s for s in dict.fromkeys(split_sentences(complete_last_sentence(section, following))) if s not in notes
    ]
    if prefilter_keep:
        query = f"{question} {bridge_terms(notes[0], question, context=previous)}" if notes else question
        sentences = prefilter(query, sentences, keep=prefilter_keep)
    return [*notes, *sentences]


def draw_rng(run: RunnableConfig, *inputs: str) -> random.Random:
    """The generator of one draw of a read: seeded from the read's `DRAW_SEED`, the graph step and the draw's
    ``inputs`` (what it chooses from), so a read draws the same again (a rerun, a resumed run) whatever other
    reads do meanwhile in other threads, and its draws differ from step to step and segment to segment."""
    metadata = run.get("metadata") or {}
    return random.Random(repr((metadata.get(DRAW_SEED, 0), metadata.get("langgraph_step"), *inputs)))


def quote_update(
    cache: GainCache,
    *,
    question: str,
    previous: str,
    section: str,
    tokenizer: Tokenizer,
    budget: int,
    settings: QuoteSettings,
    following: str = "",
    rng: random.Random | None = None,
    on_draw: Callable[[Draw], None] | None = None,
) -> Completion:
    """One memory update by quote selection, reported like a model call (its prompt tokens are what the model
    scored). The previous notes are always candidates; the chunk's sentences pass the first stage, the last one
    completed from ``following`` (the next chunk's beginning) when the chunk ends inside it. ``rng`` draws at
    ``settings.temperature``; ``on_draw`` receives the draw."""
    started = time.perf_counter()
    candidates = quote_candidates(question, previous, section, following=following, prefilter_keep=settings.prefilter)
    tally = ScoreTally(functools.cache(tokenizer.count))  # each text tokenized once per update
    ranking = rank_quotes(question, candidates, cache, settings=settings, tally=tally, rng=rng)
    if on_draw is not None:
        on_draw(ranking.draw)
    kept = fit_budget(ranking.kept, count=tally.count, budget=budget)
    return Completion(
        text="\n".join(kept),
        prompt_tokens=tally.tokens,
        completion_tokens=0,
        latency_s=time.perf_counter() - started,
        finish_reason=QUOTE_FINISH_REASON,
    )


def quote_policy(model: BaseChatModel, tokenizer: Tokenizer, config: MemAgentConfig) -> MemoryPolicy:
    """The ``quote`` policy: each question's memory chosen by `quote_update` (CPU-bound, so it has no async form),
    answered from its lines (`quote_answer`, or by the model copying one in ``copy`` mode); one question per
    read (no lockstep). Scores are cached for the policy's lifetime, per policy version (`GainCache`); each
    draw has its own generator (`draw_rng`) and goes to a model that records them (`ChoiceRecorder`)."""
    cache = GainCache(require_scorer(model, copies=config.quote_answer == "copy"))
    settings = QuoteSettings.of(config)
    recorder = model if isinstance(model, ChoiceRecorder) else None

    def recording(run: RunnableConfig) -> Callable[[Draw], None] | None:
        if recorder is None:
            return None
        return functools.partial(recorder.record_choice, metadata=dict(run.get("metadata") or {}))

    def write(requests: Sequence[MemoryRequest], options: CallOptions, run: RunnableConfig) -> list[Completion]:
        return [
            quote_update(
                cache,
                question=request.question,
                previous=request.memory,
                section=request.section,
                following=request.following,
                tokenizer=tokenizer,
                budget=options.max_tokens,
                settings=settings.in_run(),
                rng=draw_rng(run, request.question, request.memory, request.section),
                on_draw=recording(run),
            )
            for request in requests
        ]

    if config.quote_answer == "copy":
        return MemoryPolicy(write, quotes_answer=True, lockstep=False, uses_update_prompt=False)
    mode = config.quote_answer
    spans = require_span_scorer(model) if mode == "extract" else None

    def answer(question: str, memory: str, run: RunnableConfig) -> Completion:
        answerer = quote_answerer(
            cache,
            settings=settings.in_run(),
            mode=mode,
            count=tokenizer.count,
            rng=draw_rng(run, question, memory),
            on_draw=recording(run),
            spans=spans,
        )
        return answerer(question, memory, run)

    return MemoryPolicy(write, answer=answer, lockstep=False, uses_update_prompt=False)
