"""Helpers for porting MATLAB scripts: MATLAB-language behaviour without a one-line NumPy
equivalent (``pychop_compat.matlab.language``) and MAT-files of every version, SuiteSparse's
included (``pychop_compat.matlab.io``).  chop's own MATLAB functions are in :mod:`pychop_compat`.
"""

from .language import chop_struct, int_divide, round_half_away, sequential_sum, sprintf
from .io import SuiteSparseProblem, load_suitesparse, loadmat

__all__ = ["round_half_away", "int_divide", "sequential_sum", "sprintf", "chop_struct", "loadmat",
           "SuiteSparseProblem", "load_suitesparse"]
