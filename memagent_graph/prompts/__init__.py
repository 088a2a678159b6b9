"""`PromptSet`: the memory-update and final-answer templates, validated, user-replaceable.

Templates use ``{question}``, ``{memory}`` and (update only) ``{section}``. Only those names are
substituted; every other brace, such as ``\\boxed{}``, is left as written, so templates need no escaping.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memagent_graph.errors import ConfigError, PromptTemplateError

UPDATE_PLACEHOLDERS = frozenset({"question", "memory", "section"})
ANSWER_PLACEHOLDERS = frozenset({"question", "memory"})
NO_MEMORY = "No previous notes."

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _bundled(name: str) -> str:
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def _check(template: str, required: frozenset[str], kind: str) -> str:
    found = set(_PLACEHOLDER.findall(template))
    missing = sorted(required - found)
    unknown = sorted(found - required)
    if missing or unknown:
        parts = []
        if missing:
            parts.append("missing " + ", ".join("{" + m + "}" for m in missing))
        if unknown:
            parts.append("unknown " + ", ".join("{" + u + "}" for u in unknown))
        allowed = ", ".join("{" + r + "}" for r in sorted(required))
        raise ValueError(f"{kind} template: {'; '.join(parts)} (it must use exactly {allowed})")
    return template


def render(template: str, **values: str) -> str:
    """Substitute the named placeholders in one pass (values are never re-scanned for braces)."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


class PromptSet(BaseModel):
    """The two prompts of the method. Build from strings, or from files with `PromptSet.from_files`."""

    model_config = ConfigDict(frozen=True)

    update: str = Field(default_factory=lambda: _bundled("update.txt"))
    answer: str = Field(default_factory=lambda: _bundled("answer.txt"))
    quote_answer: str = Field(default_factory=lambda: _bundled("answer_quote.txt"))
    """The answer prompt of the quote memory policy: notes first, the question last (small models copy the
    note the question names more often that way), asking for the note itself."""
    no_memory: str = NO_MEMORY

    def __init__(self, **templates: str) -> None:
        try:
            super().__init__(**templates)
        except ValidationError as exc:
            raise PromptTemplateError("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None

    @field_validator("update")
    @classmethod
    def _valid_update(cls, value: str) -> str:
        return _check(value, UPDATE_PLACEHOLDERS, "update")

    @field_validator("answer", "quote_answer")
    @classmethod
    def _valid_answer(cls, value: str) -> str:
        return _check(value, ANSWER_PLACEHOLDERS, "answer")

    @classmethod
    def section_first(cls) -> PromptSet:
        """The update prompt with the section *before* the question and memory: calls over the same chunk
        then share one long prefix, which an engine's prefix cache (vLLM) computes once for all questions."""
        return cls(update=_bundled("update_section_first.txt"))

    @classmethod
    def verbatim(cls) -> PromptSet:
        """The update prompt asking for notes as word-for-word quotes of the document's sentences, one per line:
        notes the evidence tracer (`nodes.provenance`) can cite exactly."""
        return cls(update=_bundled("update_verbatim.txt"))

    @classmethod
    def named(cls, name: str) -> PromptSet:
        """A bundled set by name: "default", "section-first" or "verbatim"."""
        makers = {"default": cls, "section-first": cls.section_first, "verbatim": cls.verbatim}
        if name not in makers:
            raise ConfigError(f"unknown prompt set {name!r}: choose from {', '.join(makers)}")
        return makers[name]()

    @classmethod
    def from_files(cls, *, update: str | Path | None = None, answer: str | Path | None = None) -> PromptSet:
        """Load either template (or both) from UTF-8 text files; the other keeps its default."""
        texts = {
            key: Path(path).read_text(encoding="utf-8")
            for key, path in (("update", update), ("answer", answer))
            if path is not None
        }
        return cls(**texts)

    def render_update(self, *, question: str, memory: str, section: str) -> str:
        """The memory-update prompt for one section."""
        return render(self.update, question=question, memory=memory or self.no_memory, section=section)

    def render_answer(self, *, question: str, memory: str, quote: bool = False) -> str:
        """The final-answer prompt (question and memory only, no document); ``quote``: the quote policy's."""
        template = self.quote_answer if quote else self.answer
        return render(template, question=question, memory=memory or self.no_memory)
