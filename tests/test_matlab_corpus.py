"""The stored MATLAB outputs (pychop_compat/data/matlab_reference, see its README) reproduced exactly."""

from __future__ import annotations

import numpy as np
import pytest

from pychop_compat import chop, chop_options, clear_chop, float_params, rand, rng, roundit
from conftest import MATLAB_CORPUS, StreamFunc, assert_matlab_equal, engine_rows, matlab_cases

CHOP_CASES = [case.id for case in matlab_cases("chop")]
NATIVE_CASES = [case.id for case in matlab_cases("matlab_native")]
STREAM_CASES = [case.id for case in matlab_cases("matlab_stream")]

# Every case on the rows whose arithmetic differs (the NumPy engine, the compiled engine, and
# on a GPU torch-cuda and CuPy).  The CPU wrapper rows (torch CPU tensors, JAX arrays) hand
# their arrays to those kernels or to the namespace kernel (tested in full in test_engines.py
# and test_gpu_paths.py): every 8th case in the default profile, the rest under -m slow, and
# the route of every case asserted (test_wrapper_rows_route_every_case).
FULL_ROWS = engine_rows("numpy", "numba", "torch-cuda", "cupy")
WRAPPER_ROWS = engine_rows("torch", "jax")


def sampled(case_ids, every=8):
    """Every ``every``-th case in the default profile, the others marked slow."""
    return [pytest.param(case_id, marks=[] if k % every == 0 else [pytest.mark.slow])
            for k, case_id in enumerate(case_ids)]


def wrapper_route(engine_name, options):
    """The kernel a wrapper row's array reaches: a CPU tensor's memory the NumPy engine (the
    row's cpu_engine('numpy')); a JAX array the namespace kernel without host numbers, else
    the host engines."""
    if engine_name == "torch":
        return "numpy"
    return "namespace" if options["round"] <= 4 and not options.get("flip") else "host"


def test_corpus_is_complete():
    assert len(CHOP_CASES) == len(set(CHOP_CASES)) == 744
    assert len(NATIVE_CASES) == 32
    assert len(STREAM_CASES) == 120
    assert len(matlab_cases("roundit")) == 6
    assert len(matlab_cases("float_params")) == 20


def _chop_case_options(case, randfunc):
    options = {
        "format": case["format"],
        "round": case["round"],
        "subnormal": case["subnormal"],
        "explim": case["explim"],
        "flip": 0,
    }
    if case["params"] is not None:
        options["params"] = case["params"]
    if randfunc is not None:
        options["randfunc"] = randfunc
    return options


@pytest.mark.parametrize("engine", FULL_ROWS, indirect=True)
@pytest.mark.parametrize("case_id", CHOP_CASES)
def test_chop_case(case_id, engine):
    check_chop_case(case_id, engine)


@pytest.mark.parametrize("engine", WRAPPER_ROWS, indirect=True)
@pytest.mark.parametrize("case_id", sampled(CHOP_CASES))
def test_chop_case_on_wrapper_row(case_id, engine):
    check_chop_case(case_id, engine)


def check_chop_case(case_id, engine):
    case = MATLAB_CORPUS.case("chop", case_id)
    x = case["x"]
    stream = StreamFunc(case["stream"]) if case["stream"].size else None
    options = _chop_case_options(case, stream)
    error = case["err"]
    x_before = x.copy()
    if error:
        with pytest.raises(ValueError, match=error.replace(".", r"\.")):
            chop(engine.to(x), options)
        return
    xe = engine.to(x)
    c = engine.back(chop(xe, options), xe)
    assert_matlab_equal(c, case["c"], case_id)
    np.testing.assert_array_equal(x, x_before)
    consumed = stream.used if stream is not None else 0
    assert consumed == case["n_consumed"], "number of random draws"
    assert chop_options().params == case["ret_params"]


@pytest.mark.parametrize("engine", FULL_ROWS, indirect=True)
@pytest.mark.parametrize("case_id", NATIVE_CASES)
def test_matlab_native_case(case_id, engine):
    check_matlab_native_case(case_id, engine)


@pytest.mark.parametrize("engine", WRAPPER_ROWS, indirect=True)
@pytest.mark.parametrize("case_id", sampled(NATIVE_CASES))
def test_matlab_native_case_on_wrapper_row(case_id, engine):
    check_matlab_native_case(case_id, engine)


def check_matlab_native_case(case_id, engine):
    case = MATLAB_CORPUS.case("matlab_native", case_id)
    # x = array for subnormal = 0 and 1e-3 * array for subnormal = 1 (the corpus README).
    assert case["scale"] == (1.0 if case["subnormal"] == 0 else 1e-3)
    x = case["array"] if case["subnormal"] == 0 else 1e-3 * case["array"]
    options = {"format": case["format"], "round": case["round"], "subnormal": case["subnormal"]}
    xe = engine.to(x)
    c = engine.back(chop(xe, options), xe)
    assert_matlab_equal(c.ravel(), case["emu_vals"].ravel(), case_id)


@pytest.mark.parametrize("mode", range(1, 7))
def test_roundit_case(mode):
    case = MATLAB_CORPUS.case("roundit", f"roundit_r{mode}")
    assert case["mode"] == mode
    stream = StreamFunc(case["stream"])
    y = roundit(case["x"], {"round": mode, "flip": 0, "randfunc": stream})
    assert_matlab_equal(y, case["y"], f"roundit mode {mode}")
    assert stream.used == case["n_consumed"]


def test_float_params_table():
    cases = matlab_cases("float_params")
    assert {tuple(case["columns"]) for case in cases} == {("u", "xmins", "xmin", "xmax", "p", "emins", "emin", "emax")}
    for case in cases:
        assert_matlab_equal(np.array(float_params(case.id), dtype=np.float64), case["vals"], case.id)


@pytest.mark.parametrize("engine", FULL_ROWS, indirect=True)
@pytest.mark.parametrize("case_id", STREAM_CASES)
def test_matlab_stream_case(case_id, engine):
    """rng(seed); c = chop(x, options); after = rand(4, 1), with MATLAB's own stream."""
    check_matlab_stream_case(case_id, engine)


@pytest.mark.parametrize("engine", WRAPPER_ROWS, indirect=True)
@pytest.mark.parametrize("case_id", sampled(STREAM_CASES))
def test_matlab_stream_case_on_wrapper_row(case_id, engine):
    check_matlab_stream_case(case_id, engine)


def _stream_case_options(case):
    options = {
        "format": case["format"],
        "round": case["round"],
        "subnormal": case["subnormal"],
        "flip": case["flip"],
        "p": case["p"],
    }
    if case["params"] is not None:
        options["params"] = case["params"]
    return options


def check_matlab_stream_case(case_id, engine):
    case = MATLAB_CORPUS.case("matlab_stream", case_id)
    options = _stream_case_options(case)
    clear_chop()
    rng(case["seed"])
    assert np.array_equal(rng().State[:624], case["state"].ravel()[:624].astype(np.uint32))
    xe = engine.to(case["x"])
    c = engine.back(chop(xe, options), xe)
    after = rand(4, 1)
    assert_matlab_equal(c, case["c"], case_id)
    assert_matlab_equal(after, case["after"], f"{case_id}: stream position after chop")


@pytest.mark.parametrize("engine", WRAPPER_ROWS, indirect=True)
def test_wrapper_rows_route_every_case(engine):
    """The route of every case of the three groups on the wrapper rows (the default profile
    runs every 8th case): the kernels the full rows test on every case, or the namespace kernel."""
    routes = set()
    for case_id in CHOP_CASES:
        case = MATLAB_CORPUS.case("chop", case_id)
        if case["err"]:
            continue  # refused before any kernel (checked on every row by test_chop_case)
        stream = StreamFunc(case["stream"]) if case["stream"].size else None
        options = _chop_case_options(case, stream)
        routes.add(_assert_route(engine, case["x"], options, case_id))
    for case_id in NATIVE_CASES:
        case = MATLAB_CORPUS.case("matlab_native", case_id)
        options = {"format": case["format"], "round": case["round"], "subnormal": case["subnormal"]}
        routes.add(_assert_route(engine, case["array"], options, case_id))
    for case_id in STREAM_CASES:
        case = MATLAB_CORPUS.case("matlab_stream", case_id)
        routes.add(_assert_route(engine, case["x"], _stream_case_options(case), case_id))
    assert routes == ({"numpy"} if engine.name == "torch" else {"namespace", "host"})


def _assert_route(engine, x, options, case_id):
    from pychop_compat import explain

    found = explain(engine.to(np.asarray(x)), options).kernel
    assert found == wrapper_route(engine.name, options), (case_id, found)
    return found
