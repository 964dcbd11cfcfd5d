"""Proof by existing code: unmodified NumPy code on chopped values gives, bit for bit, the
numbers of the same algorithm written with explicit chop calls (the MATLAB way).

Each ``user_*`` function below is plain NumPy code that knows nothing about
chop; each ``hand_*`` function is the same algorithm with a chop call after
every operation, in Python's evaluation order (which matters for stochastic
rounding, whose random numbers are drawn call by call).  Published numbers
(Higham & Pranesh 2019) are asserted where they exist.
"""

from __future__ import annotations

import numpy as np
import pytest

import pychop_compat
from pychop_compat import Chop, chopped


def same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got, want, equal_nan=True), (got, want)


def values(x):
    return x.values if hasattr(x, "values") else np.asarray(x.value)


# --- harmonic series -------------------------------------------------------------------------


def user_harmonic(one, max_terms=100000):
    """Sum 1/n until the partial sum stops changing."""
    s = one * 0
    for n in range(1, max_terms + 1):
        new = s + one / n
        if new == s:
            return new, n
        s = new
    return s, max_terms


def hand_harmonic(ch, max_terms=100000):
    s = 0.0
    for n in range(1, max_terms + 1):
        new = ch(s + ch(1.0 / n))
        if new == s:
            return new, n
        s = new
    return s, max_terms


@pytest.mark.parametrize("fmt,published", [("h", (7.0859375, 513)), ("b", (5.0625, 65))])
def test_harmonic_sum_matches_hand_chopped_and_published(fmt, published):
    got, n = user_harmonic(chopped(1.0, fmt))
    assert (got.value, n) == hand_harmonic(Chop(format=fmt))
    assert (got.value, n) == published  # Higham & Pranesh (2019), sec. 5


def test_harmonic_sum_stochastic_rounding_draws_in_operation_order():
    o = {"format": "b", "round": 5}
    pychop_compat.rng(1)
    want = hand_harmonic(Chop(o), max_terms=3000)
    pychop_compat.rng(1)
    got, n = user_harmonic(chopped(1.0, o), max_terms=3000)
    assert (got.value, n) == want


# --- Euler's method ----------------------------------------------------------------------------


def user_euler(y, t, h, steps):
    """y' = -y t + cos(t), explicit Euler."""
    for _ in range(steps):
        y = y + h * (-y * t + np.cos(t))
        t = t + h
    return y


def hand_euler(ch, y, t, h, steps):
    for _ in range(steps):
        f = ch(ch(-y * t) + ch(np.cos(t)))
        y = ch(y + ch(h * f))
        t = ch(t + h)
    return y


@pytest.mark.parametrize("o", [{"format": "h"}, {"format": "b", "round": 5},
                               {"format": "q43", "round": 4}], ids=str)
def test_euler_arrays_and_scalars_match_hand_chopped(o):
    ch = Chop(o)
    y0 = np.linspace(-2, 2, 9)
    pychop_compat.rng(2)
    want = hand_euler(ch, ch(y0), ch(0.0), ch(0.01), 200)
    pychop_compat.rng(2)
    got = user_euler(chopped(y0, o), chopped(0.0, o), chopped(0.01, o), 200)
    same(got.values, want)
    # the scalar type in a MATLAB-style loop: the same numbers element by element
    pychop_compat.rng(3)
    want_scalar = float(hand_euler(ch, ch(np.array(0.5)), ch(0.0), ch(0.01), 200))
    pychop_compat.rng(3)
    got_scalar = user_euler(chopped(0.5, o), chopped(0.0, o), chopped(0.01, o), 200)
    assert got_scalar.value == want_scalar


# --- linear solvers ------------------------------------------------------------------------------


def user_conjugate_gradient(A, b, iterations):
    x = np.zeros_like(b)
    r = b - A @ x
    p = r.copy()
    rr = r @ r
    for _ in range(iterations):
        Ap = A @ p
        alpha = rr / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rr_new = r @ r
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def user_jacobi(A, b, iterations):
    d = np.diag(A)
    R = A - np.diag(d)
    x = b / d
    for _ in range(iterations):
        x = (b - R @ x) / d
    return x


def hand_matvec(ch, A, x):
    """Recursive inner products with a chop after every operation (linalg's documented order)."""
    s = ch(A[:, 0] * x[0])
    for k in range(1, A.shape[1]):
        s = ch(s + ch(A[:, k] * x[k]))
    return s


def hand_dot(ch, x, y):
    s = ch(x[0] * y[0])
    for k in range(1, x.size):
        s = ch(s + ch(x[k] * y[k]))
    return s


def hand_conjugate_gradient(ch, A, b, iterations):
    x = np.zeros_like(b)
    r = ch(b - hand_matvec(ch, A, x))
    p = r.copy()
    rr = hand_dot(ch, r, r)
    for _ in range(iterations):
        Ap = hand_matvec(ch, A, p)
        alpha = ch(rr / hand_dot(ch, p, Ap))
        x = ch(x + ch(alpha * p))
        r = ch(r - ch(alpha * Ap))
        rr_new = hand_dot(ch, r, r)
        p = ch(r + ch(ch(rr_new / rr) * p))
        rr = rr_new
    return x


def hand_jacobi(ch, A, b, iterations):
    d = np.diag(A).copy()
    R = A - np.diag(d)  # exact: the diagonal set to zero
    x = ch(b / d)
    for _ in range(iterations):
        x = ch(ch(b - hand_matvec(ch, R, x)) / d)
    return x


def spd_system(n=12, seed=0):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((n, n))
    A = M @ M.T / n + 2 * np.eye(n)
    return A, rng.standard_normal(n)


@pytest.mark.parametrize("fmt", ["h", "b"])
def test_conjugate_gradient_matches_hand_chopped(fmt):
    ch = Chop(format=fmt)
    A, b = spd_system()
    A, b = ch(A), ch(b)
    got = user_conjugate_gradient(chopped(A, fmt), chopped(b, fmt), 5)
    same(got.values, hand_conjugate_gradient(ch, A, b, 5))
    residual = np.linalg.norm(b - A @ got.values) / np.linalg.norm(b)
    # it is a solver: after 5 of 12 steps on this well-conditioned A (M M^T/n + 2I) the
    # relative residual is below 2^-6
    assert residual < 2.0**-6


def test_jacobi_matches_hand_chopped_with_stochastic_rounding():
    o = {"format": "h", "round": 5}
    ch = Chop(o)
    A, b = spd_system(10, 1)
    A = A + 10 * np.eye(10)  # diagonally dominant: Jacobi converges
    A, b = Chop(format="h")(A), Chop(format="h")(b)
    pychop_compat.rng(9)
    want = hand_jacobi(ch, A, b, 15)
    pychop_compat.rng(9)
    got = user_jacobi(chopped(A, o), chopped(b, o), 15)
    same(got.values, want)


# --- the chopped matmul table ----------------------------------------------------------------------


def hand_inner(ch, a, b, method, block):
    """One inner product written as scalar loops with explicit chop calls."""
    n = a.size
    if method == "fma":
        s = ch(a[0] * b[0])
        for k in range(1, n):
            s = ch(s + a[k] * b[k])
        return s
    terms = [ch(a[k] * b[k]) for k in range(n)]
    if method == "recursive":
        s = terms[0]
        for v in terms[1:]:
            s = ch(s + v)
        return s
    if method == "pairwise":
        while len(terms) > 1:
            pairs = [ch(terms[i] + terms[i + 1]) for i in range(0, len(terms) - 1, 2)]
            terms = pairs + (terms[-1:] if len(terms) % 2 else [])
        return terms[0]
    sums = []
    for start in range(0, n, block):
        s = terms[start]
        for v in terms[start + 1 : start + block]:
            s = ch(s + v)
        sums.append(s)
    s = sums[0]
    for v in sums[1:]:
        s = ch(s + v)
    return s


@pytest.mark.parametrize("fmt", ["h", "b", "q43", "q52"])
@pytest.mark.parametrize("method", ["recursive", "fma", "pairwise", "blocked"])
def test_matmul_table_matches_scalar_loops(fmt, method):
    ch = Chop(format=fmt)
    rng = np.random.default_rng(10)
    A, B = ch(rng.uniform(-1, 1, (4, 11))), ch(rng.uniform(-1, 1, (11, 3)))
    got = chopped(A, fmt, method=method, block_size=4) @ chopped(B, fmt)
    want = np.array([[hand_inner(ch, A[i], B[:, j], method, 4) for j in range(3)] for i in range(4)])
    same(got.values, want)


# --- the example: a user's function in fp16, bfloat16 and fp8 ------------------------------------


def test_example_user_function_matches_hand_chopped():
    import importlib.util
    from pathlib import Path

    from pychop_compat import linalg

    path = Path(__file__).resolve().parents[1] / "examples" / "chopped_user_function.py"
    spec = importlib.util.spec_from_file_location("chopped_user_function", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    results = example.main(verbose=False)
    x, w1, w2 = example.inputs()
    for name, fmt in example.FORMATS.items():
        ch = Chop(format=fmt)
        h = ch(np.tanh(linalg.matmul(ch(x), ch(w1), fmt)))
        logits = linalg.matmul(h, ch(w2), fmt)
        e = ch(np.exp(ch(logits - logits.max(axis=1, keepdims=True))))
        s = e[:, 0]
        for k in range(1, e.shape[1]):
            s = ch(s + e[:, k])
        same(results[name], ch(e / s[:, None]))
    # more bits, smaller error: unit roundoffs 2^-11 (fp16) < 2^-8 (bfloat16) < 2^-4 (fp8-e4m3)
    errors = [np.max(np.abs(results[n] - results["double"])) for n in ("fp16", "bfloat16", "fp8-e4m3")]
    assert errors[0] < errors[1] < errors[2]
