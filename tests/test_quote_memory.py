"""The quote memory policy: sentences chosen by a scorer (after a BM25 first stage), their second hops, kept
verbatim, answered with the phrase asked for or by copying one of them."""

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
from memagent_graph.integrations.models.embedded_engine import _line_continuations, start_ids
from memagent_graph.nodes.quote.answer import answer_span, asks_for_several, quote_answerer
from memagent_graph.nodes.quote.memory import QUOTE_FINISH_REASON, complete_last_sentence, quote_update, split_sentences
from memagent_graph.nodes.quote.prefilter import prefilter
from memagent_graph.nodes.quote.scoring import GainCache, ScoreTally, bridge_terms
from memagent_graph.nodes.quote.selection import QuoteSettings, fit_budget, rank_quotes, second_hops
from memagent_graph.testing import RuleMemoryModel, train_bpe_tokenizer

QUESTION = "What is the access code of the north gate?"
NEEDLE = "The access code of the north gate is 7731."
FILLER = [f"Line {i} tells of rivers, hills and the weather in spring." for i in range(60)]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class WordOverlapScorer:
    """log p(question | passage) as minus the question's words the passage lacks: a passage gains one nat per
    question word it shares, and a question's surprise is its number of words."""

    def __init__(self, nats_per_word: float = 1.0) -> None:
        self.calls: list[list[str]] = []
        self.nats_per_word = nats_per_word

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        self.calls.append(list(passages))
        return [-self.nats_per_word * len(_words(question) - _words(p)) for p in passages]


def _settings(min_gain: float = 2, *, hop_min_share: float = 2.0, prefilter: int = 0) -> QuoteSettings:
    return QuoteSettings(min_gain=min_gain, hop_min_share=hop_min_share, prefilter=prefilter)


def _rank(question: str, candidates: list[str], scorer: WordOverlapScorer, **settings: Any) -> list[str]:
    cache = GainCache(scorer)
    return rank_quotes(question, candidates, cache, settings=_settings(**settings), tally=ScoreTally(len)).kept


def _span_answer(question: str, memory: str) -> str:
    """The span answer to ``question`` from ``memory``'s notes, scored by word overlap (10 nats a word)."""
    cache = GainCache(WordOverlapScorer(nats_per_word=10))
    return quote_answerer(cache, settings=_settings(), mode="span", count=len)(question, memory, {}).text


class QuotingModel(BaseChatModel):
    """A chat model with a word-overlap scorer; its answer is the first line of ``quote_from``."""

    accepts_quote_from: ClassVar[bool] = True
    _scorer: WordOverlapScorer = PrivateAttr(default_factory=lambda: WordOverlapScorer(nats_per_word=10))
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


def test_a_sentence_cut_by_the_chunk_boundary_is_completed_from_the_next_chunk():
    assert complete_last_sentence("Rain. The code is 77", "31. Hills.") == "Rain. The code is 7731."
    assert complete_last_sentence("Rain. The code is", " 7731. Hills.") == "Rain. The code is 7731."
    assert complete_last_sentence("Rain. Snow.", "Hills. More.") == "Rain. Snow."
    assert complete_last_sentence("a table row", "\nnext row") == "a table row"


def test_sentences_split_at_sentence_ends_and_line_breaks():
    assert split_sentences("One. Two? Three!\nFour\n\n  Five.") == ["One.", "Two?", "Three!", "Four", "Five."]


def test_overlong_sentence_is_cut_at_spaces_into_bounded_pieces():
    pieces = split_sentences(" ".join(["word"] * 300), max_chars=50)
    assert all(len(piece) <= 50 for piece in pieces)
    assert " ".join(pieces) == " ".join(["word"] * 300)


def test_selection_keeps_sentences_beating_the_empty_passage_best_first():
    candidates = ["Rivers and hills.", "The north gate is old.", NEEDLE]
    assert _rank(QUESTION, candidates, WordOverlapScorer(), min_gain=2) == [NEEDLE, "The north gate is old."]


def test_selection_keeps_the_best_sentence_alone_when_none_beats_the_empty_passage_by_enough():
    candidates = ["Rivers and hills.", "The north gate is old.", NEEDLE]
    assert _rank(QUESTION, candidates, WordOverlapScorer(), min_gain=1000) == [NEEDLE]


def test_selection_stops_at_the_memory_budget(tokenizer):
    ranked = [NEEDLE, "The north gate is old."]
    assert fit_budget(ranked, count=tokenizer.count, budget=tokenizer.count(NEEDLE)) == [NEEDLE]


def test_selection_scores_each_candidate_once_and_the_empty_passage():
    scorer = WordOverlapScorer()
    _rank(QUESTION, [NEEDLE, NEEDLE, "Hills."], scorer, min_gain=1)
    assert scorer.calls == [["", NEEDLE, "Hills."]]


def test_cached_scores_are_not_asked_again():
    scorer = WordOverlapScorer()
    cache, tally = GainCache(scorer), ScoreTally(len)
    first = cache.gains(QUESTION, [NEEDLE, "Hills."], tally)
    assert cache.gains(QUESTION, ["Hills.", NEEDLE], tally) == first[::-1]
    assert scorer.calls == [["", NEEDLE, "Hills."]] and tally.passages == 3


def test_cache_forgets_the_least_recently_used_pairs_past_its_bound():
    scorer = WordOverlapScorer()
    cache = GainCache(scorer, max_entries=3)
    cache.gains(QUESTION, ["a.", "b."])
    cache.gains(QUESTION, ["c."])  # the empty passage is used again: "a." is now the least recently used
    cache.gains(QUESTION, ["b.", "a."])
    assert scorer.calls[-1] == ["a."]


LINK = "Ilvara Tesk's mentor is Dovan Maruk."
PLACE = "Dovan Maruk was born in Quelmarsh."
HOP_QUESTION = "In which town was Ilvara Tesk's mentor born?"


def test_bridge_terms_are_the_names_a_line_adds_to_the_question():
    assert bridge_terms(LINK, HOP_QUESTION) == "Dovan Maruk"
    assert bridge_terms("The gate is old.", QUESTION) == ""


def test_second_hop_is_kept_after_the_line_it_continues():
    candidates = ["Odra Vel was born in Tarwick.", PLACE, LINK, "Rivers and hills."]
    ranked = _rank(HOP_QUESTION, candidates, WordOverlapScorer(), min_gain=3, hop_min_share=0.5)
    assert ranked[:2] == [LINK, PLACE]


def test_second_hops_need_their_share_of_the_bridge():
    cache, tally = GainCache(WordOverlapScorer()), ScoreTally(len)
    half = "Dovan Pell was born in Quelmarsh."  # shares one of the bridge's two names
    assert second_hops(HOP_QUESTION, LINK, [half, PLACE], cache, min_share=0.75, tally=tally) == [PLACE]
    assert second_hops(HOP_QUESTION, LINK, [half, PLACE], cache, min_share=0.5, tally=tally) == [PLACE, half]
    assert second_hops(HOP_QUESTION, LINK, [half, PLACE], cache, min_share=1.5, tally=tally) == []


def test_prefilter_passes_the_sentences_bm25_ranks_best_in_document_order():
    sentences = [*FILLER[:10], NEEDLE, *FILLER[10:20], "The north gate is old."]
    assert prefilter(QUESTION, sentences, keep=2) == [NEEDLE, "The north gate is old."]


def test_prefilter_never_passes_a_sentence_sharing_no_word_with_the_query():
    assert prefilter("north gate code", ["Rivers.", "Hills.", "The north gate."], keep=2) == ["The north gate."]


def test_prefilter_of_no_sentences_passes_none():
    assert prefilter("north gate code", [], keep=2) == []


def test_prefilter_passes_nothing_for_a_word_most_sentences_hold():
    sentences = [f"The river {i} is wide." for i in range(20)] + ["The north gate code is 7731."]
    assert prefilter("What is the code of the river?", sentences, keep=5) == ["The north gate code is 7731."]


def test_span_answer_is_the_value_the_question_does_not_mention():
    line = "An important fact: the access code of the north gate equals 7731."
    assert answer_span(line, QUESTION) == "7731"


def test_span_answer_skips_the_first_hops_names_and_keeps_a_whole_name():
    assert answer_span(PLACE, HOP_QUESTION, known="Dovan Maruk") == "Quelmarsh"
    assert answer_span("The prize went to Odra Vel in spring.", "Who won the prize?") == "Odra Vel"


def test_notes_that_tie_with_the_best_all_answer_and_a_weaker_one_does_not():
    memory = "The north gate code is 7731.\nThe north gate code is 4410.\nThe south door code is 9999."
    assert _span_answer("What are the codes of the north gate?", memory) == "7731, 4410"


def test_span_answer_is_the_line_when_it_has_no_name_or_value():
    assert answer_span("it rained all day.", "What was the weather?") == "it rained all day."
    assert answer_span("And the days went by.", "How long did Adam live?") == "And the days went by."


def test_a_word_that_only_opens_sentences_is_not_a_name():
    line = "And Enoch walked with God."
    assert answer_span(line, "Who walked?") == "Enoch"


def test_an_opening_word_the_memory_writes_inside_a_sentence_is_a_name():
    assert answer_span("Dovan sailed home.", "Who sailed home?", context="The mentor is Dovan.") == "Dovan"
    assert answer_span("Dovan sailed home.", "Who sailed home?") == "Dovan sailed home."


def test_a_number_in_words_is_a_value():
    line = "And all the days of Methuselah were nine hundred sixty and nine years."
    assert answer_span(line, "How old was Methuselah when he died?") == "nine hundred sixty and nine"


def test_a_who_question_takes_a_name_before_a_value():
    line = "In 1890 the prize went to Odra Vel."
    assert answer_span(line, "Who won the prize?") == "Odra Vel"
    assert answer_span(line, "When was the prize given?") == "1890"


def test_questions_asking_for_several_things_are_told_from_those_asking_for_one():
    assert asks_for_several("What are all the special magic numbers for x mentioned in the provided text?")
    assert asks_for_several("Find all variables that are assigned the value 5 in the text.")
    assert asks_for_several("Which access numbers belong to adaptable-conservation?")
    assert asks_for_several("Find every chosen number of daily-independence.")
    assert not asks_for_several("How many years did Adam live in all?")
    assert not asks_for_several("What is the code of the north gate?")
    assert not asks_for_several("What did Moses call his first son?")


def test_a_value_that_opens_a_sentence_is_still_the_span():
    assert answer_span("1416270 is the hidden number of aromatic-debris.", "What is the hidden number?") == "1416270"
    assert answer_span("aromatic-debris -> lucky number: 3962132.", "What is the lucky number?") == "3962132"


def test_a_question_asking_for_one_thing_gets_only_the_best_note():
    memory = "The north gate code is 7731.\nThe north gate code is 4410."
    assert _span_answer("What is the north gate code?", memory) == "7731"


def test_update_keeps_previous_notes_as_candidates_and_reports_a_quote_step(tokenizer):
    completion = quote_update(
        GainCache(WordOverlapScorer()),
        question=QUESTION,
        previous=NEEDLE,
        section=" ".join(FILLER[:5]),
        tokenizer=tokenizer,
        budget=64,
        settings=_settings(3),
    )
    assert completion.text == NEEDLE
    assert completion.finish_reason == QUOTE_FINISH_REASON and completion.completion_tokens == 0
    assert completion.prompt_tokens > tokenizer.count(NEEDLE)


def test_update_scores_only_the_sentences_the_first_stage_passes(tokenizer):
    scorer = WordOverlapScorer()
    quote_update(
        GainCache(scorer),
        question=QUESTION,
        previous="",
        section=" ".join([*FILLER[:20], NEEDLE]),
        tokenizer=tokenizer,
        budget=64,
        settings=_settings(3, prefilter=4),
    )
    assert len(scorer.calls[0]) <= 5 and NEEDLE in scorer.calls[0]


def _read(document: str, question: str, **settings: Any) -> tuple[Any, QuotingModel]:
    model = QuotingModel()
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="quote", quote_min_gain=30, **settings)
    return MemAgent(model, config=config, tokenizer=tokenizer_for(document)).invoke(
        question, TextDocument(document)
    ), model


def tokenizer_for(document: str) -> Any:
    return train_bpe_tokenizer([document, QUESTION, HOP_QUESTION], vocab_size=600)


def test_quote_policy_reads_a_document_into_verbatim_notes_and_answers_with_the_value():
    result, model = _read(" ".join(FILLER[:25] + [NEEDLE] + FILLER[25:]), QUESTION)
    assert result.num_chunks > 3
    assert result.memory == NEEDLE
    assert result.answer == "7731" and model._answer_options == []
    assert {step["finish_reason"] for step in result.steps} == {QUOTE_FINISH_REASON}


def test_quote_policy_follows_a_second_hop_chunks_later():
    document = " ".join([*FILLER[:5], LINK, *FILLER[5:45], PLACE, *FILLER[45:]])
    result, _ = _read(document, HOP_QUESTION, quote_hop_min_share=0.5)
    assert result.memory.splitlines()[:2] == [LINK, PLACE]
    assert result.answer == "Quelmarsh"


def test_copy_mode_lets_the_model_copy_a_line_of_the_memory():
    result, model = _read(" ".join(FILLER[:25] + [NEEDLE] + FILLER[25:]), QUESTION, quote_answer="copy")
    assert result.answer == NEEDLE
    assert model._answer_options[-1]["quote_from"] == NEEDLE


class ExtractingModel(QuotingModel):
    """A `QuotingModel` that also scores continuations: it likes "1998" after a passage that holds it."""

    _prompts: list[str] = PrivateAttr(default_factory=list)

    def score_continuations(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        self._prompts.append(prompt)
        passage = prompt.split("\n", 1)[0]
        return [-1.0 if c == " 1998\n" and "1998" in passage else -9.0 for c in continuations]


def test_extract_mode_answers_with_the_phrase_the_model_scores_best_not_the_rules():
    needle = "The access code of the north gate is 7731, set in 1998."
    model = ExtractingModel()
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="quote", quote_answer="extract")
    document = " ".join([*FILLER[:25], needle, *FILLER[25:]])
    result = MemAgent(model, config=config, tokenizer=tokenizer_for(document)).invoke(QUESTION, TextDocument(document))
    assert result.memory == needle
    assert result.answer == "1998" and model._answer_options == []  # the span rules answer 7731, the first value
    assert [p.split("\n", 1)[0] for p in model._prompts] == [f"Passage: {needle}", "Passage: "]


def test_extract_mode_needs_a_model_that_scores_continuations(tokenizer):
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="quote", quote_answer="extract")
    with pytest.raises(ConfigError, match="score_continuations"):
        MemAgent(QuotingModel(), config=config, tokenizer=tokenizer)


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
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="quote", quote_min_gain=30)
    agent = MemAgent(QuotingModel(), config=config, tokenizer=tokenizer)
    items = [item async for item in agent.astream(QUESTION, document)]
    events, result = items[:-1], items[-1]
    assert [event["chunk"] for event in events] == list(range(1, result.num_chunks + 1))
    assert result.memory == NEEDLE and result.answer == agent.invoke(QUESTION, document).answer


def test_among_several_names_the_span_is_the_one_ranked_most_likely_answer():
    line = "And the king of Egypt spake to the midwives, of which the name of the one was Shiphrah."
    question = "What was the name of the first midwife?"
    assert answer_span(line, question) == "Egypt"
    assert answer_span(line, question, rank=lambda spans: [float(s == "Shiphrah") for s in spans]) == "Shiphrah"


class _MarkingTokenizer:
    """Characters as ids; with special tokens, ``before`` ids open the text and ``after`` ids close it."""

    def __init__(self, before: list[int], after: list[int]) -> None:
        self.before, self.after = before, after

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [ord(c) for c in text]
        return [*self.before, *ids, *self.after] if add_special_tokens else ids


def test_scoring_prompts_open_with_the_tokens_a_tokenizer_puts_before_text_and_nothing_else():
    assert start_ids(_MarkingTokenizer([2], [])) == [2]  # Gemma's <bos>
    assert start_ids(_MarkingTokenizer([], [])) == []  # SmolLM2 adds nothing
    assert start_ids(_MarkingTokenizer([], [1])) == []  # an end-of-text mark is not a start
    assert start_ids(_MarkingTokenizer([2], [1])) == [2]
