"""pychop_compat: a bit-exact Python port of Higham & Pranesh's MATLAB ``chop``.

>>> from pychop_compat import chop
>>> chop(0.1, {'format': 'h'})
0.0999755859375
"""

from ._version import __version__
from .matlab.api import Chop, chop, chop_jax, chop_options, clear_chop, explain, roundit
from .formats import Format, float_params
from .random.matlab_stream import ForkedStreamError, RngSettings, rand, randi, rng
from .matlab.options import Options
from . import linalg  # noqa: E402  (needs chop above)
from .linalg.errors import SingularMatrixWarning  # noqa: E402
from .matlab.history import chop_at  # noqa: E402
from .cpfloat import clear_cpfloat, cpfloat, cpfloat_at, cpfloat_options  # noqa: E402
from .arithmetic import chopped, decode, encode  # noqa: E402  (needs linalg)
from .numbers import block_quantize, fixed_point, int_quantize, mx_quantize  # noqa: E402

__all__ = [
    "__version__", "chop", "clear_chop", "chop_options", "roundit", "float_params", "explain", "chop_jax",
    "Options", "Chop", "Format", "linalg", "rng", "rand", "randi", "RngSettings",
    "SingularMatrixWarning", "chop_at",
    "cpfloat", "clear_cpfloat", "cpfloat_options", "cpfloat_at",
    "ForkedStreamError",
    "chopped", "encode", "decode",
    "fixed_point", "int_quantize", "block_quantize", "mx_quantize",
]
