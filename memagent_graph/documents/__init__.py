"""Documents and how they become token-exact chunks.

`sources` (the `DocumentSource` protocol: text, files streamed from disk, LangChain documents), `tokenization`
(the `Tokenizer` protocol and its implementations), `chunking` (a document cut into chunks by a tokenizer),
`registry` (documents by id, chunked once per tokenizer and chunk size), `sanitize` (text a model may not
see), `haystack` (generated needle-in-a-haystack documents for demos and tests).
"""

from memagent_graph.documents.chunking import ChunkedDocument, ChunkOrigin, chunk_document
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.sources import DocumentSource, FileDocument, LangChainDocuments, TextDocument
from memagent_graph.documents.tokenization import (
    ApproximateTokenizer,
    HuggingFaceTokenizer,
    Tokenizer,
    VLLMServerTokenizer,
)

__all__ = [
    "ApproximateTokenizer",
    "ChunkOrigin",
    "ChunkedDocument",
    "DocumentRegistry",
    "DocumentSource",
    "FileDocument",
    "HuggingFaceTokenizer",
    "LangChainDocuments",
    "TextDocument",
    "Tokenizer",
    "VLLMServerTokenizer",
    "chunk_document",
]
