"""The quote policy's answer: a line of the memory, or the phrase of it that the question asks for.

The answering notes are the note that predicts the question best and any that predict it as well (within
`TIE_NATS`: the four values of one key tie, a distractor key's needle does not); each is replaced by its second
hop when the memory holds one (`second_hops`): the end of the chain. In ``span`` mode each contributes the
first run of names and values that neither the question nor its first hop mentions (a number, a place, a name),
numbers first, the whole line when there is none, joined by ", "; in ``line`` mode, the whole lines. Every
answer character is the memory's. ``copy`` leaves the choice to the model: its reply must copy one whole line
(`LocalChatModel`'s ``quote_from``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Literal

from memagent_graph.nodes.model_call import Completion
from memagent_graph.nodes.quote_scoring import GainCache, ScoreTally, bridge_terms, is_name_or_value, words
from memagent_graph.nodes.quote_selection import QuoteSettings, second_hops

AnswerMode = Literal["span", "line", "copy"]
Answer = Callable[[str, str], Completion]
"""``answer(question, memory)``: the final answer, reported like a model call."""
ANSWER_FINISH_REASON = "quote"
TIE_NATS = 5.0
"""Notes within this many nats of the best note's gain answer too. Set on training-split tasks (SmolLM2-135M):
the four needles of one key were within 0.5 nats of each other, a distractor key's needle 22 or more below."""
_WORD = re.compile(r"[\w'’-]+")


def answer_lines(
    question: str, notes: list[str], cache: GainCache, *, settings: QuoteSettings, tally: ScoreTally
) -> list[tuple[str, str]]:
    """Each answering note (best first, ties within `TIE_NATS`) as (the line to answer from, the first hop it
    was reached through or "" when it is the note itself)."""
    gains = cache.gains(question, notes, tally)
    best = max(gains)
    chosen = []
    for note, gain in sorted(zip(notes, gains, strict=True), key=lambda pair: -pair[1]):
        if gain < best - TIE_NATS:
            break
        hops = second_hops(question, note, notes, cache, min_share=settings.hop_min_share, tally=tally)
        chosen.append((hops[0], note) if hops else (note, ""))
    return chosen


def answer_span(line: str, question: str, *, known: str = "") -> str:
    """The phrase of ``line`` the question asks for: its first run of names and values (`is_name_or_value`)
    that ``question`` and ``known`` do not mention, runs with a digit first; ``line`` itself when it has none
    but a capitalised first word (which alone says nothing of a name)."""
    mentioned = {w.lower() for w in words(f"{question} {known}")}
    runs: list[tuple[int, int]] = []
    previous_end = None
    for match in _WORD.finditer(line):
        word = match.group().strip("'’-")
        if not word or not is_name_or_value(word) or word.lower() in mentioned:
            previous_end = None
            continue
        start = match.start() + match.group().index(word)
        end = start + len(word)
        if previous_end is not None and line[previous_end:start].strip() == "":
            runs[-1] = (runs[-1][0], end)
        else:
            runs.append((start, end))
        previous_end = end
    with_digit = [r for r in runs if any(c.isdigit() for c in line[r[0] : r[1]])]
    names = [r for r in runs if line[: r[0]].strip() or " " in line[r[0] : r[1]]]  # not one opening word
    if not (with_digit or names):
        return line
    start, end = (with_digit or names)[0]
    return line[start:end]


def quote_answerer(
    cache: GainCache, *, settings: QuoteSettings, mode: AnswerMode, count: Callable[[str], int]
) -> Answer:
    """The answer function of a quote read in ``span`` or ``line`` mode (``copy`` is the model's call); ``count``
    tokenizes what it scores for the usage report."""

    def answer(question: str, memory: str) -> Completion:
        started = time.perf_counter()
        notes = [line for line in memory.splitlines() if line.strip()]
        tally = ScoreTally(count)
        parts = []
        for line, first_hop in answer_lines(question, notes, cache, settings=settings, tally=tally) if notes else []:
            known = bridge_terms(first_hop, question) if first_hop else ""
            parts.append(answer_span(line, question, known=known) if mode == "span" else line)
        text = (", " if mode == "span" else "\n").join(dict.fromkeys(parts))
        return Completion(
            text=text,
            prompt_tokens=tally.tokens,
            completion_tokens=0,
            latency_s=time.perf_counter() - started,
            finish_reason=ANSWER_FINISH_REASON,
        )

    return answer
