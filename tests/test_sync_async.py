"""One implementation behind each sync/async pair: the model call, the nodes, the facade's reads. Sync and async
entry points agree, async reads keep blocking work (tokenizer calls: maybe a server's /tokenize) off the event
loop, and a lockstep read stops and resumes like a single one."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

import httpx
import openai
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from test_agent import StopAt  # sets a stop event while its N-th call is in flight
from test_quote_memory import FILLER, NEEDLE, QUESTION, QuotingModel, tokenizer_for

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.config import RetrySettings
from memagent_graph.errors import ReadStopped
from memagent_graph.graph import GraphOptions, build_memagent_graph
from memagent_graph.nodes.final_answer import final_answer
from memagent_graph.nodes.model_call import (
    CallOptions,
    Completion,
    acomplete,
    acomplete_all,
    acomplete_batch,
    complete,
    complete_all,
    complete_batch,
)
from memagent_graph.testing import RuleMemoryModel

CONFIG = MemAgentConfig(chunk_tokens=300, memory_tokens=120, answer_tokens=50)
QUESTIONS = ["What is the special magic colour?", "Which colour is special?"]
TOKENIZER_CALLS = frozenset({"encode", "encode_batch", "decode", "count"})


class LoopWatchingTokenizer:
    """Wraps a tokenizer; once `watch` is called on an event loop's thread, records the calls made on it."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.loop_thread, self.calls, self.on_loop = inner, None, 0, []

    def watch(self) -> None:
        self.loop_thread = threading.get_ident()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if name not in TOKENIZER_CALLS:
            return attribute

        def watched(*args: Any) -> Any:
            if self.loop_thread is not None:
                self.calls += 1
                if threading.get_ident() == self.loop_thread:
                    self.on_loop.append(name)
            return attribute(*args)

        return watched


async def test_the_async_answer_node_finishes_off_the_event_loop(tokenizer):
    watched = LoopWatchingTokenizer(tokenizer)
    memory = "The special magic colour is teal."
    node = final_answer(
        RuleMemoryModel(),
        watched,
        memagent_config=CONFIG,
        policy_answer=lambda question, notes, run: Completion("\\boxed{teal}", 0, 0, 0.0, "policy"),
    )
    watched.watch()
    update = await node.ainvoke({"question": QUESTIONS[0], "memory": memory, "evidence": [], "num_chunks": 1})
    assert update["answer"] == "teal" and update["last_step"]["memory_tokens"] == tokenizer.count(memory)
    assert watched.calls and watched.on_loop == []  # the step record's token count ran in a worker thread


@pytest.mark.parametrize("policy", ["generate", "quote"])
async def test_an_async_read_does_no_tokenizer_work_on_the_event_loop(tokenizer, needle, policy):
    if policy == "quote":
        text, question = " ".join(FILLER[:25] + [NEEDLE] + FILLER[25:]), QUESTION
        config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="quote", quote_min_gain=30)
        model, watched = QuotingModel(), LoopWatchingTokenizer(tokenizer_for(text))
    else:
        text, question, config = needle.text, needle.question, CONFIG
        model, watched = RuleMemoryModel(), LoopWatchingTokenizer(tokenizer)
    agent = MemAgent(model, config=config, tokenizer=watched)
    watched.watch()
    result = await agent.ainvoke(question, TextDocument(text))
    assert result.num_chunks > 1 and watched.calls
    assert watched.on_loop == []


async def test_aask_many_answers_like_ask_many(tokenizer, needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer)
    document = TextDocument(needle.text)
    asynchronous, synchronous = await agent.aask_many(QUESTIONS, document), agent.ask_many(QUESTIONS, document)
    assert [r.answer for r in asynchronous] == [r.answer for r in synchronous] == [needle.answer] * 2
    assert [(r.memory, r.usage, len(r.steps)) for r in asynchronous] == [
        (r.memory, r.usage, len(r.steps)) for r in synchronous
    ]


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_stopped_lockstep_read_ends_after_the_current_chunk_and_resumes_without_resending_it(tokenizer, needle, run):
    model = StopAt(stop_at=5, stop=threading.Event())  # two questions: call 5 is chunk 3's first
    agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=InMemorySaver())
    document = TextDocument(needle.text)

    def ask(**options: Any) -> list:
        if run == "sync":
            return agent.ask_many(QUESTIONS, document, thread_id="job", **options)
        return asyncio.run(agent.aask_many(QUESTIONS, document, thread_id="job", **options))

    with pytest.raises(ReadStopped) as stopped:
        ask(stop=model.stop)
    assert (stopped.value.chunks_done, len(model.calls)) == (3, 6)
    results = ask()
    assert [r.answer for r in results] == [needle.answer] * 2
    assert len(model.calls) == 2 * (results[0].num_chunks + 1)  # chunk 3 was not sent again


class FailsEachPromptOnce(RuleMemoryModel):
    """Fails the first try of each prompt with a transient connection error."""

    def _reply(self, messages, options):
        prompt = str(messages[-1].content)
        if all(call["prompt"] != prompt for call in self.calls):
            self._calls.append({"prompt": prompt, **options})
            raise openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1/v1/chat/completions"))
        return super()._reply(messages, options)


async def test_the_sync_and_async_model_calls_agree_and_count_their_tries(tokenizer):
    retries = RetrySettings(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.001)
    options = CallOptions(max_tokens=50, temperature=0.0, top_p=1.0, retries=retries)
    prompts = [CONFIG.prompts.render_answer(question=q, memory="The special magic colour is teal.") for q in QUESTIONS]
    kwargs = {"tokenizer": tokenizer, "config": {}}
    replies = {
        "complete": [complete(FailsEachPromptOnce(), prompts[0], options, **kwargs)],
        "acomplete": [await acomplete(FailsEachPromptOnce(), prompts[0], options, **kwargs)],
        "complete_batch": complete_batch(FailsEachPromptOnce(), prompts, options, **kwargs),
        "acomplete_batch": await acomplete_batch(FailsEachPromptOnce(), prompts, options, **kwargs),
        "complete_all": complete_all(FailsEachPromptOnce(), prompts, options, **kwargs),
        "acomplete_all": await acomplete_all(FailsEachPromptOnce(), prompts, options, **kwargs),
    }
    for name, completions in replies.items():
        assert [(c.text, c.attempts) for c in completions] == [
            (r.text, 2) for r in replies["complete_all"][: len(completions)]
        ], name
    assert "\\boxed{teal}" in replies["complete"][0].text


def test_create_memagent_passes_on_the_options_of_build_memagent_graph():
    parameters = inspect.signature(build_memagent_graph).parameters.values()
    assert set(GraphOptions.__annotations__) == {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
    assert GraphOptions.__required_keys__ == {"documents"}
