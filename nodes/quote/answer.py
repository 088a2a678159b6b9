"""The quote policy's answer: a line of the memory, or the phrase of it that the question asks for.

The answering note is the note that predicts the question best, and when the question asks for several things
the notes that predict it as well (within `TIE_NATS`: the four values of one key tie, a distractor key's needle
does not); each is replaced by its second hop when the memory holds one (`second_hops`): the end of the chain.
In ``extract`` mode each contributes the phrase the model chooses (`quote.extraction`: the candidate span it
scores likeliest as the answer); in ``span`` mode, a run of names or values that neither the question nor its
first hop mentions (a number, in digits or words, a place, a name; names first when the question asks who or
where; among several of one kind, the one the line makes most likely as the answer: `span_gains`), the whole
line when there is none; several are joined by ", ". In ``line`` mode, the whole lines. Every answer character
is the memory's.
``copy`` leaves the choice to the model: its reply must copy one whole line (`LocalChatModel`'s
``quote_from``). At a temperature the answering note is drawn from the notes' gains (`quote.choice`), and a
caller may receive the draw (``on_draw``: the trainer's recorder).
"""

from __future__ import annotations

import functools
import random
import re
import time
from collections.abc import Callable

from langchain_core.runnables import RunnableConfig

from memagent_graph.config import QuoteAnswer
from memagent_graph.nodes.model_call import Completion
from memagent_graph.nodes.quote.choice import Draw, choose
from memagent_graph.nodes.quote.extraction import SpanScorer, score_spans
from memagent_graph.nodes.quote.phrases import phrase_runs
from memagent_graph.nodes.quote.scoring import GainCache, ScoreTally, bridge_terms
from memagent_graph.nodes.quote.selection import QuoteSettings, second_hops

AnswerMode = QuoteAnswer
Answer = Callable[[str, str, RunnableConfig], Completion]
"""``answer(question, memory, run)``: the final answer, reported like a model call."""
ANSWER_FINISH_REASON = "quote"
TIE_NATS = 5.0
"""Notes within this many nats of the best note's gain answer too. Set on training-split tasks (SmolLM2-135M):
the four needles of one key were within 0.5 nats of each other, a distractor key's needle 22 or more below."""
_SEVERAL = re.compile(
    r"\b(?i:are|were|every)\b|\b(?i:all)\b(?=\s+\w)"
    r"|\b(?i:which|what)\s+(?:\w+\s+){0,2}?(?!(?:is|was|has|does|this|his|its)\b)[a-z]\w*[^su\W]s\b"
)
"""A plural verb, "every", "all" before more words, or a lowercase plural noun soon after which/what."""
_ASKS_NAME = re.compile(r"\b(?:who|whom|whose|where)\b", re.IGNORECASE)


def answer_lines(
    question: str,
    notes: list[str],
    cache: GainCache,
    *,
    settings: QuoteSettings,
    tally: ScoreTally,
    rng: random.Random | None = None,
) -> tuple[list[tuple[str, str]], Draw]:
    """Each answering note as (the line to answer from, the first hop it was reached through or "" when it is the
    note itself): the best note (drawn from ``rng`` at ``settings.temperature``), and when the question
    `asks_for_several` the others within `TIE_NATS` of the best gain; and the draw."""
    gains = cache.gains(question, notes, tally)
    choice = choose(gains, stop_gain=None, temperature=settings.temperature, rng=rng)
    first = choice.order[0]
    ties = [i for i in sorted(range(len(notes)), key=lambda i: -gains[i]) if gains[i] >= max(gains) - TIE_NATS]
    chosen = []
    for index in [first, *(i for i in ties if i != first)] if asks_for_several(question) else [first]:
        hops = second_hops(question, notes[index], notes, cache, min_share=settings.hop_min_share, tally=tally)
        chosen.append((hops[0], notes[index]) if hops else (notes[index], ""))
    return chosen, Draw(question, tuple(notes), choice, None, settings.temperature)


def asks_for_several(question: str) -> bool:
    """Whether ``question`` asks for more than one thing: "What are all the values of…", "Find every number…",
    "Which access numbers belong to…", "Who were…" (`_SEVERAL`; "How many years did he live in all?" and
    "What did Moses call his son?" ask for one)."""
    return _SEVERAL.search(question) is not None


def answer_span(
    line: str,
    question: str,
    *,
    known: str = "",
    context: str = "",
    rank: Callable[[list[str]], list[float]] | None = None,
) -> str:
    """The phrase of ``line`` the question asks for: a run of names or values (`phrase_runs`, ``context`` the
    rest of the memory) that ``question`` and ``known`` do not mention. Values come first unless the question
    asks who, whom, whose or where (names first); among several of that kind, the one ``rank`` scores highest
    (the first without it); ``line`` itself when it has no such run."""
    names, values = phrase_runs(line, asked=f"{question} {known}", context=context)
    kinds = (names, values) if _ASKS_NAME.search(question) else (values, names)
    spans = [line[start:end] for start, end in next((kind for kind in kinds if kind), [])]
    if not spans:
        return line
    if rank is None or len(spans) == 1:
        return spans[0]
    scores = rank(spans)
    return spans[max(range(len(spans)), key=lambda i: scores[i])]


def span_gains(cache: GainCache, spans: list[str], *, question: str, line: str, tally: ScoreTally) -> list[float]:
    """How much ``line`` makes each span likely as the answer to ``question`` beyond the span's own prior:
    the gain of ``line`` for "question span" (the question's own gain is the same for every span, so this
    ranks spans by their pointwise mutual information with the line, given the question)."""
    return [cache.gains(f"{question} {span}", [line], tally)[0] for span in spans]


def quote_answerer(
    cache: GainCache,
    *,
    settings: QuoteSettings,
    mode: AnswerMode,
    count: Callable[[str], int],
    rng: random.Random | None = None,
    on_draw: Callable[[Draw], None] | None = None,
    spans: SpanScorer | None = None,
) -> Answer:
    """The answer function of a quote read in ``extract``, ``span`` or ``line`` mode (``copy`` is the model's
    call); ``spans`` scores the candidate spans in ``extract`` mode; ``count`` tokenizes what it scores for the
    usage report; ``rng`` draws at ``settings.temperature``, and ``on_draw`` receives each draw."""
    if mode == "extract" and spans is None:
        raise ValueError("the extract answer needs a span scorer")

    def answer(question: str, memory: str, run: RunnableConfig) -> Completion:
        started = time.perf_counter()
        notes = [line for line in memory.splitlines() if line.strip()]
        tally = ScoreTally(count)
        lines: list[tuple[str, str]] = []
        if notes:
            lines, draw = answer_lines(question, notes, cache, settings=settings, tally=tally, rng=rng)
            if on_draw is not None:
                on_draw(draw)
        parts = []
        for line, first_hop in lines:
            known = bridge_terms(first_hop, question, context=memory) if first_hop else ""
            if mode == "line":
                parts.append(line)
                continue
            if mode == "extract":
                assert spans is not None
                parts.append(score_spans(line, question, spans, known=known, context=memory, tally=tally).best())
                continue
            rank = functools.partial(span_gains, cache, question=question, line=line, tally=tally)
            parts.append(answer_span(line, question, known=known, context=memory, rank=rank))
        text = ("\n" if mode == "line" else ", ").join(dict.fromkeys(parts))
        return Completion(
            text=text,
            prompt_tokens=tally.tokens,
            completion_tokens=0,
            latency_s=time.perf_counter() - started,
            finish_reason=ANSWER_FINISH_REASON,
        )

    return answer
