"""Reading MAT-files: ``pychop_compat.matlab.loadmat`` and ``load_suitesparse``.

Two real SuiteSparse files, stored as their repository holds them (``tests/data/matrices``,
provenance in its README): ``tumorAntiAngiogenesis_2.mat`` in MATLAB v7.3 (HDF5) and ``nos5.mat``
in v5.  Besides them, files written here in MATLAB's v7.3 layout (h5py) and in v5 (scipy), and
one written by GNU Octave (v7, stored), hold each MATLAB class: all must read as the same
Python values.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from scipy import sparse

from pychop_compat.matlab import SuiteSparseProblem, load_suitesparse, loadmat

MATRICES = Path(__file__).resolve().parent / "data" / "matrices"
V73 = MATRICES / "tumorAntiAngiogenesis_2.mat"
V5 = MATRICES / "nos5.mat"


def assert_same(got, expected, where="value"):
    """Equal values of equal types, recursively (sparse compared by pattern and values)."""
    assert type(got) is type(expected), (where, type(got), type(expected))
    if isinstance(got, dict):
        assert list(got) == list(expected), where
        for name in got:
            assert_same(got[name], expected[name], f"{where}.{name}")
    elif sparse.issparse(got):
        assert got.shape == expected.shape and got.dtype == expected.dtype, where
        assert (got != expected).nnz == 0, where
    elif isinstance(got, np.ndarray):
        assert got.shape == expected.shape and got.dtype == expected.dtype, (where, got.dtype, expected.dtype)
        if got.dtype == object:
            for index in np.ndindex(got.shape):
                assert_same(got[index], expected[index], f"{where}{index}")
        else:
            assert np.array_equal(got, expected), where
    else:
        assert got == expected, where


# ---------------------------------------------------------------------------
# Real files
# ---------------------------------------------------------------------------


def test_v73_suitesparse_file_as_matlab_saved_it():
    pytest.importorskip("h5py")
    problem = load_suitesparse(V73)
    assert isinstance(problem, SuiteSparseProblem)
    assert (problem.name, problem.id, problem.kind) == ("VDOL/tumorAntiAngiogenesis_2", 2749, "optimal control problem")
    assert problem.title == "tumorAntiAngiogenesis optimal control problem (matrix 2 of 8)"
    assert isinstance(problem.A, sparse.csc_array) and problem.A.dtype == np.float64
    assert problem.A.shape == (305, 305) and problem.A.nnz == 2699 and problem.zeros is None
    assert list(problem.fields) == ["name", "title", "A", "b", "id", "date", "author", "ed", "kind", "notes", "aux"]
    assert problem.fields["id"].shape == (1, 1) and problem.fields["b"].shape == (305, 1)
    assert (problem.fields["date"], problem.fields["ed"]) == ("2015", "T. Davis")
    notes = problem.fields["notes"]
    assert len(notes) == 55 and {len(row) for row in notes} == {71}  # a 55 x 71 char matrix
    assert notes[0].rstrip() == "Optimal control problem, Vehicle Dynamics & Optimization Lab, UF"
    assert list(problem.fields["aux"]) == ["rowname", "mapping"]
    assert problem.fields["aux"]["mapping"].shape == (305, 1)


def test_v73_matrix_has_the_published_properties():
    """gmresir3_ctest.txt (SrikaraPranesh/Multi_precision_NLA_kernels, commit 3265d72) prints
    cond(A, inf), max |a_ij| and min |a_ij| > 0 of this matrix; a transposed or permuted read
    would change the infinity-norm condition number."""
    pytest.importorskip("h5py")
    A = load_suitesparse(V73).A.toarray()
    magnitudes = np.abs(A)
    assert f"{np.linalg.cond(A, np.inf):.2e}" == "1.99e+10"
    assert (f"{magnitudes.max():.2e}", f"{magnitudes[magnitudes > 0].min():.2e}") == ("5.15e+05", "8.51e-06")


def test_v5_suitesparse_file_reads_as_scipy_reads_it():
    problem = load_suitesparse(V5)
    raw = scipy.io.loadmat(str(V5))["Problem"][0, 0]
    assert (problem.name, problem.id, problem.kind) == ("HB/nos5", 221, "structural problem")
    assert problem.title == str(raw["title"][0])
    assert isinstance(problem.A, sparse.csc_array) and problem.A.shape == (468, 468)
    assert (problem.A != sparse.csc_array(raw["A"])).nnz == 0
    # MATLAB stores the id (a double) as a small integer; loadmat gives the class's dtype
    assert problem.fields["id"].dtype == np.float64


def test_v73_and_v5_give_the_same_values_for_the_same_problem(tmp_path):
    """The v7.3 problem written again in v5 by scipy reads back as the same Python values."""
    pytest.importorskip("h5py")
    problem = loadmat(V73)["Problem"]

    def for_savemat(value):
        if isinstance(value, dict):
            return {k: for_savemat(v) for k, v in value.items()}
        if isinstance(value, list):  # a char matrix
            return np.array(value)
        return value

    scipy.io.savemat(tmp_path / "v5.mat", {"Problem": for_savemat(problem)}, do_compression=True)
    assert_same(loadmat(tmp_path / "v5.mat")["Problem"], problem, "Problem")


def test_variable_names_selects():
    assert list(loadmat(V5, ["Problem"])) == list(loadmat(V5, "Problem")) == ["Problem"]
    with pytest.raises(KeyError, match="holds no variable 'x'; it holds 'Problem'"):
        loadmat(V5, ["Problem", "x"])


# ---------------------------------------------------------------------------
# Every class, in MATLAB's v7.3 layout and in v5
# ---------------------------------------------------------------------------

MATLAB_73_HEADER = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Fri Nov 27 00:00:00 2026 HDF5 schema 1.00 ."


def write_v73(path, build):
    """An HDF5 file with MATLAB's 512-byte user block and header, its variables made by ``build(file)``."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w", userblock_size=512) as handle:
        build(handle)
    with open(path, "r+b") as raw:
        raw.write(MATLAB_73_HEADER.ljust(116) + b"\0" * 8 + b"\x00\x02" + b"IM")


def put(parent, name, values, matlab_class, **attrs):
    """A dataset as MATLAB writes it: the array's dimensions reversed, the class as an attribute."""
    dataset = parent.create_dataset(name, data=np.asarray(values).T)
    dataset.attrs["MATLAB_class"] = np.bytes_(matlab_class)
    for key, value in attrs.items():
        dataset.attrs[key] = value
    return dataset


def put_char(parent, name, rows):
    rows = [rows] if isinstance(rows, str) else rows
    codes = np.array([[ord(c) for c in row] for row in rows], dtype=np.uint16)
    return put(parent, name, codes, "char", MATLAB_int_decode=np.uint8(2))


def put_sparse(parent, name, matrix, matlab_class="double"):
    import h5py

    matrix = sparse.csc_array(matrix)
    group = parent.create_group(name)
    group.attrs["MATLAB_class"] = np.bytes_(matlab_class)
    group.attrs["MATLAB_sparse"] = np.uint64(matrix.shape[0])
    group.create_dataset("jc", data=matrix.indptr.astype(np.uint64))
    if matrix.nnz:
        group.create_dataset("ir", data=matrix.indices.astype(np.uint64))
        data = matrix.data
        if np.iscomplexobj(data):
            pair = np.dtype([("real", np.float64), ("imag", np.float64)])
            data = np.array(list(zip(data.real, data.imag)), dtype=pair)
        group.create_dataset("data", data=data.astype(np.uint8) if matlab_class == "logical" else data)
    assert isinstance(group, h5py.Group)


def put_references(handle, parent, name, elements, shape, writer):
    """A dataset of object references (cells, fields of struct arrays) into ``#refs#``."""
    import h5py

    refs = handle.require_group("#refs#")
    references = np.empty(shape, dtype=h5py.ref_dtype)
    for index in np.ndindex(shape):
        target = f"r{len(refs)}"
        writer(refs, target, elements[index])
        references[index] = refs[target].ref
    return parent.create_dataset(name, data=references.T, dtype=h5py.ref_dtype)


def struct_group(parent, name, fields):
    group = parent.create_group(name)
    group.attrs["MATLAB_class"] = np.bytes_("struct")
    import h5py

    names = np.empty(len(fields), dtype=object)
    names[:] = [np.frombuffer(f.encode(), dtype="S1") for f in fields]
    group.attrs.create("MATLAB_fields", names, dtype=h5py.vlen_dtype(np.dtype("S1")))
    return group


EXPECTED = {
    "M": np.arange(6.0).reshape(2, 3),
    "S32": np.array([[1.5, -2.0]], dtype=np.float32),
    "C": np.array([[1 + 2j], [3 - 0.5j]]),
    "I": np.array([[1, -2, 3]], dtype=np.int16),
    "L": np.array([[True, False]]),
    "s": "hello",
    "rows": ["ab ", "cde"],
    "E": np.zeros((0, 0)),
    "cell": np.array([[np.array([[1.0]]), "x"]], dtype=object),
    "st": {"a": np.array([[1.0]]), "name": "t", "sub": {"q": np.eye(2)}},
    "sa": np.array([[{"a": np.array([[1.0]])}, {"a": np.array([[2.0]])}]], dtype=object),
    "S": sparse.csc_array(np.array([[0.0, 1.0], [2.0, 0.0], [0.0, 0.0]])),
    "SC": sparse.csc_array(np.array([[0.0, 1j], [2.0, 0.0]])),
    "SL": sparse.csc_array(np.array([[False, True], [True, False]])),
    "SE": sparse.csc_array((3, 2)),
}


def build_every_class(handle):
    put(handle, "M", EXPECTED["M"], "double")
    put(handle, "S32", EXPECTED["S32"], "single")
    pair = np.dtype([("real", np.float64), ("imag", np.float64)])
    put(handle, "C", np.array([(1.0, 2.0), (3.0, -0.5)], dtype=pair).reshape(2, 1), "double")
    put(handle, "I", EXPECTED["I"], "int16")
    put(handle, "L", EXPECTED["L"].astype(np.uint8), "logical")
    put_char(handle, "s", "hello")
    put_char(handle, "rows", ["ab ", "cde"])
    put(handle, "E", np.array([0, 0], dtype=np.uint64), "double", MATLAB_empty=np.uint8(1))

    def element(parent, name, value):
        if isinstance(value, str):
            put_char(parent, name, value)
        else:
            put(parent, name, value, "double")

    put_references(handle, handle, "cell", EXPECTED["cell"], (1, 2), element).attrs["MATLAB_class"] = np.bytes_("cell")
    st = struct_group(handle, "st", ["a", "name", "sub"])
    put(st, "a", np.array([[1.0]]), "double")
    put_char(st, "name", "t")
    put(struct_group(st, "sub", ["q"]), "q", np.eye(2), "double")
    sa = struct_group(handle, "sa", ["a"])
    put_references(handle, sa, "a", np.array([[1.0, 2.0]]), (1, 2),
                   lambda parent, name, v: put(parent, name, np.array([[v]]), "double"))
    put_sparse(handle, "S", EXPECTED["S"])
    put_sparse(handle, "SC", EXPECTED["SC"])
    put_sparse(handle, "SL", EXPECTED["SL"], "logical")
    put_sparse(handle, "SE", EXPECTED["SE"])


def test_every_class_in_v73_layout(tmp_path):
    write_v73(tmp_path / "all.mat", build_every_class)
    got = loadmat(tmp_path / "all.mat")
    assert sorted(got) == sorted(EXPECTED)
    for name, value in EXPECTED.items():
        assert_same(got[name], value, name)


def test_every_class_in_v5_reads_as_in_v73(tmp_path):
    saved = {k: (np.array(v) if isinstance(v, list) else v) for k, v in EXPECTED.items()}
    saved["S32"] = EXPECTED["S32"]
    saved["SL"] = sparse.csc_matrix(EXPECTED["SL"])
    scipy.io.savemat(tmp_path / "all5.mat", saved)
    got = loadmat(tmp_path / "all5.mat")
    for name, value in EXPECTED.items():
        assert_same(got[name], value, name)


def test_v73_empty_values_and_missing_variable(tmp_path):
    """MATLAB writes an empty value as its dimensions, in MATLAB's order, marked MATLAB_empty."""
    def build(handle):
        for name, matlab_class, dimensions in (("E", "double", [0, 3]), ("I", "int8", [2, 0]),
                                               ("s", "char", [0, 0]), ("c", "cell", [1, 0])):
            put(handle, name, np.array(dimensions, dtype=np.uint64), matlab_class, MATLAB_empty=np.uint8(1))

    write_v73(tmp_path / "empty.mat", build)
    got = loadmat(tmp_path / "empty.mat")
    assert_same(got, {"E": np.zeros((0, 3)), "I": np.zeros((2, 0), dtype=np.int8), "c": np.empty((1, 0), dtype=object),
                      "s": ""})  # h5py lists a file's variables by name
    with pytest.raises(KeyError, match="holds no variable 'x'; it holds 'E', 'I', 'c', 's'"):
        loadmat(tmp_path / "empty.mat", ["x"])


def test_every_class_written_by_octave_reads_as_in_v73():
    """A v7 file of another writer, GNU Octave (tests/data/matrices/README.md)."""
    got = loadmat(MATRICES / "octave_v7.mat")
    assert sorted(got) == sorted(set(EXPECTED) - {"SL"})
    for name in got:
        assert_same(got[name], EXPECTED[name], name)


def test_v5_double_stored_as_integers_keeps_double_and_complex_keeps_imaginary_part(tmp_path):
    scipy.io.savemat(tmp_path / "x.mat", {"c": np.array([[1 + 2j, 3.0]]), "n": np.array([[25.0]])})
    # scipy alone: mat_dtype=True drops the imaginary part
    got = loadmat(tmp_path / "x.mat")
    assert_same(got["c"], np.array([[1 + 2j, 3.0]]))
    assert_same(got["n"], np.array([[25.0]]))


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_not_a_mat_file(tmp_path):
    (tmp_path / "a.mat").write_text("Problem = 1\n" * 20)
    with pytest.raises(ValueError, match="is not a MAT-file"):
        loadmat(tmp_path / "a.mat")
    (tmp_path / "empty.mat").write_bytes(b"")
    with pytest.raises(ValueError, match="is not a MAT-file"):
        loadmat(tmp_path / "empty.mat")


def test_truncated_mat_file_is_a_value_error(tmp_path):
    # A v5 file cut inside a variable: SciPy raises OSError ('could not read bytes') or ValueError
    # depending on where the cut falls; the documented error is a ValueError either way.
    scipy_io = pytest.importorskip("scipy.io")
    scipy_io.savemat(tmp_path / "full.mat", {"A": np.ones((50, 50))})
    whole = (tmp_path / "full.mat").read_bytes()
    for cut in (300, 1000, len(whole) - 8):
        (tmp_path / "cut.mat").write_bytes(whole[:cut])
        with pytest.raises(ValueError, match="not a readable MAT-file"):
            loadmat(tmp_path / "cut.mat")


def test_hdf5_file_without_matlab_header_is_not_a_mat_file(tmp_path):
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "plain.h5", "w") as handle:
        handle["x"] = np.ones(3)
    with pytest.raises(ValueError, match="is not a MAT-file"):
        loadmat(tmp_path / "plain.h5")


def test_missing_file():
    with pytest.raises(FileNotFoundError):
        loadmat(MATRICES / "no_such.mat")
    with pytest.raises(FileNotFoundError):
        load_suitesparse(MATRICES / "no_such.mat")


def test_v73_without_h5py_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "h5py", None)  # import h5py raises ImportError
    with pytest.raises(ImportError, match=r"needs h5py.*pip install -e \"\.\[hdf5\]\""):
        loadmat(V73)
    assert list(loadmat(V5)) == ["Problem"]  # v5 files need no h5py


def test_unsupported_class_is_named(tmp_path):
    def build(handle):
        put(handle, "ok", np.ones((1, 1)), "double")
        put(handle, "text", np.zeros((1, 6), dtype=np.uint32), "string", MATLAB_object_decode=np.uint8(3))

    write_v73(tmp_path / "obj.mat", build)
    with pytest.raises(NotImplementedError, match="text: MATLAB class 'string'"):
        loadmat(tmp_path / "obj.mat")
    assert_same(loadmat(tmp_path / "obj.mat", ["ok"]), {"ok": np.ones((1, 1))})


def test_file_without_problem_is_not_suitesparse(tmp_path):
    scipy.io.savemat(tmp_path / "x.mat", {"A": np.eye(2)})
    with pytest.raises(KeyError, match="holds no variable 'Problem'; it holds 'A'"):
        load_suitesparse(tmp_path / "x.mat")
    scipy.io.savemat(tmp_path / "y.mat", {"Problem": {"name": "x"}})
    with pytest.raises(KeyError, match="field 'A'"):
        load_suitesparse(tmp_path / "y.mat")


def test_suitesparse_from_a_folder(tmp_path):
    (tmp_path / "HB").mkdir()
    shutil.copy(V5, tmp_path / "HB" / "nos5.mat")
    for name in ("nos5", "HB/nos5", "nos5.mat"):
        assert load_suitesparse(name, folder=tmp_path).name == "HB/nos5"
    shutil.copy(V5, tmp_path / "flat.mat")
    assert load_suitesparse("flat", folder=tmp_path).id == 221
    with pytest.raises(FileNotFoundError, match="no SuiteSparse matrix 'bcsstk03'"):
        load_suitesparse("bcsstk03", folder=tmp_path)


def test_zeros_field_is_kept_apart(tmp_path):
    A = sparse.csc_array(np.array([[4.0, 1.0], [1.0, 3.0]]))
    zeros = sparse.csc_array(np.array([[0.0, 0.0], [1.0, 0.0]]))

    def build(handle):
        problem = struct_group(handle, "Problem", ["name", "title", "A", "Zeros", "id", "kind"])
        put_char(problem, "name", "Test/two")
        put_char(problem, "title", "two by two")
        put_sparse(problem, "A", A)
        put_sparse(problem, "Zeros", zeros)
        put(problem, "id", np.array([[7.0]]), "double")
        put_char(problem, "kind", "test")

    write_v73(tmp_path / "two.mat", build)
    problem = load_suitesparse(tmp_path / "two.mat")
    assert (problem.name, problem.title, problem.id, problem.kind) == ("Test/two", "two by two", 7, "test")
    assert_same(problem.A, A)
    assert_same(problem.zeros, zeros)
