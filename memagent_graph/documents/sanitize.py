"""Untrusted text made inert before it enters a prompt: document chunks and the memory a model wrote.

A document (or a memory copied from it) may carry chat-template control tokens (``<|im_start|>``, ``[INST]``,
the tokenizer's own special tokens) or the prompt's own delimiter tags (``</section>``), which would let it
close its section and speak as another role. Each is defanged by swapping its angle/square brackets for
look-alike quotation marks (``‹|im_start|›``): still readable, never the token. Lone surrogates and control
characters other than tab and newlines (invalid UTF-8 a model or server may emit) become U+FFFD.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memagent_graph.prompts import PromptSet

# ChatML / Qwen / SmolLM, Llama 2 and 3, Mistral, Gemma, Phi: generic shapes of chat-template control tokens
_GENERIC_CONTROL = (
    r"<\|[^<>|\s]{1,64}\|>",
    r"</?s>",
    r"\[/?INST\]",
    r"<</?SYS>>",
    r"<(?:start|end)_of_turn>",
)
_TAG = re.compile(r"</?([A-Za-z_][A-Za-z0-9_]*)>")
_INVALID_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_DEFANG = str.maketrans({"<": "\u2039", ">": "\u203a", "[": "\u2039", "]": "\u203a"})


def encodable(text: str) -> str:
    """``text`` with lone surrogates (undecodable bytes a model or server let through) as U+FFFD."""
    return _SURROGATES.sub("\ufffd", text)


@dataclass(frozen=True)
class Cleaned:
    """Text after cleaning, and how many control tokens, delimiter tags or invalid characters were changed."""

    text: str
    changes: int


class Sanitizer:
    """Defangs control tokens and delimiter tags and replaces invalid characters (see the module docstring)."""

    def __init__(self, *, delimiter_tags: Iterable[str] = (), special_tokens: Iterable[str] = ()) -> None:
        tags = sorted({f"</?{re.escape(tag)}>" for tag in delimiter_tags})
        specials = sorted(
            (re.escape(t) for t in special_tokens if t and any(c in t for c in "<>[]")), key=len, reverse=True
        )
        self._pattern = re.compile("|".join([*specials, *_GENERIC_CONTROL, *tags]))

    @classmethod
    def for_reading(cls, prompts: PromptSet, tokenizer: object) -> Sanitizer:
        """A sanitizer for the delimiter tags of ``prompts`` (e.g. ``<section>``) and the special tokens
        ``tokenizer`` declares (its ``special_tokens`` attribute, when it has one)."""
        tags = {
            m.group(1)
            for template in (prompts.update, prompts.answer, prompts.quote_answer)
            for m in _TAG.finditer(template)
        }
        return cls(delimiter_tags=tags, special_tokens=getattr(tokenizer, "special_tokens", ()) or ())

    def clean(self, text: str) -> Cleaned:
        """Return ``text`` with every control token and delimiter tag defanged and invalid characters replaced."""
        text, invalid = _INVALID_CHARS.subn("\ufffd", text)
        text, tokens = self._pattern.subn(lambda m: m.group(0).translate(_DEFANG), text)
        return Cleaned(text, invalid + tokens)
