"""Rounding semantics beyond chop.m (the readable reference form); engines bind them to arrays."""
