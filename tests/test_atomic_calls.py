"""A call that raises changes nothing (issue 18, bullet 2).

For every kind of failure: the persistent options after the call are those
before it, and MATLAB's random stream has not moved (the next numbers are the
ones ``rng(seed)`` promises).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pychop_compat import Chop, chop, chop_options, rand, rng, roundit

STORED = {"format": "b", "round": 3, "subnormal": 1, "explim": 0}


def _options_now():
    o = chop_options()
    return (o.format, o.round, o.subnormal, o.explim, o.flip, o.p, o.params)


class _Failing:
    """A randfunc that fails after giving ``good`` correct calls."""

    def __init__(self, make_bad, good=0):
        self.make_bad, self.good = make_bad, good

    def fresh(self):
        return _Failing(self.make_bad, self.good)

    def __call__(self, n):
        if self.good:
            self.good -= 1
            return np.full(n, 0.5)
        return self.make_bad(n)


def _raise(n):
    raise RuntimeError("randfunc failed")


def _fresh(options):
    """The options with a fresh copy of a stateful randfunc (parameters are shared between tests)."""
    if isinstance(options, dict) and isinstance(options.get("randfunc"), _Failing):
        return {**options, "randfunc": options["randfunc"].fresh()}
    return options


X = np.array([[0.1, 1e-6], [0.3, -0.7]])  # 1e-6 is in fp16's subnormal range: a second block
X_SUB = np.array([0.1, 3e-6, 0.3])


FAILURES = [
    # option errors
    pytest.param(X, {"format": "zz"}, ValueError, id="unknown format"),
    pytest.param(X, {"round": 1 + 0j}, ValueError, id="complex round"),
    pytest.param(X, {"subnormal": "0"}, ValueError, id="string switch"),
    pytest.param(X, {"flip": 2}, ValueError, id="flip 2"),
    pytest.param(X, {"p": float("nan")}, ValueError, id="p nan"),
    pytest.param(X, {"precision": "h"}, ValueError, id="unknown key"),
    pytest.param(X, SimpleNamespace(precision="h"), ValueError, id="unknown attribute"),
    pytest.param(X, {"format"}, TypeError, id="set as options"),
    pytest.param(X, b"h", TypeError, id="bytes as options"),
    pytest.param(X, "fp7", ValueError, id="unknown format name as options"),
    pytest.param(X, {"format": "c", "params": [30, 10]}, ValueError, id="precision limit"),
    pytest.param(np.float32(1), {"format": "c", "params": [12, 10]}, ValueError, id="single precision limit"),
    pytest.param(X, {"randfunc": 0.5, "round": 5}, ValueError, id="randfunc not callable"),
    # input errors
    pytest.param(np.array([1 + 1j]), {"format": "h"}, ValueError, id="complex array"),
    pytest.param(1j, {"format": "h"}, ValueError, id="complex scalar"),
    pytest.param(np.array(["a"]), {"format": "h"}, TypeError, id="string array"),
    pytest.param(np.array(["1.5"], dtype=object), {"format": "h"}, TypeError, id="string in object array"),
    pytest.param(np.array([1.0], dtype=np.longdouble), {"format": "h", "round": 5}, TypeError, id="longdouble"),
    pytest.param(np.array([1 + 0j], dtype=object), {"format": "h"}, ValueError, id="complex in object array"),
    pytest.param(np.recarray((2,), dtype=[("a", float)]), {"format": "h"}, TypeError, id="unknown subclass"),
    # errors while rounding
    pytest.param(X, {"format": "c", "params": [1, 5], "flip": 1}, ValueError, id="flip with t=1"),
    pytest.param(X, {"format": "c", "params": [1, 5], "flip": 1, "round": 5}, ValueError, id="flip t=1 stochastic"),
    pytest.param(np.zeros(0), {"format": "c", "params": [1, 5], "flip": 1}, ValueError, id="flip t=1 empty"),
    pytest.param(X, {"round": 5, "randfunc": lambda n: np.full(n + 1, 0.5)}, ValueError, id="randfunc count"),
    pytest.param(X, {"round": 5, "randfunc": lambda n: np.full(n, np.nan)}, ValueError, id="randfunc nan"),
    pytest.param(X, {"round": 6, "randfunc": lambda n: np.full(n, 1.0)}, ValueError, id="randfunc 1"),
    pytest.param(X, {"round": 5, "randfunc": lambda n: ["x"] * n}, TypeError, id="randfunc strings"),
    pytest.param(X, {"round": 5, "randfunc": _raise}, RuntimeError, id="randfunc raises"),
    # randfunc fails on its second call, after bit flips drew from MATLAB's stream
    pytest.param(X_SUB, {"round": 5, "flip": 1, "randfunc": _Failing(lambda n: np.full(n, 2.0), good=1)},
                 ValueError, id="randfunc fails after flips"),
    pytest.param(X_SUB, {"round": 5, "flip": 1, "randfunc": _Failing(_raise, good=1)},
                 RuntimeError, id="randfunc raises after flips"),
]


@pytest.mark.parametrize("x, options, error", FAILURES)
def test_failed_call_stores_nothing_and_draws_nothing(x, options, error):
    chop(None, STORED)
    before = _options_now()
    rng(11)
    with pytest.raises(error):
        chop(x, _fresh(options))
    assert _options_now() == before
    after = rand(1, 3)
    rng(11)
    assert np.array_equal(after, rand(1, 3)), "the failed call moved MATLAB's stream"


@pytest.mark.parametrize("x, options, error", [p for p in FAILURES if p.id not in (
    "set as options", "bytes as options", "unknown key", "unknown attribute")])
def test_failed_chop_object_call_draws_nothing(x, options, error):
    rng(12)
    with pytest.raises(error):
        Chop(_fresh(options))(x)
    after = rand(1, 3)
    rng(12)
    assert np.array_equal(after, rand(1, 3))


def test_failed_call_in_a_worker_thread_stores_nothing():
    import concurrent.futures

    def work():
        chop(None, {"format": "q43"})
        with pytest.raises(ValueError):
            chop(X, {"format": "c", "params": [1, 5], "flip": 1})
        return chop_options().format

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        assert pool.submit(work).result() == "q43"


def test_placeholder_call_stores_only_valid_options():
    chop(None, STORED)
    with pytest.raises(ValueError):
        chop(None, {"round": 9})
    assert chop_options().round == 3
    chop(None, {"format": "c", "params": [1, 5], "flip": 1})  # valid options: chop.m stores them too
    assert chop_options().params == [1, 5]
    with pytest.raises(ValueError, match="t >= 2"):
        chop(X)  # now every call raises, and stores nothing new
    assert chop_options().params == [1, 5]


def test_roundit_failure_draws_nothing():
    rng(13)
    with pytest.raises(ValueError):
        roundit(np.array([0.5, 1.5]), {"round": 5, "randfunc": lambda n: np.full(n, 7.0)})
    with pytest.raises(ValueError):
        roundit(np.array([0.5, 1.5]), {"flip": 1, "params": [1, 3]})
    after = rand()
    rng(13)
    assert after == rand()


def test_successful_call_after_failures_is_unaffected():
    # The numbers a successful call gets after failures are those it gets without them.
    x = np.linspace(0.1, 0.9, 9)
    rng(3)
    expected = chop(x, {"format": "h", "round": 5, "flip": 1})
    rng(3)
    for _, options, error in [p.values for p in FAILURES[:6]]:
        with pytest.raises(error):
            chop(x, options)
    assert np.array_equal(chop(x, {"format": "h", "round": 5, "flip": 1}), expected)
