"""The command line: demonstration, --version and validate."""

from __future__ import annotations

import json
import subprocess
import sys

import pychop_compat


def _run(*args):
    return subprocess.run([sys.executable, "-m", "pychop_compat", *args], capture_output=True, text=True)


def test_version():
    out = _run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"pychop_compat {pychop_compat.__version__}"


def test_demo_table():
    out = _run()
    assert out.returncode == 0
    # 1/3 to bfloat16, nearest: 1.0101011b * 2^-2 = 0.333984375 (printed to 8 significant digits)
    assert any(line.split()[:3] == ["1/3", "bfloat16", "0.33398438"] for line in out.stdout.splitlines())


def test_validate_numpy(tmp_path):
    report = tmp_path / "v.json"
    out = _run("validate", "--engines", "numpy", "--json", str(report), "--no-progress", "--no-oracle")
    assert out.returncode == 0, out.stderr
    rows = {(r["group"], r["engine"]): r for r in json.loads(report.read_text())}
    expected_counts = {"chop": 744, "matlab_native": 32, "matlab_stream": 120, "roundit": 6, "float_params": 20}
    for group, count in expected_counts.items():
        row = rows[(group, "numpy")]
        assert row["cases"] == count and row["agreeing"] == count and row["ok"]
    assert "| chop | numpy | 744 | 744 |" in out.stdout
    assert rows[("cpfloat_corpus", "numpy")]["cases"] == 1925 and rows[("cpfloat_corpus", "numpy")]["ok"]
    ocp = rows.get(("ocp_ml_dtypes", "numpy"))
    assert ocp is None or (ocp["cases"] == 10 and ocp["ok"]), ocp


def test_validate_reports_disagreement(tmp_path, monkeypatch):
    # Break the rounding on purpose: validate must notice and exit non-zero.
    from pychop_compat import validation

    monkeypatch.setattr(validation.api, "chop", lambda x, options=None: x)
    results = validation.validate(engines=["numpy"], progress=False, oracle=False)
    chop_row = next(r for r in results if r.group == "chop")
    assert not chop_row.ok and chop_row.agreeing < chop_row.cases


def test_validate_missing_corpus(tmp_path):
    out = _run("validate", "--corpus", str(tmp_path))
    assert out.returncode == 2 and "corpus not found" in out.stderr


def test_validate_oracle_group():
    from pychop_compat import validation

    results = validation.validate(engines=["numpy"], progress=False)
    row = next(r for r in results if r.group == "mpmath_oracle")
    assert row.cases == 15 * 16 and row.ok, row.disagreeing[:5]
