"""The small-call path (issue 29, item 1): what chop, Chop and cpfloat find once and reuse.

Options resolved once per dict content, the router's choice once per spec, sources, dtype and
engine setting, CPFloat's state and spec once per options: each cache must give what a call
without it gives, after the caller changes its dict in place, with per-thread persistent
options, under another engine setting, on every layout.
"""

from __future__ import annotations

import json
import multiprocessing
import operator
import os
import pickle
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from pychop_compat import Chop, Options, chop, chop_options, clear_chop, clear_cpfloat, cpfloat, explain, rng
from pychop_compat.engines import dispatch
from pychop_compat.kernels import compiled, numpy_fast
from pychop_compat.matlab.options import atomic_values, items_snapshot, resolve
from pychop_compat.random.sources import MATLAB_STREAM, counter_sources
from bits import assert_bits_equal

THIRD = np.full(6, 1 / 3)
THIRD_FP16 = 0.333251953125      # 1.0101010101b * 2^-2, nearest
THIRD_FP16_UP = 0.33349609375    # one step of 2^-12 above
THIRD_BF16_NEAREST = 0.333984375  # 1.0101011b * 2^-2
THIRD_BF16_DOWN = 0.33203125


@pytest.fixture(autouse=True)
def _fresh_state():
    clear_chop()
    clear_cpfloat()
    yield
    clear_chop()
    clear_cpfloat()


def _fresh(options: dict) -> np.ndarray:
    """chop(THIRD, options) resolved without the dict caches (an Options object is not a dict)."""
    return chop(THIRD, Options(**options))


# --- chop's options changed in place --------------------------------------------------------------

def test_a_dict_changed_in_place_is_resolved_again():
    options = {"format": "h"}
    assert np.all(chop(THIRD, options) == THIRD_FP16)
    options["format"] = "b"
    assert np.all(chop(THIRD, options) == THIRD_BF16_NEAREST)
    options["round"] = 3
    assert np.all(chop(THIRD, options) == THIRD_BF16_DOWN)
    assert chop_options().round == 3
    del options["round"]
    options["format"] = "h"
    options["round"] = 2
    assert np.all(chop(THIRD, options) == THIRD_FP16_UP)
    options["round"] = 2.0  # equal to 2, and the same option value
    assert np.all(chop(THIRD, options) == THIRD_FP16_UP)
    for bad in (True, 2 + 0j, "2"):  # equal (or not) to 2, but not an option value
        options["round"] = bad
        with pytest.raises(ValueError, match=r"options\.round"):
            chop(THIRD, options)
    assert chop_options().round == 2  # a call that raises stores nothing


def test_values_of_other_types_are_told_apart():
    chop(THIRD, {"subnormal": 1})
    with pytest.raises(ValueError, match=r"options\.subnormal"):
        chop(THIRD, {"subnormal": 1 + 0j})  # == 1, same hash
    assert np.all(chop(THIRD, {"subnormal": np.int8(1)}) == THIRD_FP16)


def test_params_changed_in_place_are_read_again():
    options = {"format": "c", "params": [5, 3]}
    first = chop(THIRD, options)
    options["params"][0] = 8  # the same list object, another precision
    assert_bits_equal(chop(THIRD, options), _fresh({"format": "c", "params": [8, 3]}), "t = 8")
    assert not np.array_equal(first, chop(THIRD, options))
    options["params"] = (5, 3)
    assert_bits_equal(chop(THIRD, options), first, "a tuple")
    with pytest.raises(ValueError, match=r"options\.params"):
        chop(THIRD, {"format": "c", "params": (5, True)})  # == (5, 1): not the same value


def test_a_custom_format_without_params_takes_the_stored_ones_each_call():
    options = {"format": "c"}
    chop(None, {"format": "c", "params": [5, 3]})
    five = chop(THIRD, options)
    chop(None, {"format": "c", "params": [8, 3]})
    eight = chop(THIRD, options)
    assert_bits_equal(five, _fresh({"format": "c", "params": [5, 3]}), "t = 5")
    assert_bits_equal(eight, _fresh({"format": "c", "params": [8, 3]}), "t = 8")


def test_a_randfunc_is_the_callers_each_call():
    options = {"format": "h", "round": 5, "randfunc": lambda n: np.zeros(n)}
    up = chop(THIRD, options)  # u = 0 < the distance: always away from zero
    options["randfunc"] = lambda n: np.full(n, 0.999)
    down = chop(THIRD, options)
    assert np.all(up == THIRD_FP16_UP) and np.all(down == THIRD_FP16)


def test_items_snapshot_and_atomic_values():
    assert items_snapshot({"round": 1}) != items_snapshot({"round": True})
    assert hash(items_snapshot({"format": "h", "p": 0.5}))
    with pytest.raises(TypeError):
        hash(items_snapshot({"params": [5, 3]}))
    assert atomic_values({"format": "h", "round": np.int64(1), "p": np.float32(0.5), "randfunc": print,
                          "explim": None})
    for value in ((5, 3), [5, 3], np.array([5, 3]), 1 + 0j, fractions_half()):
        assert not atomic_values({"params": value})


def fractions_half():
    import fractions

    return fractions.Fraction(1, 2)


def test_the_resolved_settings_are_one_object_for_one_content():
    first = resolve({"format": "b", "round": 2}, None)
    assert resolve({"format": "b", "round": 2}, None) is first  # another dict, the same content
    assert resolve({"format": "b", "round": 2}, None, "single") is not first


# --- per-thread persistent options ----------------------------------------------------------------

def _in_thread(func):
    box = []
    worker = threading.Thread(target=lambda: box.append(func()))
    worker.start()
    worker.join()
    return box[0]


def test_one_dict_in_threads_with_their_own_stored_params():
    """Threads pass the same dict object; each custom format takes its own thread's params."""
    options = {"format": "c"}
    barrier = threading.Barrier(2)

    def worker(params):
        chop(None, {"format": "c", "params": params})
        barrier.wait()
        return [chop(THIRD, options) for _ in range(50)]

    results = {}
    threads = [threading.Thread(target=lambda p=p: results.__setitem__(p[0], worker(p))) for p in ([5, 3], [8, 3])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for t in (5, 8):
        expected = _fresh({"format": "c", "params": [t, 3]})
        for out in results[t]:
            assert_bits_equal(out, expected, f"t = {t}")


def test_stored_options_are_read_per_thread_on_every_call():
    chop(None, {"format": "h"})
    assert np.all(_in_thread(lambda: chop(THIRD)) == THIRD_FP16)  # the main thread's
    stored_b = threading.Event()
    main_changed = threading.Event()
    seen = {}

    def worker():
        chop(None, {"format": "b"})
        stored_b.set()
        main_changed.wait(10)
        seen["worker"] = chop(THIRD)  # its own, not the main thread's later ones

    thread = threading.Thread(target=worker)
    thread.start()
    stored_b.wait(10)
    assert np.all(chop(THIRD) == THIRD_FP16)
    chop(None, {"format": "b", "round": 3})
    main_changed.set()
    thread.join()
    assert np.all(seen["worker"] == THIRD_BF16_NEAREST)
    assert np.all(chop(THIRD) == THIRD_BF16_DOWN)
    assert np.all(_in_thread(lambda: chop(THIRD)) == THIRD_BF16_DOWN)  # reads the main thread's now


def _child_stores_and_a_thread_reads(queue):
    chop(None, {"format": "b"})  # this thread is the child's main thread
    box = []
    worker = threading.Thread(target=lambda: box.append(chop(THIRD)))
    worker.start()
    worker.join()
    queue.put(float(box[0][0]))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_child_forked_from_a_worker_thread_knows_its_main_thread():
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (fork with JAX's threads loaded)
        process = _in_thread(lambda: _started(context.Process(target=_child_stores_and_a_thread_reads,
                                                              args=(queue,))))
    assert queue.get(timeout=60) == THIRD_BF16_NEAREST
    process.join(60)
    assert process.exitcode == 0


def _started(process):
    process.start()
    return process


# --- the router's choice, found once ------------------------------------------------------------------

SPECS = [{"format": "h"}, {"format": "b", "round": 2}, {"format": "q43", "round": 4, "subnormal": 0},
         {"format": "c", "params": [5, 4], "explim": 0}, {"format": "float8_e4m3fn", "rules": "chop"},
         {"format": "bf16"}, {"format": "float8_e5m2"}, {"format": "s", "round": 3}]


def _layouts(dtype):
    base = np.random.default_rng(4).standard_normal((9, 8)).astype(dtype) * 300
    base[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    base[1, :3] = [1e-40, -6e-8, 70000]
    readonly = base.copy()
    readonly.flags.writeable = False
    return {"1-D": base.reshape(-1).copy(), "C": base, "F": np.asfortranarray(base), "strided": base[:, ::2],
            "readonly": readonly, "column": base[:, 3]}


@pytest.mark.parametrize("engine", ["auto", "numpy"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("options", SPECS, ids=repr)
def test_planned_calls_give_the_specifications_bits(options, dtype, engine):
    spec = resolve(options, None, "single" if dtype is np.float32 else "double").spec
    with compiled.cpu_engine(engine):
        for name, x in _layouts(dtype).items():
            for _ in range(2):  # the plan found, then used
                out = dispatch.round_array(x, spec, MATLAB_STREAM)
                assert out.dtype == x.dtype and out.shape == x.shape and out.flags.writeable
                assert_bits_equal(out, dispatch.round_array(x, spec, MATLAB_STREAM, kernel="reference"), name)


def test_a_plan_follows_the_engine_setting(monkeypatch):
    calls = []
    original = numpy_fast.chop_array
    monkeypatch.setattr(numpy_fast, "chop_array", lambda *a, **k: calls.append(1) or original(*a, **k))
    x = np.linspace(-3, 3, 50)
    half = Chop(format="h")
    auto = half(x)
    with compiled.cpu_engine("numpy"):
        assert_bits_equal(half(x), auto, "numpy engine")
    assert_bits_equal(half(x), auto, "auto again")
    # Under 'auto' the compiled engine rounds where Numba is installed; 'numpy' always the NumPy one.
    assert len(calls) == (1 if compiled.available() else 3)


def test_stochastic_plans_keep_the_streams_order():
    spec = resolve({"format": "h", "round": 5, "flip": 1, "p": 0.3}, None).spec
    x = np.random.default_rng(5).standard_normal((7, 6))
    for engine in ("auto", "numpy"):
        with compiled.cpu_engine(engine):
            rng(3)
            planned = [dispatch.round_array(x, spec, MATLAB_STREAM) for _ in range(3)]
            rng(3)
            general = [dispatch.round_array(x, spec, MATLAB_STREAM, kernel="numpy") for _ in range(3)]
        for a, b in zip(planned, general):
            assert_bits_equal(a, b, engine)
    sources = counter_sources(11)
    again = counter_sources(11)
    for _ in range(3):
        assert_bits_equal(dispatch.round_array(x, spec, sources),
                          dispatch.round_array(x, spec, again, kernel="numpy"), "counter")


# A new process: the plans below are made before the compiled kernels load (the session has loaded them).
_PLANNED_BEFORE_THE_LOAD = """
import json, sys
import numpy as np
import pychop_compat as pc
from pychop_compat.engines import dispatch
from pychop_compat.kernels import compiled, numpy_fast
x = np.linspace(-3, 3, 100)
opts = {'format': 'h'}
f = pc.Chop(format='h')
f(x), pc.chop(x, opts)  # planned while the kernels wait to load: the NumPy engine
LOAD
ran = []
original = numpy_fast.chop_array
numpy_fast.chop_array = lambda *a, **k: ran.append(1) or original(*a, **k)  # the NumPy engine, spied on
for _ in range(50):
    f(x), pc.chop(x, opts)
state = (dispatch._load_due, dispatch._spent_waiting, dispatch._plans_forgotten)
pc.explain(x, opts)
print(json.dumps({'loaded': compiled.loaded(), 'numpy calls': len(ran),
                  'explain changed the routing state': state != (dispatch._load_due, dispatch._spent_waiting,
                                                                 dispatch._plans_forgotten)}))
"""


@pytest.mark.skipif(not compiled.available(), reason="numba not installed")
@pytest.mark.parametrize("load", ["compiled.warm_up()", "with compiled.cpu_engine('numba'):\n    pc.chop(x, opts)"],
                         ids=["warm_up", "cpu_engine"])
def test_plans_made_before_an_explicit_load_give_way_to_the_compiled_kernels(load):
    # docs/engines.rst: "cpu_engine('numba'), PYCHOP_COMPAT_CPU_ENGINE=numba and warm_up() load them at once,
    # and 'auto' then uses them too" -- the small calls planned before the load included; and explain() is
    # pure (route()'s docstring): it changes nothing the router reads.
    root = Path(__file__).resolve().parents[1]
    environment = {key: value for key, value in os.environ.items() if key != "PYCHOP_COMPAT_CPU_ENGINE"}
    done = subprocess.run([sys.executable, "-c", _PLANNED_BEFORE_THE_LOAD.replace("LOAD", load)],
                          capture_output=True, text=True, env={**environment, "PYTHONPATH": str(root)},
                          timeout=600, cwd=root)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "loaded": True, "numpy calls": 0, "explain changed the routing state": False}


def test_a_chop_pickles_after_its_calls():
    for ch in (Chop(format="b", round=5, rng=7), Chop(format="h")):
        ch(THIRD)
        copy = pickle.loads(pickle.dumps(ch))
        assert_bits_equal(copy(THIRD), ch(THIRD), repr(ch))
        assert_bits_equal(copy(THIRD.astype(np.float32)), ch(THIRD.astype(np.float32)), "single")


# --- cpfloat ---------------------------------------------------------------------------------------

def test_cpfloat_dict_changed_in_place():
    options = {"format": "h"}
    assert np.all(cpfloat(THIRD, options) == THIRD_FP16)
    options["round"] = 2
    assert np.all(cpfloat(THIRD, options) == THIRD_FP16_UP)
    options["format"] = "bfloat16"
    del options["round"]  # left out: kept from the previous call
    assert np.all(cpfloat(THIRD, options) == 0.333984375)
    assert cpfloat().round == 2
    options["round"] = 3
    assert np.all(cpfloat(THIRD, options) == THIRD_BF16_DOWN)


def test_cpfloat_fields_left_out_keep_the_previous_calls_values():
    a = {"format": "h", "round": 2}
    b = {"format": "h"}
    for _ in range(2):
        assert np.all(cpfloat(THIRD, a) == THIRD_FP16_UP)
        assert np.all(cpfloat(THIRD, b) == THIRD_FP16_UP)  # round = 2 kept
    clear_cpfloat()
    assert np.all(cpfloat(THIRD, b) == THIRD_FP16)
    assert cpfloat().round == 1


def test_cpfloat_warns_about_ignored_params_on_every_call():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            cpfloat(THIRD, {"format": "h", "params": None})
    assert sum("ignoredparams" in str(w.message) for w in caught) == 3


def test_cpfloat_one_spec_object_for_repeated_options(monkeypatch):
    seen = []
    original = dispatch.PreparedRounding.__call__  # (cpfloat's route to round_array)

    def spy(self, x):
        seen.append(self.spec)
        return original(self, x)

    monkeypatch.setattr(dispatch.PreparedRounding, "__call__", spy)
    for _ in range(3):
        cpfloat(THIRD, {"format": "binary16"})
    cpfloat(THIRD, {"format": "binary16", "round": 4})
    assert seen[0] is seen[1] is seen[2] and seen[3] is not seen[0]
    assert seen[3].round == 4 and seen[0].round == 1


def _values_near_every_rule(fmt, n, seed):
    """n values of fmt's scale with zeros, infinities, NaN, values above xmax and a third on
    chop's subnormal block (which draws after the normal block)."""
    generator = np.random.default_rng(seed)
    x = generator.standard_normal(n) * np.exp2(generator.integers(-8, 8, n))
    pick = generator.random(n)
    x[pick < 0.35] = fmt.xmins * generator.uniform(-60, 60, int((pick < 0.35).sum()))  # (between grid points)
    x[(pick > 0.35) & (pick < 0.4)] = np.inf
    x[(pick > 0.4) & (pick < 0.42)] = np.nan
    x[(pick > 0.42) & (pick < 0.47)] = fmt.xmax * 1.01
    return x


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["h", "fp8-e5m2"])
def test_the_few_element_stream_loop_draws_as_the_numpy_engine(name, dtype):
    """The compiled loop of small calls with MATLAB's stream (few elements: counted, then the
    normal block, then the subnormal block, each number drawn as it comes) on both sides of its
    size limit, from positions of the stream's state next to a twist (an odd one: a double
    across it): the NumPy engine's bits, and the stream left where the NumPy engine leaves it."""
    from pychop_compat.random.matlab_stream import RngSettings, stream_uniform

    x_class = "single" if dtype is np.float32 else "double"
    rng(3)
    stream_uniform(200)  # (any draws: a state to copy)
    base = rng().State.copy()
    for mode in (5, 6):
        spec = resolve({"format": name, "round": mode}, None, x_class).spec
        for n in (2, 10, 255, 256, 257, 700):
            x = _values_near_every_rule(spec.fmt, n, n).astype(dtype)
            for position in (0, 1, 400, 622, 623, 624):
                state = base.copy()
                state[624] = position
                results, after = [], []
                for kernel in (None, "numpy"):
                    rng(RngSettings("twister", 0, state.copy()))
                    results.append(dispatch.round_array(x, spec, MATLAB_STREAM, kernel=kernel))
                    after.append(rng().State.tolist())
                where = f"{name} round {mode}, n = {n}, position {position}"
                assert_bits_equal(results[0], results[1], where)
                assert after[0] == after[1], where


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", [5, 6])
def test_stochastic_plans_without_flips_draw_as_the_general_path(mode, dtype):
    """MATLAB's stream drawn inside the compiled loop, and the counter's numbers, on every layout:
    the NumPy engine's bits and the stream left where the NumPy engine leaves it."""
    spec = resolve({"format": "b", "round": mode}, None, "single" if dtype is np.float32 else "double").spec
    for name, x in _layouts(dtype).items():
        rng(8)
        planned = [dispatch.round_array(x, spec, MATLAB_STREAM) for _ in range(2)]
        after = rng()
        rng(8)
        general = [dispatch.round_array(x, spec, MATLAB_STREAM, kernel="numpy") for _ in range(2)]
        assert rng().State.tolist() == after.State.tolist(), name
        for a, b in zip(planned, general):
            assert_bits_equal(a, b, f"stream, {name}")
        sources, again = counter_sources(21), counter_sources(21)
        for _ in range(2):
            assert_bits_equal(dispatch.round_array(x, spec, sources),
                              dispatch.round_array(x, spec, again, kernel="numpy"), f"counter, {name}")
        assert sources.counter.offset == again.counter.offset == 2 * x.size


# --- a chopped-array operation on a small array: the operation and its rounding in one call ---------

#: The operators X op Y and the NumPy operations x op y they are documented as (then rounded).
COMBINED_OPS = [(operator.add, np.add), (operator.sub, np.subtract), (operator.mul, np.multiply),
                (operator.truediv, np.true_divide)]


def _spied_combined(monkeypatch):
    """The calls of the compiled combined loop (an empty list where Numba is not installed)."""
    calls: list = []
    if compiled.available():
        k = compiled.kernels()
        original = k.det_combined
        monkeypatch.setattr(k, "det_combined", lambda *a: calls.append(a[0]) or original(*a))
    return calls


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("options", SPECS + [{"format": "h", "round": 4}, {"format": "b", "round": 3}], ids=repr)
def test_a_chopped_operation_is_chop_of_the_numpy_operation(options, dtype, monkeypatch):
    """X op Y of chopped arrays is documented as chop(x op y) with X's options: bit for bit on
    vectors and matrices, values across the format's range (subnormals, overflow past the
    format's largest number), the compiled combined loop taking the calls it can."""
    from pychop_compat import chopped

    calls = _spied_combined(monkeypatch)
    generator = np.random.default_rng(31)
    for shape in [(2,), (10,), (7, 9)]:
        x = (generator.standard_normal(shape) * 2.0 ** generator.integers(-30, 20, shape)).astype(dtype)
        y = (generator.standard_normal(shape) * 2.0 ** generator.integers(-30, 20, shape)).astype(dtype)
        X, Y = chopped(x, options), chopped(y, options)
        xs, ys = np.asarray(X), np.asarray(Y)
        for op, ufunc in COMBINED_OPS:
            for _ in range(2):  # the first call finds the loop, the second uses it
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # (an overflow of float32 data)
                    expected = chop(ufunc(xs, ys), options)
                    got = np.asarray(op(X, Y))
                assert got.dtype == expected.dtype == dtype
                assert_bits_equal(got, expected, f"{ufunc.__name__} {shape}")
    routed = str(explain(np.ones(10, dtype), options)).splitlines()[1].startswith("kernel: numba (")
    # every operation went through the combined loop where chop takes the compiled loops (the
    # format names beyond chop.m's take CPFloat's rules: the two calls there)
    assert sorted(set(calls)) == ([0, 1, 2, 3] if routed else [])


def test_an_inf_or_nan_result_is_left_to_numpy_with_its_warning(monkeypatch):
    """A division by zero, an overflow and Inf - Inf warn in NumPy: they still do, with chop's bits."""
    from pychop_compat import chopped

    calls = _spied_combined(monkeypatch)
    x = np.array([1.0, -2.0, 0.0, 3.0])
    X = chopped(x, "h")
    for op, other, message in [(operator.truediv, np.array([0.0, 0.0, 0.0, 1.0]), "divide by zero"),
                               (operator.mul, np.array([4e4, 4e4, 1.0, 1.0]), None),  # (Inf in fp16 only)
                               (operator.sub, np.array([np.inf, 1.0, 1.0, 1.0]), None)]:
        Y = chopped(other, "h")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = np.asarray(op(X, Y))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert_bits_equal(got, chop(op(np.asarray(X), np.asarray(Y)), "h"), op.__name__)
        if message:
            assert any(message in str(w.message) for w in caught), (op.__name__, caught)
    if compiled.available():
        assert calls  # the loop was asked, and gave the work back


def test_the_combined_loop_follows_the_engine_setting(monkeypatch):
    from pychop_compat import chopped

    calls = _spied_combined(monkeypatch)
    X, Y = chopped(np.linspace(1, 2, 10), "h"), chopped(np.linspace(2, 3, 10), "h")
    expected = chop(np.asarray(X) * np.asarray(Y), "h")
    with compiled.cpu_engine("numpy"):
        assert_bits_equal(np.asarray(X * Y), expected, "numpy engine")
        assert_bits_equal(np.asarray(X * Y), expected, "numpy engine, again")
    assert calls == []
    assert_bits_equal(np.asarray(X * Y), expected, "auto")
    assert_bits_equal(np.asarray(X * Y), expected, "auto, again")
    assert calls == ([2, 2] if compiled.available() else [])  # (the loop found when X was made)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_underflowing_product_keeps_numpys_floating_point_errors(dtype, monkeypatch):
    """np.errstate(under=...) sees a product or quotient of nonzero operands that is inexact below the
    smallest normal number in NumPy's ufunc; the combined loop gives such operations back (found by
    review).  Oracle: the same operation on the stored values with NumPy under the same errstate."""
    from pychop_compat import chopped

    options = {"format": "s" if dtype is np.float32 else "d"}  # (the carrier's own format: no rounding)
    calls = _spied_combined(monkeypatch)
    root = np.sqrt(np.finfo(dtype).tiny)  # a power of two
    x = np.full(4, 0.3 * root / 64, dtype)  # x * x and x / (64 / root) fall below the smallest normal, inexactly
    X, Z = chopped(x, options), chopped(np.full(4, 64 / root, dtype), options)
    xs, zs = np.asarray(X), np.asarray(Z)
    for op, ufunc, other, others in [(operator.mul, np.multiply, X, xs), (operator.truediv, np.true_divide, Z, zs)]:
        with np.errstate(under="raise"):
            with pytest.raises(FloatingPointError, match="underflow"):
                ufunc(xs, others)
            with pytest.raises(FloatingPointError, match="underflow"):
                op(X, other)
        with np.errstate(under="ignore"):
            assert_bits_equal(np.asarray(op(X, other)), chop(ufunc(xs, others), options), ufunc.__name__)
    with np.errstate(under="raise"):  # a difference below the smallest normal is exact: no flag, in NumPy or here
        tiny = np.finfo(dtype).tiny
        assert np.all(np.asarray(chopped(np.full(4, 3 * tiny, dtype), options)
                                 - chopped(np.full(4, 2.5 * tiny, dtype), options)) > 0)
    if compiled.available():
        assert 1 in calls  # the difference took the combined loop
