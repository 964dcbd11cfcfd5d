"""benchmarks/gpu_session.sh and gpu_session.py without a GPU: the script stops after the versions
and says so; the Python stages run on the CPU (torch CPU tensors) and report full agreement.
No timing is asserted."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pychop_compat.engines import available_engines

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
_GPU = any(engine in available_engines() for engine in ("cupy", "torch-cuda"))


def _gpu_session():
    spec = importlib.util.spec_from_file_location("gpu_session", BENCHMARKS / "gpu_session.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # runs the whole GPU session script in new processes: CI's slow step
@pytest.mark.skipif(_GPU, reason="a GPU is present: the script would run the whole session")
def test_without_a_gpu_the_script_says_so_and_writes_the_versions(tmp_path):
    # The versions stage imports torch, JAX, Numba, ...: 20 s is its budget on a quiet GPU machine,
    # and a loaded 2-core test machine took longer (the stage then reports TIMED OUT, as it should).
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable, "BUDGET_VERSIONS": "100"}
    env.pop("GPU_SESSION_REHEARSE", None)
    done = subprocess.run(["bash", str(BENCHMARKS / "gpu_session.sh")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert any(line.startswith("no GPU:") for line in done.stdout.splitlines()), done.stdout
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "no GPU:" in summary and "| versions | ok |" in summary
    for name in ("python", "torch", "numpy", "numba", "cupy", "pytest"):
        assert f"\n{name}: " in summary, name
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["summary.md", "versions.log"]


def test_rng_on_the_cpu_agrees_everywhere(tmp_path, capsys):
    pytest.importorskip("torch")
    report = tmp_path / "rng.md"
    assert _gpu_session().main(["rng", "--device", "cpu", "--n", "2000", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "rng: all agree" in out and report.read_text().strip() in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "reference" not in line
            and not line.startswith("| case")]
    assert len(rows) >= 6  # 3 cases x (the compiled engine,) torch cpu (and its GPU paths)
    assert all(row.count("2000/2000") == 2 for row in rows), rows


def test_matmul_on_the_cpu_agrees_with_the_host_rows(capsys):
    pytest.importorskip("torch")
    assert _gpu_session().main(["matmul", "--device", "cpu", "--n", "32"]) == 0
    out = capsys.readouterr().out
    assert "matmul: all agree" in out
    assert out.count("128/128 (0 differ)") == 2  # 4 rows x 32 columns, both torch paths
    assert "32x32 elements: 1024/1024 agree" in out and "an extrapolation" in out
