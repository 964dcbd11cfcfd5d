"""Matrix-multiply units of real hardware: block-FMA models, bit for bit against measured GPUs.

Tensor cores do not round after every operation: they multiply exactly, align a
block of products to the largest exponent with a few extra bits, truncate, add the
block in one go and round once.  :class:`BlockFMA` holds the parameters of that
model (Khattak and Mikaitis, HPEC 2025; Fasi, Higham, Mikaitis and Pranesh, PeerJ CS
2021); :func:`model` and :data:`PRESETS` give the published ones per GPU and format
pair; :func:`matmul` computes ``D = alpha * A @ B + beta * C`` with one on NumPy
arrays, and on torch, CuPy and JAX arrays on their device.  The page "Hardware matrix
units" of the documentation (``docs/hardware.rst``) tells how each preset was checked
against the outputs of the GPU it names.
"""

from .models import (BLOCK_SUMS, BlockFMA, INPUT_FORMATS, OUTPUT_FORMATS, PRESETS, ROUNDING_MODES, model,
                     model_for_format)
from .blockfma import block_dot, matmul

__all__ = ["BlockFMA", "model", "model_for_format", "PRESETS", "matmul", "block_dot", "INPUT_FORMATS",
           "OUTPUT_FORMATS", "ROUNDING_MODES", "BLOCK_SUMS"]
