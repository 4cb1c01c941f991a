"""Real LLM backends: hf (tiny random Qwen2 built here), openai (stdlib client against a local
OpenAI-compatible server that serves the tiny model through HFBackend) and vllm (request construction
with a fake engine; a real run only where vLLM and a GPU exist).

Without torch/transformers (the hf extra) the hf tests skip; the openai fault-injection tests then run
against the same server answering from a canned stub, and the vllm tests with the fake engine still run.
"""

from __future__ import annotations

import dataclasses
import http.client
import io
import json
import math
import os
import pickle
import socket
import sys
import threading
import time
import types
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mascot.backends import vllm as vllm_backend  # noqa: E402
from mascot.backends.base import Request, Response, Sampling  # noqa: E402
from mascot.backends.hf import HFBackend, completion_lengths  # noqa: E402
from mascot.backends.openai import OpenAIBackend, build_payload  # noqa: E402
from mascot.backends.vllm import VLLMBackend, build_chat_call  # noqa: E402
from tiny_model import build_tiny_qwen2  # noqa: E402  (imports torch/transformers lazily)

GREEDY = Sampling(temperature=0.0, top_p=1.0, max_tokens=10)

CONVERSATIONS = [
    [{"role": "user", "content": "hi"}],
    [
        {"role": "system", "content": "You are agent 3 of 5 in a state-tracking task."},
        {"role": "user", "content": 'The current state is {"x": 12, "y": -3}. What is the next state?'},
    ],
    [{"role": "user", "content": "Your neighbours reported: agent 1 says 14, agent 2 says 15, agent 4 says 13."}],
    [
        {"role": "system", "content": "Reply with JSON only."},
        {"role": "user", "content": "step 1"},
        {"role": "assistant", "content": '{"state": 1}'},
        {"role": "user", "content": "step 2: deliberate, vote and debate"},
    ],
    [{"role": "user", "content": "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 25 50 100"}],
]


# ---------------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------------


def _have_hf() -> bool:
    try:
        import tokenizers  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


HAVE_HF = _have_hf()


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    if not HAVE_HF:
        pytest.skip("needs the hf extra (torch, transformers, tokenizers)")
    return build_tiny_qwen2(tmp_path_factory.mktemp("tiny_qwen2"))


@pytest.fixture(scope="module")
def stop_dir(tmp_path_factory):
    if not HAVE_HF:
        pytest.skip("needs the hf extra (torch, transformers, tokenizers)")
    return build_tiny_qwen2(tmp_path_factory.mktemp("tiny_qwen2_stop"), always_stop=True)


@pytest.fixture(scope="module")
def hf(tiny_dir):
    return HFBackend(tiny_dir, device="cpu", batch_size=8)


def reference_prompt_tokens(model_dir, messages) -> int:
    """Independent count: render the Qwen format by hand, tokenize with the raw `tokenizers` library."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    text += "<|im_start|>assistant\n"
    return len(tok.encode(text, add_special_tokens=False).ids)


# ---------------------------------------------------------------------------------------------------
# hf backend
# ---------------------------------------------------------------------------------------------------


def test_hf_batched_one_response_each_with_exact_token_counts(hf, tiny_dir):
    reqs = [Request(c, GREEDY) for c in CONVERSATIONS]
    out = hf.generate(reqs)
    assert len(out) == len(reqs)
    lengths = set()
    for conv, r in zip(CONVERSATIONS, out):
        assert isinstance(r, Response) and r.error is None
        assert r.prompt_tokens == reference_prompt_tokens(tiny_dir, conv)
        assert r.completion_tokens == GREEDY.max_tokens and r.finish_reason == "length"
        assert isinstance(r.text, str) and r.text
        assert r.latency_s is not None and r.latency_s > 0
        lengths.add(r.prompt_tokens)
    assert len(lengths) == len(CONVERSATIONS)  # really different lengths -> real left padding


def test_hf_left_padding_alone_equals_batched_greedy(tiny_dir, hf):
    reqs = [Request(c, GREEDY) for c in CONVERSATIONS]
    batched = hf.generate(reqs)
    small = HFBackend(tiny_dir, device="cpu", batch_size=2).generate(reqs)
    for i, req in enumerate(reqs):
        (alone,) = hf.generate([req])
        for other in (batched[i], small[i]):
            assert (alone.text, alone.prompt_tokens, alone.completion_tokens, alone.finish_reason) == (
                other.text,
                other.prompt_tokens,
                other.completion_tokens,
                other.finish_reason,
            )


def test_hf_max_tokens_and_groups_keep_order(hf):
    reqs = [
        Request(CONVERSATIONS[i % len(CONVERSATIONS)], Sampling(temperature=0.0, top_p=1.0, max_tokens=m))
        for i, m in enumerate([3, 7, 1, 3, 5, 1])
    ]
    out = hf.generate(reqs)
    assert [r.completion_tokens for r in out] == [3, 7, 1, 3, 5, 1]
    assert all(r.finish_reason == "length" for r in out)
    # a group's results are the same as asking for that group alone
    (a,) = hf.generate([reqs[1]])
    assert a.text == out[1].text


def test_hf_stop_at_eos(stop_dir):
    be = HFBackend(stop_dir, device="cpu")
    reqs = [Request(c, GREEDY) for c in CONVERSATIONS[:3]]
    reqs.append(Request(CONVERSATIONS[3], Sampling(temperature=0.8, top_p=0.5, max_tokens=20, seed=1)))
    for r in be.generate(reqs):
        assert (r.text, r.completion_tokens, r.finish_reason, r.error) == ("", 1, "stop", None)


def test_completion_lengths_counts_through_first_eos():  # pure python, no torch needed
    eos = {2, 7}
    rows = [[5, 6, 2, 2, 2], [5, 5, 5, 5, 5], [7, 0, 0, 0, 0], [4, 2, 7, 1, 1]]
    assert completion_lengths(rows, eos) == [(3, 2, "stop"), (5, None, "length"), (1, 0, "stop"), (2, 1, "stop")]


def test_hf_sampling_seeded_reproducible_and_global_rng_untouched(hf):
    import torch

    s = Sampling(temperature=1.0, top_p=0.95, max_tokens=12)
    reqs = [Request(c, dataclasses.replace(s, seed=100 + i)) for i, c in enumerate(CONVERSATIONS)]
    state = torch.get_rng_state()
    a = hf.generate(reqs)
    b = hf.generate(reqs)
    assert torch.equal(state, torch.get_rng_state())
    assert [r.text for r in a] == [r.text for r in b]
    c = hf.generate([Request(r.messages, dataclasses.replace(s, seed=r.sampling.seed + 1000)) for r in reqs])
    assert [r.text for r in a] != [r.text for r in c]
    # the seed lives in Sampling: the same Sampling built two ways gives the same samples
    d = hf.generate([Request(CONVERSATIONS[0], Sampling(temperature=1.0, top_p=0.95, max_tokens=12, seed=5))] * 2)
    e = hf.generate([Request(CONVERSATIONS[0], dataclasses.replace(s, seed=5))] * 2)
    assert [r.text for r in d] == [r.text for r in e]


def test_hf_bad_request_fails_alone(hf):
    reqs = [Request(CONVERSATIONS[0], GREEDY), Request([{"content": "no role"}], GREEDY), Request(["hi"], GREEDY)]
    good, bad, worse = hf.generate(reqs)
    assert good.error is None and good.text
    for r in (bad, worse):
        assert r.text == "" and r.error and "messages" in r.error


def test_hf_refuses_a_max_tokens_beyond_the_models_context(hf):
    """Found by an outside tester: --max-tokens 1e11 generated for minutes with no output."""
    huge = Request(CONVERSATIONS[0], Sampling(temperature=0.0, top_p=1.0, max_tokens=100_000_000_000))
    ok, bad = hf.generate([Request(CONVERSATIONS[0], GREEDY), huge])
    assert ok.error is None and ok.text
    assert bad.text == "" and "exceeds the model's context of 512 tokens" in bad.error


def test_hf_errors_name_the_problem(tiny_dir, tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="local model directory"):
        HFBackend(str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="batch_size"):
        HFBackend(tiny_dir, batch_size=0)
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(RuntimeError, match=r'pip install -e "\.\[hf\]"'):
        HFBackend(tiny_dir)


def test_hf_describe(hf):
    import torch

    d = hf.describe()
    assert d["backend"] == "hf" and d["batch_size"] == 8 and d["device"] == "cpu"
    assert d["torch"] == torch.__version__ and "transformers" in d
    json.dumps(d)


def test_hf_identity_apart_from_provenance(hf, tiny_dir):
    from mascot.backends import identity_of

    ident = {"backend": "hf", "model": os.fspath(tiny_dir), "dtype": None, "batch_size": 8, "device": "cpu"}
    assert hf.identity() == ident == identity_of("hf", model=tiny_dir, batch_size=8, device="cpu")
    assert identity_of("hf", model=tiny_dir, dtype="bfloat16")["dtype"] == "bfloat16"
    assert "torch" in hf.describe() and "torch" not in hf.identity()


def test_hf_request_errors_come_back_programming_errors_propagate(hf, monkeypatch):
    req = Request(CONVERSATIONS[0], GREEDY)

    def fails_with(exc):
        def f(*args, **kwargs):
            raise exc

        return f

    for exc in (RuntimeError("CUDA out of memory"), IndexError("index out of range in self"), ValueError("too long")):
        monkeypatch.setattr(hf, "_run_batch", fails_with(exc))
        (r,) = hf.generate([req])
        assert r.text == "" and "generate failed" in r.error and str(exc) in r.error
    for exc in (AttributeError("bug"), TypeError("bug"), KeyError("bug"), NotImplementedError("bug")):
        monkeypatch.setattr(hf, "_run_batch", fails_with(exc))
        with pytest.raises(type(exc)):
            hf.generate([req])
    monkeypatch.undo()
    TemplateError = type("TemplateError", (Exception,), {})  # jinja2's, as transformers raises it
    monkeypatch.setattr(hf.tokenizer, "apply_chat_template", fails_with(TemplateError("roles must alternate")))
    (r,) = hf.generate([req])
    assert r.text == "" and "chat template failed" in r.error
    monkeypatch.setattr(hf.tokenizer, "apply_chat_template", fails_with(AttributeError("bug")))
    with pytest.raises(AttributeError):
        hf.generate([req])


# ---------------------------------------------------------------------------------------------------
# openai backend against a local OpenAI-compatible server (serving the tiny model via HFBackend)
# ---------------------------------------------------------------------------------------------------


class FakeOpenAIServer:
    """ThreadingHTTPServer on 127.0.0.1:<free port>. ``plan[content_of_last_message]`` is a list of faults
    served to the first calls for that message ("429", "429:<retry-after>", "5xx", "400", "echo400",
    "sleep", "close"), after which the model answers normally."""

    def __init__(self, backend):
        self.backend = backend
        self.lock = threading.Lock()
        self.model_lock = threading.Lock()
        self.reset()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                with server.lock:
                    server.inflight += 1
                    server.max_inflight = max(server.max_inflight, server.inflight)
                self.counted = True
                try:
                    server.handle(self)
                except (BrokenPipeError, ConnectionResetError):
                    server.client_gone.set()  # the client hung up before the reply was written (timeout tests)
                finally:
                    server.done(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def reset(self):
        with self.lock:
            self.plan: dict[str, list[str]] = {}
            self.calls: dict[str, int] = defaultdict(int)
            self.seen: list[dict] = []
            self.inflight = 0
            self.max_inflight = 0
            self.delay = 0.0
            self.client_gone = threading.Event()

    def done(self, h):
        """The request leaves the in-flight count (once): before its reply is written, so a client that sends
        its next request as soon as it reads this reply is never counted twice."""
        if getattr(h, "counted", False):
            h.counted = False
            with self.lock:
                self.inflight -= 1

    def _send(self, h, code, obj, headers=()):
        self.done(h)
        body = json.dumps(obj).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def handle(self, h):
        raw = h.rfile.read(int(h.headers.get("Content-Length", 0)))
        payload = json.loads(raw)
        key = payload["messages"][-1]["content"]
        with self.lock:
            self.seen.append({"path": h.path, "headers": dict(h.headers.items()), "payload": payload})
            self.calls[key] += 1
            todo = self.plan.get(key)
            action = todo.pop(0) if todo else "ok"
        if h.path != "/v1/chat/completions":
            return self._send(h, 404, {"error": "not found"})
        if action.startswith("429"):
            retry_after = action.split(":", 1)[1] if ":" in action else "0"
            return self._send(h, 429, {"error": "rate limited"}, [("Retry-After", retry_after)])
        if action.isdigit() and action.startswith("5"):
            return self._send(h, int(action), {"error": "server trouble"})
        if action == "400":
            return self._send(h, 400, {"error": {"message": "bad request: max_tokens too large"}})
        if action == "echo400":  # a careless server that echoes the credentials back
            return self._send(h, 400, {"error": f"invalid key {h.headers.get('Authorization')}"})
        if action == "echorepr400":  # ... as a Python repr inside its JSON body
            key = h.headers.get("Authorization", "").removeprefix("Bearer ")
            return self._send(h, 400, {"error": f"invalid key repr={key!r}"})
        if action == "302":  # a redirect (never followed: the key would go with it)
            return self._send(h, 302, {"error": "moved"}, [("Location", "http://127.0.0.1:9/v1/chat/completions")])
        if action == "banner":  # not an HTTP server at all (an SSH port): its banner and CR LF
            self.done(h)
            h.wfile.write(b"SSH-2.0-OpenSSH_9.6\r\n")
            h.close_connection = True
            return None
        if action == "close":
            h.close_connection = True
            return None  # no status line at all -> RemoteDisconnected on the client
        if action in ("negtok", "inftok", "nullcontent"):  # impossible token counts, or no content at all
            usage = {"negtok": '{"prompt_tokens": -50}', "inftok": '{"prompt_tokens": 1e999}'}.get(
                action, '{"prompt_tokens": 5, "completion_tokens": 3}'
            )
            message = '{"content": null, "refusal": "no"}' if action == "nullcontent" else '{"content": "x"}'
            body = '{"choices": [{"message": ' + message + ', "finish_reason": "stop"}], "usage": ' + usage + "}"
            self.done(h)
            h.send_response(200)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body.encode())
            return None
        if action == "slowhdr":  # a status line, then a header line every 0.1 s for 6 s (never a silent read)
            self.done(h)
            h.wfile.write(b"HTTP/1.0 200 OK\r\n")
            for i in range(60):
                h.wfile.write(b"X-%d: a\r\n" % i)
                h.wfile.flush()
                time.sleep(0.1)
            return None
        if action == "trickle":  # headers at once, then the body a byte every 0.1 s (never a silent read)
            body = json.dumps({"choices": [{"message": {"content": "x" * 100}}]}).encode()
            self.done(h)
            h.send_response(200)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            for i in range(len(body)):
                h.wfile.write(body[i : i + 1])
                h.wfile.flush()
                time.sleep(0.1)
            return None
        if action == "short":  # the body cut off: the connection closes 80 bytes short of Content-Length
            body = b'{"choices": [{"message": {"content": "cut'
            self.done(h)
            h.send_response(200)
            h.send_header("Content-Length", str(len(body) + 80))
            h.end_headers()
            h.wfile.write(body)
            h.close_connection = True
            return None
        if action == "sleep":
            time.sleep(1.0)
        elif self.delay:
            time.sleep(self.delay)
        req = Request(
            payload["messages"],
            Sampling(
                temperature=payload["temperature"],
                top_p=payload["top_p"],
                max_tokens=payload["max_tokens"],
                seed=payload.get("seed"),
            ),
        )
        with self.model_lock:
            (r,) = self.backend.generate([req])
        return self._send(
            h,
            200,
            {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "model": payload["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": r.text}, "finish_reason": r.finish_reason}
                ],
                "usage": {
                    "prompt_tokens": r.prompt_tokens,
                    "completion_tokens": r.completion_tokens,
                    "total_tokens": r.prompt_tokens + r.completion_tokens,
                },
            },
        )

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class CannedBackend:
    """Stands in for the tiny model where torch is missing: echoes the last message, max_tokens tokens."""

    def generate(self, requests):
        return [
            Response(f"echo: {r.messages[-1]['content']}", len(r.messages), r.sampling.max_tokens, "length")
            for r in requests
        ]


@pytest.fixture(scope="module")
def server(request):
    srv = FakeOpenAIServer(request.getfixturevalue("hf") if HAVE_HF else CannedBackend())
    yield srv
    srv.close()


@pytest.fixture
def srv(server, monkeypatch):
    server.reset()
    monkeypatch.delenv("MASCOT_TEST_KEY", raising=False)
    return server


def client(srv, **kw):
    kw.setdefault("api_key_env", "MASCOT_TEST_KEY")
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("timeout_s", 10.0)
    return OpenAIBackend("tiny-qwen2", base_url=srv.base_url, **kw)


def test_openai_roundtrip_matches_hf_and_sends_the_right_payload(srv, hf):
    schema = {"type": "object", "properties": {"state": {"type": "integer"}}, "required": ["state"]}
    reqs = [Request(c, dataclasses.replace(GREEDY, seed=i)) for i, c in enumerate(CONVERSATIONS)]
    reqs[1] = Request(CONVERSATIONS[1], GREEDY, json_schema=schema)
    out = client(srv).generate(reqs)
    ref = hf.generate(reqs)
    for a, b in zip(out, ref):
        assert a.error is None
        assert (a.text, a.prompt_tokens, a.completion_tokens, a.finish_reason) == (
            b.text,
            b.prompt_tokens,
            b.completion_tokens,
            b.finish_reason,
        )
        assert a.latency_s > 0
    by_key = {s["payload"]["messages"][-1]["content"]: s for s in srv.seen}
    p0 = by_key[CONVERSATIONS[0][-1]["content"]]["payload"]
    assert p0 == build_payload("tiny-qwen2", reqs[0])
    assert p0["model"] == "tiny-qwen2" and p0["seed"] == 0 and p0["max_tokens"] == 10
    assert p0["temperature"] == 0.0 and p0["top_p"] == 1.0 and "response_format" not in p0
    p1 = by_key[CONVERSATIONS[1][-1]["content"]]["payload"]
    assert "seed" not in p1
    assert p1["response_format"] == {"type": "json_schema", "json_schema": {"name": "state", "schema": schema}}
    assert all(s["path"] == "/v1/chat/completions" for s in srv.seen)
    assert all("Authorization" not in s["headers"] for s in srv.seen)  # no key in the env -> no header


def test_openai_retries_429_and_5xx_then_succeeds(srv):
    key = CONVERSATIONS[2][-1]["content"]
    srv.plan[key] = ["429", "500", "429", "503"]
    (r,) = client(srv, max_retries=5).generate([Request(CONVERSATIONS[2], GREEDY)])
    assert r.error is None and r.completion_tokens == 10 and r.text
    assert srv.calls[key] == 5


def test_openai_honours_retry_after(srv):
    key = CONVERSATIONS[0][-1]["content"]
    srv.plan[key] = ["429:0.4"]
    (r,) = client(srv, backoff_s=0.0).generate([Request(CONVERSATIONS[0], GREEDY)])
    assert r.error is None and srv.calls[key] == 2
    assert r.latency_s >= 0.4


def test_openai_400_fails_immediately_others_unaffected(srv):
    bad = CONVERSATIONS[3][-1]["content"]
    srv.plan[bad] = ["400"]
    out = client(srv, max_retries=5).generate([Request(c, GREEDY) for c in CONVERSATIONS])
    assert out[3].text == "" and "HTTP 400" in out[3].error and "max_tokens too large" in out[3].error
    assert srv.calls[bad] == 1
    assert all(r.error is None for i, r in enumerate(out) if i != 3)


def test_openai_timeout_and_dropped_connection_are_retried(srv):
    k0, k1 = CONVERSATIONS[0][-1]["content"], CONVERSATIONS[1][-1]["content"]
    srv.plan[k0] = ["sleep"]
    srv.plan[k1] = ["close", "close"]
    out = client(srv, timeout_s=0.3).generate([Request(CONVERSATIONS[0], GREEDY), Request(CONVERSATIONS[1], GREEDY)])
    assert [r.error for r in out] == [None, None]
    assert srv.calls[k0] == 2 and srv.calls[k1] == 3


def test_openai_gives_up_after_max_retries(srv):
    key = CONVERSATIONS[4][-1]["content"]
    srv.plan[key] = ["500"] * 10
    (r,) = client(srv, max_retries=2).generate([Request(CONVERSATIONS[4], GREEDY)])
    assert r.text == "" and r.error and "3 attempt" in r.error and "HTTP 500" in r.error
    assert srv.calls[key] == 3


def test_openai_concurrency_is_bounded(srv):
    srv.delay = 0.1
    reqs = [Request([{"role": "user", "content": f"request {i}"}], Sampling(0.0, 1.0, 2)) for i in range(12)]
    out = client(srv, concurrency=3, adaptive=False).generate(reqs)  # the fixed cap (adaptive: tests below)
    assert all(r.error is None for r in out)
    assert 2 <= srv.max_inflight <= 3


def test_openai_api_key_only_in_authorization_header(srv, monkeypatch, tmp_path):
    secret = "sk-test-DO-NOT-LEAK-0123456789"
    monkeypatch.setenv("MASCOT_TEST_KEY", secret)
    be = client(srv, max_retries=1, backoff_s=0.0)
    k_ok, k_echo = CONVERSATIONS[0][-1]["content"], CONVERSATIONS[1][-1]["content"]
    srv.plan[k_echo] = ["echo400"]
    ok, echoed = be.generate([Request(CONVERSATIONS[0], GREEDY), Request(CONVERSATIONS[1], GREEDY)])
    assert ok.error is None
    seen = {s["payload"]["messages"][-1]["content"]: s for s in srv.seen}
    assert seen[k_ok]["headers"]["Authorization"] == f"Bearer {secret}"
    assert secret not in json.dumps(seen[k_ok]["payload"])
    assert echoed.error and "HTTP 400" in echoed.error and "***" in echoed.error
    # a connection error to a closed port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    dead = OpenAIBackend(
        "m", base_url=f"http://127.0.0.1:{dead_port}/v1", api_key_env="MASCOT_TEST_KEY", max_retries=1, backoff_s=0.0
    )
    (down,) = dead.generate([Request(CONVERSATIONS[0], GREEDY)])
    assert down.error and "connection" in down.error.lower()
    d = be.describe()
    assert d["api_key_env"] == "MASCOT_TEST_KEY" and d["api_key_set"] is True
    blob = pickle.dumps(be)
    for text in (json.dumps(d), repr(be), str(be), json.dumps([r.to_dict() for r in (ok, echoed, down)])):
        assert secret not in text
    assert secret.encode() not in blob
    clone = pickle.loads(blob)  # re-reads the key from the environment where it is unpickled
    (again,) = clone.generate([Request(CONVERSATIONS[0], GREEDY)])
    assert again.error is None and srv.seen[-1]["headers"]["Authorization"] == f"Bearer {secret}"


def test_openai_validates_options():
    with pytest.raises(ValueError, match="base_url"):
        OpenAIBackend("m", base_url="file:///etc/passwd")
    with pytest.raises(ValueError, match="credentials"):
        OpenAIBackend("m", base_url="http://user:hunter2@127.0.0.1:8000/v1")
    with pytest.raises(ValueError, match="concurrency"):
        OpenAIBackend("m", concurrency=0)
    with pytest.raises(ValueError, match="max_retries"):
        OpenAIBackend("m", max_retries=-1)
    assert OpenAIBackend("m").generate([]) == []


def test_openai_identity_apart_from_provenance():
    from mascot.backends import identity_of, run_spec

    be = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", concurrency=3, timeout_s=5.0, max_retries=1)
    assert (
        be.identity()
        == {"backend": "openai", "model": "m"}
        == identity_of("openai", model="m", base_url="http://other:1/v1")
    )
    assert run_spec(be.identity()) == {"name": "openai", "model": "m", "options": {}}
    assert be.describe()["base_url"] == "http://127.0.0.1:9/v1" and be.describe()["concurrency"] == 3


def test_openai_request_errors_come_back_programming_errors_propagate(srv, monkeypatch, capsys):
    be = client(srv)
    (r,) = be.generate([Request([{"role": "user", "content": object()}], GREEDY)])  # not JSON
    assert r.text == "" and "not JSON-serialisable" in r.error
    for body in (
        b"not json",
        b'{"choices": []}',
        b'{"choices": [{"message": ["x"]}]}',
        b'{"choices": [{"message": {"content": 5}}]}',
        b'{"choices": [{}], "usage": [1]}',
        b'{"choices": [{}], "usage": {"prompt_tokens": "many"}}',
    ):
        with pytest.raises(Exception, match="malformed response"):
            be._reply(body)
    usage = b'"usage": {"prompt_tokens": 3, "completion_tokens": 0}'
    assert be._reply(b'{"choices": [{"message": {"content": null}}], ' + usage + b"}").text == ""  # no token
    with pytest.raises(Exception, match="no .usage. object"):  # budgets are charged by these counts
        be._reply(b'{"choices": [{"message": {"content": "x"}}]}')
    # a reply of another model is said once (an outside tester's server answered as another model without a word)
    capsys.readouterr()
    for served in (be.model + "-2024-08-06", "other-model", "other-model"):  # (a dated variant is the same model)
        body = {"model": served, "choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": 3}}
        body["usage"]["completion_tokens"] = 1
        be._reply(json.dumps(body).encode())
    assert capsys.readouterr().err.count("answers as model 'other-model', not the") == 1
    # a server that counts no prompt token ran a deliberation's rounds for free, then stopped at "c1 must be > 0"
    # (an outside tester)
    with pytest.raises(Exception, match="usage.prompt_tokens = 0 for a prompt that is not empty"):
        be._reply(
            b'{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": 0, "completion_tokens": 1}}'
        )

    def bug(body, *timeout):
        raise AttributeError("a bug, not a request error")

    monkeypatch.setattr(be, "_attempt", bug)
    with pytest.raises(AttributeError, match="a bug"):
        be.generate([Request(CONVERSATIONS[0], GREEDY)])


# ---------------------------------------------------------------------------------------------------
# vllm backend
# ---------------------------------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def _vllm_requests():
    return [
        Request(CONVERSATIONS[0], Sampling(0.8, 0.5, 250, seed=11)),
        Request(CONVERSATIONS[1], Sampling(0.0, 1.0, 16), json_schema=SCHEMA),
        Request(CONVERSATIONS[2], Sampling(0.7, 0.9, 32, seed=3)),
    ]


def test_build_chat_call_is_plain_data():
    reqs = _vllm_requests()
    convs, kws = build_chat_call(reqs, structured_output=False)
    assert convs == [list(r.messages) for r in reqs]
    assert kws == [
        {"temperature": 0.8, "top_p": 0.5, "max_tokens": 250, "seed": 11},
        {"temperature": 0.0, "top_p": 1.0, "max_tokens": 16, "seed": None},
        {"temperature": 0.7, "top_p": 0.9, "max_tokens": 32, "seed": 3},
    ]
    _, kws = build_chat_call(reqs, structured_output=True)
    assert kws[1]["structured_outputs"] == {"json": SCHEMA}
    assert "structured_outputs" not in kws[0] and "structured_outputs" not in kws[2]
    json.dumps(kws)


class FakeLLM:
    """Records ``chat`` calls; replies like vLLM's RequestOutput (prompt ids, one completion)."""

    def __init__(self, reject_if=None, crash=False):
        self.calls = []
        self.reject_if = reject_if
        self.crash = crash

    def chat(self, messages, sampling_params=None, use_tqdm=True):
        self.calls.append({"messages": messages, "sampling_params": sampling_params, "use_tqdm": use_tqdm})
        if self.crash:
            raise RuntimeError("EngineDeadError: engine core died")
        if self.reject_if is not None and any(self.reject_if in m[-1]["content"] for m in messages):
            raise type("VLLMValidationError", (type("VLLMClientError", (Exception,), {}),), {})("prompt too long")
        outs = []
        for conv, p in zip(messages, sampling_params):
            n_prompt = sum(len(m["content"]) for m in conv)
            n = min(p["max_tokens"], 4)
            outs.append(
                SimpleNamespace(
                    prompt_token_ids=list(range(n_prompt)),
                    outputs=[SimpleNamespace(text="x" * n, token_ids=list(range(n)), finish_reason="length")],
                )
            )
        return outs


def test_vllm_one_chat_call_per_batch_with_fake_engine():
    fake = FakeLLM()
    be = VLLMBackend(llm=fake, structured_output=True, sampling_params_factory=lambda **kw: dict(kw))
    reqs = _vllm_requests()
    out = be.generate(reqs)
    assert len(fake.calls) == 1
    call = fake.calls[0]
    assert call["use_tqdm"] is False
    assert call["messages"] == build_chat_call(reqs, True)[0]
    assert call["sampling_params"] == build_chat_call(reqs, True)[1]
    assert call["sampling_params"][1]["structured_outputs"] == {"json": SCHEMA}
    assert [r.completion_tokens for r in out] == [4, 4, 4]
    assert [r.prompt_tokens for r in out] == [sum(len(m["content"]) for m in c) for c in CONVERSATIONS[:3]]
    assert all(r.finish_reason == "length" and r.text == "xxxx" and r.error is None for r in out)
    assert be.generate([]) == [] and len(fake.calls) == 1
    d = be.describe()
    assert d["backend"] == "vllm" and d["injected_engine"] is True and d["structured_output"] is True


def test_vllm_rejected_request_is_isolated_engine_death_raises():
    fake = FakeLLM(reject_if="neighbours")
    be = VLLMBackend(llm=fake, sampling_params_factory=lambda **kw: dict(kw))
    out = be.generate(_vllm_requests())
    assert out[0].error is None and out[1].error is None
    assert out[2].text == "" and "prompt too long" in out[2].error
    assert len(fake.calls) == 1 + 3  # the batch, then one by one
    with pytest.raises(RuntimeError, match="engine"):
        VLLMBackend(llm=FakeLLM(crash=True), sampling_params_factory=lambda **kw: dict(kw)).generate(_vllm_requests())


def test_vllm_bad_params_fail_per_request():
    def factory(**kw):
        if kw["max_tokens"] == 16:
            raise ValueError("bad")
        return dict(kw)

    out = VLLMBackend(llm=FakeLLM(), sampling_params_factory=factory).generate(_vllm_requests())
    assert out[1].error and "invalid sampling parameters" in out[1].error
    assert out[0].error is None and out[2].error is None


def test_vllm_programming_error_in_params_propagates():
    def factory(**kw):
        raise AttributeError("a bug")

    with pytest.raises(AttributeError, match="a bug"):
        VLLMBackend(llm=FakeLLM(), sampling_params_factory=factory).generate(_vllm_requests())


def test_vllm_identity_apart_from_provenance():
    from mascot.backends import identity_of, run_spec

    be = VLLMBackend(
        llm=FakeLLM(),
        structured_output=True,
        max_model_len=512,
        seed=3,
        gpu_memory_utilization=0.5,
        enforce_eager=True,
        tensor_parallel_size=2,
    )
    ident = {
        "backend": "vllm",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "dtype": None,
        "max_model_len": 512,
        "structured_output": True,
        "seed": 3,
    }
    assert be.identity() == ident
    assert identity_of("vllm", structured_output=True, max_model_len=512, seed=3, enforce_eager=False) == ident
    # run directories record it without the None entries (so older runs, made before dtype existed, resume)
    assert run_spec(ident) == {
        "name": "vllm",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "options": {"max_model_len": 512, "structured_output": True, "seed": 3},
    }
    d = be.describe()
    assert d["gpu_memory_utilization"] == 0.5 and d["enforce_eager"] is True and "gpu_memory_utilization" not in ident
    with pytest.raises(TypeError):
        identity_of("vllm", no_such_option=1)


def test_vllm_missing_package_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(RuntimeError, match="install the vllm extra on a GPU node"):
        VLLMBackend()


def test_vllm_no_gpu_and_engine_start_failure_messages(monkeypatch):
    fake_vllm = types.ModuleType("vllm")
    fake_vllm.__version__ = "0.33.0-fake"

    class LLM:
        def __init__(self, **kw):
            raise ValueError("CUDA out of memory while loading")

    fake_vllm.LLM = LLM
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm)
    monkeypatch.setattr(vllm_backend, "_cuda_available", lambda: False)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        VLLMBackend()
    monkeypatch.setattr(vllm_backend, "_cuda_available", lambda: True)
    with pytest.raises(RuntimeError, match="could not start model 'Qwen/Qwen2.5-7B-Instruct'.*out of memory"):
        VLLMBackend()


def test_vllm_engine_kwargs(monkeypatch):
    seen = {}
    fake_vllm = types.ModuleType("vllm")

    class LLM:
        def __init__(self, **kw):
            seen.update(kw)

    fake_vllm.LLM = LLM
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm)
    monkeypatch.setattr(vllm_backend, "_cuda_available", lambda: True)
    VLLMBackend(model="m", enforce_eager=True, gpu_memory_utilization=0.5, seed=7)
    assert seen == {
        "model": "m",
        "enforce_eager": True,
        "gpu_memory_utilization": 0.5,
        "seed": 7,
        "tensor_parallel_size": 1,
    }
    VLLMBackend(model="m", max_model_len=4096, tensor_parallel_size=2)
    assert seen["max_model_len"] == 4096 and seen["tensor_parallel_size"] == 2


def test_vllm_real_sampling_params():
    pytest.importorskip("vllm")
    from vllm.sampling_params import StructuredOutputsParams

    from mascot.backends.vllm import make_sampling_params

    _, kws = build_chat_call(_vllm_requests(), structured_output=True)
    p = make_sampling_params(**kws[1])
    assert isinstance(p.structured_outputs, StructuredOutputsParams) and p.structured_outputs.json == SCHEMA
    p0 = make_sampling_params(**kws[0])
    assert (p0.temperature, p0.top_p, p0.max_tokens, p0.seed, p0.structured_outputs) == (0.8, 0.5, 250, 11, None)


def test_vllm_real_engine(tmp_path):
    pytest.importorskip("vllm")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("vLLM needs a CUDA GPU")
    model = os.environ.get("MASCOT_VLLM_TEST_MODEL") or build_tiny_qwen2(
        tmp_path / "tiny_vllm", hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2
    )
    be = VLLMBackend(
        model=model, enforce_eager=True, gpu_memory_utilization=0.3, max_model_len=512, structured_output=True
    )
    reqs = [Request(c, Sampling(0.8, 0.5, 24, seed=i)) for i, c in enumerate(CONVERSATIONS)]
    reqs.append(Request(CONVERSATIONS[0], Sampling(0.0, 1.0, 24), json_schema=SCHEMA))
    a, b = be.generate(reqs), be.generate(reqs)
    assert len(a) == len(reqs) and all(r.error is None for r in a)
    assert [r.text for r in a] == [r.text for r in b]  # per-request seeds
    assert all(0 < r.completion_tokens <= 24 and r.finish_reason in ("stop", "length") for r in a)
    if "MASCOT_VLLM_TEST_MODEL" not in os.environ:
        assert [r.prompt_tokens for r in a[:-1]] == [reference_prompt_tokens(model, c) for c in CONVERSATIONS]
    assert a[-1].text.lstrip().startswith("{")


# ---------------------------------------------------------------------------------------------------
# serial servers, the probe, progress inside a call (fake servers written here)
# ---------------------------------------------------------------------------------------------------


class _MiniServer:
    """ThreadingHTTPServer on 127.0.0.1:<free port> answering chat completions with ``reply(payload)`` (a
    string) after ``delay`` seconds; ``serial``: one request generated at a time, like ``transformers
    serve`` (a request waits for the lock; an abandoned one is still generated). ``received`` counts the
    requests that reached the server, ``payloads`` keeps them."""

    def __init__(self, reply, delay=0.0, serial=False):
        self.reply, self.delay, self.serial = reply, delay, serial
        self.lock = threading.Lock()
        self.gen_lock = threading.Lock()
        self.received = 0
        self.payloads: list[dict] = []
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with srv.lock:
                    srv.received += 1
                    srv.payloads.append(payload)
                if srv.serial:
                    with srv.gen_lock:
                        time.sleep(srv.delay)
                else:
                    time.sleep(srv.delay)
                text = srv.reply(payload)
                body = json.dumps(
                    {
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        ],
                        "usage": {"prompt_tokens": 7, "completion_tokens": len(text.split())},
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on it

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def mini():
    servers = []

    def make(reply=lambda p: "a fixed reply", **kw):
        servers.append(_MiniServer(reply, **kw))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def _short_requests(n):
    return [Request([{"role": "user", "content": f"question {i}"}], Sampling(0.8, 0.5, 8, seed=i)) for i in range(n)]


def test_openai_serial_server_gets_each_request_once(mini):
    """A one-at-a-time server (fixed delay d) and a timeout T with d < T < N d: with the default adaptive
    concurrency all N requests succeed and the server receives exactly N requests (no request times out in
    its queue and is re-sent). The same client with a fixed concurrency of 8 does re-send (the fault the
    adaptation removes), and a client-side queue (concurrency 1) never counts against the timeout."""
    n, d, timeout = 12, 0.25, 1.5
    assert d < timeout < n * d
    srv = mini(delay=d, serial=True)
    be = OpenAIBackend("m", base_url=srv.base_url, timeout_s=timeout, max_retries=2, backoff_s=0.01, concurrency=8)
    out = be.generate(_short_requests(n))
    assert all(r.error is None and r.text == "a fixed reply" for r in out)
    assert srv.received == n
    assert max(r.latency_s for r in out) < timeout

    fixed = mini(delay=d, serial=True)
    be = OpenAIBackend(
        "m", base_url=fixed.base_url, timeout_s=timeout, max_retries=2, backoff_s=0.01, concurrency=8, adaptive=False
    )
    be.generate(_short_requests(n))
    assert fixed.received > n  # 8 at once: the 7th and 8th wait 1.75 s and 2 s > T in the server's queue

    queued = mini(delay=0.2, serial=True)  # client-side queue: 4 x 0.2 s > T = 0.6 s, each request alone < T
    be = OpenAIBackend("m", base_url=queued.base_url, timeout_s=0.6, max_retries=0, concurrency=1, adaptive=False)
    out = be.generate(_short_requests(4))
    assert all(r.error is None for r in out) and queued.received == 4


def test_openai_adaptive_concurrency_reaches_the_maximum_on_a_parallel_server(mini):
    srv = mini(delay=0.05)
    be = OpenAIBackend("m", base_url=srv.base_url, timeout_s=10.0, concurrency=4)
    out = be.generate(_short_requests(24))
    assert all(r.error is None for r in out) and srv.received == 24
    assert be._gate.peak == 4 and be._gate.limit == 4


def _seeded_reply(payload):
    if "response_format" in payload:
        return json.dumps({"answer": 7})
    return f"reply drawn with seed {payload.get('seed')} at temperature {payload['temperature']}"


def test_probe_warns_when_a_server_ignores_sampling_and_structured_output(mini, capsys):
    """A server that echoes fixed text: identical replies for seeds 1, 2, 3 at temperature 1 and prose where
    a JSON schema was requested -> two warnings naming the endpoint, findings in describe() (not in the
    identity). A server that varies with the seed and returns the schema's JSON -> no warning, 3 requests."""
    fixed = mini()
    be = OpenAIBackend("m", base_url=fixed.base_url, probe=True, probe_structured=True)
    err = capsys.readouterr().err
    where = f"backend openai ({fixed.base_url})"
    assert f"sampling appears to be ignored by {where}" in err
    assert f"structured output (response_format json_schema) appears to be ignored by {where}" in err
    found = be.describe()["probe"]
    assert found["sampling"]["verdict"] == "ignored" and found["sampling"]["seeds"] == [1, 2, 3]
    assert found["structured_output"]["verdict"] == "ignored"
    assert fixed.received == 4
    assert [p.get("seed") for p in fixed.payloads] == [1, 2, 3, 1]
    assert all(p["temperature"] == 1.0 for p in fixed.payloads[:3]) and "response_format" in fixed.payloads[3]
    assert be.identity() == {"backend": "openai", "model": "m"}

    good = mini(reply=_seeded_reply)
    be = OpenAIBackend("m", base_url=good.base_url, probe=True, probe_structured=True)
    assert capsys.readouterr().err == ""
    found = be.describe()["probe"]
    assert found["sampling"]["verdict"] == "honoured" and found["structured_output"]["verdict"] == "honoured"
    assert good.received == 3  # seeds 1 and 2 differ: no third request

    OpenAIBackend("m", base_url=good.base_url, probe=False)
    assert good.received == 3  # no probe unless asked


def test_openai_progress_counts_every_completion(mini):
    from mascot.backends.base import attach_progress, progress_text

    srv = mini(delay=0.02)
    be = OpenAIBackend("m", base_url=srv.base_url, concurrency=3)
    lines = []
    attach_progress(be, lines.append)
    be.progress_every_s = 0.0  # report every completion
    be.generate(_short_requests(7))
    assert [ln.split(" done")[0] for ln in lines] == [f"requests {k}/7" for k in range(1, 8)]
    assert all(ln.endswith(" req/s") and len(ln.split(", ")[1].split()[0].split(".")[1]) == 2 for ln in lines)
    assert progress_text(3, 8, 2.0) == "requests 3/8 done, 1.50 req/s"
    # failures are counted apart and are not throughput (issue 33: "2/2 done, 33.88 req/s" for two failures)
    assert progress_text(2, 2, 0.5, failed=2) == "requests 2/2 done (0 answered, 2 failed), 0.00 answered/s"
    be.progress_every_s = 3600.0  # only the end of the call
    lines.clear()
    be.generate(_short_requests(5))
    assert lines[0].startswith("requests 5/5 done") and len(lines) == 1
    attach_progress(be, None)  # --quiet
    be.generate(_short_requests(2))
    assert len(lines) == 1


def test_hf_progress_once_per_generation_batch(tiny_dir):
    from mascot.backends.base import attach_progress

    be = HFBackend(tiny_dir, device="cpu", batch_size=2)
    calls = []
    be.on_progress = lambda done, total, s, failed: calls.append((done, total))
    reqs = [Request(c, GREEDY) for c in CONVERSATIONS]  # 5 requests, one sampling group: batches of 2, 2, 1
    be.generate(reqs)
    assert calls == [(2, 5), (4, 5), (5, 5)]
    lines = []
    attach_progress(be, lines.append)
    be.generate([Request(CONVERSATIONS[0], GREEDY)])
    assert len(lines) == 1 and lines[0].startswith("requests 1/1 done, ") and lines[0].endswith(" req/s")


# ---------------------------------------------------------------------------------------------------
# the CLI checks a model path and --surrogate-params before anything is written
# ---------------------------------------------------------------------------------------------------


def _cli(capsys, args) -> tuple[int, str]:
    """The CLI in this process: (exit code, stderr)."""
    from mascot.cli import main

    capsys.readouterr()
    rc = main(args)
    return rc, capsys.readouterr().err


def test_hf_model_path_is_checked_before_a_run_directory_is_written(tiny_dir, tmp_path, capsys):
    out = tmp_path / "run"
    common = [
        "trials",
        "--backend",
        "hf",
        "--device",
        "cpu",
        "--topology",
        "chain",
        "--n-trials",
        "1",
        "--steps",
        "1",
        "--max-tokens",
        "4",
        "--retries",
        "0",
        "--n-boot",
        "20",
        "--no-figures",
        "--quiet",
        "--out",
        str(out),
    ]
    wrong = tmp_path / "no" / "such" / "model"
    rc, err = _cli(capsys, [*common, "--model", str(wrong)])
    assert rc == 2 and str(wrong) in err and "does not exist" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    rc, err = _cli(capsys, [*common, "--model", str(empty)])
    assert rc == 2 and str(empty) in err
    for what in ("config.json", "tokenizer files", "weights", "empty"):
        assert what in err
    assert not out.exists()
    partial = tmp_path / "partial"  # a directory with a config only: the tokenizer and weights are named
    partial.mkdir()
    (partial / "config.json").write_text((Path(tiny_dir) / "config.json").read_text())
    rc, err = _cli(capsys, [*common, "--model", str(partial)])
    assert rc == 2 and "config.json" not in err.split("missing")[1] and "tokenizer files" in err
    assert not out.exists()
    rc, err = _cli(capsys, [*common, "--model", str(tiny_dir)])  # the corrected rerun
    assert rc == 0, err
    assert json.loads((out / "run.json").read_text())["complete"]


def test_surrogate_params_errors_name_the_flag(tmp_path, capsys):
    import argparse

    from mascot.cli.backend_args import add_backend_args, build_backend

    missing = tmp_path / "nope.toml"
    rc, err = _cli(
        capsys,
        ["trials", "--surrogate-params", str(missing), "--n-trials", "2", "--steps", "1", "--out", str(tmp_path / "t")],
    )
    assert rc == 2 and "--surrogate-params" in err and str(missing) in err and "does not exist" in err
    assert not (tmp_path / "t").exists()
    for cmd in (["trials", "--n-trials", "1", "--steps", "1"], ["deliberate"], ["debate"]):
        rc, err = _cli(
            capsys,
            [
                *cmd,
                "--backend",
                "hf",
                "--model",
                str(tmp_path),
                "--surrogate-params",
                str(missing),
                "--out",
                str(tmp_path / "x"),
            ],
        )
        assert rc == 2 and "--surrogate-params applies to --backend surrogate only, not hf" in err
    rc, err = _cli(capsys, ["deliberate", "--surrogate-params", str(missing), "--out", str(tmp_path / "d")])
    assert rc == 2 and "--surrogate-params" in err and not (tmp_path / "d").exists()
    assert not (tmp_path / "x").exists()

    # the surrogate's class builds itself from the file: from_params(path, seed=..., **flags given)
    class Sur:
        def __init__(self, seed=0, sigma=1.0):
            self.seed, self.sigma = seed, sigma

        @classmethod
        def from_params(cls, path, **overrides):
            got.append((path, overrides))
            return cls(**overrides)

    got = []
    p = argparse.ArgumentParser()
    add_backend_args(p)
    p.add_argument("--sigma", type=float)
    args = p.parse_args(["--surrogate-params", "f.toml", "--sigma", "2.5", "--seed", "4"])
    b, spec = build_backend(args, lambda: Sur(seed=args.seed), {"sigma": "--sigma"})
    assert got == [("f.toml", {"sigma": 2.5, "seed": 4})] and isinstance(b, Sur) and b.sigma == 2.5 and spec is None
    p = argparse.ArgumentParser()
    add_backend_args(p, surrogate_params=False)
    with pytest.raises(SystemExit):
        p.parse_args(["--surrogate-params", "f.toml"])


# ----------------------------------------------------------------------------- found by an outside tester, 2026-12-01
@pytest.mark.parametrize("bad", ["sk-SECRET\r", "sk-SE CRET", "sk-SECRET\n", "sk-SECRÉT", "sk-🔑"])
def test_openai_refuses_an_unusable_key_without_showing_it(monkeypatch, bad):
    monkeypatch.setenv("MASCOT_TEST_KEY", bad)
    with pytest.raises(ValueError, match=r"\$MASCOT_TEST_KEY is not a usable API key") as e:
        OpenAIBackend("m", api_key_env="MASCOT_TEST_KEY")
    assert "SECR" not in str(e.value) and "🔑" not in str(e.value)


@pytest.mark.parametrize("echo", ["echo400", "echorepr400"])  # (the repr inside JSON: a later outside tester)
def test_openai_redacts_a_key_the_server_echoes_escaped(srv, monkeypatch, echo):
    secret = 'sk-"quote\\back/slash+plus'
    monkeypatch.setenv("MASCOT_TEST_KEY", secret)
    be = client(srv, max_retries=0)
    srv.plan[CONVERSATIONS[1][-1]["content"]] = [echo]
    (r,) = be.generate([Request(CONVERSATIONS[1], GREEDY)])
    assert r.error and "HTTP 400" in r.error and "***" in r.error
    for form in (secret, json.dumps(secret)[1:-1], "quote", "back"):
        assert form not in r.error, form


def test_openai_api_key_env_must_be_a_name_and_is_never_echoed():
    with pytest.raises(ValueError, match="NAME of an environment variable") as e:
        OpenAIBackend("m", api_key_env="sk-abc123-PASTED")
    assert "PASTED" not in str(e.value)


@pytest.mark.parametrize(
    "fault, said",
    [
        ("slowhdr", "timeout after 0.5 s"),  # header lines 0.1 s apart, 6 s
        ("trickle", "still arriving after 0.5 s"),
    ],
)  # body bytes 0.1 s apart
def test_openai_timeout_bounds_the_whole_exchange(srv, fault, said):
    be = client(srv, max_retries=0, timeout_s=0.5)
    srv.plan[CONVERSATIONS[0][-1]["content"]] = [fault]
    (r,) = be.generate([Request(CONVERSATIONS[0], GREEDY)])
    assert r.error and said in r.error
    assert srv.client_gone.wait(30)  # the client hung up while the server was still writing (6 s of it)


@pytest.mark.parametrize("fault", ["negtok", "inftok"])
def test_openai_refuses_impossible_token_counts(srv, fault):
    be = client(srv, max_retries=0)
    srv.plan[CONVERSATIONS[0][-1]["content"]] = [fault]
    (r,) = be.generate([Request(CONVERSATIONS[0], GREEDY)])
    assert r.error and "usage.prompt_tokens" in r.error and "not a token count" in r.error


def test_a_reply_without_content_is_an_error_not_an_empty_answer(srv):
    """Found by an outside tester: ``"content": null`` became an empty reply, then a parse failure, then a
    carried state, and the run ended with exit 0 and a table: a malformed reply recorded as the model's."""
    be = client(srv, max_retries=0)
    srv.plan[CONVERSATIONS[0][-1]["content"]] = ["nullcontent"]
    (r,) = be.generate([Request(CONVERSATIONS[0], GREEDY)])
    assert r.text == "" and r.error and "'message.content' is null after 3 completion tokens (refusal)" in r.error


def test_sampling_refuses_a_non_finite_temperature():
    for t in (math.inf, math.nan, -0.1, 1e9):
        with pytest.raises(ValueError, match="temperature"):
            Sampling(temperature=t)


def test_openai_refuses_more_completion_tokens_than_asked_and_redacts_echoed_keys(srv, monkeypatch):
    secret = "sk_live/Zq7X<&>abc"
    monkeypatch.setenv("MASCOT_TEST_KEY", secret)
    be = client(srv, max_retries=0)
    big = Request(CONVERSATIONS[0], Sampling(temperature=0.0, top_p=1.0, max_tokens=1))
    monkeypatch.setattr(be, "_attempt", lambda body, *t: Response("ok", 3, 2))  # 2 tokens for max_tokens = 1
    (r,) = be.generate([big])
    assert r.error and "exceeds the request's max_tokens = 1" in r.error
    j = json.dumps(secret)[1:-1]
    for echo in (
        secret,
        j.replace("/", "\\/"),
        j.replace("<", "\\u003c").replace("&", "\\u0026").replace(">", "\\u003e"),
        json.dumps(j)[1:-1],
        "sk_live/Zq7X&lt;&amp;&gt;abc",
    ):
        assert "Zq7X" not in be._redact(f"error: {echo} !"), echo
    body = json.dumps(
        {
            "choices": [{"message": {"content": f"auth Bearer {secret}"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        }
    ).encode()
    with pytest.raises(Exception, match="the reply holds the API key"):  # refused: nothing of it reaches a log
        be._reply(body)
    fin = json.dumps(
        {
            "choices": [{"message": {"content": "fine"}, "finish_reason": f"stop {j}"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        }
    ).encode()
    with pytest.raises(Exception, match="the reply holds the API key"):  # the finish reason too (it was logged)
        be._reply(fin)


@pytest.mark.parametrize("key", ["0", "Value", "EMPTY", "A"])
def test_a_short_placeholder_key_never_rewrites_replies(monkeypatch, key):
    """Found by an outside tester: every form of the key was scrubbed from reply text before parsing, so a key
    "Value" or "0" turned {"Value": 50.0} into {"***": 50.0} (parse failures, exit 0)."""
    monkeypatch.setenv("MASCOT_TEST_KEY", key)
    be = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", api_key_env="MASCOT_TEST_KEY")
    reply = '{"Value": 50.0, "Parity": "A", "Level": 3, "vector": [0.83, 0.99]}'
    body = json.dumps(
        {
            "choices": [{"message": {"content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        }
    ).encode()
    r = be._reply(body)
    assert r.text == reply and r.finish_reason == "stop"


@pytest.mark.parametrize("key", ["anything", "lm-studio", "not-needed", "token-abc123", "placeholder"])
def test_a_placeholder_key_under_16_characters_never_refuses_a_reply(monkeypatch, key):
    """Found by an outside tester: the placeholders servers document ("anything" for LiteLLM, "lm-studio",
    vLLM's "token-abc123") refused ordinary replies that held the word, with spaces dropped too ("many things")."""
    monkeypatch.setenv("MASCOT_TEST_KEY", key)
    be = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", api_key_env="MASCOT_TEST_KEY")
    reply = f"There are many things to weigh; {key} is fine, not needed, lm studio, a place holder token abc123"
    body = {"choices": [{"message": {"content": reply}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1}}
    body["usage"]["completion_tokens"] = 1
    assert be._reply(json.dumps(body).encode()).text == reply


def test_hostile_replies_are_malformed_not_crashes(monkeypatch):
    """Found by an outside tester: a reply of "[" * 200000 raised RecursionError, and an HTML entity of 4,301
    digits made the key check raise ValueError (both tracebacks); a 16 MB reply took 19 s and 2 GB to check."""
    from mascot.backends.openai_options import MAX_CHECKED

    monkeypatch.setenv("MASCOT_TEST_KEY", "sk-proj-Xq7RmP2vLk9TzW4nBc8HdY1sFg6JuE3aQo5iVr0tNbMx")
    be = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", api_key_env="MASCOT_TEST_KEY")
    with pytest.raises(Exception, match="malformed response .*RecursionError"):
        be._reply(b"[" * 200_000)

    def body(text):
        return json.dumps(
            {"choices": [{"message": {"content": text}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
        ).encode()

    entity = "&#" + "9" * 5000 + "65;"
    assert be._reply(body(entity)).text == entity
    with pytest.raises(Exception, match=f"more than mascot checks for the API key \\({MAX_CHECKED:,}\\)"):
        be._reply(body("x" * (MAX_CHECKED + 1)))


# ----------------------------------------------------------------------------- found by an outside tester, 2026-12-01 (2)
@pytest.mark.parametrize(
    "url, said",
    [
        ("http://127.0.0.1:99999/v1", "no valid port"),
        ("http://127.0.0.1:0/v1", "no valid port"),
        ("http://127.0.0.1:8000/v1 ", "spaces or control characters"),
        ("http://127.0.0.1:8000/v1?api_key=sk-abc", "query or fragment"),
    ],
)
def test_openai_refuses_a_base_url_with_a_bad_port_or_a_query(url, said):
    with pytest.raises(ValueError, match=said) as e:
        OpenAIBackend("m", base_url=url)
    assert "sk-abc" not in str(e.value)


@pytest.mark.parametrize(
    "path", ["/sk-test-SECRET123/v1", "/v1/sk-test%2DSECRET123", "/x/SK%2Dtest-SECRET123", "/v1/sk-test-OTHER"]
)
def test_a_base_url_holding_the_key_is_refused_without_showing_either(monkeypatch, tmp_path, capsys, path):
    """Found by an outside tester: a key in the URL's path (some gateways route by it) was printed and stored in
    run.json (as the command line and the backend's base_url). It is refused before anything is written."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET123")
    url = f"http://127.0.0.1:9{path}"
    from mascot.cli import main

    if "OTHER" in path:  # not this key: an address like any other (another case of it is refused: hosts
        assert OpenAIBackend("m", base_url=url).base_url == url  # ignore case)
        return
    with pytest.raises(ValueError, match=r"base_url holds the value of \$OPENAI_API_KEY") as e:
        OpenAIBackend("m", base_url=url)
    assert "SECRET" not in str(e.value)
    out = tmp_path / "run"
    argv = ["trials", "--backend", "openai", "--model", "m", "--base-url", url, "--n-trials", "1", "--steps", "1"]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds the value of an environment variable" in err and "SECRET" not in err and not out.exists()


def test_the_key_given_as_the_model_or_anywhere_on_the_command_line_is_refused(monkeypatch, tmp_path, capsys):
    """Found by an outside tester: the key given as --model named the run directory, was stored twice in run.json
    (model and command line) and printed in the "does not serve model" error."""
    key = "sk-tB9fQ2xLm7Rk4vZp1Wc8Hn3Yd6Js0TgEaUoXb5Ni"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    from mascot.cli import main

    with pytest.raises(ValueError, match=r"model holds the value of \$OPENAI_API_KEY") as e:
        OpenAIBackend(key.upper(), base_url="http://127.0.0.1:9/v1")
    assert key[3:] not in str(e.value).lower()
    common = ["deliberate", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--runs", "1"]
    for argv, says in (
        ([*common, "--model", key, "--out", str(tmp_path / "a")], "holds the value of an environment variable"),
        ([*common, "--model", "m", "--out", str(tmp_path / f"b{key}")], "holds the value of an environment variable"),
    ):
        monkeypatch.setattr("sys.argv", ["mascot", *argv])  # (run records keep the console's command line)
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert says in err and key[3:] not in err
    assert not any(tmp_path.iterdir())  # refused before anything is written
    # a later tester: argparse and config errors echoed the key; a config's out named a folder after it
    cfg = tmp_path / "k.toml"
    for argv, text in (
        (["trials", "--backend", "openai", "--model", "m", "--seed", f"1{key}"], None),
        (["trials", "--config", key], None),
        (["trials", "--config", str(cfg)], f"[trials]\n{key} = 1\n"),
        (
            ["trials", "--config", str(cfg), "--no-probe"],
            f"[trials]\nbackend = 'openai'\nmodel = 'm'\nout = '{tmp_path / key}'\n",
        ),
    ):
        if text is not None:
            cfg.write_text(text)
        monkeypatch.setattr("sys.argv", ["mascot", *argv])
        try:
            rc = main(argv)
        except SystemExit as e:  # (argparse's own error)
            rc = e.code
        err = capsys.readouterr().err
        assert rc == 2 and key[3:] not in err and ("***" in err or "holds the value of an environment" in err), err
    assert [p.name for p in tmp_path.iterdir()] == ["k.toml"]
    # a third tester: with any backend, a key in --out, a debate config's name or a sweep override named run
    # directories and entered run.json
    root = Path(__file__).resolve().parents[1]
    named = tmp_path / "d.toml"
    named.write_text(
        (root / "configs/debate/code_review.toml").read_text().replace('name = "code_review"', f'name = "{key}"')
    )
    (tmp_path / "d.cfg").write_text(named.read_text())  # (a config not named .toml passed the check: a tester)
    for argv in (
        ["trials", "--n-trials", "1", "--steps", "1", "--out", str(tmp_path / f"x{key}")],
        ["debate", str(named)],
        ["debate", str(tmp_path / "d.cfg")],
        ["validate", str(root / "configs/examples/consensus_small.toml"), f"experiment.name={key}"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "holds the value of an environment variable" in err and key[3:] not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.cfg", "d.toml", "k.toml"]
    # a placeholder key is no secret: an --out or a model that holds it is an ordinary name
    monkeypatch.setenv("OPENAI_API_KEY", "lm-studio")
    assert OpenAIBackend("lm-studio-model", base_url="http://127.0.0.1:9/v1", probe=False).model == "lm-studio-model"


def test_openai_a_server_nobody_runs_is_reported_at_once(monkeypatch, dead_port):
    """A wrong port took every request's six attempts, three times over (minutes for 80 requests, hours for a
    paper-sized run). The probe now names it at once; without the probe one request's retries decide for the
    rest of the call."""
    url = f"http://127.0.0.1:{dead_port}/v1"
    attempts = []
    real_connect = http.client.HTTPConnection.connect

    def connect(self):
        attempts.append(self.port)
        return real_connect(self)

    monkeypatch.setattr(http.client.HTTPConnection, "connect", connect)
    with pytest.raises(ConnectionError, match="cannot be reached .*Connection refused.*check --base-url"):
        OpenAIBackend("m", base_url=url, probe=True, max_retries=5, backoff_s=0.01)
    assert len(attempts) == 1  # the probe's one connection, not max_retries more
    be = OpenAIBackend("m", base_url=url, max_retries=2, backoff_s=0.01, concurrency=1)
    out = be.generate([Request(CONVERSATIONS[0], GREEDY) for _ in range(20)])
    assert all(r.error for r in out) and "failed after 3 attempt(s)" in out[0].error
    assert sum(r.error.startswith("not sent: failed after 3 attempt(s)") for r in out) == 19
    assert len(attempts) == 1 + 3  # one request's three attempts decided for the other 19


def test_openai_a_body_cut_off_is_a_dropped_connection_and_retried(srv):
    """Found by an outside tester: a body shorter than its Content-Length was a "malformed response" (fatal,
    never retried); it is a dropped connection, retried like one."""
    be = client(srv, max_retries=1, backoff_s=0.0)
    srv.plan[CONVERSATIONS[0][-1]["content"]] = ["short"]
    (r,) = be.generate([Request(CONVERSATIONS[0], GREEDY)])
    assert r.error is None and r.text  # the second attempt was answered
    srv.plan[CONVERSATIONS[0][-1]["content"]] = ["short", "short"]
    (r,) = be.generate([Request(CONVERSATIONS[0], GREEDY)])
    assert r.error and "80 bytes short of the response's Content-Length" in r.error and "2 attempt(s)" in r.error


def test_the_key_is_redacted_in_every_encoding_a_server_may_use_and_partial_echoes_too():
    """Found by an outside tester: .NET's \\u0022/\\u002B, every character as \\uXXXX, MarkupSafe's &#34;, base64,
    OpenAI's masked form (the key's ends) and a key split over two fields all leaked into messages and run.json;
    a reply holding half the key or its base64 was recorded. Each form below is made by the standard library."""
    import base64
    import functools
    import html
    import urllib.parse

    from mascot.backends.openai_options import holds_key, redact

    key = "sk-Zq\"9\\x/Pl+u%2F&a<b>c'QWERTY7788"
    forms = {
        "raw": key,
        "json": json.dumps(key),
        "json twice": json.dumps(json.dumps(key)),
        "repr in json": json.dumps(repr(key)),
        ".net": "".join(f"\\u{ord(c):04X}" if c in "\"+'<>&" else c for c in json.dumps(key)[1:-1]),
        "all \\u": "".join(f"\\u{ord(c):04x}" for c in key),
        "html": html.escape(key),
        "html, quotes kept": html.escape(key, quote=False),
        "markupsafe": key.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&#34;").replace("'", "&#39;"),
        "url": urllib.parse.quote(key, safe=""),
        "url plus": urllib.parse.quote_plus(key),
        "base64": base64.b64encode(key.encode()).decode(),
        "bearer base64": base64.urlsafe_b64encode(f"Bearer {key}".encode()).decode(),
        "split": json.dumps({"a": key[:15], "b": key[15:]}),
        # a later tester: other cases, nested and rarer escapes, base64 cut short or inside another encoding, hex
        "upper case": key.upper(),
        "url twice": urllib.parse.quote(urllib.parse.quote(key, safe=""), safe=""),
        "html twice": html.escape(html.escape(key)),
        "\\U and octal": "".join(f"\\U{ord(c):08x}" if i % 2 else f"\\{ord(c):03o}" for i, c in enumerate(key)),
        "zero-width": "\u200b".join(key),
        "base64 cut": "x" * 470 + base64.b64encode(f"Bearer {key}".encode()).decode()[:30],
        "base64 inside": base64.b64encode(json.dumps({"authorization": f"Bearer {key}"}).encode()).decode(),
        "hex": key.encode().hex(),
        # the last tester (2026-12-05): other invisible characters, spaces, fullwidth letters, separated hex, deep
        # URL encoding
        "invisible separator": "\u2063".join(key),
        "bidi marks": "\u202a" + "\u200e".join(key) + "\u202c",
        "variation selectors": "\ufe0f".join(key),
        "tag characters": "\U000e0020".join(key),
        "spaced": " ".join(key),
        "no-break spaces": "\u00a0".join(key),
        "fullwidth": "".join(chr(ord(c) + 0xFEE0) for c in key),
        "hex spaced": " ".join(f"{b:02x}" for b in key.encode()),
        "hex colons": ":".join(f"{b:02X}" for b in key.encode()),
        "hex 0x": ", ".join(f"0x{b:02x}" for b in key.encode()),
        "url 8 times": functools.reduce(lambda t, _: urllib.parse.quote(t, safe=""), range(8), key),
        # and a later one: byte lists, UTF-16, anything between the characters
        "node buffer": json.dumps({"type": "Buffer", "data": list(key.encode())}),
        "go %v bytes": "[" + " ".join(map(str, key.encode())) + "]",
        "octal bytes": " ".join(f"{b:03o}" for b in key.encode()),
        "utf-16": key.encode("utf-16-le").decode("latin-1"),
        "utf-16 json": json.dumps("\0".join(key)),
        ".net BitConverter": "-".join(f"{b:02X}" for b in key.encode("utf-16-le")),
        "utf-16 base64": base64.b64encode(key.encode("utf-16-le")).decode(),
        "json backspaces": json.dumps("\b".join(key)),
        "ansi colours": "".join(f"\x1b[3{i % 7}m{c}" for i, c in enumerate(key)) + "\x1b[0m",
        "combining marks": "\u0301".join(key),
        "braille blanks": "\u2800".join(key),
        "python char list": str(list(key)),
        "comma separated": ",".join(key),
        "hex pipes": "|".join(f"{b:02x}" for b in key.encode()),
        "quoted-printable": "".join(f"={b:02X}" for b in key.encode()),
    }
    for name, form in forms.items():
        out = redact(f"HTTP 400: {form} (end)", key)
        assert "QWERTY" not in out and "Zq" not in out and "7788" not in out, (name, out)
        assert out.endswith("(end)") or out == "*** (withheld: this text held the API key)", (name, out)
        assert holds_key(f"Value: {form}", key), name
    masked = key[:8] + "*****" + key[-6:]  # OpenAI's own masking: the first 8 and last 6 characters
    assert "Zq" not in redact(masked, key) and "7788" not in redact(masked, key)
    # a later tester: octal bytes unpadded (Go's %o) or 0o-prefixed, every character backslash-escaped, a
    # UUID's 12 characters spaced (its dashes left fewer than 12 letters and digits)
    uuid_key = "a2642bab-be9c-4681-8f67-6543bb461714"
    for form in (
        "[" + " ".join(f"{b:o}" for b in uuid_key.encode()) + "]",
        str([oct(b) for b in uuid_key.encode()]),
        "".join("\\" + c for c in uuid_key),
        " ".join(uuid_key[5:17]),
        "\0".join(uuid_key[5:17]),
    ):
        assert holds_key(f"echo: {form}", uuid_key), form
    # ... and placeholders: words (llama.cpp's sk-no-key-required) and runs (sk-1234567890abcdef) are no secrets
    assert not holds_key("no key required; " + " ".join(map(str, range(20, 60))), "sk-no-key-required")
    assert not holds_key(" ".join(map(str, range(20, 60))), "sk-1234567890abcdef")
    assert redact("HTTP 422: Field required", "sk-no-key-required") == "HTTP 422: Field required"
    assert redact("HTTP 401: sk-no-key-required", "sk-no-key-required") == "HTTP 401: ***"
    # the last tester: UTF-16 bytes as decimal numbers, 12 characters holding 3 dashes spaced, a key with every
    # character escaped and spaced; and a provider's public prefix is no secret ("task project", "disk-pro...")
    hf = "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"
    assert holds_key(str(list(hf.encode("utf-16-le"))), hf) and holds_key(str(list(hf.encode("utf-16"))), hf)
    u2 = "79740d27-ab16-45d7-8dc4-a66675194f64"
    assert holds_key(" ".join(u2[8:20]), u2) and holds_key(",".join(u2[8:20]), u2)
    sk = "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"
    assert holds_key(" ".join("\\" + c for c in sk), sk)
    proj = "sk-proj-Xq7RmP2vLk9TzW4nBc8HdY1sFg6JuE3aQo5iVr0tNbMx"
    for text in ("HTTP 404: task project 7 not found", "HTTP 500: disk-provisioning error"):
        assert redact(text, proj) == text
    assert redact("bad key " + proj, proj) == "bad key ***"
    entity = "&#" + "0" * 5000 + "65;"  # (leading zeros: html.unescape's int() limit raised)
    assert not holds_key(entity, uuid_key) and redact(entity, uuid_key) == entity
    # a key split over fields of 11 characters: each run is masked whole (6-character windows overlapping), no tail
    split = " ".join(f"{n}={key[i : i + 11]}" for n, i in zip("abc", range(0, 33, 11)))
    assert redact(split, key) == "a=*** b=*** c=***", redact(split, key)
    assert holds_key("reply " + key[:17], key) and not holds_key("reply " + key[:11], key)
    # ordinary text is left alone, and a short placeholder key is not looked for, nor a placeholder's runs of one
    # character (a reply {"value": 1000000000000} was refused under the key sk-000000000000000000000000)
    assert redact("Value: 12.5, Parity: A, Level: 3", key) == "Value: 12.5, Parity: A, Level: 3"
    assert not holds_key("EMPTY", "EMPTY") and redact("0.1234", "") == "0.1234"
    assert not holds_key('{"value": 1000000000000}', "sk-000000000000000000000000")
    # spaces and invisible characters are dropped to look for the key, not to read ordinary text as holding it
    assert not holds_key("Value: 12.5, Parity: A, Level: 3 \u200e\u00a0 0x12:0x34", key)
    # a key holding %XX, echoed %-encoded twice more: no 6 of its characters in a row survive
    key2 = "sk-live%41bcd%2Fxyz0123456789"
    out = redact("HTTP 401: " + urllib.parse.quote(urllib.parse.quote(key2, safe=""), safe="") + " (end)", key2)
    assert holds_key(urllib.parse.quote(key2, safe=""), key2) and out.endswith("(end)")
    decoded = functools.reduce(lambda t, _: urllib.parse.unquote(t), range(4), out).lower()
    assert not any(key2[i : i + 6].lower() in decoded for i in range(len(key2) - 5)), out
    # runs of backslashes cost time in proportion to their length (a square before: 8,000 took 17 s)
    assert not holds_key("\\" * 200_000, "sk-" + "ab1" * 60) and redact("\\" * 200_000, "sk-" + "ab1" * 60)


def test_a_served_model_list_holding_the_key_is_redacted(srv, monkeypatch):
    """Found by an outside tester: the list of models in "does not serve model" was printed as the server sent it."""
    secret = "sk-test-LISTED-0123456789"
    monkeypatch.setenv("MASCOT_TEST_KEY", secret)
    be = client(srv)
    served = [f"tiny-{secret}", "other"]

    class Reply:
        def __init__(self):
            self.body = json.dumps({"data": [{"id": i} for i in served]}).encode()

        def read(self, n):
            return self.body

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    monkeypatch.setattr(be._opener, "open", lambda *a, **k: Reply())
    be.model = "missing"
    with pytest.raises(ValueError, match="does not serve model 'missing'") as e:
        be._served_models()
    assert secret not in str(e.value) and "LISTED" not in str(e.value) and "'tiny-***'" in str(e.value)


def test_a_model_list_holding_the_key_in_pieces_is_withheld_and_malformed_bodies_stay_on_one_line(monkeypatch):
    """Found by an outside tester: model ids of 5 characters each were redacted one by one and showed a whole
    UUID key; a malformed body's newline split the one-line error."""
    key = "a2642bab-be9c-4681-8f67-6543bb461714"
    monkeypatch.setenv("MASCOT_TEST_KEY", key)
    be = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", api_key_env="MASCOT_TEST_KEY")
    ids = [key[i : i + 5] for i in range(0, len(key), 5)]
    body = json.dumps({"data": [{"id": i} for i in ids]}).encode()

    class Reply(io.BytesIO):
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    monkeypatch.setattr(be._opener, "open", lambda *a, **k: Reply(body))
    with pytest.raises(ValueError) as e:
        be._served_models()
    assert "withheld: the list of models held the API key" in str(e.value) and "bab-b" not in str(e.value)
    with pytest.raises(Exception) as e:
        be._reply(b"not json\nsecond line")
    assert "\n" not in str(e.value) and "second line" in str(e.value)


def test_a_redirect_is_named_and_a_banner_stays_on_one_line(srv):
    """Found by an outside tester: "HTTP 302 from ..." did not say that redirects are refused; a server that is no
    HTTP server (an SSH banner ending in CR LF) split the one-line error in two."""
    be = client(srv, max_retries=0)
    k0, k1 = CONVERSATIONS[0][-1]["content"], CONVERSATIONS[1][-1]["content"]
    srv.plan[k0], srv.plan[k1] = ["302"], ["banner"]
    r0, r1 = be.generate([Request(CONVERSATIONS[0], GREEDY), Request(CONVERSATIONS[1], GREEDY)])
    assert "HTTP 302" in r0.error and "a redirect: mascot follows none" in r0.error, r0.error
    assert "SSH-2.0-OpenSSH_9.6" in r1.error and "\n" not in r1.error and "\r" not in r1.error, r1.error
