import pytest

from memagent_graph.nodes import extract_answer, last_boxed


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("The answer is \\boxed{Paris}.", "Paris"),
        ("\\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{ spaced }", "spaced"),
        ("\\fbox{42}", "42"),
        ("\\boxed{good} and \\boxed{unbalanced", "good"),
    ],
)
def test_last_boxed_content(reply, expected):
    assert last_boxed(reply) == expected


def test_no_box_gives_none():
    assert last_boxed("just text {with braces}") is None


def test_boxed_answer_is_marked_boxed():
    assert extract_answer("so \\boxed{amber-1234}") == ("amber-1234", "boxed")


def test_unboxed_reply_falls_back_to_trimmed_reply():
    assert extract_answer("  It is Paris.  \n") == ("It is Paris.", "reply")


def test_reasoning_before_think_end_is_dropped_in_the_fallback():
    assert extract_answer("<think>hmm</think> Paris") == ("Paris", "reply")
