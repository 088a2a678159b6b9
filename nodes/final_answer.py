"""`final_answer`: one call per question that sees only the question and its final memory, then extracts the
boxed answer and cites the memory spans that hold it (`provenance.cite`).

When the memory policy answers from the memory itself (``quote``: `MemoryPolicy.answer`), no answer call is
made; when it quotes its answers (``quote`` with ``quote_answer="copy"``), the prompt is the quote answer prompt
and the reply must be one whole line of the memory (extractive: nothing is invented).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.nodes.answer_extraction import extract_answer
from memagent_graph.nodes.call_node import call_node
from memagent_graph.nodes.graph_node import GraphNode
from memagent_graph.nodes.model_call import (
    CallOptions,
    Completion,
    acomplete_all,
    add_usage,
    call_options,
    complete_all,
)
from memagent_graph.nodes.provenance import cite
from memagent_graph.nodes.questions import ONE_QUESTION, Questions
from memagent_graph.state import StepRecord


def final_answer(
    model: BaseChatModel,
    tokenizer: Tokenizer,
    *,
    memagent_config: MemAgentConfig,
    quotes_answer: bool = False,
    policy_answer: Callable[[str, str, RunnableConfig], Completion] | None = None,
    questions: Questions = ONE_QUESTION,
) -> GraphNode:
    """Build the node that answers each question from its memory and records whether the answer was boxed;
    ``quotes_answer``: the reply copies one line of the memory (`MemoryPolicy.quotes_answer`);
    ``policy_answer``: the policy's own answer replaces the call (`MemoryPolicy.answer`)."""
    config_, quote, asked = memagent_config, quotes_answer, _asked(questions)

    def prepare(state: Mapping[str, Any]) -> tuple[list[str], CallOptions]:
        pairs = asked(state)
        prompts = [config_.prompts.render_answer(question=q, memory=m, quote=quote) for q, m in pairs]
        options = call_options(config_, budget="answer_tokens")
        if quote and len(pairs) == 1 and pairs[0][1].strip():  # the graph builder refuses quote for many
            options = replace(options, quote_from=pairs[0][1])
        return prompts, options

    def finish(state: Mapping[str, Any], _prepared: object, completions: list[Completion]) -> dict[str, Any]:
        steps = [
            answer_step(state["num_chunks"], completion, memory, tokenizer)
            for completion, memory in zip(completions, questions.memories(state), strict=True)
        ]
        answers = [extract_answer(c.text) for c in completions]
        citations = [
            cite(answer, spans, min_score=config_.evidence_min_score)
            for (answer, _), spans in zip(answers, questions.evidence(state), strict=True)
        ]
        return {
            **questions.answer_update(answers, steps, citations),
            "finished": True,
            "usage": add_usage(state.get("usage"), completions),
        }

    if policy_answer is not None:  # CPU-bound scoring, in a worker thread in async runs too
        return call_node("final_answer", prepare=asked, call=_own(policy_answer), acall=None, finish=finish)

    def call(prepared: tuple[list[str], CallOptions], config: RunnableConfig) -> list[Completion]:
        return complete_all(model, *prepared, tokenizer=tokenizer, config=config)

    async def acall(prepared: tuple[list[str], CallOptions], config: RunnableConfig) -> list[Completion]:
        return await acomplete_all(model, *prepared, tokenizer=tokenizer, config=config)

    return call_node("final_answer", prepare=prepare, call=call, acall=acall, finish=finish)


def _asked(questions: Questions) -> Callable[[Mapping[str, Any]], list[tuple[str, str]]]:
    """Each question of a state with its memory."""
    return lambda state: list(zip(questions.questions(state), questions.memories(state), strict=True))


def _own(
    policy_answer: Callable[[str, str, RunnableConfig], Completion],
) -> Callable[[list[tuple[str, str]], RunnableConfig], list[Completion]]:
    """The policy's answers to (question, memory) pairs."""
    return lambda pairs, config: [policy_answer(question, memory, config) for question, memory in pairs]


def answer_step(num_chunks: int, completion: Completion, memory: str, tokenizer: Tokenizer) -> StepRecord:
    """The step record of the answer call (``answer_source``: boxed or the trimmed reply)."""
    return {
        "node": "final_answer",
        "chunk": num_chunks,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": completion.latency_s,
        "finish_reason": completion.finish_reason,
        "retries": completion.attempts - 1,
        "memory_tokens": tokenizer.count(memory) if memory else 0,
        "truncated": False,
        "empty": not completion.text.strip(),
        "answer_source": extract_answer(completion.text)[1],
    }
