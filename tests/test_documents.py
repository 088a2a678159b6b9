import os

import pytest
from langchain_core.documents import Document

from memagent_graph import FileDocument, LangChainDocuments, TextDocument
from memagent_graph.documents import chunk_document
from memagent_graph.documents.sources import content_digest, split_pieces
from memagent_graph.errors import (
    BinaryDocumentError,
    DocumentEncodingError,
    DocumentIsDirectoryError,
    DocumentNotFoundError,
    DocumentPermissionError,
    EmptyDocumentError,
)


def _text_of(source):
    return "".join(piece for part in source.iter_parts() for piece in part.pieces)


def test_split_pieces_reassembles_and_prefers_line_breaks():
    text = ("line of text\n" * 20_000) + "tail"
    pieces = list(split_pieces(text, size=1000))
    assert "".join(pieces) == text
    assert all(p.endswith("\n") for p in pieces[:-1])


def test_file_document_streams_the_file_text(tmp_path):
    path = tmp_path / "doc.txt"
    text = "ünïcode line\n" * 200_000
    path.write_text(text, encoding="utf-8")
    assert _text_of(FileDocument(path)) == text


def test_file_document_strips_a_utf8_bom(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfhello")
    assert _text_of(FileDocument(path)) == "hello"


def test_missing_file_is_reported(tmp_path):
    with pytest.raises(DocumentNotFoundError, match="document not found"):
        FileDocument(tmp_path / "missing.txt")


def test_directory_is_reported(tmp_path):
    with pytest.raises(DocumentIsDirectoryError, match="is a directory"):
        FileDocument(tmp_path)


def test_symlink_loop_is_reported(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(DocumentNotFoundError, match="symlink"):
        FileDocument(tmp_path / "a")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_is_reported(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text("x")
    path.chmod(0)
    with pytest.raises(DocumentPermissionError, match="permission denied"):
        FileDocument(path)


def test_binary_file_is_rejected_with_its_offset(tmp_path):
    path = tmp_path / "image.bin"
    path.write_bytes(b"PNG header\x00\x01\x02")
    with pytest.raises(BinaryDocumentError, match="binary file"):
        _text_of(FileDocument(path))


def test_invalid_utf8_is_rejected_with_its_offset(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("café au lait".encode("latin-1"))
    with pytest.raises(DocumentEncodingError, match="byte offset 3"):
        _text_of(FileDocument(path))


def test_utf16_is_rejected_with_the_fix(tmp_path):
    path = tmp_path / "utf16.txt"
    path.write_text("hello", encoding="utf-16")
    with pytest.raises(DocumentEncodingError, match="UTF-16.*iconv"):
        _text_of(FileDocument(path))


@pytest.mark.parametrize("content", ["", "  \n\t \n"])
def test_empty_or_whitespace_document_cannot_be_chunked(tmp_path, tokenizer, content):
    path = tmp_path / "empty.txt"
    path.write_text(content)
    with pytest.raises(EmptyDocumentError, match="is empty"):
        chunk_document(FileDocument(path), tokenizer, 100)


def test_text_document_id_is_derived_from_content():
    assert TextDocument("same").doc_id == TextDocument("same").doc_id != TextDocument("other").doc_id


def test_langchain_documents_keep_one_part_per_document_with_metadata():
    source = LangChainDocuments([Document("alpha", metadata={"page": 1}), Document("beta", metadata={"page": 2})])
    parts = list(source.iter_parts())
    assert [dict(p.metadata) for p in parts] == [{"page": 1}, {"page": 2}]
    assert ["".join(p.pieces) for p in parts] == ["alpha", "beta"]


def test_content_digest_is_the_same_for_text_and_file(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("same text\n" * 1000)
    file_digest = content_digest(FileDocument(path))
    assert file_digest == content_digest(FileDocument(path))
    assert file_digest != content_digest(TextDocument("same text\n" * 1000))  # the source path is metadata


def _registry_with_files(tmp_path):
    from memagent_graph import DocumentRegistry

    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "report.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    return DocumentRegistry(allowed_root=root), root


def test_registry_reads_files_under_its_allowed_root(tmp_path):
    registry, _ = _registry_with_files(tmp_path)
    assert _text_of(registry.get("sub/report.txt")) == "inside"
    assert "sub/report.txt" in registry


@pytest.mark.parametrize("name", ["../secret.txt", "sub/../../secret.txt", "/etc/passwd"])
def test_registry_refuses_paths_outside_its_allowed_root(tmp_path, name):
    from memagent_graph.errors import DocumentAccessError

    registry, _ = _registry_with_files(tmp_path)
    with pytest.raises(DocumentAccessError):
        registry.get(name)


def test_registry_refuses_a_symlink_that_leads_outside(tmp_path):
    from memagent_graph.errors import DocumentAccessError

    registry, root = _registry_with_files(tmp_path)
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(DocumentAccessError, match="symlink"):
        registry.get("link.txt")


def test_registry_without_a_root_reads_only_registered_documents(tmp_path):
    from memagent_graph import DocumentRegistry

    with pytest.raises(DocumentNotFoundError, match="no document registered"):
        DocumentRegistry().get(str(tmp_path / "file.txt"))


def test_a_file_holding_only_a_bom_is_empty(tmp_path, tokenizer):
    path = tmp_path / "bom-only.txt"
    path.write_bytes(b"\xef\xbb\xbf")
    with pytest.raises(EmptyDocumentError):
        chunk_document(FileDocument(path), tokenizer, 100)


def test_byte_offsets_count_a_stripped_bom(tmp_path):
    path = tmp_path / "bom-nul.txt"
    path.write_bytes(b"\xef\xbb\xbfab\x00")
    with pytest.raises(BinaryDocumentError, match="offset 5"):
        _text_of(FileDocument(path))
