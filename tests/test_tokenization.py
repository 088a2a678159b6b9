import logging

import pytest

from memagent_graph import HuggingFaceTokenizer
from memagent_graph.documents import ApproximateTokenizer, VLLMServerTokenizer
from memagent_graph.errors import TokenizerError
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

TEXT = "Zürich — 東京 and naïve café. \n\t  Spaces   kept."


def test_hugging_face_tokenizer_loads_from_a_folder(tokenizer, tmp_path):
    tokenizer._backend.save(str(tmp_path / "tokenizer.json"))
    loaded = HuggingFaceTokenizer(tmp_path)
    assert loaded.encode(TEXT) == tokenizer.encode(TEXT)
    assert loaded.name == tmp_path.name


def test_hugging_face_tokenizer_round_trips_without_special_tokens(tokenizer):
    ids = tokenizer.encode(TEXT)
    assert tokenizer.decode(ids) == TEXT
    assert tokenizer.count(TEXT) == len(ids)


def test_encode_batch_equals_encode(tokenizer):
    assert tokenizer.encode_batch([TEXT, "two"]) == [tokenizer.encode(TEXT), tokenizer.encode("two")]


def test_missing_tokenizer_path_is_a_clear_error(tmp_path):
    with pytest.raises(TokenizerError, match="tokenizer not found"):
        HuggingFaceTokenizer(tmp_path / "nope")


def test_unsupported_tokenizer_object_is_a_clear_error():
    with pytest.raises(TokenizerError, match="cannot use int as a tokenizer"):
        HuggingFaceTokenizer(42)


def test_approximate_tokenizer_round_trips_exactly():
    approx = ApproximateTokenizer()
    assert approx.decode(approx.encode(TEXT)) == TEXT
    assert approx.count(TEXT) == len(approx.encode(TEXT))


def test_approximate_tokenizer_warns_once(caplog, monkeypatch):
    monkeypatch.setattr(ApproximateTokenizer, "_warned", False)
    with caplog.at_level(logging.WARNING):
        ApproximateTokenizer()
        ApproximateTokenizer()
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "approximate" in caplog.records[0].message


def test_approximate_counts_are_close_to_a_real_bpe_on_english(tokenizer, needle):
    ratio = ApproximateTokenizer().count(needle.text) / tokenizer.count(needle.text)
    assert 0.5 < ratio < 2.0


def test_vllm_server_tokenizer_uses_tokenize_and_detokenize(tokenizer):
    with SimulatedOpenAIServer(tokenizer=tokenizer) as server:
        remote = VLLMServerTokenizer(server.base_url, server.model_name)
        assert remote.supported()
        assert remote.encode(TEXT) == tokenizer.encode(TEXT)
        assert remote.decode(tokenizer.encode(TEXT)) == TEXT
        assert server.requests[-1] == ("/detokenize", {"model": "rule-model", "tokens": tokenizer.encode(TEXT)})


def test_vllm_server_tokenizer_reports_a_server_without_tokenize():
    with SimulatedOpenAIServer(tokenizer=None) as server:
        remote = VLLMServerTokenizer(server.base_url, server.model_name)
        assert not remote.supported()
        with pytest.raises(TokenizerError, match="HTTP 404"):
            remote.encode("x")


def test_approximate_tokenizers_agree_on_ids():
    first, second = ApproximateTokenizer(), ApproximateTokenizer()
    assert second.decode(first.encode("shared ids across instances")) == "shared ids across instances"


def test_a_server_whose_tokenize_is_not_vllms_is_not_supported(tokenizer):
    from memagent_graph.testing.simulated_server import SimulatedOpenAIServer as Server

    class OtherTokenize(Server):
        def _handle(self, handler, method, body):
            if handler.path == "/tokenize":
                from memagent_graph.testing.simulated_server import _send

                return _send(handler, 200, {"ids": [1, 2]})
            return super()._handle(handler, method, body)

    with OtherTokenize(tokenizer=tokenizer) as server:
        remote = VLLMServerTokenizer(server.base_url, server.model_name)
        assert not remote.supported()
        with pytest.raises(TokenizerError, match="without vLLM's 'tokens'"):
            remote.encode("x")
