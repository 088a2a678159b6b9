"""Provenance: every memory span is traced to where it was read, or flagged unsupported; the answer cites its
sources; every offset slices the original file to the cited text (UTF-8 and CRLF files included)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from memagent_graph import FileDocument, MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.chunking import chunk_document
from memagent_graph.errors import MemAgentError
from memagent_graph.testing import ScriptedChatModel

CHUNK = 300
CONFIG = MemAgentConfig(chunk_tokens=CHUNK, memory_tokens=120, answer_tokens=50)


class Script(ScriptedChatModel):
    """Replies with the given memories in order (one per chunk), then with ``answer``; the call after
    ``fail_at`` replies raises once instead (a crash mid-read). ``calls`` counts the replies."""

    memories: list[str]
    answer: str
    fail_at: int | None = None
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "script"

    def _reply(self, messages: list[BaseMessage], options: dict[str, Any]) -> str:
        if self.calls == self.fail_at:
            self.fail_at = None
            raise MemAgentError("crash")
        index, self.calls = self.calls, self.calls + 1
        return self.memories[index] if index < len(self.memories) else self.answer


FILLER = [
    "The river bends twice before it reaches the old mill near the village square.",
    "Farmers carry their grain along the dusty road every autumn morning.",
    "A bell rings at noon and the children run home for their midday meal.",
    "Clouds gather over the hills and the wind turns cold by evening.",
]


def document(facts: dict[int, str], *, blocks: int, tokenizer, newline: str = "\n") -> str:
    """About ``blocks`` chunks of filler lines, with ``facts[k]`` as a line opening chunk k (inserted where
    chunk k starts, in order: the chunks before an insertion stay as they were)."""
    text = newline.join(FILLER[i % len(FILLER)] for i in range(blocks * 20)) + newline
    for index in sorted(facts):
        at = chunk_document(TextDocument(text), tokenizer, CHUNK).chunk_origin(index).char
        text = text[:at] + newline + facts[index] + newline + text[at:]
    return text


def chunk_of(text: str, fact: str, tokenizer) -> int:
    """The chunk holding ``fact`` whole (the test documents never cut a fact)."""
    chunked = chunk_document(TextDocument(text), tokenizer, CHUNK)
    [index] = [i for i in range(chunked.num_chunks) if fact in chunked.chunk_text(i)]
    return index


def chunks_in(text: str, tokenizer) -> int:
    return chunk_document(TextDocument(text), tokenizer, CHUNK).num_chunks


def read(tmp_path, tokenizer, text: str, memories: list[str], answer: str, **options: Any):
    path = tmp_path / "doc.txt"
    path.write_bytes(text.encode("utf-8"))
    model = Script(memories=memories, answer=answer)
    agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=InMemorySaver(), **options)
    return agent, path, agent.invoke("What is the code?", FileDocument(path))


def sliced(path, source) -> str:
    return path.read_bytes()[source["byte_start"] : source["byte_end"]].decode("utf-8")


def spans_of(agent, result):
    state = agent.graph.get_state({"configurable": {"thread_id": result.thread_id}}).values
    return state["evidence"]


FACT = "The access code for the north gate is 7741."


def test_a_copied_fact_is_cited_at_its_line_and_bytes(tmp_path, tokenizer):
    text = document({1: FACT}, blocks=3, tokenizer=tokenizer)
    _, path, result = read(tmp_path, tokenizer, text, [FACT] * chunks_in(text, tokenizer), "\\boxed{7741}")
    [citation] = result.citations
    assert sliced(path, citation) == FACT
    assert citation["line"] == text.splitlines().index(FACT) + 1
    assert citation["source"] == str(path) and citation["chunk"] == chunk_of(text, FACT, tokenizer)
    assert text[citation["start"] : citation["end"]] == FACT
    assert result.unsupported == []


def test_a_span_is_unsupported_until_the_chunk_that_holds_it_is_read(tmp_path, tokenizer):
    text = document({2: FACT}, blocks=3, tokenizer=tokenizer)
    at = chunk_of(text, FACT, tokenizer)
    agent, _, result = read(tmp_path, tokenizer, text, [FACT] * chunks_in(text, tokenizer), "\\boxed{7741}")
    history = agent.graph.get_state_history({"configurable": {"thread_id": result.thread_id}})
    after_updates = {
        s.values["cursor"]: s.values["evidence"]
        for s in history
        if s.next in (("update_memory",), ("final_answer",)) and s.values.get("cursor", 0) > 0
    }
    assert after_updates  # one state after each memory update: cursor = chunks read so far
    for read_so_far, [span] in after_updates.items():
        assert bool(span["sources"]) == (read_so_far > at), read_so_far


def test_a_paraphrased_fact_is_still_traced(tmp_path, tokenizer):
    text = document({0: FACT}, blocks=2, tokenizer=tokenizer)
    memory = "The access code of the north gate is 7741."
    _, path, result = read(tmp_path, tokenizer, text, [memory] * chunks_in(text, tokenizer), "\\boxed{7741}")
    [citation] = result.citations
    assert "7741" in sliced(path, citation) and citation["score"] >= CONFIG.evidence_min_score


def test_facts_merged_across_chunks_keep_each_ones_source(tmp_path, tokenizer):
    second = "The south gate opens with the word heron."
    text = document({0: FACT, 2: second}, blocks=3, tokenizer=tokenizer)
    first_chunk, second_chunk = chunk_of(text, FACT, tokenizer), chunk_of(text, second, tokenizer)
    merged = "The access code for the north gate is 7741; the south gate opens with the word heron."
    memories = [FACT if i < second_chunk else merged for i in range(chunks_in(text, tokenizer))]
    agent, path, result = read(tmp_path, tokenizer, text, memories, "\\boxed{heron}")
    spans = spans_of(agent, result)
    assert len(spans) == 2 and all(span["sources"] for span in spans)
    assert sliced(path, spans[0]["sources"][0]) == FACT and spans[0]["sources"][0]["chunk"] == first_chunk
    assert "heron" in sliced(path, spans[1]["sources"][0]) and spans[1]["sources"][0]["chunk"] == second_chunk
    assert [c["chunk"] for c in result.citations] == [second_chunk]


def test_a_fact_carried_through_many_chunks_keeps_its_first_source(tmp_path, tokenizer):
    text = document({0: FACT}, blocks=6, tokenizer=tokenizer)
    _, path, result = read(tmp_path, tokenizer, text, [FACT] * chunks_in(text, tokenizer), "\\boxed{7741}")
    [citation] = result.citations
    assert citation["chunk"] == 0 and sliced(path, citation) == FACT


def test_an_invented_fact_is_unsupported_and_its_answer_uncited(tmp_path, tokenizer):
    text = document({}, blocks=2, tokenizer=tokenizer)
    invented = 'The special magic password is "AZURA-LEMON-LEMON".'
    memories = [invented] * chunks_in(text, tokenizer)
    _, _, result = read(tmp_path, tokenizer, text, memories, "\\boxed{AZURA-LEMON-LEMON}")
    assert result.unsupported == [invented]
    assert result.citations == []


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["LF", "CRLF"])
def test_offsets_slice_multibyte_utf8_files(tmp_path, tokenizer, newline):
    fact = "Le code d'accès du portail nord est 7741 — 北门的密码."
    others = {0: "Über den Fluß führt eine schmale Brücke, sagt Zoë.", 2: "Ça va très bien, merci beaucoup!"}
    text = document({**others, 1: fact}, blocks=3, tokenizer=tokenizer, newline=newline)
    _, path, result = read(tmp_path, tokenizer, text, [fact] * chunks_in(text, tokenizer), "\\boxed{7741}")
    [citation] = result.citations
    assert sliced(path, citation) == fact
    assert path.read_bytes()[: citation["byte_start"]].count(b"\n") + 1 == citation["line"]


def test_a_resumed_read_keeps_the_provenance_of_chunks_read_before_the_crash(tmp_path, tokenizer):
    text = document({0: FACT}, blocks=4, tokenizer=tokenizer)
    path = tmp_path / "doc.txt"
    path.write_text(text)
    count = chunks_in(text, tokenizer)
    model = Script(memories=[FACT] * count, answer="\\boxed{7741}", fail_at=2)
    agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=InMemorySaver())
    with pytest.raises(MemAgentError):
        agent.invoke("What is the code?", FileDocument(path), thread_id="t")
    result = agent.invoke("What is the code?", FileDocument(path), thread_id="t")
    assert model.calls == count + 1  # one reply per update and the answer: nothing read again
    [citation] = result.citations
    assert citation["chunk"] == 0 and sliced(path, citation) == FACT


def test_chunk_origins_are_the_lengths_of_the_chunks_before(tokenizer):
    text = document({}, blocks=3, tokenizer=tokenizer, newline="\r\n")
    chunked = chunk_document(TextDocument(text), tokenizer, CHUNK)
    for index in reversed(range(chunked.num_chunks)):  # random access first, then the remembered ones
        before = "".join(chunked.chunk_text(i) for i in range(index))
        origin = chunked.chunk_origin(index)
        assert (origin.char, origin.byte, origin.line) == (len(before), len(before.encode()), before.count("\n") + 1)


def test_a_passage_is_the_cited_text_with_context_from_its_chunk(tmp_path, tokenizer):
    text = document({1: FACT}, blocks=3, tokenizer=tokenizer)
    agent, _, result = read(tmp_path, tokenizer, text, [FACT] * chunks_in(text, tokenizer), "\\boxed{7741}")
    passage, start = agent.passage(result.citations[0], context_chars=20)
    assert FACT in passage and len(FACT) < len(passage) <= len(FACT) + 40
    assert text[start : start + len(passage)] == passage


def test_a_short_answer_is_cited_only_where_it_appears_word_for_word():
    from memagent_graph.nodes.provenance import cite

    source = {"doc_id": "d", "source": None, "part": 0, "chunk": 0, "start": 0, "end": 9, "byte_start": 0,
              "byte_end": 9, "line": 1, "score": 100.0}  # fmt: skip
    spans = [{"text": "He was born in 1999.", "sources": [source]}]
    assert cite("1990", spans, min_score=75)[0] == []  # one digit off: not this span's answer
    assert cite("1999", spans, min_score=75)[0] == [source]
