"""Validation: the reference corpora, the exact oracles, ``validate`` and the GPU check."""

from .validator import (GroupResult, environment, find_corpus, format_table, matlab_equal, validate,
                       write_json)

__all__ = ["GroupResult", "find_corpus", "validate", "matlab_equal", "environment", "format_table", "write_json"]
