"""A simulated OpenAI-compatible server: real HTTP on loopback, for tests and benchmarks.

Routes ``/v1/models``, ``/v1/chat/completions``, ``/tokenize`` and ``/detokenize``. Replies come from
`RuleMemoryModel`, so answers are deterministic. ``delay_s`` is a fixed latency per completion and
``max_concurrency`` the number of completions served at once (others wait), like an engine with that many
batch slots. Every request body is recorded; ``status`` forces an error status (401, 404, 500, ...).
``faults`` injects transient faults into a seeded share of completions (`FaultPlan`); ``on_completion`` is
called with each completion request's index before it is answered (tests kill clients there).
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from langchain_core.messages import HumanMessage

from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.testing import RuleMemoryModel

Fault = Literal["429", "500", "502", "503", "hang", "reset", "truncated", "empty"]
FAULTS: tuple[Fault, ...] = ("429", "500", "502", "503", "hang", "reset", "truncated", "empty")


@dataclass(frozen=True)
class FaultPlan:
    """Which completions fail and how: each request draws from ``random.Random(seed)``; with probability ``rate``
    it gets one of ``kinds`` (uniformly). A retried request draws again, so every fault is transient.

    ``429`` carries ``Retry-After: retry_after_s``; ``hang`` answers only after ``hang_s`` (past the client's
    timeout); ``reset`` closes the connection with a TCP reset; ``truncated`` sends half of the JSON body;
    ``empty`` answers 200 with an empty completion.
    """

    rate: float = 0.2
    kinds: tuple[Fault, ...] = FAULTS
    seed: int = 0
    retry_after_s: float = 0.05
    hang_s: float = 2.0


@dataclass
class SimulatedOpenAIServer:
    """Start with ``with SimulatedOpenAIServer() as server:``; point clients at ``server.base_url``."""

    model_name: str = "rule-model"
    tokenizer: Tokenizer | None = None
    status: int = 200
    delay_s: float = 0.0
    max_concurrency: int | None = None
    faults: FaultPlan | None = None
    on_completion: Callable[[int], None] | None = None
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    max_in_flight: int = 0
    injected: Counter[str] = field(default_factory=Counter)
    outcomes: list[str] = field(default_factory=list)
    """Per completion request, in order: ``ok`` or the injected fault."""

    def __post_init__(self) -> None:
        self._rules = RuleMemoryModel()
        self._fault_rng = random.Random(self.faults.seed if self.faults else 0)
        self._in_flight = 0
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.max_concurrency) if self.max_concurrency else None
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as model servers answer: a client reuses its connections
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall between

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._handle(self, "GET", {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                server._handle(self, "POST", json.loads(self.rfile.read(length) or b"{}"))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> SimulatedOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def chat_requests(self) -> list[dict[str, Any]]:
        return [body for path, body in self.requests if path.endswith("/chat/completions")]

    def _handle(self, handler: BaseHTTPRequestHandler, method: str, body: dict[str, Any]) -> None:
        path = handler.path
        self.requests.append((path, body))
        if path == "/v1/chat/completions" and self.on_completion is not None:
            self.on_completion(len(self.chat_requests()) - 1)
        if self.status != 200:
            return _send(
                handler, self.status, {"error": {"message": f"forced status {self.status}", "code": self.status}}
            )
        if path == "/v1/models":
            return _send(handler, 200, {"object": "list", "data": [{"id": self.model_name, "object": "model"}]})
        if path == "/v1/chat/completions":
            if body.get("model") != self.model_name:
                return _send(handler, 404, {"error": {"message": f"model {body.get('model')} does not exist"}})
            fault = self._draw_fault()
            self.outcomes.append(fault or "ok")
            if fault is not None:
                return self._inject(handler, fault, body)
            with self._slots or contextlib.nullcontext():
                with self._lock:
                    self._in_flight += 1
                    self.max_in_flight = max(self.max_in_flight, self._in_flight)
                time.sleep(self.delay_s)
                with self._lock:
                    self._in_flight -= 1
                    text = self._rules._reply([HumanMessage(body["messages"][-1]["content"])], {})
            return _send(handler, 200, _completion(self.model_name, text))
        if path == "/tokenize" and self.tokenizer is not None:
            ids = self.tokenizer.encode(body["prompt"])
            return _send(handler, 200, {"tokens": ids, "count": len(ids)})
        if path == "/detokenize" and self.tokenizer is not None:
            return _send(handler, 200, {"prompt": self.tokenizer.decode(body["tokens"])})
        return _send(handler, 404, {"error": {"message": f"no route {path}"}})

    def _draw_fault(self) -> Fault | None:
        if self.faults is None:
            return None
        with self._lock:
            if self._fault_rng.random() >= self.faults.rate:
                return None
            fault = self._fault_rng.choice(self.faults.kinds)
            self.injected[fault] += 1
        return fault

    def _inject(self, handler: BaseHTTPRequestHandler, fault: Fault, body: dict[str, Any]) -> None:
        assert self.faults is not None
        if fault == "429":
            headers = {"Retry-After": str(self.faults.retry_after_s)}
            return _send(handler, 429, {"error": {"message": "rate limited", "code": 429}}, headers=headers)
        if fault in ("500", "502", "503"):
            return _send(handler, int(fault), {"error": {"message": f"injected {fault}", "code": int(fault)}})
        if fault == "hang":
            time.sleep(self.faults.hang_s)
            return _send(handler, 503, {"error": {"message": "answered too late"}})
        if fault == "reset":
            # SO_LINGER 0: close() sends a TCP RST, as a crashed proxy or a dropped connection does
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.close_connection = True
            handler.connection.close()
            return None
        if fault == "truncated":
            whole = json.dumps(_completion(self.model_name, "cut short")).encode()
            return _send_bytes(handler, 200, whole[: len(whole) // 2])
        text = ""  # "empty"
        return _send(handler, 200, _completion(self.model_name, text))


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _send(
    handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any], *, headers: dict[str, str] | None = None
) -> None:
    _send_bytes(handler, status, json.dumps(payload).encode(), headers=headers)


def _send_bytes(
    handler: BaseHTTPRequestHandler, status: int, data: bytes, *, headers: dict[str, str] | None = None
) -> None:
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that timed out has gone
        handler.end_headers()
        handler.wfile.write(data)
