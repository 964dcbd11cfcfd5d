"""Number formats beyond floating point: fixed point, integer quantization, block floating
point and the OCP Microscaling (MX) formats, on chop's integer rounding (see :doc:`/numbers`)."""

from .fixed import fixed_point, fixed_point_range
from .integer import int_quantize, int_range
from .mx import MX_ELEMENT_NAMES, MXElement, mx_element, mx_quantize
from .block import block_quantize

__all__ = ["fixed_point", "fixed_point_range", "int_quantize", "int_range",
           "mx_quantize", "mx_element", "MXElement", "MX_ELEMENT_NAMES", "block_quantize"]
