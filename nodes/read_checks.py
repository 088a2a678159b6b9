"""Checks a read must pass before its first model call, made by the graph's first node so that every entry
point (the `MemAgent` facade, a server run, a subgraph node, a lockstep batch) gets them: the questions fit
in a chunk-sized prompt, and the run's recursion limit lets it reach the answer."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError, EmptyQuestionError, QuestionTooLongError

_RECURSION_SLACK = 8


def minimum_recursion_limit(num_chunks: int, *, segments: int = 1) -> int:
    """The least superstep budget that completes a read of ``num_chunks`` chunks: one per chunk, one to open
    the read, one for the answer, one for the input (measured); in ``segments`` > 1, two per round (the
    segments' reads and the round's end) and one per merge round (at most one per segment: a memory is shorter
    than a chunk). `recursion_limit_for` covers both."""
    if segments > 1:
        count = min(segments, max(num_chunks, 1))
        return 2 * -(-num_chunks // count) + 3 + count
    return num_chunks + 3


def recursion_limit_for(num_chunks: int) -> int:
    """The superstep budget to give a run over ``num_chunks`` chunks (the minimum plus slack)."""
    return minimum_recursion_limit(num_chunks) + _RECURSION_SLACK


class ReadChecks:
    """The checks for one reading configuration and tokenizer (the template's token count is measured once);
    ``uses_update_prompt``: the memory policy sends the update prompt, which must then fit in a chunk."""

    def __init__(self, config: MemAgentConfig, tokenizer: Tokenizer, *, uses_update_prompt: bool = True) -> None:
        self.config, self.tokenizer, self.uses_update_prompt = config, tokenizer, uses_update_prompt

    @functools.cached_property
    def template_tokens(self) -> int:
        """Tokens of the update prompt with an empty question, memory and chunk."""
        return self.tokenizer.count(self.config.prompts.render_update(question="", memory="", section=""))

    def check_questions(self, questions: Sequence[str]) -> None:
        """Refuse empty questions, and questions or templates that leave no room for the document in a
        chunk-sized prompt."""
        if not questions or any(not question or not question.strip() for question in questions):
            raise EmptyQuestionError("the question is empty; ask something about the document")
        chunk = self.config.chunk_tokens
        if self.uses_update_prompt and self.template_tokens >= chunk:
            raise ConfigError(
                f"the update prompt template alone is {self.template_tokens} tokens, not less than `chunk_tokens` "
                f"({chunk}); raise `chunk_tokens` (MemAgent reads 5000-token chunks) or shorten the template"
            )
        longest = max(self.tokenizer.count(question) for question in questions)
        if longest > chunk:
            raise QuestionTooLongError(
                f"the question is {longest} tokens, longer than a whole chunk ({chunk} tokens); "
                "shorten the question or raise `chunk_tokens`"
            )


def check_recursion_limit(num_chunks: int, recursion_limit: int, *, segments: int = 1) -> None:
    """Refuse, before any model call, a fresh read whose run would stop at the recursion limit mid-document."""
    if recursion_limit < (needed := minimum_recursion_limit(num_chunks, segments=segments)):
        raise ConfigError(
            f"the document is {num_chunks} chunks, and reading it takes {needed} "
            f"graph steps, more than this run's recursion_limit ({recursion_limit}); pass "
            f'config={{"recursion_limit": {recursion_limit_for(num_chunks)}}} '
            "(memagent_graph.graph.recursion_limit_for(num_chunks)) or raise `chunk_tokens`"
        )
