"""Labelled arrays: pandas Series/DataFrame and xarray DataArray.

chop rounds their values and gives back the same type with the same labels
(index, columns, coordinates, name, attributes); the values are rounded
by the engine of the array they hold (an xarray DataArray backed by Dask stays
lazy).  What cannot be given back faithfully is refused with a ``TypeError``:
pandas extension dtypes (nullable ``Float64``, categoricals, ...), DataFrames
whose columns have different dtypes, and containers holding unsupported arrays.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

from ..libraries import array_library, unsupported_type_error

__all__ = ["chop_labelled", "frame_dtype"]


def frame_dtype(frame: Any) -> np.dtype:
    """The one NumPy dtype of a DataFrame's columns (chop's class comes from it); else TypeError."""
    dtypes = {dtype for dtype in frame.dtypes}
    if len(dtypes) > 1:
        raise TypeError("chop on a DataFrame needs one dtype for all its columns (chop's class, single or "
                        f"double, comes from it), not {sorted(map(str, dtypes))}; round column by column.")
    dtype = dtypes.pop() if dtypes else np.dtype(np.float64)
    return _numpy_dtype(dtype)


def _numpy_dtype(dtype) -> np.dtype:
    if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf":
        raise TypeError(f"chop supports pandas data of real NumPy dtypes, not {dtype}: convert with "
                        ".astype('float64') (missing values become NaN) first.")
    return dtype


def chop_labelled(x: Any, chop_values: Callable) -> Any:
    """``chop_values`` on the values of a pandas or xarray object, given back with its labels."""
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(x, pandas.DataFrame):
        frame_dtype(x)
        out = pandas.DataFrame(chop_values(x.to_numpy()), index=x.index, columns=x.columns)
    elif pandas is not None and isinstance(x, pandas.Series):
        _numpy_dtype(x.dtype)
        out = pandas.Series(chop_values(x.to_numpy()), index=x.index, name=x.name)
    else:  # xarray.DataArray: its data may be NumPy, Dask, ... (whatever chop supports)
        if array_library(x.data) in ("unsupported", "pandas", "xarray"):
            raise unsupported_type_error(x.data)
        return x.copy(data=chop_values(x.data))
    out.attrs = dict(x.attrs)
    return out
