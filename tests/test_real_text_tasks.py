"""Real-text tasks mined from the King James Version: the book split, the counts the issue asks for, answers
unique in each document (re-derived here with the test's own patterns), evidence offsets, disjoint templates."""

from __future__ import annotations

import random
import re

import pytest

from memagent_graph.errors import ConfigError
from memagent_graph.training.data import real_text
from memagent_graph.training.data.real_text import (
    ALLOWED_BOOKS,
    SPLIT_BOOKS,
    TEST_BOOKS,
    TRAIN_BOOKS,
    VALIDATION_BOOKS,
    WORDINGS,
    RealTextTask,
    RealTextTasks,
    check_books,
    parse_number,
    read_verses,
    real_text_tasks,
    split_verses,
)
from memagent_graph.training.data.task_suite import real_text_haystack_task, real_text_task

pytestmark = pytest.mark.integration  # mines three splits, tokenizes them with the real tokenizer: ~15 s

NAME = r"[A-Z][a-z]+(?:-[a-z]+)*"
NUMBER_WORDS = (
    "an and one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand score "
    "threescore fourscore"
).split()
NUMBER = rf"(?:(?i:{'|'.join(NUMBER_WORDS)}),? )+?"  # "an hundred and five " (words, each with its space)
PLACE = rf"(?:the [a-z]+(?: [a-z]+)? of (?:the [a-z]+ of )?)?{NAME}"
LIST = rf"{NAME}(?:(?:,? and |, ){NAME})*"
DIED = "(?:died|slept with his fathers)"
END = r"(?=[,.;:]| and|$)"  # a name that ends a list item, not one a descriptor follows ("Adah the daughter of")
# What the document says about a subject ({s}), in this test's own words: every value a pattern captures must be
# the gold answer. Relations stated across verses (allotment, reign, synchronism, a king's mother) are checked
# at their evidence only.
PATTERNS: dict[str, tuple[str, ...]] = {
    "king": (rf"\b({NAME}),? (?:the )?king of {{s}}\b",),
    "kingdom": (rf"\b{{s}},? (?:the )?king of ((?:the )?(?:children of )?{NAME})",),
    "successor": (
        rf"^(?:And |So )?{{s}}\b[^.;:\n]*? {DIED}.*?[,:;.] [Aa]nd ({NAME})\b[^.;:\n]*? reigned in his stead",
    ),
    "predecessor": (
        rf"^(?:And |So )?({NAME})\b[^.;:\n]*? {DIED}.*?[,:;.] [Aa]nd {{s}}\b[^.;:\n]*? reigned in his stead",
    ),
    "lifespan": (
        rf"all the days (?:of {{s}}|that {{s}} lived) were ({NUMBER})years",
        rf"the years of the life of {{s}},? (?:were )?({NUMBER})years",
    ),
    "begetting_age": (rf"\b{{s}} lived ({NUMBER})years,? and (?:he )?begat",),
    "years_after": (rf"\b{{s}} lived after he begat {NAME} ({NUMBER})years",),
    "dwelt": (rf"\b{{s}} dwel(?:t|led) (?:in|at) ({PLACE})",),
    "buried": (rf"\bburied {{s}}(?: his wife)? (?:in|at) ({PLACE})", rf"\b{{s}} was buried (?:in|at) ({PLACE})"),
    "other_name": (rf"\b{{s}}(?:,|;| \() ?(?:which|who|the same) is ({NAME})",),
    "people": (rf"\b{{s}}(?: the|,? an?) ({NAME}ites?s?)\b",),
    "tribe": (
        rf"tribe of (?:the children of )?({NAME}),? {{s}} the son of",
        rf"^Of ({NAME}); {{s}} the son of",
        rf"\b{{s}} the son of {NAME},? (?:the )?prince of the children of ({NAME})",
    ),
    "camp": (rf"(?:removed|departed|journeyed|went) from {{s}},? and (?:pitched|encamped) (?:in|at|by) ({PLACE})",),
    "prince": (
        rf"\b({NAME}) the son of {NAME},? (?:the )?prince of the children of {{s}}\b",
        rf"captain of the children of {{s}} shall be ({NAME})",
    ),
    "offering_day": (r"[Oo]n the (\w+ day) {s} the son of",),
    "wife": (
        rf"\b({NAME}),? {{s}}'s wife\b",
        rf"\b({NAME}),? the wife of {{s}}\b",
        rf"\b{{s}} and ({NAME}) his wife\b",
    ),
    "husband": (
        rf"\b{{s}},? ({NAME})'s wife\b",
        rf"\b{{s}},? the wife of ({NAME})\b",
        rf"\b({NAME}) and {{s}} his wife\b",
    ),
}
PARENTS = (
    rf"\b{{s}},? the (?:son|daughter) of ({NAME})",
    rf"\b({NAME}) begat (?:{NAME},? (?:and )?)*{{s}}\b",
    rf"\b{{s}},? ({NAME})'s (?:son|daughter|firstborn)\b",
    rf"\b({NAME}),? the father of {{s}}\b",
    rf"\b(?:sons|daughters|children) of ({NAME})[^.;:\n]{{0,30}}[;:] (?:of )?(?:{NAME},? (?:and )?)*{{s}}{END}",
    rf"\b({NAME}),?(?: she)?(?: also)? bare (?:(?:to|unto) {NAME} )?(?:{NAME},? (?:and )?)*{{s}}{END}",
)
WOMEN = (
    rf"\b({NAME}) (?:bare|conceived)\b|\b({NAME}),? (?:the )?(?:daughter|wife) of\b"
    rf"|\b({NAME}),? {NAME}'s (?:wife|handmaid)\b"
)


@pytest.fixture(scope="module")
def tasks(embedded_tokenizer) -> dict[tuple[str, int], RealTextTasks]:
    """The tasks of train, validation and test at 16K tokens and of test at 64K (each document is cut when its
    task is read)."""
    cells = (("train", 16_384), ("validation", 16_384), ("test", 16_384), ("test", 65_536))
    return {
        (split, tokens): real_text_tasks(split, tokens=tokens, tokenizer=embedded_tokenizer) for split, tokens in cells
    }


def test_the_counts_the_issue_asks_for(tasks):
    assert len(tasks["train", 16_384]) >= 3000
    for tokens in (16_384, 65_536):
        test = tasks["test", tokens]
        assert len(test) >= 300
        assert sum(task.hops == 2 for task in test) >= 100
        assert len({(task.question, task.golds[0]) for task in test}) == len(test)  # each question asked once
    assert len(tasks["validation", 16_384]) >= 40


def test_a_book_outside_the_allowed_ones_is_refused_before_the_text_is_opened(monkeypatch):
    # every book not in ALLOWED_BOOKS is reserved; the test names none of them (a name outside the list stands in)
    monkeypatch.setattr(real_text, "_kjv_path", lambda: pytest.fail("the text was opened for a refused book"))
    for outside in (["Not A Book"], ["Genesis", "Not A Book"]):
        with pytest.raises(ConfigError, match="reserved") as refused:
            read_verses(outside)
        assert all(book in str(refused.value) for book in ALLOWED_BOOKS)
    with pytest.raises(ConfigError, match="unknown real-text split"):
        split_verses("dev")  # type: ignore[arg-type]
    assert check_books(["2 Kings", "Genesis"]) == ("Genesis", "2 Kings")


def test_the_split_is_fixed_by_book():
    assert set(TEST_BOOKS) == {"Genesis"}
    assert not set(TRAIN_BOOKS) & set(TEST_BOOKS) and not set(VALIDATION_BOOKS) & (set(TRAIN_BOOKS) | set(TEST_BOOKS))
    assert set(TRAIN_BOOKS) | set(VALIDATION_BOOKS) | set(TEST_BOOKS) == set(ALLOWED_BOOKS)
    for split, books in SPLIT_BOOKS.items():
        assert {verse.book for verse in split_verses(split)} == set(books)  # type: ignore[arg-type]


def test_tasks_come_from_their_split_only(tasks):
    for (split, _), cell in tasks.items():
        for task in cell:
            assert task.split == split
            assert {verse.book for verse in task.evidence_verses} <= set(SPLIT_BOOKS[split])
            assert task.template.split(":")[1].startswith("test" if split == "test" else "train")
    assert not any(verse.book == "Genesis" for task in tasks["train", 16_384] for verse in task.evidence_verses)


def test_documents_are_the_books_own_verses_and_evidence_offsets_slice_them(tasks, embedded_tokenizer):
    for (split, tokens), cell in tasks.items():
        verses = split_verses(split)  # type: ignore[arg-type]
        for index, task in enumerate(_sample(cell, 150)):
            start, end = task.window
            assert task.document.split("\n") == [verse.text for verse in verses[start:end]]
            for verse, text in zip(task.evidence_verses, task.evidence, strict=True):
                assert task.document[verse.start : verse.end] == text
            if index < 3:  # the real tokenizer takes ~0.1 s for 16K tokens
                assert embedded_tokenizer.count(task.document) <= tokens * 1.01
    whole = "\n".join(verse.text for verse in split_verses("test"))
    assert all(task.window == (0, len(split_verses("test"))) for task in tasks["test", 65_536])  # Genesis < 64K
    assert tasks["test", 65_536][0].document == whole


def test_a_haystack_task_holds_the_book_whole_at_a_seeded_depth_of_help_topics(embedded_tokenizer):
    tokens = 200_000
    task = real_text_haystack_task(0, tokens=tokens, tokenizer=embedded_tokenizer, split="eval")
    book = real_text_task(0, tokens=tokens, tokenizer=embedded_tokenizer, split="eval")
    at = task.document.index(book.document)
    assert at > 0 and task.document.count(book.document) == 1 and len(task.document) > len(book.document) + at
    assert task.question == book.question and task.golds == book.golds
    for verse, text in zip(task.evidence_verses, task.evidence, strict=True):
        assert task.document[verse.start : verse.end] == text
    assert 0.97 * tokens <= embedded_tokenizer.count(task.document) <= 1.01 * tokens
    again = real_text_haystack_task(0, tokens=tokens, tokenizer=embedded_tokenizer, split="eval")
    assert again.document == task.document
    assert (
        real_text_haystack_task(1, tokens=tokens, tokenizer=embedded_tokenizer, split="eval").document.index(
            real_text_task(1, tokens=tokens, tokenizer=embedded_tokenizer, split="eval").document
        )
        != at
    )  # each question its own depth


def test_every_answer_is_stated_at_the_evidence_and_unique_in_its_document(tasks):
    cells = [tasks["test", 16_384], _sample(tasks["test", 65_536], 80), _sample(tasks["train", 16_384], 400)]
    cells.append(tasks["validation", 16_384])  # type: ignore[arg-type]
    for task in (task for cell in cells for task in cell):
        evidence = " ".join(task.evidence).lower()
        assert task.entities[0].lower() in evidence and task.golds[0].lower() in evidence, task
        for hop, relation in enumerate(task.relations):
            subject, gold = task.entities[hop], task.entities[hop + 1]
            found = _values(relation, subject, task.document, task.question)
            assert found <= _keys(gold), (task.question, relation, subject, gold, found)


def test_test_templates_are_never_used_in_training(tasks):
    for relation, wording in WORDINGS.items():
        assert wording.train and wording.test, relation
        assert not set(wording.train) & set(wording.test), relation
        assert not set(wording.train_phrases) & set(wording.test_phrases), relation
    train_questions = {task.question for task in tasks["train", 16_384]}
    assert not train_questions & {task.question for task in tasks["test", 16_384]}


def test_the_same_seed_gives_the_same_tasks(tasks, embedded_tokenizer):
    again = real_text_tasks("test", tokens=16_384, tokenizer=embedded_tokenizer)
    assert [(task.question, task.window) for task in again] == [
        (task.question, task.window) for task in tasks["test", 16_384]
    ]
    other = real_text_tasks("test", tokens=16_384, tokenizer=embedded_tokenizer, seed=1, limit=50)
    assert len(other) == 50 and [task.question for task in other] != [task.question for task in again[:50]]


def test_kjv_numbers_are_read():
    assert parse_number("an hundred threescore and fifteen") == 175
    assert parse_number("nine hundred sixty and nine") == 969
    assert parse_number("forty and six thousand and five hundred") == 46_500
    assert parse_number("threescore and ten") == 70
    assert parse_number("the land") is None


def _values(relation: str, subject: str, document: str, question: str) -> set[str]:
    """Every value the document gives ``subject`` for ``relation``, by this test's patterns (as keys); the
    patterns stay within a line, so only the lines that name the subject are searched."""
    s, lines = re.escape(subject), "\n".join(line for line in document.split("\n") if subject in line)
    if relation in ("father", "mother", "parent"):
        found = _captures(PARENTS, s, lines)
        women = {name for names in re.findall(WOMEN, document) for name in names if name}
        return (
            found - _keys(*women) if relation == "father" else found & _keys(*women) if relation == "mother" else found
        )
    if relation == "child":
        return _children(s, lines)
    if relation == "age":
        event = re.escape(question.rsplit(" when ", 1)[1].rstrip("?"))
        return _captures(
            (
                rf"\b{{s}} was ({NUMBER})years old,? when {event}",
                rf"(?:^|[.:;] )({NUMBER})years old was {{s}} when {event}",
            ),
            s,
            lines,
        )
    return _captures(PATTERNS.get(relation, ()), s, lines)


def _children(s: str, document: str) -> set[str]:
    children = _captures(
        (
            rf"(?<!of )\b({NAME}),? the (?:son|daughter) of {{s}}\b(?!'s)",
            rf"\b({NAME}),? {{s}}'s (?:son|daughter|firstborn)\b",
        ),
        s,
        document,
    )
    for pattern in (
        rf"\b{s} begat ({LIST})",
        rf"\b(?:sons|daughters|children) of {s}\b[^.;:\n]{{0,30}}[;:] ({LIST})",
        rf"\b{s} bare ({LIST})",
    ):
        children |= {
            key
            for found in re.findall(pattern, document, flags=re.MULTILINE)
            for key in _keys(*re.findall(NAME, found))
        }
    return children


def _captures(patterns: tuple[str, ...], s: str, document: str) -> set[str]:
    return {
        key
        for pattern in patterns
        for found in re.findall(pattern.replace("{s}", s), document, flags=re.MULTILINE)
        for key in _keys(found)
    }


def _keys(*values: str) -> set[str]:
    """Values compared as the reader would give them: lower case, no leading article, numbers as numbers."""
    keys = set()
    for value in values:
        words = value.strip().lower().removeprefix("the ")
        number = parse_number(words.removesuffix(" years").removesuffix(" months").removesuffix(" year"))
        keys.add(str(number) if number else words)
    return keys


def _sample(cell: RealTextTasks, count: int) -> list[RealTextTask]:
    """``count`` tasks of ``cell`` drawn at random (all of them where it has fewer)."""
    return [cell[index] for index in random.Random(0).sample(range(len(cell)), min(count, len(cell)))]
