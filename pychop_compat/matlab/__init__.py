"""Helpers for porting MATLAB scripts: MATLAB-language behaviour without a one-line NumPy
equivalent (``pychop_compat.matlab.language``).  chop's own MATLAB functions are in :mod:`pychop_compat`.
"""

from .language import chop_struct, int_divide, round_half_away, sequential_sum, sprintf

__all__ = ["round_half_away", "int_divide", "sequential_sum", "sprintf", "chop_struct"]
