import random

import pytest
from langchain_core.documents import Document

from memagent_graph import FileDocument, LangChainDocuments, TextDocument
from memagent_graph.documents import chunk_document
from memagent_graph.documents.haystack import haystack_paragraphs


def _decoded(chunked):
    return "".join(chunked.chunk_text(i) for i in range(chunked.num_chunks))


def test_decoded_chunks_concatenate_to_the_document(tokenizer, needle):
    chunked = chunk_document(TextDocument(needle.text), tokenizer, 256)
    assert _decoded(chunked) == needle.text


def test_every_chunk_but_the_last_is_full(tokenizer, needle):
    chunked = chunk_document(TextDocument(needle.text), tokenizer, 256)
    sizes = [len(chunked.chunk_ids(i)) for i in range(chunked.num_chunks)]
    assert all(252 < size <= 256 for size in sizes[:-1])
    assert 0 < sizes[-1] <= 256
    assert sum(sizes) == chunked.num_tokens


def test_chunk_ids_are_the_tokenizers_ids(tokenizer):
    text = "A short document that fits in one chunk."
    chunked = chunk_document(TextDocument(text), tokenizer, 1000)
    assert chunked.num_chunks == 1
    assert chunked.chunk_ids(0) == tokenizer.encode(text)


def test_boundaries_never_split_a_multibyte_character(tokenizer):
    rng = random.Random(3)
    text = "".join(rng.choice(["東京", "🙂", "ü", "a", " ", "\n", "Ω"]) for _ in range(20_000))
    chunked = chunk_document(TextDocument(text), tokenizer, 37)
    assert _decoded(chunked) == text
    assert all("\ufffd" not in chunked.chunk_text(i) for i in range(chunked.num_chunks))


@pytest.mark.integration
def test_a_million_token_file_chunks_exactly(tokenizer, tmp_path):
    path = tmp_path / "big.txt"
    paragraphs = haystack_paragraphs()
    with path.open("w", encoding="utf-8") as handle:
        written = 0
        while written < 4_600_000:
            for paragraph in paragraphs:
                handle.write(paragraph + "\n\n")
                written += len(paragraph) + 2
    chunked = chunk_document(FileDocument(path), tokenizer, 5000)
    assert chunked.num_tokens >= 1_000_000
    assert chunked.num_chunks == pytest.approx(chunked.num_tokens / 5000, abs=2)
    assert _decoded(chunked) == path.read_text(encoding="utf-8")


def test_langchain_document_boundaries_are_chunk_boundaries(tokenizer):
    documents = [Document("first " * 300, metadata={"page": 1}), Document("second " * 10, metadata={"page": 2})]
    chunked = chunk_document(LangChainDocuments(documents), tokenizer, 100)
    last = chunked.num_chunks - 1
    assert chunked.chunk_text(last) == "second " * 10
    assert chunked.chunk_metadata(last) == {"page": 2}
    assert chunked.chunk_metadata(0) == {"page": 1}


def test_fingerprint_is_stable_for_the_same_content_tokenizer_and_size(tokenizer, needle):
    first = chunk_document(TextDocument(needle.text), tokenizer, 256).fingerprint
    assert first == chunk_document(TextDocument(needle.text), tokenizer, 256).fingerprint


def test_fingerprint_changes_with_content_tokenizer_or_chunk_size(tokenizer, needle):
    from memagent_graph.documents import ApproximateTokenizer

    base = chunk_document(TextDocument(needle.text), tokenizer, 256).fingerprint
    assert base != chunk_document(TextDocument(needle.text + "!"), tokenizer, 256).fingerprint
    assert base != chunk_document(TextDocument(needle.text), tokenizer, 257).fingerprint
    assert base != chunk_document(TextDocument(needle.text), ApproximateTokenizer(), 256).fingerprint


class _OneShot:
    """A source that cannot restart at a piece: chunking keeps its token ids (the reference for the index)."""

    def __init__(self, source):
        self.doc_id, self._source = source.doc_id + "-held", source

    def iter_parts(self):
        return self._source.iter_parts()


def _sources(tmp_path):
    rng = random.Random(11)
    multibyte = "".join(rng.choice(["東京", "🙂", "ü", "a", " ", "\n", "Ω", "word "]) for _ in range(60_000))
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(("\r\n".join(haystack_paragraphs()[:400]) + "\r\n").encode())
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbf" + "\n\n".join(haystack_paragraphs()[:300]).encode())
    one_line = tmp_path / "one-line.txt"  # no line break: pieces end at spaces
    one_line.write_text(" ".join(haystack_paragraphs()[:300]).replace("\n", " "))
    return {
        "multibyte text": TextDocument(multibyte),
        "CRLF file": FileDocument(crlf),
        "BOM file": FileDocument(bom),
        "one long line": FileDocument(one_line),
        "langchain parts": LangChainDocuments([Document(p) for p in haystack_paragraphs()[:50]]),
    }


@pytest.mark.parametrize("chunk_tokens", [37, 1000])
def test_the_piece_index_gives_every_chunk_exactly_as_a_straight_encoding(tokenizer, tmp_path, chunk_tokens):
    for name, source in _sources(tmp_path).items():
        indexed = chunk_document(source, tokenizer, chunk_tokens)
        held = chunk_document(_OneShot(source), tokenizer, chunk_tokens)
        assert indexed.num_chunks == held.num_chunks > 2, name
        assert indexed.parts == held.parts, name
        order = list(range(indexed.num_chunks))
        random.Random(5).shuffle(order)  # random access, then in order (remembered pieces)
        for index in order + list(range(indexed.num_chunks)):
            assert indexed.chunk_ids(index) == held.chunk_ids(index), (name, index)


def test_a_file_changed_after_chunking_is_refused_when_read(tokenizer, tmp_path):
    from memagent_graph.errors import DocumentChangedError

    path = tmp_path / "doc.txt"
    path.write_text("\n".join(haystack_paragraphs()[:400]))
    chunked = chunk_document(FileDocument(path), tokenizer, 500)
    path.write_text("\n".join(haystack_paragraphs()[:400]).replace("the", "a"))  # same file, other text
    with pytest.raises(DocumentChangedError, match="changed after it was chunked"):
        chunked.chunk_ids(chunked.num_chunks - 1)


def test_a_read_in_order_with_chunk_origins_decodes_each_chunk_once(tokenizer, needle, monkeypatch):
    chunked = chunk_document(TextDocument(needle.text), tokenizer, 300)
    decoded = []
    real_decode = tokenizer.decode
    monkeypatch.setattr(tokenizer, "decode", lambda ids: decoded.append(len(ids)) or real_decode(ids))
    for index in range(chunked.num_chunks):
        chunked.chunk_text(index), chunked.chunk_origin(index)
    assert len(decoded) == chunked.num_chunks


def test_a_read_in_order_restarts_the_file_once_not_once_per_piece(tokenizer, tmp_path):
    class CountingFile(FileDocument):
        restarts = 0

        def pieces_from(self, part, *, char, byte):
            CountingFile.restarts += 1
            return super().pieces_from(part, char=char, byte=byte)

    path = tmp_path / "doc.txt"
    path.write_text("\n".join(haystack_paragraphs()) * 3)
    source = CountingFile(path)
    indexed = chunk_document(source, tokenizer, 500)
    straight = chunk_document(_OneShot(source), tokenizer, 500)
    assert len(indexed.tokens.piece_chars[0]) > 4  # several pieces
    assert [indexed.chunk_ids(i) for i in range(indexed.num_chunks)] == [
        straight.chunk_ids(i) for i in range(straight.num_chunks)
    ]
    assert CountingFile.restarts == 1
