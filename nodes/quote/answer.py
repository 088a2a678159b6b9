"""The quote policy's answer: a line of the memory, or the phrase of it that the question asks for.

The answering note is the note that predicts the question best, and when the question asks for several things
the notes that predict it as well (within `TIE_NATS`: the four values of one key tie, a distractor key's needle
does not); each is replaced by its second hop when the memory holds one (`second_hops`): the end of the chain.
In ``extract`` mode each contributes the phrase the model chooses (`quote.extraction`: the candidate span it
scores likeliest as the answer); a question that asks for one thing is answered, on a greedy read, with the best
phrase of the `extraction.NOTES_SCORED` best notes (`extraction.best_phrase`: the verse that names the person
asked about often predicts the question less well than one that repeats its words). In ``span`` mode, a run of
names or values that neither the question nor its first hop mentions (a number, in digits or words, a place, a
name; names first when the question asks who or where; among several of one kind, the one the line makes most
likely as the answer: `span_gains`), the whole line when there is none; several are joined by ", ". In ``line``
mode, the whole lines. Every answer character is the memory's.
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
from typing import NamedTuple

from langchain_core.runnables import RunnableConfig

from memagent_graph.config import QuoteAnswer
from memagent_graph.nodes.model_call import Completion
from memagent_graph.nodes.quote.choice import Draw, choose
from memagent_graph.nodes.quote.extraction import NOTES_SCORED, SpanScorer, SpanScores, best_phrase, score_spans
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


class AnswerLine(NamedTuple):
    """A line to answer from: a note or the second hop it leads to, the first hop it was reached through ("" when
    it is the note itself), and the note's gain."""

    line: str
    first_hop: str
    gain: float


def answer_lines(
    question: str,
    notes: list[str],
    cache: GainCache,
    *,
    settings: QuoteSettings,
    tally: ScoreTally,
    rng: random.Random | None = None,
    alternatives: int = 1,
) -> tuple[list[AnswerLine], Draw]:
    """The answering notes and the draw: the best note (drawn from ``rng`` at ``settings.temperature``); when the
    question `asks_for_several`, the others within `TIE_NATS` of the best gain; else, on a greedy read, the next
    best up to ``alternatives`` notes in all (for `extraction.best_phrase` to choose among). Each is replaced by
    its second hop when the memory holds one."""
    gains = cache.gains(question, notes, tally)
    choice = choose(gains, stop_gain=None, temperature=settings.temperature, rng=rng)
    first = choice.order[0]
    ranked = sorted(range(len(notes)), key=lambda i: -gains[i])
    if asks_for_several(question):
        others = [i for i in ranked if gains[i] >= max(gains) - TIE_NATS]
    else:
        others = ranked[:alternatives] if settings.temperature == 0 else []
    chosen = []
    for index in [first, *(i for i in others if i != first)]:
        hops = second_hops(question, notes[index], notes, cache, min_share=settings.hop_min_share, tally=tally)
        line, first_hop = (hops[0], notes[index]) if hops else (notes[index], "")
        chosen.append(AnswerLine(line, first_hop, gains[index]))
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
        lines: list[AnswerLine] = []
        if notes:
            alternatives = NOTES_SCORED if mode == "extract" else 1
            lines, draw = answer_lines(
                question, notes, cache, settings=settings, tally=tally, rng=rng, alternatives=alternatives
            )
            if on_draw is not None:
                on_draw(draw)
        if mode == "extract" and lines and not asks_for_several(question):
            assert spans is not None
            scored = [_scored(line, question, spans, memory=memory, tally=tally) for line in lines]
            parts = [best_phrase(scored, [line.gain for line in lines])]
        else:
            parts = [_phrase(line, question, mode, cache, spans, memory=memory, tally=tally) for line in lines]
        text = ("\n" if mode == "line" else ", ").join(dict.fromkeys(parts))
        return Completion(
            text=text,
            prompt_tokens=tally.tokens,
            completion_tokens=0,
            latency_s=time.perf_counter() - started,
            finish_reason=ANSWER_FINISH_REASON,
        )

    return answer


def _scored(line: AnswerLine, question: str, spans: SpanScorer, *, memory: str, tally: ScoreTally) -> SpanScores:
    """``line``'s candidate phrases scored by ``spans`` (`score_spans`; the first hop's names count as asked)."""
    return score_spans(line.line, question, spans, known=_known(line, question, memory), context=memory, tally=tally)


def _known(line: AnswerLine, question: str, memory: str) -> str:
    """The names ``line``'s first hop adds to what the question asks ("" for a note answered itself)."""
    return bridge_terms(line.first_hop, question, context=memory) if line.first_hop else ""


def _phrase(
    line: AnswerLine,
    question: str,
    mode: AnswerMode,
    cache: GainCache,
    spans: SpanScorer | None,
    *,
    memory: str,
    tally: ScoreTally,
) -> str:
    """What one answering line answers in ``mode``: itself (``line``), the model's phrase (``extract``) or the
    rules' (``span``)."""
    if mode == "line":
        return line.line
    if mode == "extract":
        assert spans is not None
        return _scored(line, question, spans, memory=memory, tally=tally).best()
    rank = functools.partial(span_gains, cache, question=question, line=line.line, tally=tally)
    return answer_span(line.line, question, known=_known(line, question, memory), context=memory, rank=rank)
