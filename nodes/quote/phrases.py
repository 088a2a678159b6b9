"""The phrases a note can answer with: runs of names and of values (numbers in digits or English words) that
the question does not already give. Both span answers start here: the rules of ``span`` pick one by kind,
the model of ``extract`` scores them all."""

from __future__ import annotations

import re

from memagent_graph.nodes.quote.scoring import names_and_values, words

Span = tuple[int, int]
"""(start, end) character offsets in a line."""
_NUMBER_WORD = (
    r"(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen"
    r"|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand"
    r"|million|billion|\w*score)"
)
_NUMBER_PHRASE = re.compile(rf"\b{_NUMBER_WORD}(?:(?:\s+|\s+and\s+|-){_NUMBER_WORD})*\b", re.IGNORECASE)
"""A number in English words ("nine hundred sixty and nine", "threescore and ten"); "one" alone is not."""
_POSSESSIVE = re.compile(r"['’]s?$")


def bare(word: str) -> str:
    """``word`` lowercased without a possessive ending: "Heber's" is "heber"."""
    return _POSSESSIVE.sub("", word.lower())


def phrase_runs(line: str, *, asked: str, context: str = "") -> tuple[list[Span], list[Span]]:
    """(names, values) of ``line``: runs of adjacent names (`names_and_values`, ``context`` the rest of the
    memory) and the values (runs with a digit, English number phrases), leaving out every word ``asked``
    (the question and what it already knows) mentions; each kind in reading order."""
    mentioned = {bare(w) for w in words(asked)}
    numbers = [m.span() for m in _NUMBER_PHRASE.finditer(line) if m.group().lower() != "one"]
    runs: list[Span] = []
    for start, end in names_and_values(line, context=context):
        if bare(line[start:end]) in mentioned or any(a <= start < b for a, b in numbers):
            continue
        if runs and line[runs[-1][1] : start].strip() == "":
            runs[-1] = (runs[-1][0], end)
        else:
            runs.append((start, end))
    values = sorted(numbers + [r for r in runs if any(c.isdigit() for c in line[r[0] : r[1]])])
    return [r for r in runs if r not in values], values
