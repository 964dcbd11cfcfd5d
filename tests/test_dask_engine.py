"""The Dask engine: lazy results, chunking-independent random numbers, dask.distributed.

Oracles: the NumPy engine on the same values as one array (itself checked
against MATLAB's corpus) and, for the counter-based numbers, the torch
engine's device path fed the same counter (an independent implementation).
"""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

from engine_matrix import assert_bits_equal, make_input  # noqa: E402
from pychop_compat import Chop, chop
from pychop_compat.random import sources as randomness  # noqa: E402
from pychop_compat.engines.dispatch import device_paths_on_cpu, round_array
from pychop_compat.random import counter as device_random  # noqa: E402
from pychop_compat.formats import lookup_format  # noqa: E402
from pychop_compat.matlab.options import resolve  # noqa: E402
from pychop_compat.random.sources import MATLAB_STREAM  # noqa: E402

CHUNKINGS = [(130, 6), (7, 5), (64, 1)]
COUNTER_CHOP = hasattr(randomness, "counter_sources")  # Chop(rng=<int>) is counter-based (issue 21)


class _Counter:
    """The counter of Chop(..., rng=seed): keys from the seed, offset advanced per call."""

    def __init__(self, seed):
        self.keys = tuple(device_random.mix64(seed + s * device_random.GOLDEN) for s in (1, 2, 3))
        self.offset = 0

    def take(self, n):
        offset, self.offset = self.offset, self.offset + n
        return device_random.CounterStream(self.keys, offset)


class _CounterSources:
    def __init__(self, seed):
        self.counter = _Counter(seed)


def _input(dtype="float64", fmt="b"):
    return make_input(lookup_format(fmt), dtype, seed=4)


def test_chop_is_lazy():
    calls = []

    def source(block):
        calls.append(block.shape)
        return block

    x = da.from_array(_input(), chunks=(20, 3)).map_blocks(source, dtype=np.float64, meta=np.empty((0, 0)))
    out = chop(x, {"format": "h"})
    assert isinstance(out, da.Array) and calls == []  # nothing computed
    assert out.chunks == x.chunks and out.dtype == np.float64
    with pytest.raises(ValueError, match="rng=<int seed>"):
        chop(x, {"format": "h", "round": 5})  # refused at once, still without computing
    assert calls == []
    out.compute()
    assert calls


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("options", [{"format": "h"}, {"format": "b", "round": 3, "subnormal": 1},
                                     {"format": "q43", "round": 2, "explim": 0}], ids=str)
def test_deterministic_modes_equal_numpy_for_every_chunking(options, dtype):
    with np.errstate(over="ignore"):  # float16: the largest inputs become Inf
        x = _input("float32" if dtype == "float16" else dtype).astype(dtype)
    expected = chop(x.copy(), options)
    for chunks in CHUNKINGS:
        out = chop(da.from_array(x, chunks=chunks), options)
        assert out.dtype == x.dtype
        assert_bits_equal(out.compute(), expected, f"{chunks}")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("options", [{"format": "b", "round": 5, "subnormal": 1}, {"format": "h", "round": 6},
                                     {"format": "b", "round": 1, "flip": 1, "p": 0.3},
                                     {"format": "q52", "round": 5, "flip": 1}], ids=str)
def test_counter_numbers_do_not_depend_on_chunking(options, dtype):
    """Element i (global row-major) gets u(offset + i): three chunkings agree, and equal the torch
    engine's device path with the same counter (seed_device, first call)."""
    x = _input(dtype)
    spec = resolve(options, None, "single" if dtype == "float32" else "double").spec
    results = [round_array(da.from_array(x, chunks=c), spec, _CounterSources(21)).compute()
               for c in CHUNKINGS]
    for chunks, result in zip(CHUNKINGS[1:], results[1:]):
        assert_bits_equal(result, results[0], f"chunks {chunks}")
    torch = pytest.importorskip("torch")

    device_random.seed_device(21)
    with device_paths_on_cpu():
        expected = chop(torch.from_numpy(x.copy()), options).numpy()
    assert_bits_equal(results[0], expected, "torch device path, same counter")


def test_counter_offsets_advance_per_call():
    x = _input()
    spec = resolve({"format": "b", "round": 5}, None, "double").spec
    sources = _CounterSources(3)
    first = round_array(da.from_array(x, chunks=(9, 4)), spec, sources)
    second = round_array(da.from_array(x, chunks=(9, 4)), spec, sources)
    assert sources.counter.offset == 2 * x.size  # taken when chop is called, not when computed
    assert not np.array_equal(second.compute(), first.compute())


@pytest.mark.skipif(not COUNTER_CHOP, reason="Chop(rng=<int>) is not counter-based in this build")
def test_chop_rng_seed_on_dask_equals_numpy():
    x = _input()
    for options in ({"format": "b", "round": 5}, {"format": "h", "round": 1, "flip": 1}):
        expected = Chop(options, rng=8)(x.copy())
        for chunks in CHUNKINGS:
            assert_bits_equal(Chop(options, rng=8)(da.from_array(x, chunks=chunks)).compute(), expected,
                              f"{options} {chunks}")


def test_sequential_sources_are_refused():
    x = da.from_array(_input(), chunks=(20, 3))
    spec = resolve({"format": "h", "flip": 1}, None, "double").spec
    with pytest.raises(ValueError, match="rng=<int seed>"):
        round_array(x, spec, MATLAB_STREAM)
    with pytest.raises(ValueError, match="rng=<int seed>"):
        Chop({"format": "h", "round": 5}, rng=np.random.default_rng(1))(x)


def test_distributed_local_cluster_of_processes():
    distributed = pytest.importorskip("distributed")
    try:
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, memory_limit="512MiB", silence_logs=40)
    except Exception as error:  # sandboxes without process spawning or sockets
        pytest.skip(f"no LocalCluster here: {error}")
    x = _input()
    spec = resolve({"format": "b", "round": 5, "flip": 1}, None, "double").spec
    try:
        with cluster, distributed.Client(cluster) as client:
            det = chop(da.from_array(x, chunks=(13, 6)), {"format": "h"}).compute(scheduler=client)
            rnd = round_array(da.from_array(x, chunks=(13, 6)), spec, _CounterSources(5))
            rnd = rnd.compute(scheduler=client)
            workers = len(client.scheduler_info()["workers"])
    except OSError as error:
        pytest.skip(f"LocalCluster could not run: {error}")
    assert workers == 2
    assert_bits_equal(det, chop(x.copy(), {"format": "h"}), "deterministic on the cluster")
    local = round_array(da.from_array(x, chunks=(50, 2)), spec, _CounterSources(5))
    assert_bits_equal(rnd, local.compute(scheduler="synchronous"), "same numbers on 2 processes")


@pytest.mark.parametrize("mode", [-1, 0, 7, 8])
def test_cpfloat_deterministic_codes_are_not_stochastic(mode):
    """CPFloat's codes -1, 0, 7 (round to odd) and 8 (no rounding) draw no numbers: a Dask array
    is rounded chunk by chunk as the NumPy engine rounds the whole (the reference, checked
    against the CPFloat corpus), with no generator asked for."""
    from pychop_compat.rounding import make_spec, round_to_format

    spec = make_spec("float8_e4m3fn", mode)
    assert not spec.stochastic and not spec.draws
    x = make_input(lookup_format("float8_e4m3fn"), "float64", seed=4)
    got = round_to_format(dask.array.from_array(x, chunks=(7, 5)), spec).compute()
    assert_bits_equal(got, round_to_format(x, spec), f"mode {mode}")
    assert make_spec("float8_e4m3fn", 5).stochastic and make_spec("float8_e4m3fn", 1, flip=1).draws


def test_masked_dask_arrays_keep_their_mask():
    # As NumPy's masked arrays: masked elements keep their values and mask (0.6.0 rounded them and
    # dropped the mask).  fp16 of 1/3 is NumPy's float16 cast.
    x = np.array([1 / 3, 2 / 3, 0.1, 5.0])
    mask = [False, True, False, True]
    d = da.ma.masked_array(da.from_array(x, chunks=2), mask=mask)
    for rounder in (lambda v: chop(v, "h"), Chop({"format": "h", "round": 5}, rng=3)):
        out = rounder(d).compute()
        assert isinstance(out, np.ma.MaskedArray) and np.ma.getmaskarray(out).tolist() == mask
        assert np.ma.getdata(out)[[1, 3]].tolist() == [2 / 3, 5.0]
    out = chop(d, "h").compute()
    assert np.ma.getdata(out)[[0, 2]].tolist() == np.float16(x[[0, 2]]).astype(np.float64).tolist()


def test_e8m0_of_float32_blocks_is_rounded_in_float64():
    # E8M0's smallest number 2^-127 lies below float32's normal range, so float32 input is rounded
    # in float64 on every path; Dask blocks skipped that step and gave 2^-126.  Oracle: ml_dtypes' cast.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([6.4e-40, 1e-42, 3e-39, 1.0, 0.3, -5.0], np.float32)
    want = x.astype(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    assert want[0] == 2.0 ** -127
    got = chop(da.from_array(x, chunks=2), {"format": "float8_e8m0fnu"}).compute()
    assert got.dtype == np.float32
    assert_bits_equal(got, want, "float32 E8M0 on Dask")


def test_cpu_engine_in_force_is_part_of_the_graph():
    # The engine setting in force at chop's call serves its blocks: two settings, two graphs
    # (0.6.0 named both the same, so a merged graph ran one engine for both).
    from pychop_compat.kernels.compiled import cpu_engine

    d = da.ones(4, chunks=2) / 3
    with cpu_engine("numpy"):
        y1 = chop(d, {"format": "h"})
    with cpu_engine("auto"):
        y2 = chop(d, {"format": "h"})
    assert y1.name != y2.name


@pytest.mark.parametrize("dtype", [">f8", ">f4", ">f2"])
def test_byte_swapped_dask_arrays_give_native_results(dtype):
    # As on NumPy: non-native byte order is accepted and the result is native (0.6.x raised
    # TypeError "not >f8").  Oracle: NumPy's float16 cast, chop's 'h' in round to nearest.
    x = (np.arange(-6.0, 6.0) / 7).astype(dtype)
    want = x.astype(np.float16).astype(np.dtype(dtype).newbyteorder("="))
    lazy = chop(da.from_array(x, chunks=5), {"format": "h"})
    assert lazy.dtype == want.dtype and lazy.dtype.isnative
    got = lazy.compute()
    assert got.dtype == want.dtype and got.dtype.isnative
    assert_bits_equal(got, want, dtype)
    if COUNTER_CHOP:  # the counter's numbers by position, as NumPy's on the native copy
        stochastic = Chop({"format": "h", "round": 5}, rng=3)(da.from_array(x, chunks=5)).compute()
        assert stochastic.dtype.isnative
        assert_bits_equal(stochastic, Chop({"format": "h", "round": 5}, rng=3)(x.astype(want.dtype)), dtype)
    xarray = pytest.importorskip("xarray")
    labelled = chop(xarray.DataArray(da.from_array(x, chunks=5), dims="i"), {"format": "h"})
    assert labelled.dtype == want.dtype
    assert_bits_equal(labelled.values, want, f"xarray over Dask {dtype}")
