"""``python -m pychop_compat validate``: the MATLAB corpus, the mpmath oracle, CPFloat's corpus
and the OCP formats against ml_dtypes, on every engine.

The MATLAB corpus (:mod:`pychop_compat.validation.corpora`) is rerun and
compared under MATLAB's ``isequal`` with NaN == NaN; ``mpmath_oracle`` compares
with :func:`pychop_compat.validation.oracle.chop_rule_round`; ``cpfloat_corpus``
reruns CPFloat's outputs through :func:`pychop_compat.cpfloat` (bit patterns);
``ocp_ml_dtypes`` compares the OCP/ML formats with ml_dtypes' casts
(``docs/validation.rst``).
"""

from __future__ import annotations

import contextlib
import datetime
import gzip
import hashlib
import importlib.util
import json
import os
import platform
import sys
import warnings
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Optional, Union

import numpy as np

from ..matlab import api
from ..random import matlab_stream
from .corpora import Corpus, CorpusCase, corpus_path, load_corpus
from ..engines import available_engines, from_numpy, to_numpy
from ..cpfloat import CpfloatError, clear_cpfloat, cpfloat, cpfloat_options
from ..formats import catalogue_format, float_params
from ..kernels.compiled import cpu_engine
from ..rounding import round_to_format

__all__ = ["GroupResult", "find_corpus", "validate", "matlab_equal", "environment", "format_table", "write_json",
           "ENGINES", "ENGINE_INDEPENDENT", "not_run"]

#: Every engine validate knows, in the order it runs them.
ENGINES = ("numpy", "numba", "torch", "torch-cuda", "cupy", "jax")

#: The engine column of the groups whose results no engine computes (``roundit``, ``float_params``).
ENGINE_INDEPENDENT = "engine-independent"

#: The library (import name) each engine runs on, whose version a run records.
_ENGINE_LIBRARIES = {"numba": "numba", "torch": "torch", "torch-cuda": "torch", "cupy": "cupy", "jax": "jax"}

# The MATLAB corpus's groups that validate reads.
_MATLAB_GROUPS = ("chop", "matlab_native", "matlab_stream", "roundit", "float_params")

# Engines whose default random draws are MATLAB's stream (GPU engines draw on the device).
_MATLAB_STREAM_ENGINES = ("numpy", "numba", "torch", "jax")  # jax: on the host, outside jit


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


def matlab_equal(actual: Any, expected: Any) -> bool:
    """Equal shape and dtype, and every element equal with NaN == NaN (MATLAB ``isequal``, NaNs equal)."""
    a, b = np.asarray(actual), np.asarray(expected)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def find_corpus(path: Union[str, os.PathLike, Corpus, None] = None) -> Corpus:
    """The MATLAB corpus: the folder ``path`` or ``$PYCHOP_COMPAT_CORPUS`` if given, else the shipped copy.

    A folder must have the layout of :mod:`pychop_compat.validation.corpora`.

    Raises
    ------
    FileNotFoundError
        When the folder has no ``manifest.json`` or not its arrays file.
    ValueError
        When the manifest cannot be read (see :class:`~pychop_compat.validation.corpora.Corpus`)
        or lacks one of the groups validate runs (``chop``, ``matlab_native``, ``matlab_stream``,
        ``roundit``, ``float_params``).
    """
    if isinstance(path, Corpus):
        corpus = path
    else:
        explicit = path or os.environ.get("PYCHOP_COMPAT_CORPUS")
        try:
            corpus = load_corpus(Path(explicit)) if explicit else load_corpus("matlab_reference")
        except FileNotFoundError as exc:
            raise FileNotFoundError(
                f"MATLAB reference corpus not found in {explicit} ({exc}): pass --corpus PATH, a folder holding "
                "manifest.json and arrays.npz (see pychop_compat.validation.corpora), or leave it out to use the "
                "corpus installed with the package."
            ) from None
    missing = [group for group in _MATLAB_GROUPS if group not in corpus.groups]
    if missing:
        raise ValueError(f"corpus {corpus.folder}: no group {', '.join(missing)} in its manifest "
                         f"(validate runs {', '.join(_MATLAB_GROUPS)})")
    return corpus


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


def _options(case: CorpusCase, *names: str, **fixed: Any) -> dict:
    """chop's options from a case's fields ``names`` (and ``params`` where it has them)."""
    options = {**{name: case[name] for name in names}, **fixed}
    if case.get("params") is not None:
        options["params"] = case["params"]
    return options


def _chop_case(case: CorpusCase, engine: str) -> bool:
    stream = _Stream(case["stream"]) if case["stream"].size else None
    options = _options(case, "format", "round", "subnormal", "explim", flip=0)
    if stream is not None:
        options["randfunc"] = stream
    api.clear_chop()
    if case["err"]:
        try:
            api.chop(from_numpy(case["x"], engine), options)
        except ValueError as exc:
            return case["err"] in str(exc)
        return False
    c = to_numpy(api.chop(from_numpy(case["x"], engine), options))
    consumed = stream.used if stream is not None else 0
    return (matlab_equal(c, case["c"]) and consumed == case["n_consumed"]
            and api.chop_options().params == case["ret_params"])


def _native_case(case: CorpusCase, engine: str) -> bool:
    x = case["scale"] * case["array"] if case["scale"] != 1 else case["array"]
    api.clear_chop()
    options = {"format": case["format"], "round": case["round"], "subnormal": case["subnormal"]}
    c = to_numpy(api.chop(from_numpy(x, engine), options))
    return matlab_equal(c.ravel(), case["emu_vals"].ravel())


def _stream_case(case: CorpusCase, engine: str) -> bool:
    options = _options(case, "format", "round", "subnormal", "flip", "p")
    api.clear_chop()
    matlab_stream.rng(case["seed"])
    c = to_numpy(api.chop(from_numpy(case["x"], engine), options))
    after = matlab_stream.rand(4, 1)
    return matlab_equal(c, case["c"]) and matlab_equal(after, case["after"])


def _roundit_case(case: CorpusCase, engine: str) -> bool:
    stream = _Stream(case["stream"])
    y = api.roundit(case["x"], {"round": case["mode"], "randfunc": stream})
    return matlab_equal(y, case["y"]) and stream.used == case["n_consumed"]


def _oracle_checks(engine: str):
    """chop on ``engine`` against the exact mpmath oracle: every dataset, explim, subnormal and mode 1-4."""
    from . import oracle

    cache: dict[tuple[str, str], tuple[np.ndarray, oracle.ExactValues]] = {}

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


def _float_params_case(case: CorpusCase, engine: str) -> bool:
    return matlab_equal(np.array(float_params(case.id), dtype=np.float64), case["vals"])


def _bits_equal(got, want) -> bool:
    """Same shape and dtype, same bit patterns (so -0 != +0), any NaN equal to any NaN."""
    got, want = np.asarray(got), np.asarray(want)
    u = f"u{want.dtype.itemsize}"
    return matlab_equal(got, want) and bool(np.all((got.view(u) == want.view(u)) | np.isnan(got)))


def _cpfloat_cases(folder: Path, engine: str):
    """CPFloat's outputs (``cpfloat_reference``, untagged cases): the cpfloat facade reproduces
    them bit for bit, and raises the MEX's error where the MEX raises (its values are then
    checked with ``drcheck = 0`` when the error is the double-rounding check)."""
    manifest = json.loads(gzip.open(folder / "manifest.json.gz").read())
    arrays = np.load(folder / "cases.npz")

    def run(case, drcheck=None):
        opts = {k: case[k] for k in ("round", "subnormal", "explim", "saturation", "infinity")}
        if case["format"] is None:
            opts.update(format="c", params=[case["precision"], case["emin"], case["emax"]])
        else:
            opts["format"] = case["format"]
        if drcheck is not None:
            opts["drcheck"] = drcheck
        clear_cpfloat()
        return to_numpy(cpfloat(from_numpy(arrays[case["input"]], engine), opts))

    def check(case):
        want = arrays[case["output"]]
        if not case["mex_error"]:
            return _bits_equal(run(case), want)
        try:
            run(case)
            return False
        except CpfloatError as exc:
            if str(exc) != case["mex_error"]:
                return False
        return "double rounding" not in case["mex_error"] or _bits_equal(run(case, drcheck=0), want)

    return [(c["id"], lambda c=c: check(c)) for c in manifest if not c["tags"]]


#: OCP/ML formats compared with ml_dtypes' casts.
OCP_FORMATS = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3",
               "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu")


def _ocp_checks(engine: str):
    """Each OCP/ML format against ml_dtypes' cast from float32 (one correct rounding, round to
    nearest even): every code point, every midpoint between neighbours and the float32 numbers
    beside them, both signs, overflow; rounding by the format's defaults, through
    ``round_to_format`` (CPFloat's rules) and ``chop`` (correct rounding for these names)."""
    import ml_dtypes

    def check(name):
        kind = getattr(ml_dtypes, name)
        fmt = catalogue_format(name)
        codes = np.arange(2 ** fmt.bits, dtype=np.uint8).view(kind).astype(np.float64)
        points = np.unique(np.abs(codes[~np.isnan(codes)]))
        base = np.concatenate([points, (points[:-1] + points[1:]) / 2, [fmt.xmax * 1.5, fmt.xmax * 4]])
        with np.errstate(over="ignore"):
            x = base.astype(np.float32)
            x = np.concatenate([x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(0))])
        x = np.concatenate([x, -x, np.float32([np.inf, -np.inf])])
        if fmt.encoding == "e8m0":
            x = x[(x > 0) & (x >= 2.0 ** -126)]  # ml_dtypes: float32 subnormals are not rounded correctly
        with np.errstate(over="ignore", invalid="ignore"):
            want = x.astype(kind).astype(np.float32)
        got = to_numpy(round_to_format(from_numpy(x, engine), fmt))
        # chop rounds these names as the format's definition says (one correct rounding) too.
        got_chop = to_numpy(api.Chop({"format": name})(from_numpy(x, engine)))
        return _bits_equal(got, want) and _bits_equal(got_chop, want)

    return [(name, lambda name=name: check(name)) for name in OCP_FORMATS]


def _groups(corpus: Corpus, engines: Iterable[str], with_oracle: bool = True):
    """(group, engine, [(case id, check)]) for every group and engine it applies to."""

    def checks(group, run, engine):
        return [(case.id, lambda case=case: run(case, engine)) for case in corpus.cases(group)]

    for engine in engines:
        yield "chop", engine, checks("chop", _chop_case, engine)
        yield "matlab_native", engine, checks("matlab_native", _native_case, engine)
        if engine in _MATLAB_STREAM_ENGINES:
            yield "matlab_stream", engine, checks("matlab_stream", _stream_case, engine)
        if with_oracle:
            yield "mpmath_oracle", engine, _oracle_checks(engine)
        cpfloat_folder = corpus_path("cpfloat_reference")
        if (cpfloat_folder / "manifest.json.gz").is_file():
            yield "cpfloat_corpus", engine, _cpfloat_cases(cpfloat_folder, engine)
        if importlib.util.find_spec("ml_dtypes") is not None:
            yield "ocp_ml_dtypes", engine, _ocp_checks(engine)
    # roundit and float_params compute with NumPy whatever the engines: once, under their own label
    yield "roundit", ENGINE_INDEPENDENT, checks("roundit", _roundit_case, ENGINE_INDEPENDENT)
    yield "float_params", ENGINE_INDEPENDENT, checks("float_params", _float_params_case, ENGINE_INDEPENDENT)


def _why_unavailable(engine: str) -> str:
    if engine == "torch-cuda" and importlib.util.find_spec("torch") is not None:
        return "torch sees no CUDA GPU"
    return {"numba": "Numba is not installed (pip install numba)", "torch": "torch is not installed",
            "jax": "jax is not installed", "torch-cuda": "torch is not installed"}.get(
        engine, "CuPy is not installed or sees no CUDA GPU")


def not_run(engines: Iterable[str], with_oracle: bool = True, requested: bool = False) -> list[str]:
    """What a run of :func:`validate` on ``engines`` leaves out, one line each (``what: why``).

    Parameters
    ----------
    engines : iterable of str
        The engines the run covers.
    with_oracle : bool
        Whether the mpmath oracle group runs.
    requested : bool
        Whether ``engines`` was chosen by the caller (``--engines``) rather than all those available.
    """
    engines = list(engines)
    lines = [f"engine {engine}: " + ("not requested (--engines)" if requested else _why_unavailable(engine))
             for engine in ENGINES if engine not in engines]
    if not with_oracle:
        lines.append("group mpmath_oracle: not requested (--no-oracle)")
    if not (corpus_path("cpfloat_reference") / "manifest.json.gz").is_file():
        lines.append("group cpfloat_corpus: the CPFloat corpus is not installed")
    if importlib.util.find_spec("ml_dtypes") is None:
        lines.append("group ocp_ml_dtypes: ml_dtypes is not installed (pip install ml_dtypes)")
    return lines + [f"group matlab_stream on {engine}: this engine draws its numbers on the device, not from "
                    "MATLAB's stream" for engine in engines if engine not in _MATLAB_STREAM_ENGINES]


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


def validate(corpus: Union[str, os.PathLike, Corpus, None] = None, engines: Optional[Iterable[str]] = None,
             progress: bool = True, oracle: bool = True) -> list[GroupResult]:
    """Run every corpus group on every engine; return one :class:`GroupResult` per (group, engine).

    Parameters
    ----------
    corpus : path-like or Corpus, optional
        The corpus (see :func:`find_corpus`; default: the copy installed with the package).
    engines : list of str, optional
        Engines to run, each one of :func:`pychop_compat.engines.available_engines` (the default).
    progress : bool
        Draw a progress bar on standard error.
    oracle : bool
        Also compare with the exact mpmath oracle (about 200,000 inputs per format and
        dtype, each under explim 0/1, subnormal 0/1 and rounding modes 1-4).

    Raises
    ------
    ValueError
        When ``engines`` is empty, or names an engine that is not available here (the message
        names it and those that are), or when the corpus cannot be read (see :func:`find_corpus`).
    FileNotFoundError
        When the corpus is not found.

    Notes
    -----
    The caller's persistent chop and cpfloat options, MATLAB's random stream and JAX's
    ``jax_enable_x64`` (turned on for the run: the corpus holds doubles) are as they were afterwards.
    """
    corpus = find_corpus(corpus)
    if isinstance(engines, str):
        raise TypeError(f"engines: a list of engine names, not the string {engines!r}")
    known = available_engines()
    engines = list(known if engines is None else engines)
    unknown = [repr(engine) for engine in engines if engine not in known]
    if not engines or unknown:
        raise ValueError(f"engines: {', '.join(unknown) + ' not available here' if unknown else 'none given'}; "
                         f"available: {', '.join(known)}")
    groups = list(_groups(corpus, engines, oracle))
    bar = _Progress(sum(len(cases) for _, _, cases in groups), progress)
    # The run clears both persistent options case by case; the caller's are put back afterwards
    # through the public options (chop_options() stores the defaults where nothing was stored: chop
    # gives the same bits either way; cpfloat's drcheck is not among its options and comes back as 1).
    saved_state, saved_chop, saved_cpfloat = matlab_stream.rng(), api.chop_options(), cpfloat_options()
    saved_x64 = None
    if "jax" in engines:
        import jax

        # The corpus holds doubles; JAX has float64 only with x64 on (its default is 32-bit).
        saved_x64 = bool(jax.config.read("jax_enable_x64"))
        jax.config.update("jax_enable_x64", True)
    results = []
    try:
        for group, engine, cases in groups:
            row = GroupResult(group, engine)
            for case_id, check in cases:
                row.cases += 1
                try:
                    # the NumPy rows run on their own CPU engine (NumPy or compiled), the others as they are
                    with cpu_engine(engine) if engine in ("numpy", "numba") else contextlib.nullcontext():
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
        api.chop(None, saved_chop)
        clear_cpfloat()
        with warnings.catch_warnings():  # (a named format's params, filled in: ignored, as the MEX does)
            warnings.filterwarnings("ignore", message="cpfloat:ignoredparams")
            cpfloat(None, saved_cpfloat)
        matlab_stream.rng(saved_state)
        if saved_x64 is not None:
            jax.config.update("jax_enable_x64", saved_x64)
    return results


def format_table(results: list[GroupResult]) -> str:
    """A markdown table: group, engine, cases, agreeing."""
    lines = ["| group | engine | cases | agreeing |", "| --- | --- | ---: | ---: |"]
    lines += [f"| {r.group} | {r.engine} | {r.cases} | {r.agreeing} |" for r in results]
    return "\n".join(lines)


def environment(engines: Iterable[str] = (), corpus: Optional[Corpus] = None) -> dict:
    """What a validation run ran on: package, Python, libraries, engines, machine and corpus.

    Parameters
    ----------
    engines : iterable of str
        The engines that ran (their libraries' versions and devices are recorded).
    corpus : Corpus, optional
        The corpus that was read (its name, folder and the SHA-256 of its files), and with it, under
        ``data``, the folder and SHA-256 of the files of the other data validate's groups read
        (``cpfloat_reference``, read by the ``cpfloat_corpus`` group, where it is installed).
    """
    from .. import __version__

    # scipy and mpmath are dependencies (always installed); the optional engines' libraries are
    # recorded when this run imported them or names their engines
    engines = [engine for engine in engines if engine != ENGINE_INDEPENDENT]
    libraries = {"numpy": np.__version__, "scipy": metadata.version("scipy"), "mpmath": metadata.version("mpmath")}
    names: set[str] = {name for name in ("torch", "cupy", "jax") if name in sys.modules}
    names.update(_ENGINE_LIBRARIES[engine] for engine in engines if engine in _ENGINE_LIBRARIES)
    libraries.update({name: _library_version(name) for name in sorted(names)})
    devices = {}
    for engine in engines:
        if engine == "torch-cuda":
            import torch

            devices[engine] = torch.cuda.get_device_name(0)
        elif engine == "cupy":
            import cupy

            props = cupy.cuda.runtime.getDeviceProperties(0)
            devices[engine] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        elif engine == "jax":
            import jax

            devices[engine] = str(jax.devices()[0].device_kind)
        else:
            devices[engine] = "cpu"
    record = {
        "package": {"name": "pychop_compat", "version": __version__,
                    "location": str(Path(__file__).resolve().parents[1])},
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "libraries": libraries,
        "engines": devices,
        "machine": {"platform": platform.platform(), "machine": platform.machine(),
                    "processor": platform.processor() or "unknown", "cpu_count": os.cpu_count()},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if corpus is not None:
        record["corpus"] = {"name": corpus.name, "folder": str(corpus.folder), "sha256": _checksums(corpus.folder)}
        cpfloat_folder = corpus_path("cpfloat_reference")
        if (cpfloat_folder / "manifest.json.gz").is_file():  # (the cpfloat_corpus group ran: see _groups)
            record["data"] = {"cpfloat_reference": {"folder": str(cpfloat_folder),
                                                    "sha256": _checksums(cpfloat_folder)}}
    return record


def _checksums(folder: Path) -> dict[str, str]:
    """The SHA-256 of every file in ``folder``, by name."""
    files = sorted(p for p in folder.iterdir() if p.is_file())
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _library_version(name: str) -> str:
    """The installed version of the library imported as ``name``, without importing it (CuPy's
    distributions are named after their CUDA version: ``cupy-cuda12x``)."""
    module = sys.modules.get(name)
    if module is not None and isinstance(getattr(module, "__version__", None), str):
        return module.__version__
    for distribution in [name, *metadata.packages_distributions().get(name, ())]:
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def write_json(results: list[GroupResult], path: Union[str, os.PathLike], env: Optional[dict] = None,
               left_out: Optional[list[str]] = None) -> None:
    """Write the results, their :func:`environment` and what the run left out (:func:`not_run`) as JSON.

    The file holds ``{"all_agree", "environment", "results": [row, ...], "not_run": [line, ...]}``,
    a row per group and engine with the fields of :class:`GroupResult` and ``ok``.
    """
    engines = sorted({r.engine for r in results} - {ENGINE_INDEPENDENT})
    document = {
        "all_agree": all(r.ok for r in results),
        "environment": env if env is not None else environment(engines),
        "results": [{**asdict(r), "ok": r.ok} for r in results],
        "not_run": left_out if left_out is not None else not_run(engines),
    }
    Path(path).write_text(json.dumps(document, indent=2) + "\n")
