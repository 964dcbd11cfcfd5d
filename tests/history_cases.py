"""What chop_at's fast routes are compared with: the step-by-step rules (``chop_vector_at``, itself
checked against chop.m's history corpus), shared by tests/test_history_compiled.py and
tests/test_history_numpy.py."""

from __future__ import annotations

from pychop_compat import chop_at
from pychop_compat.matlab import history


def step_by_step(date, x, options, monkeypatch):
    """``chop_at(date)(x, options)`` computed by the step-by-step rules (route ``'step by step'``
    forced for this call; the test's other patches are undone with it)."""
    slow = chop_at(date)
    monkeypatch.setattr(history, "route_at", lambda rules, spec: "step by step")
    try:
        return slow(x, options)
    finally:
        monkeypatch.undo()
