"""A real OpenAI-compatible server (``transformers serve`` on SmolLM2-135M-Instruct) behind ``--backend openai``.

The CLI runs as a user runs it (``python3 -m mascot ...`` in a subprocess) against the server started by
``tests/real_server.py``. What is asserted holds for any real model and server: prompt token counts equal
the model's own tokenizer on its chat template, replies are logged with their token counts, parse outcomes
are recorded per attempt, progress lines count the requests, runs resume without asking again, a server
that dies mid-run stops the command (exit 1, one line naming the endpoint, nothing uncommitted kept, the
rerun redoes exactly the lost step), a wrong model name (HTTP 400) is an error and never a result, and the
probe reports what the server really does (sampling honoured only with ``do_sample`` in the model's
generation config; ``response_format`` ignored).

The model answers about 0.5 requests/s on 2 CPUs (one request at a time): one trial, chain only, one or two
steps, 32-48 tokens, one deliberation round, one debate round. Without network access to PyPI (the model)
or without ``transformers[serving]`` the tests skip, except under ``MASCOT_REQUIRE_REAL_MODEL=1``
(``.ci/run``), where that is a failure. Every assertion on a run shows its stderr and the server's log.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_model import smollm2_dir  # noqa: E402
from real_server import RealServer, model_copy_without_sampling, server_or_skip  # noqa: E402

pytest.importorskip("transformers")

PROGRESS = re.compile(r"requests (\d+)/(\d+) done, (\d+\.\d{2}) req/s$")


@pytest.fixture(scope="module")
def model_dir():
    try:
        d = smollm2_dir()
    except Exception as e:  # noqa: BLE001 -- any fetch/convert failure is reported the same way
        if os.environ.get("MASCOT_REQUIRE_REAL_MODEL") == "1":
            pytest.fail(f"the real test model could not be prepared: {e}")
        pytest.skip(f"the real test model could not be prepared: {e}")
    gc = json.loads((d / "generation_config.json").read_text())
    assert gc.get("do_sample") is True, "tests/real_model.py sets do_sample (transformers serve samples only then)"
    return d


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    srv = server_or_skip(model_dir, tmp_path_factory.mktemp("serve") / "transformers-serve.log")
    yield srv
    srv.stop()


def mascot(*args, timeout=900) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-m", "mascot", *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout
    )


def why(r: subprocess.CompletedProcess, srv: RealServer) -> str:
    return (
        f"exit {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-4000:]}\n"
        f"--- server log {srv.log}\n{srv.log_tail()}"
    )


def openai_args(srv: RealServer, *extra) -> list:
    return [
        "--backend",
        "openai",
        "--model",
        srv.model,
        "--base-url",
        srv.base_url,
        "--timeout",
        "120",
        "--max-retries",
        "1",
        *extra,
    ]


def server_posts(srv: RealServer) -> int:
    """Chat requests the server has answered with a reply (uvicorn's access log: status 200)."""
    return srv.log_tail(10**9).count('"POST /v1/chat/completions HTTP/1.1" 200')


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def progress_counts(stderr: str) -> list[tuple[int, int]]:
    out = []
    for line in stderr.splitlines():
        m = PROGRESS.search(line)
        if m:
            out.append((int(m.group(1)), int(m.group(2))))
    return out


def chat_prompt_tokens(model_dir, messages) -> int:
    """Independent count: the model's tokenizer on its chat template (what the server should report)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return len(tok(text, add_special_tokens=False)["input_ids"])


# ------------------------------------------------------------------------------------------------------
# the probe: what the server really does
# ------------------------------------------------------------------------------------------------------


def test_probe_reports_what_transformers_serve_does(server, model_dir, tmp_path, capsys):
    from mascot.backends.openai import OpenAIBackend

    be = OpenAIBackend(server.model, base_url=server.base_url, probe=True, probe_structured=True, timeout_s=120)
    err = capsys.readouterr().err
    found = be.describe()["probe"]
    # do_sample in the generation config: seeds 1 and 2 at temperature 1 give different replies
    assert found["sampling"]["verdict"] == "honoured", (found, server.log_tail())
    assert "sampling appears to be ignored" not in err
    # transformers serve ignores response_format: prose where {"answer": <int>} was required
    assert found["structured_output"]["verdict"] == "ignored", found
    assert (
        f"structured output (response_format json_schema) appears to be ignored by backend openai "
        f"({server.base_url})" in err
    )

    # the same model without do_sample: the server decodes greedily whatever the seed and temperature
    plain = server_or_skip(model_copy_without_sampling(model_dir, tmp_path / "no-do-sample"), tmp_path / "serve.log")
    try:
        be = OpenAIBackend(plain.model, base_url=plain.base_url, probe=True, timeout_s=120)
    finally:
        plain.stop()
    err = capsys.readouterr().err
    found = be.describe()["probe"]
    assert found["sampling"]["verdict"] == "ignored" and found["sampling"]["seeds"] == [1, 2, 3], found
    assert len(set(found["sampling"]["replies"])) == 1
    assert f"sampling appears to be ignored by backend openai ({plain.base_url})" in err
    assert found["structured_output"] is None  # not asked for


# ------------------------------------------------------------------------------------------------------
# the three LLM commands through the server
# ------------------------------------------------------------------------------------------------------


def test_trials_through_the_server_log_count_and_resume(server, model_dir, tmp_path):
    import pandas as pd

    out = tmp_path / "trials"
    cmd = [
        "trials",
        *openai_args(server),
        "--topology",
        "chain",
        "--n-trials",
        "1",
        "--steps",
        "1",
        "--max-tokens",
        "32",
        "--retries",
        "0",
        "--n-boot",
        "50",
        "--no-figures",
        "--out",
        out,
    ]
    r = mascot(*cmd)
    assert r.returncode == 0, why(r, server)
    logs = jsonl(out / "requests.jsonl")
    assert len(logs) == 2, why(r, server)  # one chain agent per arm, one attempt each
    n_prompt = chat_prompt_tokens(model_dir, logs[0]["messages"])
    for rec in logs:
        assert rec["error"] is None and rec["attempt"] == 0 and isinstance(rec["parse_ok"], bool)
        assert rec["prompt_tokens"] == chat_prompt_tokens(model_dir, rec["messages"]) == n_prompt
        assert 1 <= rec["completion_tokens"] <= 32 and rec["finish_reason"] in ("stop", "length")
        assert (rec["finish_reason"] == "length") == (rec["completion_tokens"] == 32)
        assert rec["parse_ok"] == (rec["state"] is not None) and (rec["parse_ok"] or rec["reason"])
    t = pd.read_parquet(out / "trials.parquet")
    assert len(t) == 4 and int(t.n_backend_errors.sum()) == 0  # 1 trial x 2 arms x (initial + 1 step)
    assert int(t[t.step == 1].n_requests.sum()) == 2
    assert int(t[t.step == 1].n_failed_attempts.sum()) == sum(not rec["parse_ok"] for rec in logs)
    assert progress_counts(r.stderr)[-1] == (2, 2), why(r, server)  # requests done/total inside the stage
    meta = json.loads((out / "run.json").read_text())
    assert meta["complete"] and meta["sessions"][-1]["steps_run"] == 1
    probe = meta["sessions"][-1]["backend"]["describe"]["probe"]
    assert probe["sampling"]["verdict"] == "honoured"  # recorded as provenance ...
    assert "probe" not in json.dumps(meta["identity"])  # ... never in the identity

    posts = server_posts(server)
    again = mascot(*cmd)  # resume: nothing left to ask (not even the probe)
    assert again.returncode == 0 and "0 steps run, 1 already committed" in again.stdout, why(again, server)
    assert jsonl(out / "requests.jsonl") == logs
    time.sleep(0.5)  # the access log is written after the reply
    assert server_posts(server) == posts
    # what the model did, as `mascot show` tells it from the records of this real run (issue 33)
    shown = mascot("show", out, "--html", tmp_path / "run.html")
    parsed = sum(rec["parse_ok"] for rec in logs)
    assert shown.returncode == 0 and f"2 recorded, 2 answered, 0 got no answer; {parsed} of the answers parsed" in (
        shown.stdout
    )
    finish = {f: sum(rec["finish_reason"] == f for rec in logs) for f in ("stop", "length")}
    assert (
        all(f"{n} x {f}" in shown.stdout for f, n in finish.items() if n) and "latency stage1: median" in shown.stdout
    )
    page = (tmp_path / "run.html").read_text()
    assert page.count("<div class='role'>reply</div>") == 2 and html.escape(logs[0]["text"]) in page


DELIBERATION_TOML = """
name = "tiny"
task = "Choose how to store the notes of a small team: speed against cost."
strategies = ["complete"]
max_rounds = 1
retries = 0
b0 = 1000000
[[roles]]
name = "Fast"
prompt = "You are the performance engineer. You want the fastest storage."
prior = [0.9, 0.8]
[[roles]]
name = "Cheap"
prompt = "You are the accountant. You want the cheapest storage."
prior = [0.1, 0.2]
[[roles]]
name = "Safe"
prompt = "You are the security officer. You want the safest storage."
prior = [0.5, 0.9]
[[axes]]
name = "speed"
low = "slow and simple"
high = "fast and complex"
[[axes]]
name = "cost"
low = "free"
high = "expensive"
[sampling]
max_tokens = 32
"""


def test_deliberate_through_the_server(server, tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(DELIBERATION_TOML)
    out = tmp_path / "delib"
    cmd = ["deliberate", cfg, *openai_args(server, "--no-probe"), "--out", out]
    r = mascot(*cmd)
    assert r.returncode == 0, why(r, server)
    logs = jsonl(out / "requests.jsonl")
    assert sorted((x["round"], x["agent"]) for x in logs) == [(k, i) for k in (0, 1) for i in range(3)], why(r, server)
    for x in logs:
        resp = x["response"]
        assert resp["error"] is None and resp["prompt_tokens"] > 0 and 1 <= resp["completion_tokens"] <= 32
        assert isinstance(x["parse"]["ok"], bool) and (x["parse"]["ok"] or x["parse"]["reason"])
    rounds = jsonl(out / "rounds.jsonl")
    assert [x["round"] for x in rounds] == [0, 1] and rounds[-1]["status"] is not None
    assert rounds[1]["failures"] == sum(not x["parse"]["ok"] for x in logs if x["round"] == 1)
    assert [c for c in progress_counts(r.stderr) if c[0] == c[1]] == [(3, 3), (3, 3)], why(r, server)
    meta = json.loads((out / "run.json").read_text())
    assert meta["complete"]  # provenance as trials and debate record it (the probe's findings go there)
    assert meta["sessions"][-1]["backend"]["describe"]["backend"] == "openai"
    again = mascot(*cmd)
    assert again.returncode == 0 and jsonl(out / "requests.jsonl") == logs, why(again, server)


def test_debate_through_the_server_quietly(server, tmp_path):
    out = tmp_path / "debate"
    cmd = [
        "debate",
        *openai_args(server, "--no-probe"),
        "--max-rounds",
        "1",
        "--max-tokens",
        "48",
        "--quiet",
        "--json",
        "--out",
        out,
    ]
    r = mascot(*cmd)
    assert r.returncode == 0, why(r, server)
    lines = jsonl(out / "transcript.jsonl")
    replies = [x for x in lines if x["type"] == "reply"]
    assert len(replies) == 3 and len([x for x in lines if x["type"] == "round"]) == 1
    for x in replies:
        assert x["error"] is None and x["prompt_tokens"] > 0 and 1 <= x["completion_tokens"] <= 48
        assert x["decision"] in ("PASS", "FAIL", "NONE") and "ballot_reason" in x  # judged, tagged or not
    summary = json.loads(r.stdout)
    assert summary["rounds"] == 1 and summary["tokens"] == sum(
        x["prompt_tokens"] + x["completion_tokens"] for x in replies
    )
    assert progress_counts(r.stderr) == [] and "[debate]" not in r.stderr  # --quiet
    assert json.loads((out / "run.json").read_text())["complete"]
    again = mascot(*cmd)
    assert again.returncode == 0 and jsonl(out / "transcript.jsonl") == lines, why(again, server)


# ------------------------------------------------------------------------------------------------------
# failures are never results
# ------------------------------------------------------------------------------------------------------


def test_server_killed_mid_run_stops_and_the_rerun_redoes_the_lost_step(model_dir, tmp_path):
    srv = server_or_skip(model_dir, tmp_path / "serve.log")
    out = tmp_path / "trials"
    common = [
        "trials",
        "--topology",
        "chain",
        "--n-trials",
        "1",
        "--steps",
        "2",
        "--max-tokens",
        "32",
        "--retries",
        "0",
        "--n-boot",
        "50",
        "--no-figures",
        "--out",
        out,
    ]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mascot", *map(str, common), *openai_args(srv, "--max-retries", "0", "--no-probe")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        run_json = out / "run.json"
        t0 = time.monotonic()
        while time.monotonic() - t0 < 600 and proc.poll() is None:  # kill the server once step 1 is committed
            try:
                if json.loads(run_json.read_text()).get("steps_done") == 1:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.02)
        srv.kill()
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        srv.stop()
    r = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert r.returncode == 1, why(r, srv)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("mascot: error")]
    assert len(errors) == 1, why(r, srv)
    # the endpoint, the cause and the step that was not committed; which of two messages depends on where the
    # kill lands: mid-request (a reset: the step's requests fail, "first error: ...") or before a request
    # connects (refused: the backend is down, "failed after 1 attempt(s) ... Step 2 was not committed")
    assert srv.base_url in errors[0] and "step 2" in errors[0].lower(), errors[0]
    assert "connection" in errors[0].lower()
    assert "first error:" in errors[0] or "Step 2 was not committed" in errors[0], errors[0]
    meta = json.loads(run_json.read_text())
    assert not meta["complete"] and meta["steps_done"] == 1
    steps = out / "steps"
    assert (steps / "step_001.parquet").exists() and not (steps / "step_002.parquet").exists()
    assert not (out / "trials.parquet").exists()
    step1 = (steps / "step_001.parquet").read_bytes()
    step1_log = jsonl(steps / "step_001.requests.jsonl")

    srv.start()  # back, on another port: the address is not part of the run's identity
    try:
        again = mascot(*common, *openai_args(srv, "--max-retries", "0", "--no-probe"))
    finally:
        srv.stop()
    assert again.returncode == 0 and "1 steps run, 1 already committed" in again.stdout, why(again, srv)
    assert (steps / "step_001.parquet").read_bytes() == step1  # step 1 untouched
    logs = jsonl(out / "requests.jsonl")
    assert [x for x in logs if x["step"] == 1] == step1_log
    step2 = [x for x in logs if x["step"] == 2]
    assert len(step2) == 2 and all(x["error"] is None and x["completion_tokens"] > 0 for x in step2)
    meta = json.loads(run_json.read_text())
    assert (
        meta["complete"] and meta["sessions"][-1]["steps_done_before"] == 1 and meta["sessions"][-1]["steps_run"] == 1
    )


def test_wrong_model_name_is_an_error_never_a_result(server, tmp_path):
    """With the probe (the default) the server's /v1/models names what it serves, before any completion (issue
    33); without it, the server's HTTP 400 stops the run."""
    out = tmp_path / "wrong"
    posts = server_posts(server)
    args = openai_args(server)
    args[args.index("--model") + 1] = "no-such-model"
    few = ["--topology", "chain", "--n-trials", "1", "--steps", "1", "--no-figures", "--quiet"]
    r = mascot("trials", *args, *few, "--out", tmp_path / "probed")
    assert r.returncode == 2, why(r, server)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"does not serve model 'no-such-model'; it serves {server.model!r}" in lines[0]
    assert server_posts(server) == posts
    r = mascot(
        "trials",
        *args,
        "--no-probe",
        "--topology",
        "chain",
        "--n-trials",
        "1",
        "--steps",
        "1",
        "--max-tokens",
        "8",
        "--retries",
        "0",
        "--no-figures",
        "--quiet",
        "--out",
        out,
    )
    assert r.returncode == 1, why(r, server)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert (
        len(lines) == 1
        and lines[0].startswith("mascot: error")
        and server.base_url in lines[0]
        and "HTTP 400" in lines[0]
        and "no-such-model" in lines[0]
    )
    meta = json.loads((out / "run.json").read_text())
    assert not meta["complete"] and meta["steps_done"] == 0
    assert not list((out / "steps").glob("*.parquet")) and not (out / "trials.parquet").exists()
    time.sleep(0.5)
    assert server_posts(server) == posts  # refused before generation: nothing was answered
