"""Final-answer extraction: the last ``\\boxed{...}`` (nested braces allowed), else the trimmed reply."""

from __future__ import annotations

from typing import Literal

from memagent_graph.documents.sanitize import encodable

_BOX_OPENERS = ("\\boxed{", "\\fbox{")


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text`` with balanced braces, or None."""
    start = max(text.rfind(opener) for opener in _BOX_OPENERS)
    while start >= 0:
        opener = next(o for o in _BOX_OPENERS if text.startswith(o, start))
        begin = start + len(opener)
        depth = 1
        for index in range(begin, len(text)):
            if text[index] == "{":
                depth += 1
            elif text[index] == "}":
                depth -= 1
                if depth == 0:
                    return text[begin:index].strip()
        start = max(text.rfind(o, 0, start) for o in _BOX_OPENERS)  # unbalanced: try an earlier box
    return None


def extract_answer(reply: str) -> tuple[str, Literal["boxed", "reply"]]:
    """(answer, where it came from): the last boxed content, or the whole reply trimmed when nothing is boxed.
    Lone surrogates (undecodable bytes) become U+FFFD, so the answer is always encodable."""
    reply = encodable(reply)
    boxed = last_boxed(reply)
    if boxed is not None:
        return boxed, "boxed"
    return reply.rsplit("</think>", 1)[-1].strip(), "reply"
