"""The quote memory policy: sentences chosen by a scorer, kept verbatim, answered by copying one of them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.errors import ConfigError
from memagent_graph.integrations.models.embedded_engine import _line_continuations
from memagent_graph.nodes.quote_memory import QUOTE_FINISH_REASON, quote_update, select_quotes, split_sentences
from memagent_graph.testing import RuleMemoryModel, train_bpe_tokenizer

QUESTION = "What is the access code of the north gate?"
NEEDLE = "The access code of the north gate is 7731."
FILLER = [f"Line {i} tells of rivers, hills and the weather in spring." for i in range(60)]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class WordOverlapScorer:
    """Scores a passage by how many of the question's words it shares (an empty passage scores 0)."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        self.calls.append(list(passages))
        return [float(len(_words(question) & _words(p))) for p in passages]


class QuotingModel(BaseChatModel):
    """A chat model with a word-overlap scorer; its answer is the first line of ``quote_from``."""

    accepts_quote_from: ClassVar[bool] = True
    _scorer: WordOverlapScorer = PrivateAttr(default_factory=WordOverlapScorer)
    _answer_options: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "quoting-test-model"

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        return self._scorer.score_passages(question, passages)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any):
        self._answer_options.append(kwargs)
        text = (kwargs.get("quote_from") or "nothing").splitlines()[0]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe_tokenizer([NEEDLE, QUESTION, *FILLER], vocab_size=600)


def test_sentences_split_at_sentence_ends_and_line_breaks():
    assert split_sentences("One. Two? Three!\nFour\n\n  Five.") == ["One.", "Two?", "Three!", "Four", "Five."]


def test_overlong_sentence_is_cut_at_spaces_into_bounded_pieces():
    pieces = split_sentences(" ".join(["word"] * 300), max_chars=50)
    assert all(len(piece) <= 50 for piece in pieces)
    assert " ".join(pieces) == " ".join(["word"] * 300)


def test_selection_keeps_sentences_beating_the_empty_passage_best_first(tokenizer):
    candidates = ["Rivers and hills.", "The north gate is old.", NEEDLE]
    kept = select_quotes(QUESTION, candidates, WordOverlapScorer(), count=tokenizer.count, budget=100, min_gain=2)
    assert kept == [NEEDLE, "The north gate is old."]


def test_selection_stops_at_the_memory_budget(tokenizer):
    candidates = [NEEDLE, "The north gate is old."]
    budget = tokenizer.count(NEEDLE)
    kept = select_quotes(QUESTION, candidates, WordOverlapScorer(), count=tokenizer.count, budget=budget, min_gain=1)
    assert kept == [NEEDLE]


def test_selection_scores_each_candidate_once_and_the_empty_passage(tokenizer):
    scorer = WordOverlapScorer()
    select_quotes(QUESTION, [NEEDLE, NEEDLE, "Hills."], scorer, count=tokenizer.count, budget=100, min_gain=1)
    assert scorer.calls == [[NEEDLE, "Hills.", ""]]


def test_update_keeps_previous_notes_as_candidates_and_reports_a_quote_step(tokenizer):
    completion = quote_update(
        WordOverlapScorer(),
        question=QUESTION,
        previous=NEEDLE,
        section=" ".join(FILLER[:5]),
        tokenizer=tokenizer,
        budget=64,
        min_gain=3,
    )
    assert completion.text == NEEDLE
    assert completion.finish_reason == QUOTE_FINISH_REASON and completion.completion_tokens == 0
    assert completion.prompt_tokens > tokenizer.count(NEEDLE)


def test_quote_policy_reads_a_document_into_verbatim_notes_and_answers_from_them(tokenizer):
    document = " ".join(FILLER[:25] + [NEEDLE] + FILLER[25:])
    model = QuotingModel()
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="quote", quote_min_gain=3)
    result = MemAgent(model, config=config, tokenizer=tokenizer).invoke(QUESTION, TextDocument(document))
    assert result.num_chunks > 3
    assert result.memory == NEEDLE
    assert result.answer == NEEDLE
    assert model._answer_options[-1]["quote_from"] == NEEDLE
    assert {step["finish_reason"] for step in result.steps[:-1]} == {QUOTE_FINISH_REASON}


def test_quote_policy_needs_a_model_that_scores_passages(tokenizer):
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="quote")
    with pytest.raises(ConfigError, match="score_passages"):
        MemAgent(RuleMemoryModel(), config=config, tokenizer=tokenizer)


def test_lockstep_refuses_the_quote_policy(tokenizer):
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="quote")
    agent = MemAgent(QuotingModel(), config=config, tokenizer=tokenizer)
    with pytest.raises(ConfigError, match="lockstep"):
        agent.ask_many([QUESTION, "Where?"], TextDocument(" ".join(FILLER)))


def test_line_copier_allows_only_whole_lines_then_eos():
    lines, eos = [[5, 6, 7], [5, 8]], frozenset({0})
    assert _line_continuations(lines, [], eos) == {5}
    assert _line_continuations(lines, [5], eos) == {6, 8}
    assert _line_continuations(lines, [5, 8], eos) == {0}
    assert _line_continuations(lines, [5, 6, 7], eos) == {0}


async def test_async_stream_reports_every_chunk_and_ends_like_invoke(tokenizer):
    document = TextDocument(" ".join(FILLER[:25] + [NEEDLE] + FILLER[25:]))
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="quote", quote_min_gain=3)
    agent = MemAgent(QuotingModel(), config=config, tokenizer=tokenizer)
    items = [item async for item in agent.astream(QUESTION, document)]
    events, result = items[:-1], items[-1]
    assert [event["chunk"] for event in events] == list(range(1, result.num_chunks + 1))
    assert result.memory == NEEDLE and result.answer == agent.invoke(QUESTION, document).answer
