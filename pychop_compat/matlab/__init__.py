"""Helpers for porting MATLAB scripts: MATLAB-language behaviour without a one-line NumPy equivalent.

``round_half_away`` (MATLAB ``round``), ``int_divide`` (``./`` on integer
classes), ``sprintf`` (MATLAB's recycling, column-major ``sprintf``/``fprintf``
with ``Inf``/``NaN``) and ``chop_struct`` (options read as chop.m reads a
struct, unknown fields ignored with a warning).  The MATLAB functions of chop
itself (``chop``, ``rng``, ``rand``, ...) are in :mod:`pychop_compat`.  See
the migration guide's section on MATLAB-language traps.
"""

from .language import chop_struct, int_divide, round_half_away, sprintf

__all__ = ["round_half_away", "int_divide", "sprintf", "chop_struct"]
