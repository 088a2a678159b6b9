"""The fair retrieval baselines: sentences ranked by BM25, MiniLM or both fused, kept to the reader's memory
budget, answered by the reader's own answer step, citing what they kept."""

from __future__ import annotations

from memagent_graph import MemAgentConfig
from memagent_graph.training.eval.sentence_baselines import (
    bm25_ranking,
    document_sentences,
    memory_answerer,
    reciprocal_rank_fusion,
    sentence_reader,
)

DOCUMENT = "Adam knew Eve his wife.  And she bare Cain.\nThe special magic number is 7391.\nAnd Cain went out."


def test_each_sentence_is_found_at_its_place_in_the_document():
    sentences = document_sentences(DOCUMENT)
    assert [s.text for s in sentences] == [
        "Adam knew Eve his wife.", "And she bare Cain.", "The special magic number is 7391.", "And Cain went out."
    ]  # fmt: skip
    assert all(DOCUMENT[s.start : s.end] == s.text for s in sentences)


def test_fusion_ranks_by_the_sum_of_reciprocal_ranks():
    # 0: 1/61 + 1/62, 1: 1/62 + 1/63, 2: 1/63 + 1/61
    assert reciprocal_rank_fusion([[0, 1, 2], [2, 0, 1]]) == [0, 2, 1]


def test_bm25_puts_the_sentence_with_the_questions_rare_words_first():
    sentences = [s.text for s in document_sentences(DOCUMENT)]
    assert bm25_ranking("What is the special magic number?", sentences)[0] == 2


def test_the_reader_keeps_what_fits_the_memory_budget_in_document_order_and_cites_it(tokenizer):
    memories = []

    def answer(question: str, memory: str) -> str:
        memories.append(memory)
        return "7391"

    def ranking(question, sentences):
        return [3, 2, 0, 1]  # the last sentence first

    budget = tokenizer.count("And Cain went out.") + 1 + tokenizer.count("The special magic number is 7391.")
    reading = sentence_reader(answer, tokenizer, ranking=ranking, memory_tokens=budget)("Q?", DOCUMENT)
    assert memories == ["The special magic number is 7391.\nAnd Cain went out."]
    assert [DOCUMENT[a:b] for a, b in reading.cited] == ["The special magic number is 7391.", "And Cain went out."]
    assert reading.reply == "7391"


def test_the_answer_step_is_the_graphs_answer_node(model, tokenizer):
    answer = memory_answerer(model, tokenizer, MemAgentConfig())
    assert answer("What is the special magic number?", "The special magic number is 7391.") == "\\boxed{7391}"
