"""The command line: demonstration, --version and validate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import pychop_compat


def _run(*args):
    return subprocess.run([sys.executable, "-m", "pychop_compat", *args], capture_output=True, text=True)


def _in_process(capsys, *args):
    """The command line's ``main`` in this process (what ``python -m pychop_compat`` runs, without a
    new interpreter's start): ``(exit status, stdout, stderr)``."""
    from pychop_compat.__main__ import main

    try:
        status = main(list(args))
    except SystemExit as exit_:  # argparse's errors
        status = exit_.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_version():
    out = _run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"pychop_compat {pychop_compat.__version__}"


def test_demo_table():
    out = _run()
    assert out.returncode == 0
    # 1/3 to bfloat16, nearest: 1.0101011b * 2^-2 = 0.333984375 (printed to 8 significant digits)
    assert any(line.split()[:3] == ["1/3", "bfloat16", "0.33398438"] for line in out.stdout.splitlines())


@pytest.fixture(scope="module")
def validated_numpy(tmp_path_factory):
    """One run of ``validate --engines numpy --json ... --no-oracle`` (about 10 s), read by the
    tests below: its output and its JSON certificate."""
    report = tmp_path_factory.mktemp("validate") / "v.json"
    out = _run("validate", "--engines", "numpy", "--json", str(report), "--no-progress", "--no-oracle")
    return out, report


@pytest.mark.slow  # the validate command in a new process (the corpora themselves run in the default profile): CI's slow step
def test_validate_numpy(validated_numpy):
    out, report = validated_numpy
    assert out.returncode == 0, out.stderr
    document = json.loads(report.read_text())
    assert document["all_agree"] is True
    rows = {(r["group"], r["engine"]): r for r in document["results"]}
    expected_counts = {"chop": 744, "matlab_native": 32, "matlab_stream": 120, "roundit": 6, "float_params": 20}
    for group, count in expected_counts.items():
        row = rows[(group, "engine-independent" if group in ("roundit", "float_params") else "numpy")]
        assert row["cases"] == count and row["agreeing"] == count and row["ok"]
    assert "| chop | numpy | 744 | 744 |" in out.stdout
    assert rows[("cpfloat_corpus", "numpy")]["cases"] == 1925 and rows[("cpfloat_corpus", "numpy")]["ok"]
    ocp = rows.get(("ocp_ml_dtypes", "numpy"))
    assert ocp is None or (ocp["cases"] == 10 and ocp["ok"]), ocp


@pytest.mark.slow  # the validate command in a new process: CI's slow step
def test_validate_json_is_a_certificate(validated_numpy):
    """--json records what ran where: package, Python, NumPy, engines, machine and the corpus's checksums."""
    import hashlib
    import platform

    import numpy as np

    from pychop_compat.validation.corpora import corpus_path

    out, report = validated_numpy
    assert out.returncode == 0, out.stderr
    env = json.loads(report.read_text())["environment"]
    assert env["package"] == {"name": "pychop_compat", "version": pychop_compat.__version__,
                              "location": str(Path(pychop_compat.__file__).resolve().parent)}
    assert env["python"]["version"] == platform.python_version()
    assert env["libraries"]["numpy"] == np.__version__
    assert set(env["libraries"]) >= {"numpy", "scipy", "mpmath"}
    assert env["engines"] == {"numpy": "cpu"}
    assert env["machine"]["machine"] == platform.machine() and env["machine"]["cpu_count"] >= 1
    folder = corpus_path("matlab_reference")
    assert env["corpus"]["name"] == "matlab_reference"
    for name in ("manifest.json", "arrays.npz"):
        assert env["corpus"]["sha256"][name] == hashlib.sha256((folder / name).read_bytes()).hexdigest()
    cpfloat_folder = corpus_path("cpfloat_reference")  # the cpfloat_corpus group's data, hashed too
    assert env["data"]["cpfloat_reference"]["sha256"]["cases.npz"] == hashlib.sha256(
        (cpfloat_folder / "cases.npz").read_bytes()).hexdigest()


@pytest.mark.slow  # five new processes, each importing the package: CI's slow step
def test_help_lists_every_command():
    out = _run("--help")
    assert out.returncode == 0
    for command in ("demo", "info", "validate"):
        assert command in out.stdout
        assert _run(command, "--help").returncode == 0
    info = _run("info")
    assert info.returncode == 0 and json.loads(info.stdout)["package"]["version"] == pychop_compat.__version__


def test_cli_errors_name_the_option_and_the_allowed_values(capsys):
    status, _, err = _in_process(capsys, "validate", "--engines", "numpy,gpu9")
    assert status == 2
    assert "--engines" in err and "gpu9" in err and "available: numpy" in err
    status, _, err = _in_process(capsys, "no-such-command")
    assert status == 2 and "demo" in err and "validate" in err
    # an unwritable --json is refused before the run (0.6.0: a traceback after it)
    status, _, err = _in_process(capsys, "validate", "--engines", "numpy", "--json", "/nonexistent-folder/x.json")
    assert status == 2 and "--json" in err and "Traceback" not in err


def test_validate_reports_disagreement(tmp_path, monkeypatch):
    # Break the rounding on purpose: validate must notice and exit non-zero.
    from pychop_compat import validation
    from pychop_compat.validation import validator

    monkeypatch.setattr(validator.api, "chop", lambda x, options=None: x)
    results = validation.validate(engines=["numpy"], progress=False, oracle=False)
    chop_row = next(r for r in results if r.group == "chop")
    assert not chop_row.ok and chop_row.agreeing < chop_row.cases


def test_validate_missing_corpus(tmp_path, capsys):
    status, _, err = _in_process(capsys, "validate", "--corpus", str(tmp_path))
    assert status == 2 and "corpus not found" in err


@pytest.mark.heavy
@pytest.mark.slow  # validate() with every group on NumPy, ~20 s (the mpmath oracle itself: test_oracle_mpmath.py)
def test_validate_oracle_group():
    from pychop_compat import validation

    results = validation.validate(engines=["numpy"], progress=False)
    row = next(r for r in results if r.group == "mpmath_oracle")
    assert row.cases == 15 * 16 and row.ok, row.disagreeing[:5]


@pytest.mark.slow  # the validate command in a new process: CI's slow step
def test_validate_says_what_it_left_out(validated_numpy):
    """The table is followed by one line per engine or group not run, with the reason; the JSON
    certificate records the same lines, and the closing line says how much ran (issue 33)."""
    out, report = validated_numpy
    assert out.returncode == 0, out.stderr
    printed = [line[len("not run: "):] for line in out.stdout.splitlines() if line.startswith("not run: ")]
    assert "engine numba: not requested (--engines)" in printed
    assert "group mpmath_oracle: not requested (--no-oracle)" in printed
    assert json.loads(report.read_text())["not_run"] == printed
    closing = f"all cases agree (7 groups on 1 engine(s); {len(printed)} left out, listed above)"
    assert out.stdout.strip().splitlines()[-1] == closing


def test_validate_summary_counts_the_requested_engines_only(capsys, monkeypatch, tmp_path):
    """roundit and float_params compute with NumPy on any --engines: their rows are labelled
    engine-independent, not numpy, which --engines numba did not run; the closing line counts the
    one engine requested (it said 2; --engines jax,torch said 3).  Kept fast: one case a group, the
    CPFloat corpus left out, and the numba rows on the NumPy engine (the labels are the point)."""
    import contextlib

    from pychop_compat.validation import corpora, validator

    cases = corpora.Corpus.cases
    monkeypatch.setattr(corpora.Corpus, "cases", lambda self, group: cases(self, group)[:1])
    monkeypatch.setattr(validator, "corpus_path", lambda name: tmp_path / name)
    monkeypatch.setattr(validator, "cpu_engine", lambda engine: contextlib.nullcontext())
    status, out, _ = _in_process(capsys, "validate", "--engines", "numba", "--no-oracle", "--no-progress")
    assert status == 0
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    engines = {(row[0][2:], row[1]) for row in rows}
    assert ("roundit", "engine-independent") in engines and ("float_params", "engine-independent") in engines
    assert {engine for _, engine in engines} == {"numba", "engine-independent"}
    assert "not run: engine numpy: not requested (--engines)" in out
    assert out.strip().splitlines()[-1].startswith(f"all cases agree ({len(rows)} groups on 1 engine(s); ")


def test_environment_records_every_engine_library_version():
    """The certificate and `info` name the version of each engine's library (validation.rst): Numba's
    for the numba engine even where this process has not imported it.  Oracle: importlib.metadata."""
    from importlib import metadata

    from pychop_compat.validation import environment

    try:
        numba_version = metadata.version("numba")
    except metadata.PackageNotFoundError:
        pytest.skip("numba not installed")
    env = environment(["numpy", "numba"])
    assert env["libraries"]["numba"] == numba_version
    assert env["engines"] == {"numpy": "cpu", "numba": "cpu"}


def test_not_run_names_the_reason_for_each_missing_engine():
    import importlib.util

    from pychop_compat.validation import ENGINES, not_run

    lines = not_run(["numpy"], requested=False)
    missing = [line for line in lines if line.startswith("engine ")]
    assert [line.split(":")[0] for line in missing] == [f"engine {e}" for e in ENGINES if e != "numpy"]
    if importlib.util.find_spec("torch") is not None:
        import torch

        if not torch.cuda.is_available():
            assert "engine torch-cuda: torch sees no CUDA GPU" in lines
    assert not any("mpmath_oracle" in line for line in lines)


def _tiny_run(monkeypatch, tmp_path):
    """validate kept fast: one case a group, the CPFloat corpus left out."""
    from pychop_compat.validation import corpora, validator

    cases = corpora.Corpus.cases
    monkeypatch.setattr(corpora.Corpus, "cases", lambda self, group: cases(self, group)[:1])
    monkeypatch.setattr(validator, "corpus_path", lambda name: tmp_path / name)


@pytest.mark.parametrize("problem", ["format_version", "not json", "no group", "no arrays"])
def test_validate_bad_corpus_exits_2_with_the_reason(capsys, tmp_path, problem):
    """A corpus that cannot be read is a corpus problem, exit 2 as docs/validation.rst says, found
    before the run (it gave a traceback and exit 1, or 2,000 disagreements)."""
    from pychop_compat.validation.corpora import corpus_path

    shipped = corpus_path("matlab_reference")
    manifest = json.loads((shipped / "manifest.json").read_text())
    if problem == "format_version":
        manifest["format_version"] = 2
    elif problem == "no group":
        del manifest["groups"]["roundit"]
    text = "not json" if problem == "not json" else json.dumps(manifest)
    (tmp_path / "manifest.json").write_text(text)
    if problem != "no arrays":
        (tmp_path / "arrays.npz").symlink_to(shipped / "arrays.npz")
    status, out, err = _in_process(capsys, "validate", "--corpus", str(tmp_path), "--engines", "numpy",
                                   "--no-oracle", "--no-progress")
    assert status == 2 and "Traceback" not in err and out == ""
    expected = {"format_version": "format_version 2", "not json": "not valid JSON",
                "no group": "no group roundit", "no arrays": "no arrays.npz"}[problem]
    assert expected in err and str(tmp_path) in err


def test_validate_keeps_the_callers_persistent_options(monkeypatch, tmp_path):
    """validate() from Python puts back the caller's persistent chop and cpfloat options (it cleared
    them).  Oracle: the options the test stored; bfloat16 is [t, emax] = [8, 127] (chop's docs)."""
    from pychop_compat import chop, chop_options, clear_chop, clear_cpfloat, cpfloat, cpfloat_options
    from pychop_compat import validation

    _tiny_run(monkeypatch, tmp_path)
    try:
        chop(None, {"format": "b", "round": 2})
        cpfloat(None, {"format": "c", "params": [5, -14, 15], "round": 7})
        validation.validate(None, ["numpy"], progress=False, oracle=False)
        o = chop_options()
        assert (o.format, o.round, o.params) == ("b", 2, [8, 127])
        c = cpfloat_options()
        assert (c.format, c.params, c.round) == ("c", [5, -14, 15], 7)
    finally:
        clear_chop()
        clear_cpfloat()


@pytest.mark.heavy
@pytest.mark.slow  # validate on JAX, one case a group: about 20 s (JAX's compilations)
def test_validate_restores_jax_x64(monkeypatch, tmp_path):
    """validate on JAX turns on jax_enable_x64 for the run only (it stayed on for the process)."""
    jax = pytest.importorskip("jax")
    from pychop_compat import validation
    from pychop_compat.engines import available_engines

    if "jax" not in available_engines():
        pytest.skip("the jax engine is not available")
    _tiny_run(monkeypatch, tmp_path)
    before = bool(jax.config.jax_enable_x64)
    try:
        jax.config.update("jax_enable_x64", False)
        results = validation.validate(None, ["jax"], progress=False, oracle=False)
        assert all(r.ok for r in results)
        assert jax.config.jax_enable_x64 is False
        assert jax.numpy.zeros(2).dtype == jax.numpy.float32  # JAX's default without x64
    finally:
        jax.config.update("jax_enable_x64", before)


def test_validate_refuses_unknown_and_empty_engines(capsys):
    """An engine that is not available here is refused up front, named with those that are (it was
    reported as thousands of disagreements); so is an empty name or list (read as 'all engines')."""
    from pychop_compat import validation
    from pychop_compat.engines import available_engines

    with pytest.raises(ValueError, match=r"'bogus' not available here; available: numpy"):
        validation.validate(None, ["bogus"], progress=False, oracle=False)
    with pytest.raises(ValueError, match="engines: none given"):
        validation.validate(None, [], progress=False, oracle=False)
    with pytest.raises(TypeError, match="engines"):
        validation.validate(None, "numpy", progress=False, oracle=False)
    for value in ("", "numpy,", ",numpy"):
        status, out, err = _in_process(capsys, "validate", "--engines", value, "--no-oracle", "--no-progress")
        assert status == 2 and "--engines" in err and "empty engine name" in err and out == ""
    assert "numpy" in available_engines()


def test_validate_json_directory_and_help(capsys, tmp_path):
    """--json naming a folder says so; --help names $PYCHOP_COMPAT_CORPUS, which the default reads."""
    status, _, err = _in_process(capsys, "validate", "--engines", "numpy", "--json", str(tmp_path))
    assert status == 2 and f"{tmp_path} is a directory" in err
    status, out, _ = _in_process(capsys, "validate", "--help")
    assert status == 0 and "$PYCHOP_COMPAT_CORPUS" in " ".join(out.split())


def test_certificate_hashes_the_cpfloat_data():
    """The certificate's checksums cover every data file a group reads: the cpfloat_corpus group's
    data/cpfloat_reference too, under "data" (only the MATLAB corpus was hashed).  Oracle: hashlib."""
    import hashlib

    from pychop_compat.validation import environment, find_corpus
    from pychop_compat.validation.corpora import corpus_path

    folder = corpus_path("cpfloat_reference")
    if not (folder / "manifest.json.gz").is_file():
        pytest.skip("the CPFloat corpus is not installed")
    data = environment(["numpy"], find_corpus())["data"]
    assert data["cpfloat_reference"]["folder"] == str(folder)
    for name in ("manifest.json.gz", "cases.npz"):
        assert data["cpfloat_reference"]["sha256"][name] == hashlib.sha256((folder / name).read_bytes()).hexdigest()
