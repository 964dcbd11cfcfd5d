"""``python -m pychop_compat gpu-check``: its verdicts, without a GPU.

The steps themselves (pytest -m gpu, validate, the benchmark) need a GPU;
here they are replaced by stand-ins to check how the command reads their
results and what it prints and returns.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from pychop_compat.validation import gpu_check
from pychop_compat.engines import available_engines

_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="6">
<testcase classname="tests.test_engines" name="test_engine_matches_numpy[cupy-h-float32-r1-s0-e0-f0]"/>
<testcase classname="tests.test_engines" name="test_engine_matches_numpy[torch-cuda-h-float32-r1-s0-e0-f0]">
  <failure message="1 of 600 elements differ">...</failure></testcase>
<testcase classname="tests.test_engines" name="test_torch_zero_dim_and_empty[torch-cuda-1]"/>
<testcase classname="tests.test_gpu_paths" name="test_torch_cuda_through_cupy_matches_pure_torch"/>
<testcase classname="tests.test_engines" name="test_engine_matches_numpy[cupy-s-float64-r2-s1-e1-f0]">
  <skipped message="no cupy"/></testcase>
<testcase classname="tests.test_engines" name="test_x[cupy]"><error message="boom"/></testcase>
</testsuite></testsuites>
"""


def test_junit_results_are_counted_per_engine():
    reports = gpu_check.classify_junit(_JUNIT, ["cupy", "torch-cuda"])
    cupy, torch_cuda = reports["cupy"], reports["torch-cuda"]
    # cupy: one pass, one skip, one error; plus the shared test.  torch-cuda: one failure, one pass, shared.
    assert (cupy.passed, cupy.failed, cupy.skipped) == (2, 1, 1)
    assert (torch_cuda.passed, torch_cuda.failed, torch_cuda.skipped) == (2, 1, 0)
    assert torch_cuda.failures == ["tests.test_engines::test_engine_matches_numpy[torch-cuda-h-float32-r1-s0-e0-f0]"]


@pytest.mark.skipif(any(e in available_engines() for e in gpu_check.GPU_ENGINES), reason="a GPU is present")
def test_without_a_gpu_it_says_so_and_exits_3():
    done = subprocess.run([sys.executable, "-m", "pychop_compat", "gpu-check"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == gpu_check.NO_GPU == 3
    assert "no CUDA GPU" in done.stdout and "nothing was checked" in done.stdout


def _stand_ins(monkeypatch, *, test_failures=0, disagree=False, bench_ok=True, tiles_ok=True):
    def run_tests(engines, extra):
        reports = {name: gpu_check.EngineReport(name, passed=10) for name in engines}
        reports["cupy"].failed = test_failures
        return reports, "20 passed"

    def validate(reports, routes):
        for label, _engine, _route in routes:
            report = reports.setdefault(label, gpu_check.EngineReport(label))
            report.validated, report.validate_cases = True, 100
            report.validate_agreeing = 99 if disagree and label == "torch-cuda" else 100
            if report.validate_agreeing < 100:
                report.validate_groups_failed.append("chop 99/100")

    monkeypatch.setattr("pychop_compat.engines.available_engines", lambda: ["numpy", "torch", "torch-cuda", "cupy"])
    monkeypatch.setattr(gpu_check, "_run_tests", run_tests)
    monkeypatch.setattr(gpu_check, "_validate", validate)
    monkeypatch.setattr(gpu_check, "_benchmark", lambda extra: (bench_ok, ["| cupy | float32 | 1e+06 | fp16 RN |"]))
    monkeypatch.setattr(gpu_check, "_device_line", lambda engines: "Fake GPU")
    tiles = ["| fp16 | fp32 | 16x16x64 (1) | mma.sync | 160 | 40960 | 40960 / 40960 |",
             f"tiles: kernel = model on {40960 if tiles_ok else 40959} of 40960 outputs; 0 rows with a failure"]
    monkeypatch.setattr(gpu_check, "_tensor_core_tiles", lambda engines: (tiles_ok, tiles))


def test_summary_passes_when_everything_passes(monkeypatch, capsys):
    _stand_ins(monkeypatch)
    assert gpu_check.main([]) == 0
    out = capsys.readouterr().out
    assert "| cupy | 10 passed, 0 failed, 0 skipped | 100/100 agree | PASS |" in out
    assert "| torch-cuda (pure torch) |" in out and "| fp16 RN |" in out
    assert "tiles: kernel = model on 40960 of 40960 outputs" in out
    assert ("| torch-cuda (triton) |" in out) == (importlib.util.find_spec("triton") is not None)
    assert out.rstrip().endswith("GPU check: PASS")


@pytest.mark.parametrize("failure", ["tests", "validate", "bench", "tiles"])
def test_any_failure_fails_the_check(monkeypatch, capsys, failure):
    _stand_ins(monkeypatch, test_failures=int(failure == "tests"), disagree=failure == "validate",
               bench_ok=failure != "bench", tiles_ok=failure != "tiles")
    assert gpu_check.main([]) == 1
    out = capsys.readouterr().out
    assert out.rstrip().endswith("GPU check: FAIL")
    if failure == "validate":
        assert "| torch-cuda | 10 passed, 0 failed, 0 skipped | 99/100 agree (disagree: chop 99/100) | FAIL |" in out


def test_tiles_need_cuda_tensors_and_say_so():
    """Without torch on CUDA the tiles cannot run: the check says it skipped them and does not fail on it."""
    ok, lines = gpu_check._tensor_core_tiles(["cupy"])
    assert ok is None and lines == ["tensor-core tiles: skipped (they need torch with CUDA and Triton)"]


def test_validate_runs_every_route_of_cuda_tensors():
    routes = gpu_check.validation_routes
    assert routes(["cupy"], True) == [("cupy", "cupy", None)]
    assert routes(["torch-cuda"], False) == [("torch-cuda", "torch-cuda", None)]
    assert routes(["torch-cuda"], True) == [("torch-cuda", "torch-cuda", None),
                                             ("torch-cuda (pure torch)", "torch-cuda", "torch")]
    assert [label for label, _, _ in routes(["torch-cuda", "cupy"], True)] == [
        "torch-cuda", "cupy", "torch-cuda (triton)", "torch-cuda (pure torch)"]


def test_each_validate_route_is_reported_as_it_finishes(monkeypatch, capsys):
    """A GPU session's time limit can cut the check short: each route's count is printed when it is known."""
    from types import SimpleNamespace

    from pychop_compat.validation import validator

    results = [SimpleNamespace(group="chop", cases=7, agreeing=7, ok=True),
               SimpleNamespace(group="cpfloat", cases=3, agreeing=2, ok=False)]
    monkeypatch.setattr(validator, "validate", lambda corpus, engines, progress: results)
    reports: dict = {}
    gpu_check._validate(reports, [("torch-cuda", "torch-cuda", None)])
    assert "validate torch-cuda: 9/10 agree" in capsys.readouterr().out
    assert reports["torch-cuda"].validate_groups_failed == ["cpfloat 2/3"]


def _gpu_without_tests(monkeypatch):
    """A pretended GPU whose validate agrees everywhere; tiles and benchmark skipped by the caller."""
    def validate(reports, routes):
        for label, _engine, _route in routes:
            report = reports.setdefault(label, gpu_check.EngineReport(label))
            report.validated, report.validate_cases, report.validate_agreeing = True, 100, 100

    monkeypatch.setattr("pychop_compat.engines.available_engines", lambda: ["numpy", "torch-cuda"])
    monkeypatch.setattr(gpu_check, "_validate", validate)
    monkeypatch.setattr(gpu_check, "_device_line", lambda engines: "Fake GPU")


@pytest.mark.slow  # (a real pytest run: 4 to 5 s)
def test_a_test_stage_that_did_not_run_fails_the_check(monkeypatch, capsys):
    """pytest that wrote no report (here a usage error) is a FAIL with the reason, exit 1: it gave
    a blank row, 0 passed 0 failed, and PASS with exit 0."""
    _gpu_without_tests(monkeypatch)
    assert gpu_check.main(["--skip-tiles", "--skip-bench", "--pytest-args=--no-such-pytest-option"]) == 1
    out = capsys.readouterr().out
    assert "| torch-cuda | 0 passed, 0 failed, 0 skipped (not run) | 100/100 agree | FAIL |" in out
    assert "pytest: not run: pytest wrote no report (exit 4)" in out
    assert out.rstrip().endswith("GPU check: FAIL")


def test_no_tests_folder_fails_the_check(monkeypatch, capsys, tmp_path):
    """An installed wheel has no tests/ folder: the check says so and fails (it passed)."""
    _gpu_without_tests(monkeypatch)
    monkeypatch.setattr(gpu_check, "_ROOT", tmp_path)
    assert gpu_check.main(["--skip-tiles", "--skip-bench"]) == 1
    out = capsys.readouterr().out
    assert "no tests/ folder next to the package" in out and out.rstrip().endswith("GPU check: FAIL")


def test_an_engine_with_no_test_run_fails(monkeypatch, capsys):
    """A report that counts no test of an engine (all deselected or skipped) fails that engine's row."""
    _gpu_without_tests(monkeypatch)
    junit = ('<testsuites><testsuite name="pytest" tests="1"><testcase classname="t" name="test_a[torch-cuda-1]">'
             '<skipped message="x"/></testcase></testsuite></testsuites>')
    monkeypatch.setattr(gpu_check, "_run_tests", lambda engines, extra: (gpu_check.classify_junit(junit, engines), ""))
    assert gpu_check.main(["--skip-tiles", "--skip-bench"]) == 1
    out = capsys.readouterr().out
    assert "| torch-cuda | 0 passed, 0 failed, 1 skipped (no GPU test of this engine ran) |" in out
    # --skip-tests asks for no test: the row passes on validate alone
    assert gpu_check.main(["--skip-tiles", "--skip-bench", "--skip-tests"]) == 0


@pytest.mark.parametrize("argv, expected", [(["--pytest-args", "-x"], ["-x"]), (["--pytest-args=-x"], ["-x"]),
                                            (["--pytest-args", "-n 8 -k 'cupy and not slow'"],
                                             ["-n", "8", "-k", "cupy and not slow"])])
def test_pytest_args_may_start_with_a_dash(monkeypatch, capsys, argv, expected):
    """--pytest-args -x was refused by argparse ("expected one argument"); the string is split as a shell would."""
    _gpu_without_tests(monkeypatch)
    seen = []

    def run_tests(engines, extra):
        seen.append(extra)
        return {name: gpu_check.EngineReport(name, passed=1) for name in engines}, "1 passed"

    monkeypatch.setattr(gpu_check, "_run_tests", run_tests)
    assert gpu_check.main(["--skip-tiles", "--skip-bench", *argv]) == 0
    assert seen == [expected]
