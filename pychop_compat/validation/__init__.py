"""Validation: the reference corpora, the exact oracles, ``validate`` and the GPU check."""

from .validator import (ENGINE_INDEPENDENT, ENGINES, GroupResult, environment, find_corpus, format_table,
                        matlab_equal, not_run, validate, write_json)

__all__ = ["GroupResult", "find_corpus", "validate", "matlab_equal", "environment", "format_table", "write_json",
           "ENGINES", "ENGINE_INDEPENDENT", "not_run"]
