"""Floating-point formats: the data model (``model``) and the named formats (:mod:`.catalogue`)."""

from .catalogue import (AMBIGUOUS_NAMES, CATALOGUE, CHOP_FORMAT_NAMES, CUSTOM_NAMES, catalogue_format,
                        custom_format, float_params, known_names, lookup_format)
from .model import ENCODINGS, OVERFLOWS, Format

__all__ = ["Format", "ENCODINGS", "OVERFLOWS", "CATALOGUE", "CHOP_FORMAT_NAMES", "CUSTOM_NAMES", "AMBIGUOUS_NAMES",
           "lookup_format", "catalogue_format", "custom_format", "float_params", "known_names"]
