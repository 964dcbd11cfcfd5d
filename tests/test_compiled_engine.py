"""The compiled CPU engine (Numba) and the counter-based numbers of ``Chop(rng=<int>)``.

The compiled engine runs the whole shared engine matrix and the MATLAB corpus
as the ``numba`` row of the ``engine`` fixture (conftest.py); here are its
specifics: many chunks and threads in chop.m's draw order, the fallbacks, the
lazy import.  The counter-based numbers are checked against their definition,
:func:`pychop_compat.random.counter.counter_uniform`, element by element.
"""

from __future__ import annotations

import math
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from engine_matrix import assert_bits_equal, make_input
from pychop_compat import Chop, chop, chop_at, rand, rng
from pychop_compat.kernels import compiled, numpy_fast
from pychop_compat.random.counter import (FLIP_BIT, FLIP_CHOICE, GOLDEN, MIX1, MIX2, ROUND, counter_uniform,
                                          mix64)
from pychop_compat.formats import custom_format, lookup_format
from pychop_compat.matlab.options import resolve
from pychop_compat.random.sources import RandomSources, counter_sources
from pychop_compat.rules.chop import chop_vector

needs_numba = pytest.mark.skipif(not compiled.available(), reason="numba not installed")
CPU_ENGINES = ["numpy", pytest.param("numba", marks=needs_numba)]


def _x(fmt, dtype, seed, n=600):
    return make_input(lookup_format(fmt) if isinstance(fmt, str) else custom_format(*fmt), dtype, seed, n)


# --- the counter-based numbers ------------------------------------------------------------------


def _expected_counter(x: np.ndarray, options: dict, seed: int, offset: int) -> np.ndarray:
    """chop of each element on its own by the reference algorithm, fed the element's numbers
    from the definition: u_s(offset + i) with key_s = mix(seed + s G), i the row-major index."""
    spec = resolve(options, None, "single" if x.dtype == np.float32 else "double").spec
    keys = {s: mix64(seed + s * GOLDEN) for s in (ROUND, FLIP_CHOICE, FLIP_BIT)}
    flat = x.reshape(-1)
    out = np.empty_like(flat)
    for i, value in enumerate(flat):
        j = offset + i
        u = {s: counter_uniform(keys[s], j) for s in keys}
        sources = RandomSources(
            lambda n, u=u: np.full(n, u[ROUND]),
            lambda n, u=u: np.full(n, u[FLIP_CHOICE]),
            lambda imax, n, u=u: np.full(n, 1 + int(np.floor(imax * u[FLIP_BIT])), np.int64))
        out[i] = chop_vector(np.array([value]), spec, sources)[0]
        if spec.round >= 5 and value == 0:
            out[i] = 0.0  # each element draws its own number: a zero's block drew, so +0 (chop.m's mysign)
    return out.reshape(x.shape)


def _counter_for_word(key: int, word: int) -> int:
    """The counter j with mix(key + j G) == word: SplitMix64's finaliser inverted step by step (an
    xor-shift by s >= 22 is its own inverse after two more shifts; odd multipliers invert mod 2**64)."""
    mask = (1 << 64) - 1

    def unshift(z, s):
        return z ^ (z >> s) ^ (z >> 2 * s) ^ (z >> 3 * s)

    z = unshift(word, 31)
    z = unshift(z * pow(MIX2, -1, 1 << 64) & mask, 27)
    z = unshift(z * pow(MIX1, -1, 1 << 64) & mask, 30)
    return (z - key) * pow(GOLDEN, -1, 1 << 64) & mask


@needs_numba
def test_compiled_counter_numbers_at_their_extremes():
    """The compiled kernels make u = ((w >> 12) + 1/2) 2^-52 from the hash's word w through a double's
    fraction bits; at the words that give the smallest and largest u, and around powers of two, it is
    still the definition's number (exact rationals)."""
    from fractions import Fraction

    from pychop_compat.kernels import numba_kernels

    key = mix64(7)
    words = [0, (1 << 12) - 1, 1 << 12, (1 << 64) - 1, ((1 << 52) - 1) << 12, 1 << 63, (1 << 63) - 1, 3 << 60]
    for word in words:
        j = _counter_for_word(key, word)
        assert mix64(key + j * GOLDEN) == word
        want = Fraction(2 * (word >> 12) + 1, 1 << 53)
        assert Fraction(counter_uniform(key, j)) == want
        assert Fraction(numba_kernels.counter_uniform(np.uint64(key), np.uint64(j))) == want, hex(word)


@pytest.mark.parametrize("engine", CPU_ENGINES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("options", [
    {"format": "h", "round": 5}, {"format": "b", "round": 6}, {"format": "q43", "round": 5, "subnormal": 0},
    {"format": "c", "params": [5, 3], "round": 5, "flip": 1, "p": 0.4},
    {"format": "h", "round": 1, "flip": 1, "p": 0.7}, {"format": "b", "round": 6, "flip": 1, "explim": 0}])
def test_counter_numbers_follow_their_definition(engine, dtype, options):
    x = _x(options["format"] if options["format"] != "c" else (5, 3), dtype, seed=5, n=150)
    ch = Chop(options, rng=2024)
    with compiled.cpu_engine(engine):
        first = ch(x)
        second = ch(x[:3])  # the second call continues at counter x.size
    assert_bits_equal(first, _expected_counter(x, options, 2024, 0), f"{engine} {options}")
    assert_bits_equal(second, _expected_counter(x[:3], options, 2024, x.size), f"{engine} second call")


@pytest.mark.parametrize("engine", CPU_ENGINES)
def test_counter_numbers_do_not_depend_on_layout_threads_or_chunks(engine, monkeypatch):
    """Row-major element order whatever the memory order; no effect of threads or chunk size."""
    x = np.asfortranarray(_x("b", "float64", seed=9, n=3000))
    options = {"format": "b", "round": 5, "flip": 1, "p": 0.2}
    with compiled.cpu_engine("numpy"):
        expected = Chop(options, rng=77)(np.ascontiguousarray(x))
    monkeypatch.setattr(compiled, "SERIAL_BELOW", 16)
    monkeypatch.setattr(compiled, "CHUNK", 64)
    monkeypatch.setattr(numpy_fast, "_FLIP_CHUNK", 100)
    with compiled.cpu_engine(engine):
        assert_bits_equal(Chop(options, rng=77)(x), expected, "fortran order, small chunks")
        # One call on the whole array = two calls on its rows' halves (the counter carries on).
        ch = Chop(options, rng=77)
        flat = np.ascontiguousarray(x).reshape(-1)
        half = flat.size // 2
        assert_bits_equal(np.concatenate([ch(flat[:half]), ch(flat[half:])]), expected.reshape(-1), "split")
    if engine == "numba":
        import numba

        threads = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            with compiled.cpu_engine("numba"):
                assert_bits_equal(Chop(options, rng=77)(x), expected, "one thread")
        finally:
            numba.set_num_threads(threads)


def test_counter_chop_pickles_with_its_counter():
    x = np.random.default_rng(1).standard_normal(500)
    ch = Chop(format="h", round=5, flip=1, rng=12)
    ch(x)
    copy = pickle.loads(pickle.dumps(ch))
    assert_bits_equal(copy(x), ch(x), "after a round trip")
    assert_bits_equal(Chop(format="h", round=5, rng=12)(1 / 3 * np.ones(1)),
                      np.array([Chop(format="h", round=5, rng=12)(1 / 3)]), "scalar = array of one")


def test_counter_does_not_touch_matlab_stream():
    rng(5)
    Chop(format="h", round=6, flip=1, rng=3)(np.linspace(-2, 2, 100))
    after = rand(3, 1)
    rng(5)
    assert np.array_equal(after, rand(3, 1))


def test_counter_with_randfunc_follows_chop_order():
    """A randfunc supplies the stochastic draws (chop.m's calls); the flips then come from the
    counter generator call by call: reproducible, and the randfunc is called as chop.m calls it."""
    calls = []

    def randfunc(n):
        calls.append(n)
        return np.full(n, 0.25)

    x = np.array([1 + 2**-12, 3.0, 1 + 2**-13])
    a = Chop(format="h", round=5, flip=1, randfunc=randfunc, rng=8)(x)
    b = Chop(format="h", round=5, flip=1, randfunc=randfunc, rng=8)(x)
    assert_bits_equal(a, b, "reproducible")
    assert calls == [2, 2]


# --- the compiled engine ---------------------------------------------------------------------------


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("options", [
    {"format": "h", "round": 5}, {"format": "q43", "round": 6, "subnormal": 1},
    {"format": "c", "params": [3, 1], "round": 5}, {"format": "b", "round": 5, "flip": 1, "p": 0.3},
    {"format": "h", "round": 2, "flip": 1}, {"format": "c", "params": [10, 5000], "round": 6, "flip": 1}])
def test_chop_order_over_many_chunks(monkeypatch, dtype, options):
    """chop.m's draw order across many chunks and threads: equal to the NumPy engine, and the
    MATLAB stream left in the same state."""
    fmt = options["format"] if options["format"] != "c" else tuple(options["params"])
    x = np.tile(_x(fmt, dtype, seed=3), (4, 1))
    monkeypatch.setattr(compiled, "SERIAL_BELOW", 64)
    monkeypatch.setattr(compiled, "CHUNK", 37)
    with compiled.cpu_engine("numpy"):
        rng(1)
        expected, after = chop(x, options), rand(2, 1)
    with compiled.cpu_engine("numba"):
        rng(1)
        actual = chop(x, options)
    assert_bits_equal(actual, expected, str(options))
    assert np.array_equal(rand(2, 1), after)


def _every_binade(fmt, dtype) -> np.ndarray:
    """Grid points of ``fmt`` at both ends of every binade from below its smallest subnormal to
    past its overflow threshold, the midpoints between neighbours, and a random value in each
    gap; both signs."""
    gen = np.random.default_rng(11)
    lo = max(fmt.emins - 2, -1074 if dtype == np.float64 else -149)
    hi = min(fmt.emax + 1, 1023 if dtype == np.float64 else 127)
    points = []
    for e in range(lo, hi + 1):
        start = math.ldexp(1.0, e)
        # chop.m's grid (2^emins in its subnormal block) and the t-bit grid of the binade
        for q in {max(e, fmt.emin) - fmt.t + 1, e - fmt.t + 1}:
            quantum = math.ldexp(1.0, max(q, lo))
            steps = min(int(start / quantum), 64)
            m = np.arange(steps, dtype=np.float64)
            for j in (m, m + 0.5, m + gen.random(steps)):
                points.append(start + j * quantum)
                points.append(2 * start - (j + 1) * quantum)
    x = np.concatenate(points)
    x = x[(x > 0) & np.isfinite(x.astype(dtype))].astype(dtype)
    return np.concatenate([x, -x])


@needs_numba
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fmt", ["h", "b", "q43", "q52", (5, 7), (2, 3), (1, 4), (24, 20), (53, 1000)])
def test_deterministic_loop_in_every_binade(monkeypatch, dtype, fmt):
    """The branch-free loop (which takes in chop.m's subnormal block) against the NumPy engine,
    for every mode, subnormal and explim, in every binade; fp16 to nearest against the hardware
    cast too.  Large arrays (the parallel loop) with a few special values scattered."""
    f = lookup_format(fmt) if isinstance(fmt, str) else custom_format(*fmt)
    if dtype == np.float32 and (f.t > 24 or f.emax > 127):
        pytest.skip("not a format of single-precision input")
    x = _every_binade(f, dtype)
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)])
    x = np.tile(np.random.default_rng(3).permutation(x), max(1, (1 << 17) // x.size + 1))
    options = {"format": fmt} if isinstance(fmt, str) else {"format": "c", "params": list(fmt)}
    for mode in (1, 2, 3, 4):
        for subnormal in (0, 1):
            for explim in (0, 1):
                o = dict(options, round=mode, subnormal=subnormal, explim=explim)
                try:
                    resolve(o, None, "single" if dtype == np.float32 else "double").spec
                except ValueError:
                    continue  # (chop.m limits the precision of custom formats for single input)
                with compiled.cpu_engine("numpy"):
                    expected = chop(x, o)
                with compiled.cpu_engine("numba"):
                    actual = chop(x, o)
                    with monkeypatch.context() as m:  # the parallel loop, chunks not whole sub-blocks
                        m.setattr(compiled, "SERIAL_BELOW", 4096)
                        m.setattr(compiled, "CHUNK", 1000)
                        assert_bits_equal(chop(x, o), expected, f"{o} parallel")
                assert_bits_equal(actual, expected, str(o))
                if fmt == "h" and mode == 1 and subnormal == 1 and explim == 1:
                    # (+ 0.0: chop flushes to +0, as chop.m does; and chop.m rounds x just above
                    # xmins / 2 to t bits first, which can give the tie xmins / 2, then 0.)
                    half = f.xmins / 2
                    same = ~((np.abs(x) > half) & (np.abs(x) <= half * (1 + 2.0 ** -f.t)))
                    with np.errstate(over="ignore"):
                        assert_bits_equal(actual[same] + 0.0, x[same].astype(np.float16).astype(dtype) + 0.0,
                                          "float16 cast")


@needs_numba
@pytest.mark.parametrize("seed", [0, 1, 2**32 - 1])
def test_compiled_mt19937_is_the_stream(seed):
    """The kernels' mt19937ar gives rand's numbers (NumPy's RandomState is MATLAB's generator,
    checked against MathWorks' outputs in test_matlab_random) from any position, odd ones and
    the last word of a block included, and leaves the same state."""
    kernels = compiled.kernels()
    reference = np.random.RandomState(seed)
    for skip_words, n in ((0, 1), (1, 311), (0, 312), (621, 5), (623, 1), (3, 2000), (0, 0)):
        reference.randint(0, 2**32, size=skip_words, dtype=np.uint32)  # one word each
        state = reference.get_state(legacy=False)["state"]
        key, pos = state["key"].copy(), np.array([state["pos"]], np.intc)
        ours = kernels.mt_uniform(key, pos, n)
        assert np.array_equal(ours, reference.random_sample(n)), (skip_words, n)
        after = reference.get_state(legacy=False)["state"]
        assert np.array_equal(key, after["key"]) and pos[0] == after["pos"]


@needs_numba
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matlab_stream_drawn_in_the_kernel(monkeypatch, shared, dtype):
    """Stochastic rounding on MATLAB's stream with the numbers drawn inside the kernel: the NumPy
    engine's bits and the stream left in the same state, with subnormal blocks, signed zeros,
    Inf and NaN among regular sub-blocks; on the generator's own memory and on a copy."""
    from pychop_compat.random import matlab_stream as matlab_random

    if not shared:
        monkeypatch.setattr(matlab_random, "_state_view", False)
    gen = np.random.default_rng(4)
    x = gen.standard_normal((700, 30)) * np.exp2(gen.integers(-28, 16, (700, 30)))
    x[::97, ::5] = gen.choice([0.0, -0.0, np.inf, -np.inf, np.nan, 3e-6, -2e-7], x[::97, ::5].shape)
    x = x.astype(dtype)
    for options in ({"format": "h", "round": 5}, {"format": "q43", "round": 6}, {"format": "h", "round": 6, "explim": 0},
                    {"format": "c", "params": [4, 3], "round": 5, "subnormal": 0}, {"format": "b", "round": 5},
                    {"format": "c", "params": [3, 1], "round": 5}):  # (emin = 0: zero is in the subnormal block)
        for data in (x, np.full(600, -0.0, dtype), np.full(600, 2.0**-20, dtype)):
            with compiled.cpu_engine("numpy"):
                rng(7)
                expected, after = chop(data, options), rand(3, 1)
            with compiled.cpu_engine("numba"):
                rng(7)
                actual = chop(data, options)
            assert_bits_equal(actual, expected, f"{options} {data[:1]}")
            assert np.array_equal(rand(3, 1), after), options


@needs_numba
def test_deterministic_large_and_strided_arrays():
    gen = np.random.default_rng(2)
    x = gen.standard_normal((300, 700)) * np.exp2(gen.integers(-30, 30, (300, 700)))
    x[::7, ::3] = gen.choice([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, 6e-8, 65520.0], x[::7, ::3].shape)
    for view in (x, x.T, x[::2, 1::3], x.astype(np.float32)):
        for options in ({"format": "h"}, {"format": "b", "round": 3}, {"format": "q52", "round": 4, "subnormal": 0},
                        {"format": "c", "params": [5, 7], "round": 2}, {"format": "h", "explim": 0}):
            with compiled.cpu_engine("numpy"):
                expected = chop(view, options)
            with compiled.cpu_engine("numba"):
                actual = chop(view, options)
            assert_bits_equal(actual, expected, str(options))
            assert actual.flags.c_contiguous == expected.flags.c_contiguous



@needs_numba
@pytest.mark.parametrize("mode", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("emax", [5, 100])
def test_single_input_with_a_stored_precision_above_24(mode, emax):
    # A double call stores t up to 25 (mode 1) or 30, which a single call then uses: chop.m's
    # subnormal block has the grid 2^(emin + 1 - t) with that t, not with t capped at float32's 24
    # (Octave, chop.m 906c31e: chop(1.0, struct('format','c','params',[25 5])) then
    # chop(single([1e-5 3e-8 0.00441033])) gives 0.0044103302 for the third).
    gen = np.random.default_rng(emax + mode)
    x = np.float32(np.exp2(gen.uniform(-150, 8, 4096)) * gen.choice([-1.0, 1.0], 4096))
    x[:3] = [1e-5, 3e-8, 0.00441033]
    for t in range(24, 31 if mode > 1 else 26):
        options = {"format": "c", "params": [t, emax], "round": mode}
        outs = []
        for engine in ("numpy", "numba"):
            with compiled.cpu_engine(engine):
                chop(1.0, options)
                rng(5)
                today = chop(x)
                dated = chop_at("2022-06-14")
                dated(1.0, options)
                rng(5)
                outs.append((today, dated(x)))
        for expected, actual in zip(outs[0], outs[1]):
            assert_bits_equal(actual, expected, f"t = {t} {options}")
        if (t, emax, mode) == (25, 5, 1):
            assert outs[1][0][2] == np.float32(0.0044103302)

def test_engine_setting_and_fallbacks(monkeypatch):
    with pytest.raises(ValueError, match="cpu engine must be one of"):
        compiled.set_cpu_engine("fortran")
    spec = resolve({"format": "h"}, None).spec
    x = np.linspace(0, 1, 10)
    assert compiled.handles(x, spec)
    assert not compiled.handles(x[:1], spec)  # one element: the scalar path
    assert not compiled.handles(x.astype(">f8"), spec)

    class Extended:  # a spec beyond chop.m's semantics (CONTRACTS.md item 2)
        extended = True
        flips = False

    assert not compiled.handles(x, Extended())
    monkeypatch.setattr(compiled, "_available", False)
    assert not compiled.wanted()  # 'auto' without numba: the NumPy engine
    with pytest.raises(ImportError, match="numba"):
        compiled.set_cpu_engine("numba")


def test_import_stays_light_and_numba_is_imported_on_use():
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import pychop_compat
        print('numba' in sys.modules)
        pychop_compat.chop(1/3, {'format': 'b'})
        print('numba' in sys.modules)
        pychop_compat.chop(np.linspace(0, 1, 100), {'format': 'b'})  # 'auto': not yet (tests/test_first_call.py)
        print('numba' in sys.modules)
        from pychop_compat.kernels import compiled
        if compiled.available():
            with compiled.cpu_engine('numba'):
                pychop_compat.chop(np.linspace(0, 1, 100), {'format': 'b'})
            print('numba' in sys.modules)
        else:
            print(True)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False", "False", "True"]


@pytest.mark.parametrize("options", [{"format": "h", "round": 5}, {"format": "b", "round": 6, "flip": 1, "p": 0.3},
                                     {"format": "q43", "round": 1, "flip": 1, "subnormal": 0}])
def test_counter_numbers_on_torch_device_paths(options):
    """Chop(rng=<int>) on a GPU takes the same numbers (the device paths, run on CPU tensors)."""
    torch = pytest.importorskip("torch")
    from pychop_compat.engines.dispatch import device_paths_on_cpu

    x = _x(options["format"], "float64", seed=6, n=400)
    expected = Chop(options, rng=31)(x)
    with device_paths_on_cpu():
        actual = Chop(options, rng=31)(torch.from_numpy(x.copy())).numpy()
    assert_bits_equal(actual, expected, str(options))



@needs_numba
@pytest.mark.skipif(sys.platform == "win32", reason="the lock is POSIX flock; elsewhere Numba's own cache")
def test_a_kernel_cache_saves_only_under_the_directory_lock(tmp_path, monkeypatch):
    """Numba numbers a new cache file from the index it read, so two processes compiling one kernel
    at once could write two signatures under one name (a later load then unboxes the wrong code).
    The package's kernels save under a lock of the cache directory: while someone else holds it, a
    compilation finishes but its save waits, and the index appears only once the lock is free."""
    import fcntl
    import importlib.util
    import threading
    from pathlib import Path

    import numba

    from pychop_compat.kernels import numba_kernels

    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "locked_cache_probe.py"
    source.write_text("import numba\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2.0 * x\n")
    spec = importlib.util.spec_from_file_location("locked_cache_probe", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    numba_kernels.lock_kernel_caches(vars(module))
    directory = Path(module.twice._cache.cache_path)  # (Numba's cache object of the dispatcher)
    assert directory.is_relative_to(tmp_path)
    directory.mkdir(parents=True, exist_ok=True)
    results = []
    with open(directory / "pychop_compat.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        worker = threading.Thread(target=lambda: results.append(module.twice(1.5)))
        worker.start()
        for _ in range(600):  # the compilation itself takes no lock: it finishes
            if module.twice.overloads:
                break
            worker.join(0.1)
        assert module.twice.overloads, "the compilation did not finish in 60 s"
        worker.join(0.5)
        assert worker.is_alive(), "the save went ahead while another holder had the lock"
        assert not list(directory.glob("*.nbi")), "an index was written under someone else's lock"
        fcntl.flock(held, fcntl.LOCK_UN)
    worker.join(60)
    assert results == [3.0]
    assert len(list(directory.glob("locked_cache_probe.twice-*.nbi"))) == 1
