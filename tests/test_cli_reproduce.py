"""The `mascot` command: the consensus reproduction and the certificate calculator, end to end."""

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from mascot.cli import main
from mascot.graphs import paper_modes


@pytest.fixture(scope="module")
def repro(tmp_path_factory):
    out = tmp_path_factory.mktemp("consensus")
    assert main(["reproduce", "consensus", "--out", str(out)]) == 0
    return out


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_reproduce_writes_every_output(repro):
    for name in ("table_iv.csv", "table_v.csv", "table_vi.csv", "theorem1.json", "errata.md", "README.md",
                 "fig3a_disagreement.png", "fig3a_disagreement.pdf", "fig3b_budget.png", "fig3b_budget.pdf"):
        assert (repro / name).stat().st_size > 0, name
    for png in repro.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(repro.glob("*.tmp"))  # atomic writes leave no temp files


def test_table_vi_columns_and_values(repro):
    with open(repro / "table_vi.csv") as f:
        assert f.readline().strip() == "x0,strategy,b0,rounds,tokens,d_final,status,in_omega_eps"
    rows = {(r["x0"], r["strategy"]): r for r in _rows(repro / "table_vi.csv")}
    assert len(rows) == 8
    r = rows[("rescaled", "adaptive")]
    assert (int(r["rounds"]), float(r["tokens"]), r["status"], r["in_omega_eps"]) == (3, 800.0, "consensus", "True")
    r = rows[("rescaled", "complete-only")]
    assert (int(r["rounds"]), float(r["tokens"])) == (2, 1200.0)
    assert float(r["d_final"]) == pytest.approx(0.3009 * 0.25**2, abs=1e-9)
    r = rows[("rescaled", "tight")]
    assert (int(r["rounds"]), float(r["tokens"]), r["status"], r["in_omega_eps"]) == (1, 600.0, "BudgetFail", "False")
    assert float(r["d_final"]) == pytest.approx(0.3009 * 0.25, abs=1e-9)
    r = rows[("printed", "adaptive")]
    assert (int(r["rounds"]), float(r["tokens"])) == (4, 900.0)


def test_table_iv_and_v(repro):
    t4 = _rows(repro / "table_iv.csv")
    X = np.array([[float(r[f"f{i}"]) for i in range(1, 7)] for r in t4])
    assert X.shape == (5, 6) and X[0, 0] == 0.57 and X[4, 5] == 0.66
    t5 = [r for r in _rows(repro / "table_v.csv") if r["x0"] == "rescaled"]
    assert [r["sigma"] for r in t5] == ["1", "2", "2", ""]
    assert [float(r["budget"]) for r in t5] == [2000, 1400, 1300, 1200]
    assert float(t5[1]["D"]) == pytest.approx(0.075225, abs=1e-9)


def test_theorem1_json(repro):
    th = json.loads((repro / "theorem1.json").read_text())
    for key in ("lambda1", "lambda2", "D0", "K1", "K2", "K_star", "B_star", "K_cmpl", "K_ring", "B_cmpl", "B_ring",
                "corollary_condition"):
        assert key in th, key
    assert (th["K1"], th["K2"], th["K_star"], th["B_star"]) == (1, 4, 5, 1000.0)
    assert (th["K_cmpl"], th["K_ring"], th["B_cmpl"], th["B_ring"]) == (2, 8, 1200.0, 800.0)
    assert th["lambda1"] == pytest.approx(0.25) and th["lambda2"] == pytest.approx(0.7236068, abs=1e-7)
    assert th["D0"] == pytest.approx(0.3009) and th["printed_x0"]["D0"] == pytest.approx(0.3282560, abs=1e-6)
    assert th["corollary_condition"] is True


def test_errata_explains_the_known_differences(repro):
    text = (repro / "errata.md").read_text()
    for needle in ("0.3283", "K1 = 1, K2 = 4", "sigma = 1, 2, 2", "f = 0.403", "largest eigenvalue", "K_ring = 1"):
        assert needle in text, needle


def test_certify_text_and_json(capsys):
    args = ["certify", "--d0", "0.3", "--b0", "2000", "--eta", "0.1", "--eps", "0.03", "--lambda1", "0.25",
            "--lambda2", "0.7236", "--c1", "600", "--c2", "100"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "K* = 5" in out and "B* = 1000" in out and "YES" in out
    assert main(args + ["--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["certified"] is True and js["margin"] == 1000.0 and js["corollary_condition"] is True
    assert main(["certify", "--d0", "0.3", "--b0", "999.5", "--eta", "0.1", "--eps", "0.03", "--lambda1", "0.25",
                 "--lambda2", "0.7236", "--c1", "600", "--c2", "100", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["certified"] is False and js["margin"] == -0.5


def test_certify_from_weight_files(tmp_path, capsys):
    W1, W2 = paper_modes()
    np.save(tmp_path / "w1.npy", W1)
    np.savetxt(tmp_path / "w2.csv", W2, delimiter=",")
    assert main(["certify", "--d0", "0.3009", "--b0", "1000", "--eta", "0.1", "--eps", "0.03", "--w1",
                 str(tmp_path / "w1.npy"), "--w2", str(tmp_path / "w2.csv"), "--c1", "600", "--c2", "100",
                 "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["lambda1"] == pytest.approx(0.25) and js["lambda2"] == pytest.approx(0.7236068, abs=1e-7)
    assert js["B_star"] == 1000.0 and js["certified"] is True  # exactly at the boundary


def test_certify_non_contracting_and_bad_input(tmp_path, capsys):
    base = ["certify", "--d0", "0.3", "--b0", "1e9", "--eta", "0.1", "--eps", "0.03", "--c1", "600", "--c2", "100"]
    assert main(base + ["--lambda1", "1.0", "--lambda2", "0.7", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["certified"] is False and js["B_star"] == "inf" and "does not contract" in js["reason"]
    assert main(base + ["--lambda1", "0.25"]) == 2
    assert "--lambda2" in capsys.readouterr().err
    bad = np.array([[0.5, 0.5], [0.6, 0.4]])
    np.save(tmp_path / "bad.npy", bad)
    assert main(base + ["--w1", str(tmp_path / "bad.npy"), "--lambda2", "0.7"]) == 2
    assert "W1 (--w1)" in capsys.readouterr().err
    assert main(["certify", "--d0", "0.3", "--b0", "-5", "--eta", "0.1", "--eps", "0.03", "--c1", "600",
                 "--c2", "100", "--lambda1", "0.2", "--lambda2", "0.7"]) == 2
    assert "--b0" in capsys.readouterr().err


def test_console_entry_point():
    out = subprocess.run([sys.executable, "-m", "mascot.cli", "certify", "--d0", "0.05", "--b0", "0", "--eta", "0.1",
                          "--eps", "0.06", "--lambda1", "0.25", "--lambda2", "0.7", "--c1", "6", "--c2", "1",
                          "--json"], capture_output=True, text=True, check=True)
    js = json.loads(out.stdout)
    assert js["K_star"] == 0 and js["certified"] is True
