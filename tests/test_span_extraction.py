"""The quote policy's ``extract`` answer: candidate spans of the answering note, scored as the model's
continuations, with every family of spans that share their first words computed as one row."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from memagent_graph.errors import ConfigError
from memagent_graph.integrations.models.query_likelihood import continuation_log_likelihoods
from memagent_graph.nodes.quote.extraction import candidate_spans, extract_span, require_span_scorer
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


def test_candidates_are_runs_of_up_to_five_words_that_repeat_no_asked_name():
    spans = candidate_spans("Elon died, and was buried in Aijalon.", asked="Where was Elon buried?")
    assert "Aijalon" in spans and "buried in Aijalon" in spans and "died, and was buried in" in spans
    assert not any("Elon" in s.split() for s in spans)
    assert "died, and was buried in Aijalon" not in spans  # six words


def test_a_possessive_repeats_the_name_it_is_made_of():
    spans = candidate_spans("Jael Heber's wife took a nail.", asked="Who was the wife of Heber?")
    assert "Jael" in spans and not any("Heber" in s for s in spans)


def test_candidates_also_skip_the_first_hops_names():
    spans = candidate_spans("Gilead begat Jephthah.", asked="Who was the grandfather of Abdon? Gilead")
    assert spans == ["begat", "begat Jephthah", "Jephthah"]


class LongestFavoured:
    """A scorer that prefers the candidate holding "Aijalon" and records what it was asked."""

    def __init__(self):
        self.asked = []

    def score_continuations(self, prompt, continuations):
        self.asked.append((prompt, list(continuations)))
        return [10.0 if c == " Aijalon\n" else -len(c) for c in continuations]


def test_extract_answers_with_the_span_the_model_scores_best_and_counts_it():
    scorer, tally = LongestFavoured(), ScoreTally(lambda text: len(text.split()))
    line = "And Elon the Zebulonite died, and was buried in Aijalon in the country of Zebulun."
    answer = extract_span(line, "Where was Elon buried?", scorer, tally=tally)
    assert answer == "Aijalon"
    [(prompt, continuations)] = scorer.asked
    assert line in prompt and "Where was Elon buried?" in prompt and prompt.endswith("passage:")
    assert tally.tokens == len(prompt.split()) + sum(len(c.split()) for c in continuations)


def test_a_line_of_nothing_but_asked_names_answers_itself():
    scorer = LongestFavoured()
    assert extract_span("Elon.", "Who was Elon?", scorer) == "Elon."
    assert scorer.asked == []


def test_extract_needs_a_model_that_scores_continuations():
    with pytest.raises(ConfigError, match="quote_answer` 'span'"):
        require_span_scorer(object())
