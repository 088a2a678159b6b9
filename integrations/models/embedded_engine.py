"""The embedded engine: a local Hugging Face causal LM in-process, with one background thread that groups
pending requests with the same sampling settings and runs one left-padded ``generate`` per group; passage
scoring and line-copy decoding for the quote memory policy. torch and transformers load on first use."""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.errors import ConfigError, ModelError
from memagent_graph.integrations.models import query_likelihood
from memagent_graph.integrations.models.embedded_files import MODEL_NAME, ensure_local_model, require, resolve_dtype
from memagent_graph.integrations.models.generation import Generation, Sampling, generate
from memagent_graph.precision import resolve_device

if TYPE_CHECKING:  # torch loads on first use
    import torch

logger = logging.getLogger(__name__)

_IDLE_POLL_S = 1.0  # how often an idle worker checks whether its model was garbage collected


@contextlib.contextmanager
def seeded_sampling(seed: int, device: str | torch.device) -> Iterator[None]:
    """Sample inside this block as if torch were seeded with ``seed`` on ``device`` (a model's), then give the
    process's generators back the state they had: a seeded ``generate`` does not reset anyone else's stream (a
    learner's in the same process). transformers' ``generate`` draws from torch's default generator and takes no
    other, so the seeded stream is that generator forked for the block; the fork is process-wide while it lasts
    (a caller holds the model's lock, and nothing else in the process samples meanwhile)."""
    import torch

    where = torch.device(device)
    cuda = [torch.cuda.current_device() if where.index is None else where.index] if where.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.default_generator.manual_seed(seed)
        for index in cuda:  # only the model's GPU: seeding every GPU would reset the ones not forked
            torch.cuda.default_generators[index].manual_seed(seed)
        yield


@dataclass
class Request:
    """One chat call: its messages, sampling, stop strings and, for the quote policy, the text whose lines
    alone the reply may be (requests with the same sampling and quote text share a ``generate``)."""

    messages: list[dict[str, str]]
    sampling: Sampling
    stop: tuple[str, ...]
    quote_from: str | None = None
    future: Future[ChatResult] = field(default_factory=Future)


class Engine:
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
        device: str = "cpu",
    ) -> None:
        self.model_path, self.adapter_path, self.dtype, self.device = model_path, adapter_path, dtype, device
        self.max_batch_size, self.batch_wait_s = max_batch_size, batch_wait_s
        self.seed, self.num_threads = seed, num_threads
        self.model: Any = None
        self.hf_tokenizer: Any = None
        self.eos_ids: frozenset[int] = frozenset()
        self.pad_id = 0
        self.start_ids: list[int] = []
        self.generate_calls = 0
        self._folder: Path | None = None
        self._tokenizer: HuggingFaceTokenizer | None = None
        self._load_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._compute_lock = threading.Lock()  # generate (worker thread) and scoring (caller threads) take turns
        self._queue: queue.Queue[Request] = queue.Queue()
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
            require("torch", "transformers", *(("peft",) if self.adapter_path else ()))
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # "Loading weights" bars would interleave with our own progress
            if self.num_threads is not None:
                torch.set_num_threads(self.num_threads)
            folder = self.folder()
            started = time.perf_counter()
            device = resolve_device(self.device, what="device")
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(
                folder, dtype=getattr(torch, resolve_dtype(self.dtype, device=device)), local_files_only=True
            )
            if self.adapter_path:
                model = _with_adapter(model, Path(self.adapter_path).expanduser())
            model.to(device).eval()
            eos = model.generation_config.eos_token_id
            eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
            if tokenizer.eos_token_id is not None:
                eos_ids.add(tokenizer.eos_token_id)
            self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos_ids)
            self.eos_ids = frozenset(eos_ids)
            self.start_ids = start_ids(tokenizer)
            self.hf_tokenizer = tokenizer
            self.model = model
            logger.info("loaded %s from %s in %.1f s", self.name, folder, time.perf_counter() - started)

    def submit(self, request: Request) -> Future[ChatResult]:
        self._queue.put(request)
        with self._start_lock:
            if self._worker is None:
                self._worker = threading.Thread(
                    target=_serve, args=(weakref.ref(self), self._queue), name="memagent-local-engine", daemon=True
                )
                self._worker.start()
        return request.future

    def serve(self, first: Request) -> None:
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
        groups: dict[tuple[Sampling, str | None], list[Request]] = {}
        for request in batch:
            if request.future.set_running_or_notify_cancel():  # False: the caller gave up waiting
                groups.setdefault((request.sampling, request.quote_from), []).append(request)
        for (sampling, quote_from), requests in groups.items():
            try:
                results = self._generate(sampling, quote_from, requests)
            except Exception as exc:
                for request in requests:
                    request.future.set_exception(exc)
            else:
                for request, result in zip(requests, results, strict=True):
                    request.future.set_result(result)

    def _generate(self, sampling: Sampling, quote_from: str | None, requests: Sequence[Request]) -> list[ChatResult]:
        tokenizer = self.hf_tokenizer
        texts = [
            tokenizer.apply_chat_template(r.messages, add_generation_prompt=True, tokenize=False) for r in requests
        ]
        prompts = tokenizer(texts, add_special_tokens=False)["input_ids"]
        processors = []
        if quote_from is not None:
            lines = [line.strip() for line in quote_from.splitlines() if line.strip()]
            ids = tokenizer(lines, add_special_tokens=False)["input_ids"]
            processors.append(_line_copier(ids, max(len(p) for p in prompts), self.eos_ids))
        seeded = contextlib.nullcontext() if self.seed is None else seeded_sampling(self.seed, self.model.device)
        with self._compute_lock, seeded:
            generations = generate(
                self.model,
                prompts,
                sampling,
                pad_id=self.pad_id,
                eos_ids=self.eos_ids,
                logits_processors=processors,
            )
        self.generate_calls += 1
        return [
            self._result(generation, len(prompt), request.stop)
            for generation, prompt, request in zip(generations, prompts, requests, strict=True)
        ]

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        """Sum of log p(question token | passage prompt, earlier question tokens), one per passage
        (`query_likelihood`)."""
        import torch

        self.load()
        encode = functools.partial(self.hf_tokenizer.encode, add_special_tokens=False)
        query = query_likelihood.question_ids(encode, question)
        prompts = [self.start_ids + prompt for prompt in query_likelihood.passage_prompt_ids(encode, passages)]
        with self._compute_lock, torch.inference_mode():
            scores = query_likelihood.query_log_likelihoods(self.model, query, prompts, pad_id=self.pad_id)
        return [float(score) for score in scores]

    def score_continuations(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """log p(continuation | prompt) for each continuation, summed over its tokens (the quote policy's answer
        extraction scores its candidate spans so; `query_likelihood.continuation_log_likelihoods`)."""
        self.load()
        encode = functools.partial(self.hf_tokenizer.encode, add_special_tokens=False)
        with self._compute_lock:
            return query_likelihood.continuation_log_likelihoods(
                self.model, self.start_ids + encode(prompt), [encode(c) for c in continuations]
            )

    def _result(self, generation: Generation, prompt_size: int, stop: tuple[str, ...]) -> ChatResult:
        finish_reason, output_size = generation.finish_reason, len(generation.response_ids)  # the EOS counts
        answer = generation.response_ids[:-1] if finish_reason == "stop" else generation.response_ids
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


def start_ids(tokenizer: Any) -> list[int]:
    """The ids ``tokenizer`` puts before any text (Gemma's ``<bos>``, which it always saw first in training; none
    for SmolLM2): scoring prompts are encoded without special tokens and start with these."""
    plain = tokenizer.encode("a", add_special_tokens=False)
    marked = tokenizer.encode("a")
    return next((marked[:at] for at in range(len(marked)) if marked[at : at + len(plain)] == plain), [])


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


def _with_adapter(model: Any, adapter: Path) -> Any:
    from peft import PeftModel

    if not adapter.is_dir():
        raise ConfigError(f"adapter folder not found: {adapter}; pass a folder written by PeftModel.save_pretrained")
    return PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()  # merged: plain-model speed


def _serve(engine_ref: weakref.ref[Engine], requests: queue.Queue[Request]) -> None:
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
