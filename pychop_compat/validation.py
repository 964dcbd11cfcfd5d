"""``python -m pychop_compat validate``: the MATLAB corpus and the mpmath oracle on every engine.

The corpus (``tests/matlab_reference`` in a source checkout; see its README)
holds outputs of MATLAB's chop.m, roundit.m and float_params.m.  Each case
is rerun and compared under MATLAB's ``isequal`` rule with NaN == NaN (sign of
zero and NaN payloads ignored, nothing else).  The ``mpmath_oracle`` group
compares chop with :func:`pychop_compat.oracle.chop_rule_round`, an exact
implementation of chop.m's documented rounding rules built on mpmath.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from . import api, matlab_random
from .engines import available_engines, from_numpy, to_numpy
from .formats import float_params

__all__ = ["GroupResult", "find_corpus", "validate", "matlab_equal"]

# Engines whose default random draws are MATLAB's stream (GPU engines draw on the device).
_MATLAB_STREAM_ENGINES = ("numpy", "numba", "torch")


@dataclass
class GroupResult:
    """One row of the validation table."""

    group: str
    engine: str
    cases: int = 0
    agreeing: int = 0
    disagreeing: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.cases == self.agreeing and self.cases > 0


def matlab_equal(actual, expected) -> bool:
    """Equal shape and dtype, and every element equal with NaN == NaN (MATLAB ``isequal``, NaNs equal)."""
    a, b = np.asarray(actual), np.asarray(expected)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def find_corpus(path=None) -> Path:
    """The corpus folder: ``path``, ``$PYCHOP_COMPAT_CORPUS``, or ``tests/matlab_reference`` beside the package."""
    explicit = path or os.environ.get("PYCHOP_COMPAT_CORPUS")
    candidates = [explicit] if explicit else [Path(__file__).resolve().parent.parent / "tests" / "matlab_reference"]
    for candidate in candidates:
        if (Path(candidate) / "manifest.json").is_file():
            return Path(candidate)
    raise FileNotFoundError(
        "MATLAB reference corpus not found: pass --corpus PATH (the folder tests/matlab_reference "
        "of a source checkout) or set PYCHOP_COMPAT_CORPUS."
    )


def _load(path: Path) -> dict:
    import scipy.io

    return {k: v for k, v in scipy.io.loadmat(path).items() if not k.startswith("__")}


def _text(value) -> str:
    return str(value[0]) if np.size(value) else ""


def _scalar(case, name):
    return case[name].item()


class _Stream:
    """randfunc replaying a stored column of uniforms, counting what it hands out."""

    def __init__(self, column):
        self.column = np.asarray(column, dtype=np.float64).ravel()
        self.used = 0

    def __call__(self, n):
        out = self.column[self.used:self.used + n]
        if out.size != n:
            raise RuntimeError("stored stream exhausted")
        self.used += n
        return out


def _chop_case(path: Path, engine: str) -> bool:
    case = _load(path)
    stream = _Stream(case["stream"]) if case["stream"].size else None
    options = {"format": _text(case["format"]), "round": int(_scalar(case, "round")),
               "subnormal": int(_scalar(case, "subnormal")), "explim": int(_scalar(case, "explim")), "flip": 0}
    if case["params"].size:
        options["params"] = case["params"].ravel().tolist()
    if stream is not None:
        options["randfunc"] = stream
    api.clear_chop()
    error = _text(case["err"])
    if error:
        try:
            api.chop(from_numpy(case["x"], engine), options)
        except ValueError as exc:
            return error in str(exc)
        return False
    c = to_numpy(api.chop(from_numpy(case["x"], engine), options))
    consumed = stream.used if stream is not None else 0
    return (matlab_equal(c, case["c"]) and consumed == int(_scalar(case, "n_consumed"))
            and api.chop_options().params == case["ret_params"].ravel().tolist())


def _native_case(path: Path, engine: str) -> bool:
    fmt, _, mode, _, subnormal = path.stem.split("_")
    array = _load(path.parent / "verified_data.mat")["array"]
    x = array if subnormal == "0" else 1e-3 * array
    api.clear_chop()
    options = {"format": "h" if fmt == "half" else fmt, "round": int(mode), "subnormal": int(subnormal)}
    c = to_numpy(api.chop(from_numpy(x, engine), options))
    return matlab_equal(c.ravel(), _load(path)["emu_vals"].ravel())


def _stream_case(path: Path, engine: str) -> bool:
    case = _load(path)
    options = {"format": _text(case["format"]), "round": int(_scalar(case, "round")),
               "subnormal": int(_scalar(case, "subnormal")), "flip": int(_scalar(case, "flip")),
               "p": float(_scalar(case, "p"))}
    if case["params"].size:
        options["params"] = case["params"].ravel().tolist()
    api.clear_chop()
    matlab_random.rng(int(_scalar(case, "seed")))
    c = to_numpy(api.chop(from_numpy(case["x"], engine), options))
    after = matlab_random.rand(4, 1)
    return matlab_equal(c, case["c"]) and matlab_equal(after, case["after"])


def _roundit_case(path: Path, engine: str) -> bool:
    case = _load(path)
    stream = _Stream(case["stream"])
    y = api.roundit(case["x"], {"round": int(_scalar(case, "mode")), "randfunc": stream})
    return matlab_equal(y, case["y"]) and stream.used == int(_scalar(case, "n_consumed"))


def _oracle_checks(engine: str):
    """chop on ``engine`` against the exact mpmath oracle: every dataset, explim, subnormal and mode 1-4."""
    from . import oracle

    cache = {}

    def check(case, dtype_name, explim, subnormal, mode):
        key = (case, dtype_name)
        if key not in cache:
            cache.clear()  # one dataset in memory at a time
            x = oracle.oracle_inputs(case, dtype_name)
            cache[key] = (x, oracle.ExactValues(x))
        x, exact = cache[key]
        spec = oracle.case_spec(case)
        want = oracle.chop_rule_round(exact, spec.t, spec.emax, subnormal, mode, explim, dtype=x.dtype)
        got = to_numpy(api.Chop(oracle.case_options(case, mode, subnormal, explim))(from_numpy(x, engine)))
        return matlab_equal(got, want)

    return [(f"{case}-{dtype_name}-e{explim}-s{subnormal}-r{mode}",
             lambda a=(case, dtype_name, explim, subnormal, mode): check(*a))
            for case, dtype_name in oracle.DATASETS
            for explim in (1, 0) for subnormal in (1, 0) for mode in (1, 2, 3, 4)]


def _float_params_rows(path: Path) -> Iterator[tuple[str, Callable[[], bool]]]:
    table = _load(path)
    for name, row in zip(table["names"], table["vals"]):
        name = str(name).strip()
        yield name, (lambda name=name, row=row: matlab_equal(np.array(float_params(name), dtype=np.float64), row))


def _groups(corpus: Path, engines: Iterable[str], with_oracle: bool = True):
    """(group, engine, [(case id, check)]) for every group and engine it applies to."""
    chop_ids = [c["id"] for c in json.loads((corpus / "manifest.json").read_text())]
    stream_ids = [c["id"] for c in json.loads((corpus / "matlab_stream" / "manifest.json").read_text())]
    natives = sorted((corpus / "matlab_native").glob("*_rmode_*.mat"))
    for engine in engines:
        yield "chop", engine, [(i, lambda i=i, e=engine: _chop_case(corpus / "chop" / f"{i}.mat", e))
                               for i in chop_ids]
        yield "matlab_native", engine, [(p.stem, lambda p=p, e=engine: _native_case(p, e)) for p in natives]
        if engine in _MATLAB_STREAM_ENGINES:
            yield "matlab_stream", engine, [
                (i, lambda i=i, e=engine: _stream_case(corpus / "matlab_stream" / "chop" / f"{i}.mat", e))
                for i in stream_ids]
        if with_oracle:
            yield "mpmath_oracle", engine, _oracle_checks(engine)
    yield "roundit", "numpy", [(p.stem, lambda p=p: _roundit_case(p, "numpy"))
                               for p in sorted((corpus / "roundit").glob("*.mat"))]
    yield "float_params", "numpy", list(_float_params_rows(corpus / "float_params.mat"))


class _Progress:
    """A one-line bar on standard error, drawn only on a terminal and only when it moves."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.drawn = total, 0, -1
        self.enabled = enabled and total > 0 and sys.stderr.isatty()

    def step(self, label: str) -> None:
        self.done += 1
        filled = 30 * self.done // self.total
        if self.enabled and (filled != self.drawn or self.done == self.total):
            self.drawn = filled
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} {label:<24}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def validate(corpus=None, engines=None, progress: bool = True, oracle: bool = True) -> list[GroupResult]:
    """Run every corpus group on every engine; return one :class:`GroupResult` per (group, engine).

    Parameters
    ----------
    corpus : path-like, optional
        The corpus folder (see :func:`find_corpus`).
    engines : list of str, optional
        Engines to run (default: :func:`pychop_compat.engines.available_engines`).
    progress : bool
        Draw a progress bar on standard error.
    oracle : bool
        Also compare with the exact mpmath oracle (about 200,000 inputs per format and
        dtype, each under explim 0/1, subnormal 0/1 and rounding modes 1-4).
    """
    corpus = find_corpus(corpus)
    engines = list(engines or available_engines())
    groups = list(_groups(corpus, engines, oracle))
    bar = _Progress(sum(len(cases) for _, _, cases in groups), progress)
    saved_state = matlab_random.rng()
    results = []
    try:
        for group, engine, cases in groups:
            row = GroupResult(group, engine)
            for case_id, check in cases:
                row.cases += 1
                try:
                    with _cpu_engine_for(engine):
                        agrees = check()
                except Exception as exc:  # a crash is a disagreement, reported by id
                    agrees = False
                    case_id = f"{case_id} ({type(exc).__name__}: {exc})"
                if agrees:
                    row.agreeing += 1
                else:
                    row.disagreeing.append(case_id)
                bar.step(f"{group}/{engine}")
            results.append(row)
    finally:
        bar.close()
        api.clear_chop()
        matlab_random.rng(saved_state)
    return results


def _cpu_engine_for(engine: str):
    """The NumPy rows run on their own CPU engine (NumPy or compiled); the others as they are."""
    import contextlib

    from .engines.compiled import cpu_engine

    return cpu_engine(engine) if engine in ("numpy", "numba") else contextlib.nullcontext()


def format_table(results: list[GroupResult]) -> str:
    """A markdown table: group, engine, cases, agreeing."""
    lines = ["| group | engine | cases | agreeing |", "| --- | --- | ---: | ---: |"]
    lines += [f"| {r.group} | {r.engine} | {r.cases} | {r.agreeing} |" for r in results]
    return "\n".join(lines)


def write_json(results: list[GroupResult], path) -> None:
    Path(path).write_text(json.dumps([{**asdict(r), "ok": r.ok} for r in results], indent=2) + "\n")
