"""Saved chunk indexes: a resumed read of an unchanged file reuses its index; anything else chunks again."""

import pytest
from langchain_core.documents import Document

from memagent_graph import FileDocument, LangChainDocuments
from memagent_graph.documents import chunk_document
from memagent_graph.documents import registry as registry_module
from memagent_graph.documents.chunk_index_file import chunk_index_path, load_chunk_index, save_chunk_index
from memagent_graph.documents.haystack import haystack_paragraphs
from memagent_graph.documents.registry import DocumentRegistry

TEXT = "\n".join(haystack_paragraphs()[:300]) + "\nÜber 東京 🙂 done.\n"


@pytest.fixture
def path(tmp_path):
    file = tmp_path / "doc.txt"
    file.write_text(TEXT, encoding="utf-8")
    return file


def test_a_saved_index_loads_back_and_gives_every_chunk_exactly(tokenizer, path, tmp_path):
    chunked = chunk_document(FileDocument(path), tokenizer, 97)
    assert save_chunk_index(chunked, tmp_path / "doc.chunks")
    loaded = load_chunk_index(FileDocument(path), tokenizer, 97, tmp_path / "doc.chunks")
    assert loaded is not None
    assert (loaded.fingerprint, loaded.num_chunks, list(loaded.parts)) == (
        chunked.fingerprint,
        chunked.num_chunks,
        list(chunked.parts),
    )
    assert [loaded.chunk_ids(i) for i in range(loaded.num_chunks)] == [
        chunked.chunk_ids(i) for i in range(chunked.num_chunks)
    ]
    assert loaded.chunk_metadata(0) == chunked.chunk_metadata(0)


def test_an_index_of_a_changed_file_is_not_used(tokenizer, path, tmp_path):
    save_chunk_index(chunk_document(FileDocument(path), tokenizer, 97), tmp_path / "doc.chunks")
    path.write_text(TEXT.replace("the", "a"), encoding="utf-8")
    assert load_chunk_index(FileDocument(path), tokenizer, 97, tmp_path / "doc.chunks") is None


def test_an_index_for_another_chunk_size_is_not_used(tokenizer, path, tmp_path):
    save_chunk_index(chunk_document(FileDocument(path), tokenizer, 97), tmp_path / "doc.chunks")
    assert load_chunk_index(FileDocument(path), tokenizer, 98, tmp_path / "doc.chunks") is None


def test_a_truncated_index_file_is_not_used(tokenizer, path, tmp_path):
    index = tmp_path / "doc.chunks"
    save_chunk_index(chunk_document(FileDocument(path), tokenizer, 97), index)
    index.write_bytes(index.read_bytes()[:-5])
    assert load_chunk_index(FileDocument(path), tokenizer, 97, index) is None


def test_a_document_with_metadata_that_is_not_json_saves_no_index(tokenizer, tmp_path):
    source = LangChainDocuments([Document(TEXT, metadata={"when": object()})])
    assert not save_chunk_index(chunk_document(source, tokenizer, 97), tmp_path / "doc.chunks")
    assert not (tmp_path / "doc.chunks").exists()


def test_a_registry_with_an_index_folder_does_not_tokenize_an_unchanged_file_again(
    tokenizer, path, tmp_path, monkeypatch
):
    first = DocumentRegistry(index_dir=tmp_path / "indexes")
    chunked = first.chunked(first.add(FileDocument(path)), tokenizer, 97)
    assert chunk_index_path(tmp_path / "indexes", str(path), tokenizer, 97).is_file()

    def no_chunking(*args, **kwargs):
        raise AssertionError("the document was chunked again")

    monkeypatch.setattr(registry_module, "chunk_document", no_chunking)
    second = DocumentRegistry(index_dir=tmp_path / "indexes")
    again = second.chunked(second.add(FileDocument(path)), tokenizer, 97)
    assert again.fingerprint == chunked.fingerprint
    assert again.chunk_text(again.num_chunks - 1) == chunked.chunk_text(chunked.num_chunks - 1)


def test_an_index_folder_that_cannot_be_written_does_not_stop_the_read(tokenizer, path, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    registry = DocumentRegistry(index_dir=blocked / "indexes")
    chunked = registry.chunked(registry.add(FileDocument(path)), tokenizer, 97)
    assert chunked.chunk_ids(0) == chunk_document(FileDocument(path), tokenizer, 97).chunk_ids(0)
