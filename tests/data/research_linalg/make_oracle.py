"""Write ``oracle.json``: inputs and GNU Octave outputs of the research codes' linear algebra.

Run from the repository root, with GNU Octave on the path and a folder holding the research
files (see ``README.md``)::

    python tests/data/research_linalg/make_oracle.py /path/to/research_m_files

Every number crosses to Octave and back as the hexadecimal of its bits (``hex2num`` and
``num2hex``), so the stored outputs are Octave's to the last bit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


def _hex_matrix(a: np.ndarray) -> str:
    """An Octave expression for the double matrix ``a``, bit for bit."""
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    words = ";".join("'" + format(int(v.view(np.uint64)), "016x") + "'" for v in a.flatten(order="F"))
    return f"reshape(hex2num({{{words}}}), {a.shape[0]}, {a.shape[1]})"


def _symmetric(a: np.ndarray) -> np.ndarray:
    """``a``'s upper triangle mirrored: symmetric to the last bit, as ``chol_lp`` requires."""
    return np.triu(a) + np.triu(a, 1).T


def inputs() -> dict:
    """The input matrices and vectors, by case name."""
    rng = np.random.default_rng(2026)
    d = np.array([1e5, 1.0, 1e-3, 3e2])
    B = np.array([[2.0, 1, 0, 1], [1, 3, 1, 0], [0, 1, 4, 1], [1, 0, 1, 5]])
    spd_graded = d[:, None] * B * d[None, :]
    signs = rng.choice([-1.0, 1.0], (6, 6))
    wide = signs * 10.0 ** rng.uniform(-6, 8, (6, 6))
    C = rng.standard_normal((7, 7))
    spd_wide = C @ C.T + 7 * np.eye(7)
    e = 10.0 ** rng.uniform(-2, 3, 7)
    spd_wide = _symmetric(e[:, None] * spd_wide * e[None, :])
    zero_row = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [4.0, 5e4, 6e-5]])
    hilbert = 1.0 / (np.arange(8)[:, None] + np.arange(8)[None, :] + 1)
    vector = np.concatenate([[1.0], 10.0 ** rng.uniform(-17, 0, 15) * rng.choice([-1.0, 1.0], 15)])
    return {
        "spd_graded": spd_graded,
        "wide": wide,
        "spd_wide": spd_wide,
        "zero_row": zero_row,
        "normal": rng.standard_normal((6, 6)),
        "singular": np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]]),
        "hilbert": hilbert,
        "indefinite": np.array([[1.0, 2.0], [2.0, 1.0]]),
        "tall": rng.standard_normal((7, 4)),
        "graded_tall": rng.standard_normal((6, 3)) * 10.0 ** rng.uniform(-3, 3, (6, 1)),
        "zero_column": np.array([[1.0, 0.0, 2.0], [2.0, 0.0, 1.0], [0.5, 0.0, 3.0], [1.0, 0.0, 1.0]]),
        "sum_vector": vector,
        "sum_matrix": rng.standard_normal((12, 3)) * 10.0 ** rng.integers(-8, 9, (12, 3)),
        "sum_signed_zero": np.array([-0.0, -0.0]),
        "sum_numpy_differs": np.array([1.0] + [2.0**-53] * 8 + [0.1, -0.3]),
    }


#: (function, case, Octave call producing the outputs, output names); single outputs
#: are widened to double before they are written.
CALLS = [("scale_diag_2side", c, "[B, D1, D2] = scale_diag_2side(A); d1 = diag(D1); d2 = diag(D2);",
          ["B", "d1", "d2"]) for c in ("spd_graded", "wide", "spd_wide", "zero_row")]
CALLS += [("scale_diag_2side_symm", c, "[B, D1, D2, its] = scale_diag_2side_symm(A); d1 = diag(D1); "
           "d2 = diag(D2);", ["B", "d1", "d2", "its"]) for c in ("spd_graded", "wide", "spd_wide", "zero_row")]
CALLS += [("lutx_chop", c, f"[L, U, p] = lutx_chop(A, '{f}');", ["L", "U", "p"])
          for c in ("normal", "wide", "singular", "hilbert") for f in ("h", "b")]
# gmresir3_ctest.m's flow (lines 43-52): scale, mu = theta * xmax, round, factorize
CALLS += [("lutx_chop", "spd_wide", "[B, D1, D2] = scale_diag_2side_symm(A); "
           "[L, U, p] = lutx_chop(chop(0.1 * 65504 * B, struct('format', 'h')), 'h');",
           ["L", "U", "p"])]
CALLS += [("spd_diag_scale", c, f"[B, D, mu] = spd_diag_scale(A, {flag}, 0.1); d = diag(D);", ["B", "d", "mu"])
          for c in ("spd_graded", "spd_wide", "normal_spd") for flag in (0, 1)]
CALLS += [("chol_lp", c, f"[R, flag] = chol_lp(A, '{f}');", ["R", "flag"])
          for c in ("spd_graded", "spd_wide", "hilbert", "indefinite", "normal_spd") for f in ("h", "b")]
CALLS += [("house_qr_lp", c, f"[Q, R] = house_qr_lp(A, {flag});", ["Q", "R"])
          for c in ("tall", "graded_tall", "zero_column", "normal") for flag in (1, 0)]
CALLS += [("sum", c, "s = sum(A);", ["s"]) for c in ("sum_vector", "sum_matrix", "sum_signed_zero",
                                                                 "sum_numpy_differs")]
CALLS += [("sum", "sum_matrix", "s = sum(A, 2);", ["s"]),
          ("sum", "sum_vector", "s = double(sum(single(A)));", ["s"])]


def main(research: str) -> None:
    data = inputs()
    data["normal_spd"] = _symmetric(data["normal"] @ data["normal"].T)
    lines = [f"addpath('{Path(research).resolve()}');", "format long;"]
    for index, (function, case, call, names) in enumerate(CALLS):
        A = data[case]
        lines.append(f"A = {_hex_matrix(A.reshape(1, -1) if A.ndim == 1 else A)};")
        lines.append(call)
        for name in names:
            lines.append(f"printf('{index} {name} %d %d', rows({name}), columns({name})); "
                         f"printf(' %s', cellstr(num2hex(double({name}(:))))'{{:}}); printf('\\n');")
    script = "\n".join(lines)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "oracle_run.m"
        path.write_text(script + "\n")
        run = subprocess.run(["octave-cli", "--no-gui", str(path)], capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(run.stderr)
    out = run.stdout
    results: list = [{"function": f, "case": c, "call": call, "outputs": {}} for f, c, call, _ in CALLS]
    for line in out.splitlines():
        index, name, rows, cols, *words = line.split()
        values = np.array([int(w, 16) for w in words], dtype=np.uint64).view(np.float64)
        results[int(index)]["outputs"][name] = values.reshape((int(rows), int(cols)), order="F").tolist()
    version = subprocess.run(["octave-cli", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    oracle = {
        "provenance": {
            "research": "github.com/SrikaraPranesh/Multi_precision_NLA_kernels, commit "
                        "fb3a2d7d0d8a1cd5b0e09e7b4801996b4f5de2bc: chol_lp.m, lutx_chop.m, house_qr_lp.m, "
                        "hgemm.m, ip_chop.m, "
                        "scaling_algorithms/scale_diag_2side.m, scaling_algorithms/scale_diag_2side_symm.m, "
                        "scaling_algorithms/spd_diag_scale.m",
            "chop": "github.com/higham/chop, commit 906c31e653ad610effb2402f567b2dab69518176: chop.m, "
                    "float_params.m",
            "octave": version,
            "command": "python tests/data/research_linalg/make_oracle.py <folder of those .m files>",
        },
        "inputs": {name: value.tolist() for name, value in data.items()},
        "results": results,
    }
    (HERE / "oracle.json").write_text(json.dumps(oracle, indent=None) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
