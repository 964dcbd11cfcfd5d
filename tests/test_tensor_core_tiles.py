"""benchmarks/tensor_core_tiles.py without a GPU: it says so and exits 0; its CPU rehearsal (Triton's
interpreter, torch on CPU, the smallest size) writes the report's table.  No number is asserted: the
rehearsal checks the plumbing only."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pychop_compat.engines import available_engines

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "tensor_core_tiles.py"
ROOT = SCRIPT.parents[1]
_GPU = any(engine in available_engines() for engine in ("cupy", "torch-cuda"))
pytestmark = pytest.mark.skipif("torch" not in available_engines(), reason="torch not installed")


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


@pytest.mark.skipif(_GPU, reason="a GPU is present: the script would run on it")
def test_without_a_gpu_the_script_says_so(tmp_path):
    done = _run("--report", str(tmp_path / "tiles.md"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no GPU"), done.stdout
    assert not (tmp_path / "tiles.md").exists()


@pytest.mark.slow  # Triton's interpreter and torch: about 5 s on a quiet machine
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton not installed")
def test_the_rehearsal_writes_the_table(tmp_path):
    done = _run("--report", str(tmp_path / "tiles.md"), "--rehearse", "--seconds", "120", "--strict")
    # The interpreter's tl.dot is NumPy's float32 matmul, not a tensor core: with --strict the outputs unlike
    # the model's fail the run (what gpu-check relies on), and the last line counts them.
    assert done.returncode == 1, done.stderr
    verdict = re.search(r"tiles: kernel = model on (\d+) of (\d+) outputs; 0 rows with a failure", done.stdout)
    assert verdict and int(verdict.group(1)) < int(verdict.group(2)) == 6 * 1024, done.stdout
    report = (tmp_path / "tiles.md").read_text()
    assert "say nothing about hardware" in report
    rows = [line for line in report.splitlines() if line.startswith("| ") and not line.startswith("| inputs")]
    assert len(rows) == 8, report  # 8 format pairs, one tile shape
    assert all(row.count(" | ") == 9 for row in rows), report
    assert all("| failed: " not in row for row in rows), report  # each step ran (torch may lack a CPU kernel)
    pairs = {tuple(row.split(" | ")[:2]) for row in rows}
    assert ("| fp16", "fp32") in pairs and ("| e5m2", "fp16") in pairs
    fp16_row = next(row for row in rows if row.startswith("| fp16 | fp16 |"))
    assert "/ 1024 |" in fp16_row  # 4 tiles of 16 x 16 compared with the model


@pytest.mark.slow  # sixteen Triton compilations: about 10 s
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton not installed")
def test_the_kernels_compile_for_hopper_to_mma_sync_and_wgmma(tmp_path):
    done = _run("--ptx", "90", "--report", str(tmp_path / "ptx.md"))
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and not line.startswith("| inputs")]
    assert len(rows) == 16, done.stdout
    if all("failed:" in row for row in rows):
        pytest.skip("this Triton cannot compile for CUDA here: " + rows[0])
    assert "| fp16 | fp32 | 16x16x64 (1) | mma.sync m16n8k16 f32.f16.f16.f32 |" in rows, done.stdout
    assert "| tf32 | fp32 | 64x64x64 (4) | wgmma m64n64k8 f32.tf32.tf32 |" in rows, done.stdout
    assert "| e4m3 | fp32 | 64x64x64 (4) | wgmma m64n64k32 f32.e4m3.e4m3 |" in rows, done.stdout
    assert (tmp_path / "ptx.md").read_text().count("\n| ") == 17


@pytest.mark.slow  # twelve Triton compilations: about 5 s
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton not installed")
def test_the_fp8_diagnostic_kernels_hold_one_or_two_wgmma(tmp_path):
    done = _run("--ptx", "90", "--fp8-diagnostic")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and not line.startswith("| inputs")]
    assert len(rows) == 12, done.stdout  # 2 inputs x 2 K x 3 max_num_imprecise_acc
    if all("failed:" in row for row in rows):
        pytest.skip("this Triton cannot compile for CUDA here: " + rows[0])
    assert "| e4m3 | fp32 | 64x64x32 (4) | None (Triton's default) | wgmma m64n64k32 f32.e4m3.e4m3 (wgmma x1" \
        in done.stdout
    assert "| e5m2 | fp32 | 64x64x64 (4) | K (64) | wgmma m64n64k32 f32.e5m2.e5m2 (wgmma x2" in done.stdout


@pytest.mark.slow  # Triton's interpreter on 24 kernels of 64 x 64 x K: about 20 s
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton not installed")
def test_the_fp8_diagnostic_rehearsal_writes_one_row_per_combination(tmp_path):
    done = _run("--report", str(tmp_path / "fp8.md"), "--rehearse", "--fp8-diagnostic", "--seconds", "200")
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "fp8.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| ") and not line.startswith("| inputs")]
    assert len(rows) == 24, report  # 2 inputs x 2 K x 2 addends x 3 max_num_imprecise_acc
    assert all(row.count(" | ") == 9 and "failed:" not in row and "skipped" not in row for row in rows), report
    assert sum("| 0 | interpreter | 16384 |" in row for row in rows) == 12, report
