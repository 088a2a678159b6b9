import os

import pytest

from memagent_graph import PromptSet
from memagent_graph.errors import ConfigError, PromptTemplateError


def test_default_update_prompt_orders_question_memory_section():
    text = PromptSet().render_update(question="Q?", memory="M", section="S")
    assert text.index("Q?") < text.index("M") < text.index("S")


def test_empty_memory_renders_as_no_previous_notes():
    assert "No previous notes." in PromptSet().render_update(question="q", memory="", section="s")


def test_answer_prompt_asks_for_a_boxed_answer_and_has_no_section():
    text = PromptSet().render_answer(question="q", memory="m")
    assert "\\boxed{}" in text and "<section>" not in text


def test_braces_in_values_are_not_substituted_again():
    text = PromptSet().render_update(question="{memory}", memory="mem", section="{question} {x}")
    assert "{memory}" in text and "{question} {x}" in text


def test_custom_templates_from_strings_keep_literal_braces():
    prompts = PromptSet(update="{question}|{memory}|{section}", answer="{question} {memory} \\boxed{}")
    assert prompts.render_update(question="a", memory="b", section="c") == "a|b|c"
    assert prompts.render_answer(question="a", memory="b") == "a b \\boxed{}"


def test_custom_templates_from_files(tmp_path):
    path = tmp_path / "answer.txt"
    path.write_text("Answer {question} from {memory}", encoding="utf-8")
    prompts = PromptSet.from_files(answer=path)
    assert prompts.render_answer(question="q", memory="m") == "Answer q from m"
    assert prompts.update == PromptSet().update


def test_missing_placeholder_is_named():
    with pytest.raises(PromptTemplateError, match=r"update template: missing \{section\}"):
        PromptSet(update="{question} {memory}")


def test_unknown_placeholder_is_named():
    with pytest.raises(PromptTemplateError, match=r"answer template: unknown \{context\}"):
        PromptSet(answer="{question} {memory} {context}")


def test_section_first_layout_shares_the_section_as_a_common_prefix():
    prompts = PromptSet.section_first()
    first = prompts.render_update(question="Q1?", memory="notes one", section="THE SECTION TEXT")
    second = prompts.render_update(question="Q2?", memory="other notes", section="THE SECTION TEXT")
    shared = len(os.path.commonprefix([first, second]))
    assert first.index("THE SECTION TEXT") + len("THE SECTION TEXT") < shared


def test_default_layout_puts_per_question_text_before_the_section():
    prompts = PromptSet()
    first = prompts.render_update(question="Q1?", memory="m", section="THE SECTION TEXT")
    second = prompts.render_update(question="Q2?", memory="m", section="THE SECTION TEXT")
    assert len(os.path.commonprefix([first, second])) < first.index("THE SECTION TEXT")


def test_the_verbatim_set_asks_for_word_for_word_quotes_one_per_line():
    prompt = PromptSet.named("verbatim").render_update(question="Q?", memory="m", section="S.")
    assert "word for word" in prompt and "one per line" in prompt
    assert PromptSet.named("verbatim").answer == PromptSet().answer


def test_an_unknown_prompt_set_names_the_known_ones():
    with pytest.raises(ConfigError, match="default, section-first, verbatim"):
        PromptSet.named("fancy")
