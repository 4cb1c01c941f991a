"""Issue 33, item 6: `mascot show RUN` (terminal summary) and `--html` (one self-contained page), the page checked
in a real headless Chromium (Debian's package; CI installs it and sets MASCOT_REQUIRE_BROWSER=1)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from mascot.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = "<script>document.title='owned'</script>\x1b[31m</pre><b>x</b>"


def _browser():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("MASCOT_REQUIRE_BROWSER"):
            pytest.fail("MASCOT_REQUIRE_BROWSER is set but no chromium is installed")
        pytest.skip("needs Chromium (Debian: apt-get install chromium)")
    return exe


@pytest.fixture(scope="module")
def trials_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("show") / "t"
    argv = ["trials", "--backend", "surrogate", "--n-trials", "2", "--steps", "2", "--parse-fail", "0.3"]
    rc = cli_main([*argv, "--log-requests", "all", "--no-figures", "--quiet", "--out", str(out)])
    assert rc == 0
    # one reply as a hostile model would write it: markup and a terminal escape
    lines = (out / "requests.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["text"], rec["parse_ok"], rec["reason"] = HOSTILE, False, "no_json: no JSON object in the reply"
    lines[0] = json.dumps(rec)
    (out / "requests.jsonl").write_text("\n".join(lines) + "\n")
    return out


def _edited_copy(run, tmp_path, line: int, **fields):
    """A copy of ``run`` whose ``requests.jsonl`` record on ``line`` (0-based) has ``fields`` replaced; returns the
    copy and its lines."""
    out = tmp_path / "t"
    shutil.copytree(run, out)
    lines = (out / "requests.jsonl").read_text().splitlines()
    lines[line] = json.dumps({**json.loads(lines[line]), **fields})
    (out / "requests.jsonl").write_text("\n".join(lines) + "\n")
    return out, lines


def test_show_counts_what_the_records_hold(trials_run, capsys):
    recs = [json.loads(x) for x in (trials_run / "requests.jsonl").read_text().splitlines()]
    assert cli_main(["show", str(trials_run)]) == 0
    out = capsys.readouterr().out
    parsed = sum(1 for r in recs if r["parse_ok"] and not r["error"])
    assert (
        f"requests: {len(recs):,} recorded, {len(recs):,} answered, 0 got no answer; {parsed:,} of the answers parsed"
        in out
    )
    ptok = sum(r["prompt_tokens"] for r in recs)
    assert f"tokens: {ptok:,} prompt" in out and "no_json" in out and "\x1b" not in out


def test_show_refuses_what_is_not_an_llm_run(tmp_path, capsys):
    assert cli_main(["show", str(tmp_path)]) == 2 and "no run.json" in capsys.readouterr().err
    (tmp_path / "run.json").write_text('{"kind": "mascot-trials"}')
    assert cli_main(["show", str(tmp_path)]) == 2 and "--log-requests all" in capsys.readouterr().err
    (tmp_path / "requests.jsonl").write_text('{"topology": "chain"\n')
    assert cli_main(["show", str(tmp_path)]) == 2 and "line 1 is not JSON" in capsys.readouterr().err
    # found by the outside tester: these gave tracebacks
    for bad, why in (
        (b"\xff\xfe\n", "not JSON"),
        (b"[1, 2, 3]\n", "not a record"),
        (b'{"topology": "x"}\n', "KeyError"),
    ):
        (tmp_path / "requests.jsonl").write_bytes(bad)
        assert cli_main(["show", str(tmp_path)]) == 2 and why in capsys.readouterr().err


def test_show_never_writes_its_page_over_a_run_file(trials_run, capsys):
    """Found by an outside tester: --html RUN/requests.jsonl (or run.json) replaced the run's log with the page."""
    before = {p.name: p.read_bytes() for p in trials_run.iterdir() if p.is_file()}
    for name in ("requests.jsonl", "run.json"):
        assert cli_main(["show", str(trials_run), "--html", str(trials_run / name)]) == 2
        assert "give a .html file name" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in trials_run.iterdir() if p.is_file()} == before


def test_show_masks_the_key_in_records_that_hold_it(trials_run, tmp_path, capsys, monkeypatch):
    """Found by an outside tester: a run whose records held the API key (an error, a finish reason) was shown with
    the key, on screen and in the page."""
    import shutil

    key = "sk-proj9A8b7C6d5E4f3G2h1I0jK9l8M7n6O5p4Q3r2"
    run = tmp_path / "r"
    shutil.copytree(trials_run, run)
    lines = (run / "requests.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec.update(finish_reason=key, error=f"401 invalid key {key}")
    (run / "requests.jsonl").write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    assert cli_main(["show", str(run), "--html", str(tmp_path / "p.html")]) == 0
    shown = capsys.readouterr().out + (tmp_path / "p.html").read_text()
    assert "C6d5E4f3G2h1" not in shown and "***" in shown
    # ... and in a variable of another name that the run's record names as its key's (a later tester)
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("MYCRED", key)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "backend_options": {"api_key_env": "MYCRED"}}))
    assert cli_main(["show", str(run), "--html", str(tmp_path / "q.html")]) == 0
    shown = capsys.readouterr().out + (tmp_path / "q.html").read_text()
    assert "C6d5E4f3G2h1" not in shown and "***" in shown


def test_show_escapes_what_the_server_said_in_the_summary(trials_run, tmp_path, capsys):
    """A finish_reason of "\x1b[31mweird" reached the terminal raw in the summary (the page escaped it)."""
    run, _ = _edited_copy(trials_run, tmp_path, 1, finish_reason="\x1b[31mweird\x1b[0m")
    assert cli_main(["show", str(run)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "1 x \\x1b[31mweird\\x1b[0m" in out


def test_show_html_in_a_real_browser(trials_run, tmp_path):
    exe = _browser()
    page = tmp_path / "run.html"
    r = subprocess.run(
        [sys.executable, "-m", "mascot", "show", str(trials_run), "--html", str(page)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,1600"]
    dom = subprocess.run([exe, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    # the hostile reply is text on the page, not markup: no script ran (the title is the page's own), no <b>
    assert "<title>mascot show t</title>" in dom and "<script" not in dom.lower() and "<b>x</b>" not in dom
    assert "&lt;script&gt;document.title='owned'&lt;/script&gt;\\x1b[31m&lt;/pre&gt;&lt;b&gt;x&lt;/b&gt;" in dom
    assert "not parsed: no_json" in dom and "chain · trial 0 · benign" in dom and '<details open="">' in dom
    shot = tmp_path / "run.png"
    subprocess.run([exe, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", head[16:24]) == (1200, 1600)


def test_show_reads_what_it_can_of_a_damaged_or_uncommitted_run(trials_run, tmp_path, capsys):
    """The outside test: one cut line (a kill) or one bad field refused the whole file, and a run that failed
    before its first commit had nothing to say but "no requests.jsonl"."""
    run, lines = _edited_copy(trials_run, tmp_path, 2, latency_s="fast")
    with open(run / "requests.jsonl", "a") as f:
        f.write(lines[3][:40])  # + a line cut by a kill
    assert cli_main(["show", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"requests: {len(lines) - 1:,} recorded" in out
    assert "warning: 2 line(s) left out: requests.jsonl line 3 is not a trials record (ValueError" in out
    (run / "requests.jsonl").unlink()
    (run / "answers.jsonl").write_text('{"key": "a"}\n{"key": "b"}\n')
    assert cli_main(["show", str(run)]) == 2
    assert "nothing is committed yet, and 2 answered request(s) wait in answers.jsonl" in capsys.readouterr().err


def test_show_counts_clipped_deliberation_replies_of_the_real_run(capsys):
    """The committed real-model deliberation (results/real-llm-deliberation): an outside tester found that the replies
    clipped to [0, 1] (which can themselves make agents agree) were nowhere in `mascot show`; counted against the
    records read here."""
    run = ROOT / "results" / "real-llm-deliberation"
    recs = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines() if x.strip()]
    parsed = [r for r in recs if not r["response"]["error"] and r["parse"]["ok"]]
    clipped = sum(1 for r in parsed if r["parse"].get("clipped", 0) > 0)
    assert cli_main(["show", str(run)]) == 0
    out = capsys.readouterr().out
    assert (
        clipped > 0 and f"warning: {clipped:,} of the {len(parsed):,} parsed replies had vector entries outside" in out
    )
