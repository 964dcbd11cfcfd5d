"""Threads and processes (issue 18, bullet 3).

Expected values: fp16/bfloat16/fp8 roundings of 1/3 worked out in binary
(1/3 = 0.010101...b), numbers drawn from MATLAB's stream after ``rng(seed)``,
and the reference algorithm (``round_array(..., kernel="reference")``) fed those
numbers.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import multiprocessing
import pickle
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from pychop_compat import Chop, chop, chop_options, clear_chop, clear_cpfloat, cpfloat, cpfloat_options, rand, rng
from pychop_compat.engines.dispatch import round_array
from pychop_compat.matlab.options import resolve
from pychop_compat.random.sources import ForkedStreamError, RandomSources

THIRD = 1 / 3
THIRD_FP16 = 0.333251953125       # 1.0101010101b * 2^-2
THIRD_BF16 = 0.333984375          # 1.0101011b * 2^-2
THIRD_Q43_DOWN = 0.3125           # 1.010b * 2^-2 (round towards zero)


def _in_thread(func, *args):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(func, *args).result()


# --- persistent options per thread ---------------------------------------------------------------

def test_threads_do_not_see_each_others_options():
    # The scenario: A stores fp16 then calls chop(x); B keeps storing bfloat16.
    go = threading.Barrier(2)
    results = {}

    def a():
        chop(None, {"format": "h"})
        go.wait()
        results["a"] = [chop(THIRD) for _ in range(200)]

    def b():
        go.wait()
        results["b"] = [chop(THIRD, {"format": "b"}) for _ in range(200)]

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["a"] == [THIRD_FP16] * 200
    assert results["b"] == [THIRD_BF16] * 200


def test_a_thread_that_stored_nothing_reads_the_main_threads_options_at_call_time():
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        chop(None, {"format": "b"})
        assert pool.submit(chop, THIRD).result() == THIRD_BF16
        chop(None, {"format": "q43", "round": 4})
        assert pool.submit(chop, THIRD).result() == THIRD_Q43_DOWN  # the same worker, now q43
        assert pool.submit(lambda: chop_options().format).result() == "q43"


def test_never_a_siblings_options():
    chop(None, {"format": "h"})
    stored = threading.Event()
    read = threading.Event()
    out = {}

    def sibling():
        chop(None, {"format": "b"})
        stored.set()
        read.wait()

    def reader():
        stored.wait()
        out["value"] = chop(THIRD)
        read.set()

    threads = [threading.Thread(target=sibling), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out["value"] == THIRD_FP16
    assert chop_options().format == "h"  # the main thread's own options are untouched


def test_what_a_worker_stores_stays_in_the_worker():
    chop(None, {"format": "h"})

    def work():
        chop(None, {"format": "b"})
        return chop(THIRD)

    assert _in_thread(work) == THIRD_BF16
    assert chop(THIRD) == THIRD_FP16


def test_worker_options_outlive_later_main_changes():
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(chop, None, {"format": "b"}).result()
        chop(None, {"format": "q43"})
        assert pool.submit(chop, THIRD).result() == THIRD_BF16


def test_clear_chop_in_a_worker():
    chop(None, {"format": "b"})

    def work():
        clear_chop()
        return chop(THIRD), chop_options().format

    assert _in_thread(work) == (THIRD_FP16, "h")
    assert chop_options().format == "b"


def test_custom_params_inherit_within_the_thread():
    chop(None, {"format": "c", "params": [5, 3]})

    def work():
        chop(None, {"format": "c", "params": [4, 7]})
        chop(None, {"format": "c"})
        return chop_options().params

    assert _in_thread(work) == [4, 7]
    chop(None, {"format": "c"})
    assert chop_options().params == [5, 3]


def test_cpfloat_options_are_per_thread_like_chops():
    # docs/reliability.rst: persistent options are per thread, cpfloat's too.  1/3 in fp16 is
    # 1.0101010101b * 2^-2; in bfloat16 (CPFloat's 'b') 1.0101011b * 2^-2.
    clear_cpfloat()
    try:
        cpfloat(None, {"format": "h"})

        def work():
            seen = cpfloat_options().format  # nothing stored here yet: the main thread's
            cpfloat(None, {"format": "b"})
            return seen, cpfloat(THIRD), cpfloat_options().format

        assert _in_thread(work) == ("h", THIRD_BF16, "b")
        assert cpfloat(THIRD) == THIRD_FP16 and cpfloat_options().format == "h"

        def cleared():
            clear_cpfloat()  # this thread's options only
            return cpfloat_options().format

        cpfloat(None, {"format": "s"})
        assert _in_thread(cleared) == "h"  # the MEX's defaults: fp16
        assert cpfloat_options().format == "s"
    finally:
        clear_cpfloat()


def test_results_do_not_depend_on_the_thread():
    x = np.random.default_rng(8).standard_normal((40, 30))
    for options in ({"format": "b", "round": 2}, {"format": "q52", "round": 5}, {"format": "h", "flip": 1}):
        rng(4)
        here = chop(x, options)
        rng(4)
        there = _in_thread(chop, x, options)
        assert np.array_equal(here, there)


# --- MATLAB's stream under threads ------------------------------------------------------------------

class _Run:
    """Sequential draws from one stored run of numbers, as MATLAB's stream gives them."""

    def __init__(self, numbers):
        self.numbers, self.used = numbers, 0

    def uniform(self, n):
        out = self.numbers[self.used:self.used + n]
        self.used += n
        return out

    def randi(self, imax, n):  # MATLAB's randi(imax): 1 + floor(imax * u)
        return 1 + np.floor(imax * self.uniform(n)).astype(np.int64)

    def sources(self):
        return RandomSources(self.uniform, self.uniform, self.randi)


def test_concurrent_calls_each_draw_a_contiguous_run_of_the_stream():
    # Stochastic rounding with bit flips at p = 1 draws three times per call (m rounding
    # numbers, m flip choices, m flipped bits), 3m numbers in all.  Each call's numbers must be
    # one contiguous run [3mk, 3m(k+1)) of rand after rng(21): its result equals the reference
    # algorithm fed one run, and no run serves two calls.
    m, calls = 500, 32
    options = {"format": "h", "round": 5, "flip": 1, "p": 1.0}
    x = np.random.default_rng(2).uniform(0.1, 1.0, m)  # no element is an fp16 number
    spec = resolve(options, None).spec
    rng(21)
    runs = rand(calls * 3 * m, 1).ravel().reshape(calls, 3 * m)
    expected = []
    for run in runs:
        feed = _Run(run)
        expected.append(round_array(x, spec, feed.sources(), kernel="reference"))
        assert feed.used == 3 * m

    rng(21)
    start = threading.Barrier(8)

    def work(_):
        start.wait()
        return [chop(x, options) for _ in range(4)]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over often, so that unlocked calls would interleave
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = [r for pair in pool.map(work, range(8)) for r in pair]
    finally:
        sys.setswitchinterval(interval)
    used = []
    for result in results:
        matches = [k for k, e in enumerate(expected) if np.array_equal(result, e)]
        assert len(matches) == 1
        used.append(matches[0])
    assert sorted(used) == list(range(calls))
    assert rand() == rand_after(21, calls * 3 * m)


def test_a_chop_call_holds_the_stream_until_it_returns():
    # Inside a call that draws from MATLAB's stream (here: bit flips; the randfunc runs in the
    # middle of the call), another thread's draw waits until the call has returned.
    other_done = threading.Event()
    seen_inside = []

    def other():
        rand()
        other_done.set()

    def randfunc(n):
        worker = threading.Thread(target=other)
        worker.start()
        seen_inside.append(other_done.wait(0.2))  # False: the other draw is blocked
        return np.full(n, 0.5)

    rng(1)
    chop(np.array([0.1, 0.2]), {"round": 5, "flip": 1, "randfunc": randfunc})
    assert seen_inside == [False]
    assert other_done.wait(10)


def test_a_shared_chop_holds_its_generator_for_each_call():
    # Two threads share one Chop with its own generator: the second call waits while the first
    # one (paused inside its randfunc, between drawing flip numbers) holds the generator.
    other_done = threading.Event()
    seen_inside = []

    def randfunc(n):
        if not seen_inside:
            worker = threading.Thread(target=lambda: (shared(np.array([0.1, 0.2])), other_done.set()))
            worker.start()
            seen_inside.append(other_done.wait(0.2))
        return np.full(n, 0.5)

    shared = Chop({"format": "h", "round": 5, "flip": 1, "randfunc": randfunc}, rng=np.random.default_rng(3))
    shared(np.array([0.1, 2e-6]))
    assert seen_inside == [False]
    assert other_done.wait(10)


def rand_after(seed, skipped):
    rng(seed)
    rand(skipped, 1)
    return rand()


def test_direct_draws_from_many_threads_lose_nothing():
    rng(5)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        draws = np.concatenate(list(pool.map(lambda _: rand(1, 1000).ravel(), range(8))))
    rng(5)
    everything = rand(1, 8000).ravel()
    assert np.array_equal(np.sort(draws), np.sort(everything))  # every number once, in some order


# --- pickling ----------------------------------------------------------------------------------------

X = np.random.default_rng(9).uniform(-2, 2, (30, 20))


@pytest.mark.parametrize("rng_arg", [None, 7, "generator"])
@pytest.mark.parametrize("options", [{"format": "b", "round": 5}, {"format": "q43", "round": 6, "flip": 1, "p": 0.3},
                                     {"format": "c", "params": [6, 9], "round": 3}])
def test_chop_objects_pickle_and_draw_the_same_numbers(rng_arg, options):
    if rng_arg == "generator":
        rng_arg = np.random.default_rng(77)
    original = Chop(options, rng=rng_arg)
    original(X)  # advance its generator: the copy must continue from here
    copy = pickle.loads(pickle.dumps(original))
    rng(3)
    expected = original(X)
    rng(3)
    assert np.array_equal(copy(X), expected)
    assert repr(copy) == repr(original)


def test_generator_sources_pickle():
    from pychop_compat.random.sources import generator_sources

    sources = generator_sources(np.random.default_rng(1))
    copy = pickle.loads(pickle.dumps(sources))
    assert np.array_equal(copy.stochastic(5), sources.stochastic(5))
    assert np.array_equal(copy.flip_randi(10, 5), sources.flip_randi(10, 5))
    assert copy.stochastic.__self__ is copy.flip_randi.generator  # one generator, as before


# --- fork ----------------------------------------------------------------------------------------------

fork = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork here")


def _child_draws_unseeded(_):
    try:
        return ("ok", chop(np.linspace(0.1, 0.9, 9), {"format": "h", "round": 5}).tolist())
    except ForkedStreamError as exc:
        return ("refused", str(exc))


def _child_rand_unseeded(_):
    try:
        return ("ok", float(rand()))
    except ForkedStreamError:
        return ("refused", None)


def _child_seeded(seed):
    rng(seed)
    return chop(np.linspace(0.1, 0.9, 9), {"format": "h", "round": 5, "flip": 1}).tolist()


def _child_randfunc_then_flips_twice(_):
    # randfunc supplies the rounding numbers; the flips would come from the inherited stream.
    options = {"format": "h", "round": 5, "flip": 1, "randfunc": _half}
    kinds = []
    for _ in range(2):
        try:
            chop(np.array([0.1, 3e-6]), options)
            kinds.append("ok")
        except ForkedStreamError:
            kinds.append("refused")
    return kinds


def _half(n):
    return np.full(n, 0.5)


def _child_deterministic(_):
    return chop(THIRD, {"format": "b"})


INHERITED = {}


def _child_inherited_chop(_):
    try:
        return ("ok", INHERITED["chop"](X).tolist())
    except ForkedStreamError:
        return ("refused", None)


def _child_sent_chop(ch):
    return ch(X).tolist()


def _fork_pool(n=2):
    return multiprocessing.get_context("fork").Pool(n)


@fork
def test_forked_child_refuses_to_repeat_the_parents_stream():
    rng(1)
    with _fork_pool() as pool:
        results = pool.map(_child_draws_unseeded, range(4))
        assert all(kind == "refused" for kind, _ in results)
        assert "rng(" in results[0][1]
        assert all(kind == "refused" for kind, _ in pool.map(_child_rand_unseeded, range(2)))
        # a refused call is undone without unlocking the stream: the next one is refused too
        assert pool.map(_child_randfunc_then_flips_twice, [0]) == [["refused", "refused"]]
        # deterministic rounding draws nothing and works as ever
        assert pool.map(_child_deterministic, range(2)) == [THIRD_BF16] * 2


@fork
def test_forked_children_seeded_by_task_are_reproducible():
    seeds = [11, 12, 13, 11]
    with _fork_pool() as pool:
        results = pool.map(_child_seeded, seeds)
    for seed, got in zip(seeds, results):
        rng(seed)
        assert got == chop(np.linspace(0.1, 0.9, 9), {"format": "h", "round": 5, "flip": 1}).tolist()
    assert results[0] == results[3] and results[0] != results[1]


@fork
def test_chop_with_generator_inherited_by_fork_refuses_pickled_one_works():
    INHERITED["chop"] = Chop({"format": "b", "round": 5}, rng=np.random.default_rng(5))
    try:
        with _fork_pool() as pool:
            assert pool.map(_child_inherited_chop, range(2)) == [("refused", None)] * 2
            sent = Chop({"format": "b", "round": 5}, rng=np.random.default_rng(6))
            got = pool.map(_child_sent_chop, [sent])
        assert got == [Chop({"format": "b", "round": 5}, rng=np.random.default_rng(6))(X).tolist()]
    finally:
        INHERITED.clear()


@fork
def test_parent_stream_unaffected_by_children():
    rng(2)
    expected = rand(1, 4)
    rng(2)
    with _fork_pool() as pool:
        pool.map(_child_seeded, [1, 2])
    assert np.array_equal(rand(1, 4), expected)


def test_spawned_children_must_seed_too():
    # A spawned child starts at rng('default'), as every sibling does: the same numbers in each.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.map(_child_draws_unseeded, [0])[0][0] == "refused"
        seeded = pool.map(_child_seeded, [31])
    rng(31)
    assert seeded == [chop(np.linspace(0.1, 0.9, 9), {"format": "h", "round": 5, "flip": 1}).tolist()]


# A main script that imports the package at its top: spawn and forkserver import it again in each child
# during the child's bootstrap, before multiprocessing.parent_process() is set.
TOP_LEVEL_IMPORT_SCRIPT = """
import json, multiprocessing, sys
import numpy as np
import pychop_compat as pc

def draw(seed):
    if seed is not None:
        pc.rng(seed)
    try:
        return [float(pc.rand()), float(pc.chop(np.array([0.1]), {"format": "h", "round": 5})[0])]
    except pc.ForkedStreamError:
        return "refused"

if __name__ == "__main__":
    pc.rng(1)
    with multiprocessing.get_context(sys.argv[1]).Pool(1) as pool:
        print(json.dumps(pool.map(draw, [None, 7])))
"""


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_children_of_a_script_that_imports_the_package_at_the_top_must_seed(method, tmp_path):
    # docs/randomness.rst: "A forked child, and any child started by multiprocessing (spawn, forkserver),
    # must seed the stream before drawing: its first draw otherwise raises ForkedStreamError".
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} here")
    import json
    import subprocess

    script = tmp_path / "study.py"
    script.write_text(TOP_LEVEL_IMPORT_SCRIPT)
    run = subprocess.run([sys.executable, str(script), method], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    unseeded, seeded = json.loads(run.stdout)
    assert unseeded == "refused"
    rng(7)  # seeded in the child, the child draws MATLAB's rng(7) numbers
    assert seeded == [float(rand()), float(chop(np.array([0.1]), {"format": "h", "round": 5})[0])]


# --- the example ---------------------------------------------------------------------------------------

def _load_example():
    path = Path(__file__).resolve().parents[1] / "examples" / "parallel_study.py"
    spec = importlib.util.spec_from_file_location("example_parallel_study", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # worker processes find its functions by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("source", ["matlab", "generator"])
def test_parallel_study_is_reproducible(source):
    study = _load_example()
    one = study.main(tasks=4, processes=1, n=300, source=source, verbose=False)
    methods = multiprocessing.get_all_start_methods()
    many = study.main(tasks=4, processes=2, n=300, source=source, verbose=False,
                      start_method="fork" if "fork" in methods else None)
    assert one == many
    assert len(set(one)) > 1  # independent trials (4 equal sums of 300 stochastic roundings: ~impossible)
    # Exact sum 0.3; each rounding moves the sum by less than one fp16 ulp, at most 2^-12 below 0.5.
    assert all(abs(s - 0.3) < 300 * 2.0**-12 for s in one)
    if source == "matlab":
        # trial k is MATLAB's rng(task_seed(base, k)) followed by the loop: rerun trial 2 alone
        assert study.trial((2026, 2, 300, "matlab")) == one[2]
