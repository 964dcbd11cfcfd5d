"""Reading MATLAB's MAT-files, v4 to v7.3, and SuiteSparse's ``Problem`` struct.

Versions 4 to 7 are read by :func:`scipy.io.loadmat`; version 7.3 is HDF5 and is read through
h5py, an optional dependency (``pip install h5py``, or the ``hdf5`` extra).  Both give the same
Python values, those of :func:`loadmat`'s table, so a script does not depend on how the file
was saved.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Iterable, Optional, Union

import numpy as np

__all__ = ["loadmat", "SuiteSparseProblem", "load_suitesparse"]

PathName = Union[str, "PathLike[str]"]

# The dtype of each numeric MATLAB class in a v7.3 file (HDF5 keeps the class as an attribute).
NUMERIC_CLASSES = {"double": np.float64, "single": np.float32, "int8": np.int8, "uint8": np.uint8,
                   "int16": np.int16, "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32,
                   "int64": np.int64, "uint64": np.uint64, "logical": np.bool_}
H5PY_MISSING = ("reading a MATLAB v7.3 (HDF5) MAT-file needs h5py, which is not installed: python -m pip "
                "install h5py, or from the root of a pychop_compat checkout python -m pip install -e \".[hdf5]\"")


def loadmat(path: PathName, variable_names: Union[str, Iterable[str], None] = None) -> dict[str, Any]:
    """MATLAB's ``load``: the variables of a MAT-file of any version, 7.3 (HDF5) included.

    :func:`scipy.io.loadmat` reads versions 4 to 7 and refuses 7.3 (HDF5), the format MATLAB
    needs for variables over 2 GB and SuiteSparse uses for its newer matrices.  This function
    reads all of them and gives the same values for the same MATLAB data whichever version
    holds it:

    ============================  ===============================================================
    MATLAB                        Python
    ============================  ===============================================================
    numeric array (real/complex)  :class:`numpy.ndarray` of MATLAB's shape (never squeezed: a
                                  scalar is ``1 x 1``) and its class's dtype (``double`` is
                                  float64, ``single`` float32, ``int8`` int8, ...)
    ``logical``                   :class:`numpy.ndarray` of bool
    ``char``                      :class:`str` (one row, or empty); a list of the rows otherwise
    sparse                        :class:`scipy.sparse.csc_array` (float64, complex128 or bool)
    ``struct`` (``1 x 1``)        :class:`dict` of the fields, in MATLAB's order
    ``struct`` array, ``cell``    :class:`numpy.ndarray` of objects (dicts, values) of its shape
    ============================  ===============================================================

    Parameters
    ----------
    path : str or path-like
        The file (the ``.mat`` suffix is not added).
    variable_names : str or iterable of str, optional
        Read only this variable, or these (default: all).

    Returns
    -------
    dict
        Variable name to value; the file's header and globals list are not variables.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        The file is not a MAT-file (no MATLAB header, or not one of the formats 4 to 7.3).
    KeyError
        A name of ``variable_names`` is not in the file (the message lists what it holds).
    ImportError
        A v7.3 file, and h5py is not installed (the message says how to install it).
    NotImplementedError
        A variable of a class without a NumPy counterpart (function handles, objects such as
        ``string`` or ``table``).

    Notes
    -----
    :func:`scipy.io.loadmat` gives version 5 data in the integer type the file stores it in
    (MATLAB stores a ``double`` array of small integers as ``uint8``) and, asked for the class's
    dtype (``mat_dtype=True``), drops the imaginary part of complex arrays; here every array
    has its class's dtype and keeps its imaginary part.

    Examples
    --------
    >>> import numpy as np, scipy.io, tempfile, os
    >>> from pychop_compat.matlab import loadmat
    >>> path = os.path.join(tempfile.mkdtemp(), 'x.mat')
    >>> scipy.io.savemat(path, {'A': np.array([[1., 2.], [3., 4.]]), 'name': 'bcsstk03'})
    >>> data = loadmat(path)
    >>> data['A'], data['name']
    (array([[1., 2.],
           [3., 4.]]), 'bcsstk03')
    """
    source = Path(path)
    wanted = [variable_names] if isinstance(variable_names, str) else (
        None if variable_names is None else list(variable_names))
    hdf5 = _major_version(source) == 2
    variables = (_read_hdf5 if hdf5 else _read_with_scipy)(source, wanted)
    missing = [name for name in wanted or () if name not in variables]
    if missing:
        held = ", ".join(map(repr, _variable_names(source, hdf5))) or "no variables"
        raise KeyError(f"{source} holds no variable {', '.join(map(repr, missing))}; it holds {held}")
    return variables


def _variable_names(path: Path, hdf5: bool) -> list[str]:
    if hdf5:
        import h5py

        with h5py.File(path, "r") as handle:
            return [name for name in handle if not name.startswith("#")]
    import scipy.io

    return [name for name, _, _ in scipy.io.whosmat(str(path))]


def _major_version(path: Path) -> int:
    """0 for a v4 file, 1 for v5 to v7, 2 for v7.3; ValueError for a file of another kind."""
    from scipy.io.matlab import matfile_version

    with open(path, "rb") as handle:
        try:
            major, _ = matfile_version(handle)
        except Exception as error:  # scipy raises ValueError or MatReadError, by version
            raise ValueError(f"{path} is not a MAT-file ({error})") from None
    if major not in (0, 1, 2):
        raise ValueError(f"{path} is not a MAT-file (unknown version {major})")
    return int(major)


# --- Versions 4 to 7, through scipy ---


def _read_with_scipy(path: Path, wanted: Optional[list[str]]) -> dict[str, Any]:
    """Both of scipy's readings: with the class's dtypes and as stored (complex kept), merged."""
    import scipy.io

    options = dict(struct_as_record=False, chars_as_strings=True, variable_names=wanted)
    try:
        with warnings.catch_warnings():  # the complex values it drops are taken from the second reading
            warnings.simplefilter("ignore")
            typed = scipy.io.loadmat(str(path), mat_dtype=True, **options)
        stored = scipy.io.loadmat(str(path), mat_dtype=False, **options)
    except (ValueError, TypeError, OSError) as error:  # a corrupt file past its header (OSError: truncated)
        raise ValueError(f"{path} is not a readable MAT-file ({error})") from None
    return {name: _from_scipy(typed[name], stored[name]) for name in typed if not name.startswith("__")}


def _from_scipy(typed: Any, stored: Any) -> Any:
    """One value of :func:`scipy.io.loadmat` in :func:`loadmat`'s types (see the table there)."""
    from scipy import sparse
    from scipy.io.matlab import MatlabFunction, MatlabObject, MatlabOpaque, mat_struct

    if isinstance(typed, (MatlabFunction, MatlabObject, MatlabOpaque)):
        raise NotImplementedError(f"a MATLAB {type(typed).__name__[6:].lower()} cannot be read")
    if sparse.issparse(typed):
        if typed.dtype == np.uint8:  # scipy's sparse logical (MATLAB's sparse is double or logical)
            return sparse.csc_array(typed, dtype=np.bool_)
        return sparse.csc_array(stored if np.iscomplexobj(stored) else typed)
    if isinstance(typed, mat_struct):
        # the fields in MATLAB's order, as scipy's reader records them (its own simplify_cells reads them so)
        return {name: _from_scipy(getattr(typed, name), getattr(stored, name)) for name in typed._fieldnames}
    typed = np.asarray(typed)
    if typed.dtype.kind == "U":
        rows = [str(row) for row in typed.ravel()]
        return rows[0] if len(rows) == 1 else ("" if not rows else rows)
    if typed.dtype == object:
        cells = np.empty(typed.shape, dtype=object)
        for index in np.ndindex(typed.shape):
            cells[index] = _from_scipy(typed[index], stored[index])
        # scipy gives a struct, of any size, as an object array of mat_struct; a cell holding one
        # struct is an object array of a (1, 1) object array
        one_struct = cells.size == 1 and isinstance(cells.flat[0], dict)
        if one_struct and all(isinstance(v, mat_struct) for v in typed.ravel()):
            return cells.flat[0]
        return cells
    if np.iscomplexobj(stored):
        return np.asarray(stored, dtype=np.result_type(typed.dtype, np.complex64))
    return typed


# --- Version 7.3, through h5py ---


def _read_hdf5(path: Path, wanted: Optional[list[str]]) -> dict[str, Any]:
    try:
        import h5py
    except ImportError as error:
        raise ImportError(H5PY_MISSING, name="h5py") from error
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise ValueError(f"{path} is not a readable MAT-file ({error})") from None
    with handle:
        # "#refs#" holds the elements of cells and struct arrays, "#subsystem#" MATLAB's objects
        names = [name for name in handle if not name.startswith("#")]
        return {name: _from_hdf5(handle[name], name) for name in names if wanted is None or name in wanted}


def _matlab_class(node: Any) -> str:
    value = node.attrs.get("MATLAB_class", b"")
    return value.decode("ascii") if isinstance(value, bytes) else str(value)


def _from_hdf5(node: Any, where: str) -> Any:
    """One variable (or field, or cell element) of a v7.3 file: HDF5 stores MATLAB's
    column-major arrays with their dimensions reversed, so every array is transposed."""
    import h5py

    matlab_class = _matlab_class(node)
    if isinstance(node, h5py.Group):
        if "MATLAB_sparse" in node.attrs:
            return _sparse_from_hdf5(node, matlab_class)
        if matlab_class == "struct" or not matlab_class:
            return _struct_from_hdf5(node, where)
        raise NotImplementedError(f"{where}: MATLAB class {matlab_class!r} cannot be read")
    if node.attrs.get("MATLAB_empty", 0):
        # the dataset holds MATLAB's dimensions, in MATLAB's order
        dimensions = tuple(int(d) for d in np.asarray(node[()]).ravel()) if node.shape else (0, 0)
        if matlab_class == "char":
            return ""
        if matlab_class in NUMERIC_CLASSES:
            return np.zeros(dimensions, dtype=NUMERIC_CLASSES[matlab_class])
        return np.empty(dimensions, dtype=object)  # an empty cell or struct array
    if matlab_class == "char":
        codes = np.asarray(node[()], dtype=np.uint16).T
        rows = [row.astype("<u2").tobytes().decode("utf-16-le") for row in codes.reshape(codes.shape[0], -1)]
        return rows[0] if len(rows) == 1 else rows
    if matlab_class == "cell":
        return _references_from_hdf5(node, where)
    if matlab_class in NUMERIC_CLASSES:
        return _numeric_from_hdf5(np.asarray(node[()]), matlab_class)
    raise NotImplementedError(f"{where}: MATLAB class {matlab_class!r} cannot be read")


def _numeric_from_hdf5(values: np.ndarray, matlab_class: str) -> np.ndarray:
    """MATLAB stores a complex array as a compound of ``real`` and ``imag``."""
    dtype = NUMERIC_CLASSES[matlab_class]
    if values.dtype.names:
        complex_dtype = np.result_type(dtype, np.complex64)
        values = values["real"].astype(complex_dtype) + 1j * values["imag"].astype(complex_dtype)
    else:
        values = values.astype(dtype, copy=False)
    return values.T


def _references_from_hdf5(node: Any, where: str) -> np.ndarray:
    references = np.asarray(node[()]).T
    cells = np.empty(references.shape, dtype=object)
    for index in np.ndindex(references.shape):
        cells[index] = _from_hdf5(node.file[references[index]], f"{where}{{{', '.join(map(str, index))}}}")
    return cells


def _struct_from_hdf5(group: Any, where: str) -> Any:
    """A struct: a group of its fields.  In a struct array each field is a dataset of references
    (one element per struct), with no MATLAB class of its own."""
    names = [b"".join(np.asarray(name).ravel()).decode("ascii") for name in group.attrs.get("MATLAB_fields", [])]
    names = [n for n in names if n in group] + [n for n in group if n not in names]
    per_element = [n for n in names if _is_reference_array(group[n])]
    if names and len(per_element) == len(names):
        columns = {n: _references_from_hdf5(group[n], f"{where}.{n}") for n in names}
        shape = next(iter(columns.values())).shape
        structs = np.empty(shape, dtype=object)
        for index in np.ndindex(shape):
            structs[index] = {n: columns[n][index] for n in names}
        return structs
    return {n: _from_hdf5(group[n], f"{where}.{n}") for n in names}


def _is_reference_array(node: Any) -> bool:
    import h5py

    return (isinstance(node, h5py.Dataset) and not _matlab_class(node)
            and node.dtype == h5py.ref_dtype)


def _sparse_from_hdf5(group: Any, matlab_class: str) -> Any:
    """MATLAB's compressed columns: ``jc`` (column starts), ``ir`` (row indices), ``data``; the
    attribute ``MATLAB_sparse`` is the number of rows.  A matrix without nonzeros has no
    ``ir`` nor ``data``."""
    from scipy import sparse

    rows = int(group.attrs["MATLAB_sparse"])
    starts = np.asarray(group["jc"][()], dtype=np.int64)
    if "data" in group:
        values = _numeric_from_hdf5(np.asarray(group["data"][()]), matlab_class).ravel()
        indices = np.asarray(group["ir"][()], dtype=np.int64)
    else:
        values = np.zeros(0, dtype=NUMERIC_CLASSES.get(matlab_class, np.float64))
        indices = np.zeros(0, dtype=np.int64)
    return sparse.csc_array((values, indices, starts), shape=(rows, starts.size - 1))


# --- SuiteSparse's Problem struct ---


@dataclass(frozen=True, eq=False)
class SuiteSparseProblem:
    """A matrix of the SuiteSparse Matrix Collection: the ``Problem`` struct of its ``.mat`` file.

    Attributes
    ----------
    name : str
        ``'Group/name'``, e.g. ``'HB/bcsstk03'``.
    title : str
        The one-line description.
    id : int
        The matrix's number in the collection.
    kind : str
        E.g. ``'structural problem'``.
    A : scipy.sparse.csc_array
        The matrix (``Problem.A``); ``A.toarray()`` gives it dense.
    zeros : scipy.sparse.csc_array or None
        ``Problem.Zeros``: the entries that the original matrix stores explicitly although they
        are zero (they are not in ``A``), or None where there are none.
    fields : dict
        Every field of ``Problem``, as :func:`loadmat` reads them (``b``, ``x``, ``notes``,
        ``aux``, ``date``, ``author``, ``ed`` where present).
    """

    name: str
    title: str
    id: int
    kind: str
    A: Any
    zeros: Optional[Any] = None
    fields: dict = field(default_factory=dict, repr=False)


def load_suitesparse(name: PathName, folder: Optional[PathName] = None) -> SuiteSparseProblem:
    """Read a SuiteSparse matrix from a ``.mat`` file the user has (MATLAB v5 to v7.3).

    Nothing is downloaded: the file comes from the collection's site (sparse.tamu.edu,
    ``mat/Group/name.mat``) or from ``ssget``'s folder.

    Parameters
    ----------
    name : str or path-like
        Without ``folder``, the path of the file.  With ``folder``, the matrix's name, with or
        without its group (``'bcsstk03'`` or ``'HB/bcsstk03'``).
    folder : str or path-like, optional
        Where to look for ``name``: ``folder/Group/name.mat`` (the collection's layout), then
        ``folder/name.mat``, then ``folder/*/name.mat``.

    Returns
    -------
    SuiteSparseProblem

    Raises
    ------
    FileNotFoundError
        No such file (the message lists the paths tried).
    KeyError
        The file has no ``Problem`` variable, or ``Problem`` no field ``A``.
    ValueError, ImportError, NotImplementedError
        As :func:`loadmat`.

    Examples
    --------
    With ``bcsstk03.mat`` downloaded into ``~/suitesparse/HB/``::

        problem = load_suitesparse('HB/bcsstk03', folder='~/suitesparse')
        A = problem.A.toarray()           # 112 x 112, float64
    """
    path = _find_matrix(name, folder)
    problem = loadmat(path, "Problem")["Problem"]
    if not isinstance(problem, dict) or "A" not in problem:
        raise KeyError(f"{path}: Problem is not a SuiteSparse struct with a field 'A'")
    matrix = problem["A"]
    if not hasattr(matrix, "tocsc"):  # a dense A, as a few problems store it
        from scipy import sparse

        matrix = sparse.csc_array(matrix)
    identifier = np.asarray(problem.get("id", np.zeros((1, 1)))).ravel()
    return SuiteSparseProblem(name=_text(problem.get("name")), title=_text(problem.get("title")),
                              id=int(identifier[0]) if identifier.size else 0, kind=_text(problem.get("kind")),
                              A=matrix, zeros=problem.get("Zeros"), fields=problem)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "\n".join(value) if isinstance(value, list) else ""


def _find_matrix(name: PathName, folder: Optional[PathName]) -> Path:
    if folder is None:
        path = Path(name).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"no SuiteSparse file {path}")
        return path
    root = Path(folder).expanduser()
    relative = Path(name)
    stem = relative.name.removesuffix(".mat")
    tried = [root / relative.parent / f"{stem}.mat", root / f"{stem}.mat"]
    found = [path for path in tried if path.is_file()] or sorted(root.glob(f"*/{stem}.mat"))
    if found:
        return found[0]
    raise FileNotFoundError(f"no SuiteSparse matrix {str(name)!r} in {root} (tried "
                            f"{', '.join(map(str, dict.fromkeys(tried)))} and {root / '*' / (stem + '.mat')})")
