"""The benchmark scripts run and print their tables (smoke runs: no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pychop_compat.engines import available_engines

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _run(script, *args):
    return subprocess.run([sys.executable, str(BENCHMARKS / script), *args],
                          capture_output=True, text=True, timeout=600)


def _table_rows(stdout: str) -> list:
    return [line for line in stdout.splitlines() if line.startswith("| ") and not line.startswith("| engine")]


@pytest.mark.slow  # a run of the benchmark script (minutes of CPU under load): CI's slow step
@pytest.mark.skipif("torch" not in available_engines(), reason="torch not installed")
def test_gpu_benchmark_table_on_the_cpu_proxy():
    """The GPU benchmark's table code, run on CPU tensors sent down the GPU paths."""
    out = _run("bench_gpu.py", "--cpu-proxy", "--sizes", "2e4", "--repeats", "1")
    assert out.returncode == 0, out.stderr
    rows = _table_rows(out.stdout)
    assert len(rows) == 8, out.stdout  # 2 dtypes x 4 cases
    assert all(row.count("|") == 10 and "does not fit" not in row for row in rows)
    assert "not GPU times" in out.stdout
    out = _run("bench_gpu.py", "--cpu-proxy", "--formats", "--sizes", "2e4", "--repeats", "1", "--dtypes", "float32")
    assert out.returncode == 0, out.stderr
    rows = _table_rows(out.stdout)
    assert len(rows) == 10 and any("cpfloat float4_e2m1fn SR" in row for row in rows), out.stdout


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
def test_gpu_benchmark_without_a_gpu_says_so():
    if {"cupy", "torch-cuda"} & set(available_engines()):
        pytest.skip("a GPU is visible")
    out = _run("bench_gpu.py", "--quick")
    assert out.returncode == 0 and "No CUDA GPU" in out.stdout


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
def test_cpu_benchmark_quick_run():
    out = _run("bench_cpu.py", "--quick", "--no-pychop")
    assert out.returncode == 0, out.stderr
    rows = [row for row in out.stdout.splitlines() if row.startswith("| 1e+0")]
    assert len(rows) >= 36, out.stdout  # 2 sizes x 2 dtypes x 9 configurations, then torch rows
    assert any("fp16 SR5 MATLAB stream" in row for row in rows)
    for label in ("float8_e4m3fn RN", "float4_e2m1fn RN", "fp16 round to odd (cpfloat)", "float6_e2m3fn RN",
                  "float8_e4m3fn RN ties away (cpfloat)", "float8_e4m3fn RN saturation (cpfloat)",
                  "float8_e5m2 RN (cpfloat)", "float4_e2m1fn RN (cpfloat)"):
        assert any(label in row and "failed" not in row for row in rows), label


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
def test_formats_benchmark_quick_run():
    """The formats beyond chop next to chop's fp16 RN: 12 configurations x 2 dtypes, one engine."""
    out = _run("bench_formats.py", "--quick", "--engines", "numpy")
    assert out.returncode == 0, out.stderr
    rows = [row for row in out.stdout.splitlines() if row.startswith("| 1e+05")]
    assert len(rows) == 24, out.stdout
    assert rows[0].endswith("| 1.00 |") and "fp16 RN (chop)" in rows[0]
    assert all(row.count("|") == 7 for row in rows)



def test_narrow_range_workload_quick_run_matches_the_study_and_octave():
    """Mary and Mikaitis' study, ported line by line (its first 9 sizes): every printed line as the
    published data file has it, the chopped products bit for bit as Octave's run with CPFloat's MEX."""
    out = _run("workload_narrow_range.py", "--quick", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["calls"] == 1564
    assert result["checks"] == {"published": [9, 9], "LABM bits": [9, 9], "err to 1e-12": [9, 9]}

def torch_cuda_visible() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
@pytest.mark.skipif("torch" not in available_engines(), reason="torch not installed")
def test_nn_benchmark_prints_its_table():
    out = _run("bench_nn.py", "--quick", "--threads", "1")
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ") and not line.startswith("| device")]
    devices = 2 if torch_cuda_visible() else 1  # CPU, and CUDA when torch sees a GPU
    assert len(rows) == 8 * devices, out.stdout  # one size, eight cases (no torch.compile row in --quick)
    assert all(row.count("|") == 7 for row in rows)


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
def test_jax_dask_benchmark_smoke():
    pytest.importorskip("jax")
    pytest.importorskip("dask.array")
    out = _run("bench_jax_dask.py", "--quick")
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| fp16")]
    assert len(rows) == 4, out.stdout  # 2 cases x 2 dtypes x 1 size
    rows = [line for line in out.stdout.splitlines() if line.startswith("| cpfloat")]
    assert len(rows) == 4, out.stdout  # CPFloat's rules: 2 cases x 2 dtypes x 1 size


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
def test_arithmetic_benchmark_smoke_run():
    out = _run("bench_arithmetic.py", "--smoke")
    assert out.returncode == 0, out.stderr
    rows = [row for row in out.stdout.splitlines() if row.startswith("| ")]
    assert sum(row.startswith("| 1e+0") for row in rows) == 6, out.stdout  # 2 sizes x 3 operations
    # 3 operations x 3 modes, then the 2 rows of stochastic rounding before/after the one-number draw
    assert sum(row.startswith("| `a ") for row in rows) == 11, out.stdout


@pytest.mark.slow  # a run of the benchmark script (41 s of one worker in a fresh clone): CI's slow step
def test_cpu_benchmark_compiled_table_quick_run():
    """The compiled engine's table (or a line saying why it is skipped), and CPFloat skipped
    without its source."""
    out = _run("bench_cpu.py", "--compiled", "--quick")
    assert out.returncode == 0, out.stderr
    from pychop_compat.kernels import compiled

    if not compiled.available():
        assert "skipped" in out.stdout
        return
    rows = [row for row in out.stdout.splitlines() if row.startswith("| ") and "configuration" not in row]
    assert len(rows) == 7, out.stdout
    assert "compiled / (draw + one pass)" in out.stdout
    assert "CPFloat: skipped (no CPFloat source given" in out.stdout
    # CPFloat's stochastic rounding is never timed (no PCG in the driver's build), and the output says why
    assert "CPFloat's stochastic rounding: not compared" in out.stdout and "PCG" in out.stdout


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
def test_linalg_benchmark_quick_run():
    out = _run("bench_linalg.py", "--sizes", "12", "--methods", "recursive", "pairwise")
    assert out.returncode == 0, out.stderr
    rows = [row for row in out.stdout.splitlines() if row.startswith("| 12 |")]
    assert len(rows) == 4 and not any("failed" in row for row in rows), out.stdout


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
def test_small_calls_benchmark_smoke_run():
    """benchmarks/bench_small_calls.py: every row, and a verdict for every target."""
    out = _run("bench_small_calls.py", "--smoke", "--sizes", "10", "100")
    assert out.returncode == 0, out.stderr
    rows = [row for row in out.stdout.splitlines() if row.startswith("| ")]
    for case in ("chop stored", "chop dict", "Chop object", "chop stored round 5", "Chop round 5 rng"):
        assert sum(row.startswith(f"| {case} | n=10 |") for row in rows) == 2, out.stdout  # time, verdict
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    # a verdict row: case, n, ratio, target, met ("-": a smoke run measures nothing), floor
    assert any(row[:2] == ["cpfloat dict 10x10", "n=100"] and len(row) == 6 and row[4] == "-"
               for row in cells), out.stdout
    for case in ("chop stored round 5", "Chop round 5 rng"):  # their floors: the stochastic loops swapped in
        assert all(row[5] for row in cells if row[:1] == [case] and len(row) == 6), out.stdout
    assert any(row.startswith("| floor: empty function | n=1 |") for row in rows), out.stdout
    assert any(row.startswith("| floor: compiled loop round 5 stream | n=10 |") for row in rows), out.stdout


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
def test_every_mode_benchmark_smoke_run():
    """benchmarks/bench_every_mode.py: one row per case, each mode on the compiled engine."""
    pytest.importorskip("numba")
    out = _run("bench_every_mode.py", "--smoke", "--sizes", "1e3")
    assert out.returncode == 0, out.stderr
    rows = [row for row in _table_rows(out.stdout) if not row.startswith("| case")]
    assert len(rows) == 13 and all(" | numba" in row for row in rows), out.stdout


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
def test_cpfloat_benchmark_smoke_run():
    """benchmarks/bench_cpfloat.py: the cpfloat facade on both CPU engines (one row per case)."""
    pytest.importorskip("numba")
    out = _run("bench_cpfloat.py", "--n", "1e4", "--repeats", "1")
    assert out.returncode == 0, out.stderr
    rows = [row for row in _table_rows(out.stdout) if not row.startswith("| cpfloat(x")]
    assert len(rows) == 17 and all(row.count("|") == 7 for row in rows), out.stdout


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
def test_formats_compiled_benchmark_smoke_run():
    """benchmarks/bench_formats_compiled.py: one line per configuration (fp16 and four formats)."""
    pytest.importorskip("numba")
    out = _run("bench_formats_compiled.py", "--n", "1e4", "--repeats", "1")
    assert out.returncode == 0, out.stderr
    rows = [row for row in out.stdout.splitlines() if row.endswith("x") and " ms " in row]
    assert len(rows) == 1 + 4 * 6 + 2, out.stdout
