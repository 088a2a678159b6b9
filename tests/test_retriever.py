"""`MemAgentRetriever` and `MemAgentCompressor`: the cited source passages (offsets that slice the original to
them) and the memory are returned, and they reach an LCEL prompt."""

from __future__ import annotations

import pytest
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from memagent_graph import LangChainDocuments, MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.haystack import haystack_paragraphs
from memagent_graph.integrations.retriever import MemAgentCompressor, MemAgentRetriever
from memagent_graph.testing import RuleMemoryModel

NEEDLE = "The special magic fruit is mango-4242."
QUESTION = "What is the special magic fruit?"


@pytest.fixture
def agent(tokenizer) -> MemAgent:
    config = MemAgentConfig(chunk_tokens=300, memory_tokens=120, answer_tokens=50)
    return MemAgent(RuleMemoryModel(), tokenizer=tokenizer, config=config)


@pytest.fixture
def retrieved() -> list[Document]:
    """Five retrieved documents, the needle in the third."""
    texts = list(haystack_paragraphs()[100:105])
    texts[2] += "\n\n" + NEEDLE
    return [Document(page_content=text, metadata={"source": f"page-{i}"}) for i, text in enumerate(texts)]


def _assert_memory_document(document: Document, *, doc_id: str, answer: str, fact: str) -> None:
    assert fact in document.page_content
    assert document.metadata["doc_id"] == doc_id
    assert document.metadata["answer"] == answer
    assert document.metadata["answer_source"] == "boxed"
    assert document.metadata["num_chunks"] > 1
    assert document.metadata["thread_id"]
    assert document.metadata["retriever"] == "memagent" and document.metadata["kind"] == "memory"


def _fact(needle) -> str:
    return next(line for line in needle.text.split("\n\n") if line.startswith("The special magic"))


def test_retriever_returns_the_memory_with_its_metadata(agent, needle):
    document = TextDocument(needle.text)
    *_, evidence = MemAgentRetriever(agent=agent, document=document).invoke(needle.question)
    _assert_memory_document(evidence, doc_id=document.doc_id, answer=needle.answer, fact=_fact(needle))
    assert evidence.metadata["num_chunks"] == agent.chunk(document).num_chunks
    assert evidence.metadata["unsupported"] == []


def test_retriever_returns_the_cited_passage_with_offsets_that_slice_the_original(agent, needle):
    document = TextDocument(needle.text)
    [passage, _] = MemAgentRetriever(agent=agent, document=document, context_chars=30).invoke(needle.question)
    start = passage.metadata["start_index"]
    assert needle.text[start : start + len(passage.page_content)] == passage.page_content
    assert _fact(needle) in passage.page_content and len(passage.page_content) <= len(_fact(needle)) + 60
    assert needle.text.splitlines()[passage.metadata["line"] - 1].startswith(_fact(needle)[:20])
    assert passage.metadata["kind"] == "passage" and passage.metadata["score"] >= 75
    assert passage.metadata["source"] == document.doc_id  # text in memory has no file; a file's path is here


def test_retriever_without_the_memory_returns_only_passages(agent, needle):
    retriever = MemAgentRetriever(agent=agent, document=TextDocument(needle.text), include_memory=False)
    [passage] = retriever.invoke(needle.question)
    assert passage.metadata["kind"] == "passage"


async def test_retriever_ainvoke_returns_the_memory_with_its_metadata(agent, needle):
    document = TextDocument(needle.text)
    *_, evidence = await MemAgentRetriever(agent=agent, document=document).ainvoke(needle.question)
    _assert_memory_document(evidence, doc_id=document.doc_id, answer=needle.answer, fact=_fact(needle))


def test_retriever_reads_a_registered_document_by_id(agent, needle):
    doc_id = agent.documents.add(TextDocument(needle.text), doc_id="manual")
    *_, evidence = MemAgentRetriever(agent=agent, document="manual").invoke(needle.question)
    _assert_memory_document(evidence, doc_id=doc_id, answer=needle.answer, fact=_fact(needle))


def test_the_passage_and_the_memory_reach_the_prompt_of_an_lcel_chain(agent, needle):
    def format_docs(docs: list[Document]) -> str:
        return "\n\n".join(d.page_content for d in docs)

    prompt = ChatPromptTemplate.from_messages(
        [("human", "Answer from this evidence only.\n<evidence>\n{context}\n</evidence>\nQuestion: {question}")]
    )
    retriever = MemAgentRetriever(agent=agent, document=TextDocument(needle.text), context_chars=0)
    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | ParrotFakeChatModel()  # replies with its prompt, so the output shows what the model saw
        | StrOutputParser()
    )
    seen = chain.invoke(needle.question)
    assert f"<evidence>\n{_fact(needle)}\n\n{_fact(needle)}\n</evidence>" in seen  # the passage, the memory
    assert seen.endswith(f"Question: {needle.question}")


def test_compressor_reads_retrieved_documents_into_evidence(agent, retrieved):
    [passage, evidence] = MemAgentCompressor(agent=agent).compress_documents(retrieved, QUESTION)
    start, page = passage.metadata["start_index"], retrieved[2].page_content
    assert (
        passage.metadata["source"] == "page-2"
        and page[start : start + len(passage.page_content)] == passage.page_content
    )
    assert NEEDLE in passage.page_content
    doc_id = evidence.metadata["doc_id"]  # one id per call, so concurrent calls never collide
    assert doc_id.startswith("lc-") and doc_id != LangChainDocuments(retrieved).doc_id
    _assert_memory_document(evidence, doc_id=doc_id, answer="mango-4242", fact=NEEDLE)
    assert evidence.metadata["num_documents"] == 5
    assert evidence.metadata["num_chunks"] >= 5  # no chunk crosses a document


async def test_compressor_acompress_reads_retrieved_documents_into_evidence(agent, retrieved):
    *_, evidence = await MemAgentCompressor(agent=agent).acompress_documents(retrieved, QUESTION)
    assert NEEDLE in evidence.page_content
    assert evidence.metadata["answer"] == "mango-4242"
    assert evidence.metadata["num_documents"] == 5


async def test_compressor_returns_nothing_for_no_documents(agent):
    compressor = MemAgentCompressor(agent=agent)
    assert compressor.compress_documents([], QUESTION) == []
    assert await compressor.acompress_documents([], QUESTION) == []
    assert len(agent.documents) == 0  # nothing was read or registered


def test_compressor_after_a_retriever_in_lcel(agent, retrieved):
    # langchain 1.x dropped ContextualCompressionRetriever (now in langchain-classic); this is its LCEL form
    class FixedRetriever(BaseRetriever):
        documents: list[Document]

        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return self.documents

    compressor = MemAgentCompressor(agent=agent)
    pipeline = {"documents": FixedRetriever(documents=retrieved), "query": RunnablePassthrough()} | RunnableLambda(
        lambda found: compressor.compress_documents(found["documents"], found["query"])
    )
    *_, evidence = pipeline.invoke(QUESTION)
    assert NEEDLE in evidence.page_content
    assert evidence.metadata["num_documents"] == len(retrieved)


def test_retriever_callbacks_reach_the_inner_model_calls(agent, needle):
    class CountChatStarts(BaseCallbackHandler):
        starts = 0

        def on_chat_model_start(self, *args: object, **kwargs: object) -> None:
            self.starts += 1

    handler, document = CountChatStarts(), TextDocument(needle.text)
    MemAgentRetriever(agent=agent, document=document).invoke(needle.question, config={"callbacks": [handler]})
    assert handler.starts == agent.chunk(document).num_chunks + 1  # one update per chunk, then the answer


def test_the_compressor_leaves_no_document_registered(agent):
    from langchain_core.documents import Document

    MemAgentCompressor(agent=agent).compress_documents([Document("The special magic city is rome-1.")], "city?")
    assert len(agent.documents) == 0


async def test_concurrent_compressions_of_the_same_documents_do_not_collide(agent):
    import asyncio

    from langchain_core.documents import Document

    documents = [Document("The special magic city is rome-1.")]
    compressor = MemAgentCompressor(agent=agent)
    results = await asyncio.gather(*(compressor.acompress_documents(documents, "city?") for _ in range(4)))
    assert all(result[-1].metadata["answer"] == "rome-1" for result in results)
