"""The stored MATLAB outputs (tests/matlab_reference, see its README) reproduced exactly."""

from __future__ import annotations

import numpy as np
import pytest

from pychop_compat import chop, chop_options, clear_chop, float_params, rand, rng, roundit
from conftest import CORPUS, StreamFunc, assert_matlab_equal, load_mat, manifest, matlab_string

CHOP_CASES = [case["id"] for case in manifest()]  # the top-level manifest lists chop/
NATIVE_CASES = sorted(p.stem for p in (CORPUS / "matlab_native").glob("*_rmode_*.mat"))
STREAM_CASES = [case["id"] for case in manifest("matlab_stream")]


def test_corpus_is_complete():
    assert len(CHOP_CASES) == 744
    assert len(NATIVE_CASES) == 32
    assert len(STREAM_CASES) == 120
    assert len(list((CORPUS / "roundit").glob("*.mat"))) == 6


def _chop_case_options(case, randfunc):
    options = {
        "format": matlab_string(case["format"]),
        "round": int(case["round"][0, 0]),
        "subnormal": int(case["subnormal"][0, 0]),
        "explim": int(case["explim"][0, 0]),
        "flip": 0,
    }
    if case["params"].size:
        options["params"] = case["params"].ravel().tolist()
    if randfunc is not None:
        options["randfunc"] = randfunc
    return options


@pytest.mark.parametrize("case_id", CHOP_CASES)
def test_chop_case(case_id, engine):
    case = load_mat(CORPUS / "chop" / f"{case_id}.mat")
    x = case["x"]
    stream = StreamFunc(case["stream"]) if case["stream"].size else None
    options = _chop_case_options(case, stream)
    error = matlab_string(case["err"])
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
    assert consumed == int(case["n_consumed"][0, 0]), "number of random draws"
    assert chop_options().params == case["ret_params"].ravel().tolist()


@pytest.mark.parametrize("case_id", NATIVE_CASES)
def test_matlab_native_case(case_id, engine):
    fmt, _, mode, _, subnormal = case_id.split("_")
    array = load_mat(CORPUS / "matlab_native" / "verified_data.mat")["array"]
    x = array if subnormal == "0" else 1e-3 * array
    expected = load_mat(CORPUS / "matlab_native" / f"{case_id}.mat")["emu_vals"]
    options = {"format": "h" if fmt == "half" else fmt, "round": int(mode), "subnormal": int(subnormal)}
    xe = engine.to(x)
    c = engine.back(chop(xe, options), xe)
    assert_matlab_equal(c.ravel(), expected.ravel(), case_id)


@pytest.mark.parametrize("mode", range(1, 7))
def test_roundit_case(mode):
    case = load_mat(CORPUS / "roundit" / f"roundit_r{mode}.mat")
    stream = StreamFunc(case["stream"])
    y = roundit(case["x"], {"round": mode, "flip": 0, "randfunc": stream})
    assert_matlab_equal(y, case["y"], f"roundit mode {mode}")
    assert stream.used == int(case["n_consumed"][0, 0])


def test_float_params_table():
    table = load_mat(CORPUS / "float_params.mat")
    assert matlab_string(table["columns"]).split() == ["u", "xmins", "xmin", "xmax", "p", "emins", "emin", "emax"]
    names = [str(n).strip() for n in table["names"]]
    assert len(names) == 20
    for name, row in zip(names, table["vals"]):
        assert_matlab_equal(np.array(float_params(name), dtype=np.float64), row, name)


@pytest.mark.parametrize("case_id", STREAM_CASES)
def test_matlab_stream_case(case_id, engine):
    """rng(seed); c = chop(x, options); after = rand(4, 1), with MATLAB's own stream."""
    case = load_mat(CORPUS / "matlab_stream" / "chop" / f"{case_id}.mat")
    options = {
        "format": matlab_string(case["format"]),
        "round": int(case["round"][0, 0]),
        "subnormal": int(case["subnormal"][0, 0]),
        "flip": int(case["flip"][0, 0]),
        "p": float(case["p"][0, 0]),
    }
    if case["params"].size:
        options["params"] = case["params"].ravel().tolist()
    clear_chop()
    rng(int(case["seed"][0, 0]))
    assert np.array_equal(rng().State[:624], case["state"].ravel()[:624].astype(np.uint32))
    xe = engine.to(case["x"])
    c = engine.back(chop(xe, options), xe)
    after = rand(4, 1)
    assert_matlab_equal(c, case["c"], case_id)
    assert_matlab_equal(after, case["after"], f"{case_id}: stream position after chop")
