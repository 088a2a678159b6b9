"""The quote policy's ``extract`` answer: candidate spans of the answering note, scored as the model's
continuations, with every family of spans that share their first words computed as one row."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from memagent_graph.errors import ConfigError
from memagent_graph.integrations.models.query_likelihood import continuation_log_likelihoods
from memagent_graph.nodes.quote.extraction import (
    asked_names,
    asks_quantity,
    candidate_spans,
    require_span_scorer,
    score_spans,
    word_distances,
)
from memagent_graph.nodes.quote.scoring import ScoreTally

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def tiny_lm():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4
    )
    return LlamaForCausalLM(config).eval()


def one_by_one(model, prompt, continuation):
    """log p(continuation | prompt) from one full forward of prompt + continuation."""
    ids = torch.tensor([prompt + continuation])
    with torch.inference_mode():
        logprobs = model(input_ids=ids).logits[0].float().log_softmax(-1)
    return sum(float(logprobs[len(prompt) + i - 1, token]) for i, token in enumerate(continuation))


def test_shared_rows_score_each_continuation_as_alone(tiny_lm):
    prompt = [5, 9, 2, 7]
    continuations = [[3, 11, 40], [3, 11, 12, 40], [3, 40], [8], [3, 11, 12, 13, 40], [21, 22]]
    scores = continuation_log_likelihoods(tiny_lm, prompt, continuations, batch_rows=2)
    expected = [one_by_one(tiny_lm, prompt, c) for c in continuations]
    assert scores == pytest.approx(expected, abs=1e-4)


def test_an_empty_continuation_is_refused(tiny_lm):
    with pytest.raises(ConfigError, match="empty continuation"):
        continuation_log_likelihoods(tiny_lm, [1, 2], [[3], []])


def phrases(line: str, *, asked: str) -> list[str]:
    return [line[start:end] for start, end in candidate_spans(line, asked=asked)]


def test_candidates_are_the_names_and_values_the_question_does_not_give():
    line = "And Elon the Zebulonite died at nine hundred and five years, 42 days, and was buried in Aijalon."
    assert phrases(line, asked="Where was Elon buried?") == [
        "Zebulonite",
        "nine hundred and five",
        "42",
        "Aijalon",
    ]


def test_a_question_that_asks_a_quantity_is_answered_by_a_value_when_the_line_has_one():
    line = "Ahaziah the son of Ahab began to reign over Israel in Samaria, and reigned two years over Israel."
    assert phrases(line, asked="For how long was Ahaziah king?") == ["two"]
    assert phrases("Ahaziah the son of Ahab reigned.", asked="For how long was Ahaziah king?") == ["Ahab"]


def test_a_run_of_names_offers_each_name_too():
    assert phrases("Then came Jael Heber.", asked="Who came?") == ["Jael", "Jael Heber", "Heber"]


def test_a_possessive_repeats_the_name_it_is_made_of():
    assert phrases("Then came Jael Heber's wife.", asked="Who was the wife of Heber?") == ["Jael"]


def test_candidates_also_skip_the_first_hops_names():
    assert phrases("Gilead begat Jephthah.", asked="Who was the grandfather of Abdon? Gilead") == ["Jephthah"]


class ScriptedScorer:
    """Scores from a table: (with the passage, without it) per candidate; records each prompt it was asked."""

    def __init__(self, given, prior):
        self.given, self.prior, self.prompts = given, prior, []

    def score_continuations(self, prompt, continuations):
        self.prompts.append(prompt)
        table = self.prior if prompt.startswith("Passage: \n") else self.given
        return [table[c.strip()] for c in continuations]


LINE = "And Sihon king of the Amorites ruled in Heshbon."
QUESTION = "Where did Sihon rule?"


def test_extract_answers_with_the_phrase_its_passage_makes_likely_beyond_its_prior():
    scorer = ScriptedScorer(given={"Amorites": -2.0, "Heshbon": -3.0}, prior={"Amorites": -1.0, "Heshbon": -8.0})
    assert score_spans(LINE, QUESTION, scorer).best(distance_weight=0) == "Heshbon"  # -2 + 0.25 vs -3 + 2
    assert len(scorer.prompts) == 2 and LINE in scorer.prompts[0] and QUESTION in scorer.prompts[1]


def test_extract_prefers_the_candidate_next_to_the_name_the_question_gives():
    line = "And the children of Dan set up the image: and Jonathan, the son of Gershom, was their priest."
    scorer = ScriptedScorer(given={"Dan": -2.0, "Gershom": -3.0}, prior={"Dan": -4.0, "Gershom": -4.0})
    scores = score_spans(line, "Who was the father of Jonathan?", scorer)
    assert scores.distances == [6, 4]  # words from "Jonathan"
    assert scores.best(distance_weight=0) == "Dan" and scores.best() == "Gershom"


def test_distances_are_zero_when_the_line_names_nothing_the_question_gives():
    line = "Then came Jael Heber."
    assert word_distances(line, candidate_spans(line, asked="Who came?"), asked="Who came?") == [0, 0, 0]


def test_a_phrase_said_twice_is_one_candidate_at_its_first_place():
    line = "Dan went out. Later Dan, the son of Jacob, and Asher came."
    scorer = ScriptedScorer(given={"Dan": -1.0, "Asher": -1.0}, prior={"Dan": -1.0, "Asher": -1.0})
    scores = score_spans(line, "Who was the son of Jacob?", scorer)
    assert scores.spans == ["Dan", "Asher"] and scores.distances == [8, 2]


def test_a_name_that_opens_the_question_is_a_place_to_measure_from():
    line = "Ehud the son of Gera, a Benjamite, came."
    spans = candidate_spans(line, asked="Ehud was the son of whom?")
    assert word_distances(line, spans, asked="Ehud was the son of whom?") == [4, 6]  # Gera, Benjamite


def test_extract_counts_both_prompts_and_every_candidate_as_scored():
    scorer = ScriptedScorer(given={"Amorites": -2.0, "Heshbon": -3.0}, prior={"Amorites": -1.0, "Heshbon": -5.0})
    tally = ScoreTally(lambda text: len(text.split()))
    score_spans(LINE, QUESTION, scorer, tally=tally)
    candidates = len(" Amorites\n".split()) + len(" Heshbon\n".split())
    assert tally.tokens == sum(len(p.split()) for p in scorer.prompts) + 2 * candidates


def test_a_line_of_nothing_but_asked_names_answers_itself():
    scorer = ScriptedScorer(given={}, prior={})
    assert score_spans("Elon.", "Who was Elon?", scorer).best() == "Elon."
    assert scorer.prompts == []


def test_extract_needs_a_model_that_scores_continuations():
    with pytest.raises(ConfigError, match="quote_answer` 'span'"):
        require_span_scorer(object())


def test_asked_names_are_the_line_words_the_question_also_writes_capitalised():
    line = "And Jonathan, the son of Gershom, was their priest."
    assert asked_names(line, asked="Who was the father of Jonathan?") == [1]
    assert asked_names(line, asked="Who was their priest?") == []  # "Who" is a question word, not a name


def test_a_quantity_question_asks_how_many_how_long_how_old_or_which_year():
    assert asks_quantity("How old was Jared when Enoch was born to him?")
    assert asks_quantity("In which year did Ahaz reign?")
    assert not asks_quantity("Who was the father of Jonathan?")
