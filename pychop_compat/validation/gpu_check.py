"""``python -m pychop_compat gpu-check``: the whole GPU check in one command.

It runs the GPU test matrix (``pytest -m gpu``, each test counted for the engine
its id names), :func:`pychop_compat.validation.validate` on every GPU engine and
CUDA route, single MMA tiles on the GPU's tensor cores against the GPU's
:mod:`pychop_compat.hardware` preset (``benchmarks/tensor_core_tiles.py --strict``:
every output bit for bit) and the quick GPU benchmark, then prints one summary
(``docs/validation.rst``, "The GPU check").  Exit status: 0 when everything
passed, 1 when something failed (a test stage that did not run, or ran no test of an
engine, is a failure), :data:`NO_GPU` (3) when no CUDA GPU is visible.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shlex
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["NO_GPU", "EngineReport", "classify_junit", "format_summary", "validation_routes", "main"]

#: Exit status when there is no GPU to check.
NO_GPU = 3

_ROOT = Path(__file__).resolve().parents[2]
GPU_ENGINES = ("cupy", "torch-cuda")


@dataclass
class EngineReport:
    """What the check found for one engine (or route)."""

    name: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list = field(default_factory=list)
    validate_cases: int = 0
    validate_agreeing: int = 0
    validate_groups_failed: list = field(default_factory=list)
    validated: bool = False
    validate_requested: bool = True
    #: Whether this row must show GPU tests run (an engine's row, when the test stage runs).
    tests_expected: bool = False
    #: Why the test stage gave no trustworthy count (no report, pytest's exit status), or "".
    tests_problem: str = ""

    @property
    def tests_ok(self) -> bool:
        """No test failed, the test stage ran, and it ran tests of this engine where they were expected."""
        ran = self.passed + self.failed > 0 or not self.tests_expected
        return self.failed == 0 and not self.tests_problem and ran

    @property
    def ok(self) -> bool:
        validated = self.validated and not self.validate_groups_failed and self.validate_cases > 0
        return self.tests_ok and (validated or not self.validate_requested)


def _engine_of(test_name: str) -> Optional[str]:
    """The GPU engine a test's parameters (``name[...]``) name, or None for a test of both."""
    params = test_name.partition("[")[2]
    return next((engine for engine in GPU_ENGINES if engine in params), None)


def classify_junit(xml_text: str, engines: Sequence[str]) -> dict:
    """Per engine ``{name: EngineReport}`` from pytest's JUnit XML; tests naming no engine count for all."""
    reports = {name: EngineReport(name) for name in engines}
    for case in ElementTree.fromstring(xml_text).iter("testcase"):
        name = case.get("name", "")
        engine = _engine_of(name)
        targets = [reports[engine]] if engine in reports else ([] if engine else list(reports.values()))
        tags = {child.tag for child in case}
        outcome = "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"
        for report in targets:
            setattr(report, outcome, getattr(report, outcome) + 1)
            if outcome == "failed":
                report.failures.append(f"{case.get('classname', '')}::{name}")
    return reports


def _not_run(engines, why: str) -> tuple[dict[str, EngineReport], str]:
    """Each engine's report of a test stage that did not run (so the check fails), and the note."""
    return {name: EngineReport(name, tests_problem="not run") for name in engines}, why


def _run_tests(engines, extra_args) -> tuple[dict[str, EngineReport], str]:
    tests = _ROOT / "tests"
    if not tests.is_dir():
        return _not_run(engines, f"not run: no tests/ folder next to the package ({tests}): run from a source "
                                 "checkout, or pass --skip-tests")
    with tempfile.TemporaryDirectory() as folder:
        junit = Path(folder) / "gpu.xml"
        command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
                   f"--junitxml={junit}", str(tests), *extra_args]
        print("$", " ".join(command), flush=True)
        # pytest's output is passed on line by line as it comes: a run cut short by a time
        # limit (a lent GPU's minutes are few) still leaves its progress in the caller's log.
        last = ""
        with subprocess.Popen(command, cwd=_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) as process:
            assert process.stdout is not None
            for line in process.stdout:
                print(line, end="", flush=True)
                last = line.strip() or last
        if not junit.exists():  # a usage error, a crash
            return _not_run(engines, f"not run: pytest wrote no report (exit {process.returncode}); "
                                     f"its last line: {last}")
        reports = classify_junit(junit.read_text(), engines)
        # exit 1 is failed tests (counted); any other non-zero exit (interrupted, internal error,
        # no test collected) or an exit 1 with no failure counted leaves the counts unproven
        if process.returncode != 0 and not (process.returncode == 1 and any(r.failed for r in reports.values())):
            for report in reports.values():
                report.tests_problem = f"pytest exit {process.returncode}"
            last = f"pytest exited with status {process.returncode}; its last line: {last}"
        return reports, last


def _validate(reports: dict, routes) -> None:
    from ..engines.dispatch import cuda_route
    from .validator import validate

    for label, engine, route in routes:
        report = reports.setdefault(label, EngineReport(label))
        print(f"validate {label} ...", flush=True)
        with cuda_route(route) if route is not None else contextlib.nullcontext():
            results = validate(None, [engine], progress=False)
        report.validated = True
        for result in results:
            report.validate_cases += result.cases
            report.validate_agreeing += result.agreeing
            if not result.ok:
                report.validate_groups_failed.append(f"{result.group} {result.agreeing}/{result.cases}")
        # as each route finishes: a run cut short by a time limit still says what it checked
        print(f"validate {label}: {report.validate_agreeing}/{report.validate_cases} agree", flush=True)


def validation_routes(engines: Sequence[str], has_triton: bool) -> list[tuple[str, str, Optional[str]]]:
    """``(label, engine, cuda_route)`` for each run of validate: every GPU engine on its default
    route, and CUDA tensors also on each other route that is installed."""
    routes: list[tuple[str, str, Optional[str]]] = [(name, name, None) for name in engines]
    if "torch-cuda" in engines:
        if "cupy" in engines and has_triton:
            routes.append(("torch-cuda (triton)", "torch-cuda", "triton"))
        if "cupy" in engines or has_triton:
            routes.append(("torch-cuda (pure torch)", "torch-cuda", "torch"))
    return routes


def _tensor_core_tiles(engines: Sequence[str]) -> tuple[Optional[bool], list]:
    """benchmarks/tensor_core_tiles.py --strict: (None, why) where it cannot run, else (passed, its table)."""
    if "torch-cuda" not in engines or importlib.util.find_spec("triton") is None:
        return None, ["tensor-core tiles: skipped (they need torch with CUDA and Triton)"]
    return _run_script("tensor_core_tiles.py", ["--strict", "--seconds", "90"], "tensor-core tiles",
                       lambda line: line.startswith(("| ", "|---", "tiles:")), echo=True, hint=", or pass --skip-tiles")


def _benchmark(extra_args) -> tuple[bool, list]:
    return _run_script("bench_gpu.py", ["--quick", *extra_args], "benchmark", str.strip)


def _run_script(name: str, args: list, what: str, keep, echo: bool = False, hint: str = "") -> tuple[bool, list]:
    """``python benchmarks/<name> args`` from the checkout's root, the command shown first (and its output
    where ``echo``): (passed, the lines of its output that ``keep`` selects; a failure adds its exit
    status and the end of its stderr)."""
    script = _ROOT / "benchmarks" / name
    if not script.exists():
        return False, [f"no benchmarks/{name} next to the package ({script}): run from a source checkout{hint}"]
    command = [sys.executable, str(script), *args]
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=_ROOT, capture_output=True, text=True)
    if echo:
        print(done.stdout, end="", flush=True)
    lines = [line for line in done.stdout.splitlines() if keep(line)]
    if done.returncode != 0:
        lines.append(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.returncode == 0, lines


def format_summary(device: str, reports: dict, test_note: str, bench_ok: Optional[bool],
                   bench_lines: Sequence[str], tiles_ok: Optional[bool] = None,
                   tiles_lines: Sequence[str] = ()) -> str:
    """The closing summary: one row per engine, the tensor-core tiles, then the bandwidth table."""
    lines = [f"pychop_compat GPU check: {device}", "",
             "| engine | pytest -m gpu | validate (corpus + oracle) | verdict |", "|---|---|---|---|"]
    for report in reports.values():
        tests = f"{report.passed} passed, {report.failed} failed, {report.skipped} skipped"
        if report.tests_problem:
            tests += f" ({report.tests_problem})"
        elif not report.tests_ok and report.failed == 0:
            tests += " (no GPU test of this engine ran)"
        if not report.validated:
            checked = "not run"
        else:
            checked = f"{report.validate_agreeing}/{report.validate_cases} agree"
            if report.validate_groups_failed:
                checked += f" (disagree: {'; '.join(report.validate_groups_failed)})"
        lines.append(f"| {report.name} | {tests} | {checked} | {'PASS' if report.ok else 'FAIL'} |")
    if test_note:
        lines += ["", f"pytest: {test_note}"]
    for report in reports.values():
        for failure in report.failures[:10]:
            lines.append(f"FAILED ({report.name}) {failure}")
    if tiles_lines:
        lines += ["", "Tensor-core tiles against the hardware model (kernel = model must hold on every output; "
                  "torch = model is reported, not expected):"] + list(tiles_lines)
    if bench_ok is not None:
        lines += ["", "Quick benchmark (GB/s = bytes read + written per second; 'of copy' = share of a "
                  "device-to-device copy in the same run):"] + list(bench_lines)
    verdict = all(r.ok for r in reports.values()) and bool(reports) and bench_ok is not False and tiles_ok is not False
    lines += ["", f"GPU check: {'PASS' if verdict else 'FAIL'}"]
    return "\n".join(lines)


def _device_line(engines) -> str:
    if "torch-cuda" in engines:
        import torch

        text = f"{torch.cuda.get_device_name()}, torch {torch.__version__} (CUDA {torch.version.cuda})"
    else:
        text = "a CUDA device"
    if "cupy" in engines:
        import cupy

        text += f", CuPy {cupy.__version__}"
    return text


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m pychop_compat gpu-check``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m pychop_compat gpu-check",
                                     description="Run the GPU tests, validate and the quick GPU benchmark.")
    parser.add_argument("--skip-tests", action="store_true", help="do not run pytest -m gpu")
    parser.add_argument("--skip-validate", action="store_true", help="do not run validate")
    parser.add_argument("--skip-tiles", action="store_true",
                        help="do not compare the tensor cores' tiles with the hardware model")
    parser.add_argument("--skip-bench", action="store_true", help="do not run the quick benchmark")
    parser.add_argument("--pytest-args", default="",
                        help='extra arguments for pytest, as one string split as a shell would: --pytest-args -x, '
                             '--pytest-args "-n 8 -k cupy" or --pytest-args=-x')
    # argparse refuses a value that starts with '-' (--pytest-args -x): join it to its option first
    argv = list(sys.argv[1:] if argv is None else argv)
    i = 0
    while i < len(argv) - 1:
        if argv[i] == "--pytest-args":
            argv[i:i + 2] = [f"--pytest-args={argv[i + 1]}"]
        i += 1
    args = parser.parse_args(argv)

    from ..engines import available_engines

    engines = [name for name in available_engines() if name in GPU_ENGINES]
    if not engines:
        print("gpu-check: no CUDA GPU is visible to torch or CuPy on this machine, so nothing was checked.\n"
              "Run this command on a machine with an NVIDIA GPU and CUDA builds of torch and/or CuPy.")
        return NO_GPU
    os.environ.setdefault("PYTHONHASHSEED", "0")
    reports: dict[str, EngineReport] = {}
    note = "not run"
    if not args.skip_tests:
        reports, note = _run_tests(engines, shlex.split(args.pytest_args))
    for name in engines:
        # an engine's row with no test counted fails when the tests were to run
        reports.setdefault(name, EngineReport(name)).tests_expected = not args.skip_tests
    if args.skip_validate:
        for report in reports.values():
            report.validate_requested = False
    else:
        _validate(reports, validation_routes(engines, importlib.util.find_spec("triton") is not None))
    tiles_ok, tiles_lines = (None, []) if args.skip_tiles else _tensor_core_tiles(engines)
    bench_ok, bench_lines = (None, []) if args.skip_bench else _benchmark([])
    summary = format_summary(_device_line(engines), reports, note, bench_ok, bench_lines, tiles_ok, tiles_lines)
    print(f"\n{summary}")
    return 0 if summary.endswith("GPU check: PASS") else 1  # (the summary's verdict)
