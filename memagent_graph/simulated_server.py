"""A simulated OpenAI-compatible server: real HTTP on loopback, for tests and benchmarks.

Routes ``/v1/models``, ``/v1/chat/completions``, ``/tokenize`` and ``/detokenize``. Replies come from
`RuleMemoryModel`, so answers are deterministic. ``delay_s`` is a fixed latency per completion and
``max_concurrency`` the number of completions served at once (others wait), like an engine with that many
batch slots. Every request body is recorded; ``status`` forces an error status (401, 404, 500, ...).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from langchain_core.messages import HumanMessage

from memagent_graph.testing import RuleMemoryModel
from memagent_graph.tokenization import Tokenizer


@dataclass
class SimulatedOpenAIServer:
    """Start with ``with SimulatedOpenAIServer() as server:``; point clients at ``server.base_url``."""

    model_name: str = "rule-model"
    tokenizer: Tokenizer | None = None
    status: int = 200
    delay_s: float = 0.0
    max_concurrency: int | None = None
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        self._rules = RuleMemoryModel()
        self._in_flight = 0
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.max_concurrency) if self.max_concurrency else None
        server = self

        class Handler(BaseHTTPRequestHandler):
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
        if self.status != 200:
            return _send(
                handler, self.status, {"error": {"message": f"forced status {self.status}", "code": self.status}}
            )
        if path == "/v1/models":
            return _send(handler, 200, {"object": "list", "data": [{"id": self.model_name, "object": "model"}]})
        if path == "/v1/chat/completions":
            if body.get("model") != self.model_name:
                return _send(handler, 404, {"error": {"message": f"model {body.get('model')} does not exist"}})
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


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
