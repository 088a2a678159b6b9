"""Verifiable rewards: MemAgent's verifier, QA metrics, RULER string match, the registry."""

from __future__ import annotations

import pytest

from memagent_graph.errors import ConfigError
from memagent_graph.training.rewards import (
    REWARDS,
    exact_match,
    get_reward,
    memagent_verifier,
    register_reward,
    ruler_match_all,
    ruler_match_part,
    substring_match,
    token_f1,
)


def test_verifier_takes_the_last_box_lowercased_without_spaces():
    assert memagent_verifier(r"I think \boxed{Paris}. No: \boxed{ New  York }", ["new york"]) == 1.0


def test_verifier_gives_no_credit_without_a_box_or_for_a_near_miss():
    assert memagent_verifier("The answer is New York", ["New York"]) == 0.0
    assert memagent_verifier(r"\boxed{New York City}", ["New York"]) == 0.0


def test_verifier_ignores_a_box_far_from_the_end():
    assert memagent_verifier(r"\boxed{42}" + " and then a long ramble" * 20, ["42"]) == 0.0


def test_verifier_takes_the_best_of_several_golds_and_strips_math_marks():
    assert memagent_verifier(r"\boxed{\$50\%}", ["10", "$50%"]) == 1.0
    assert memagent_verifier(r"\boxed{\dfrac{1}{2}}", ["\\frac{1}{2}"]) == 1.0


def test_exact_match_normalises_case_punctuation_and_articles():
    assert exact_match("The Eiffel Tower!", ["eiffel tower"]) == 1.0
    assert exact_match("Eiffel", ["eiffel tower"]) == 0.0


def test_substring_match_works_both_ways_but_not_for_an_empty_prediction():
    assert substring_match("It was the Eiffel Tower in Paris", ["Eiffel Tower"]) == 1.0
    assert substring_match("Eiffel", ["Eiffel Tower"]) == 1.0
    assert substring_match("", ["Eiffel Tower"]) == 0.0


def test_token_f1_is_partial_and_exact_for_yes_no():
    assert token_f1("eiffel tower paris", ["eiffel tower"]) == pytest.approx(0.8)
    assert token_f1("yes", ["no"]) == 0.0 and token_f1("yes", ["yes"]) == 1.0


def test_ruler_match_all_is_the_share_found_and_part_is_any():
    assert ruler_match_all("values: 123, 456", ["123", "456", "789"]) == pytest.approx(2 / 3)
    assert ruler_match_part("values: 123", ["999", "123"]) == 1.0


def test_users_register_their_own_reward():
    @register_reward("always_half")
    def half(prediction, golds):
        return 0.5

    try:
        assert get_reward("always_half")("x", ["y"]) == 0.5
    finally:
        del REWARDS["always_half"]


def test_an_unknown_reward_lists_the_known_ones():
    with pytest.raises(ConfigError, match="memagent_verifier"):
        get_reward("nope")
