"""Write ``oracle.json``: GNU Octave runs of the research codes' GMRES-IR (``gmresir3.m``) and
LU-IR (``sir3.m``).

Run from the repository root with GNU Octave on the path, a folder holding the research files
and, in its subfolder ``trace``, the recording ``gmres_dd.m`` (see ``README.md``)::

    python tests/data/research_ir/make_oracle.py /path/to/research_m_files

Inputs go to Octave and outputs come back as raw little-endian doubles (``fwrite``/``fread``),
so both are the same bits on each side.  Each code is run with ``iter_max = 0, 1, 2, ...``
until it reports convergence: the run with ``iter_max = k`` returns the iterate after ``k``
refinement steps (``x_0`` for ``k = 0``), or the converged one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


def inputs() -> dict:
    """Square nonsingular test matrices and right-hand sides; no random numbers."""
    i = np.arange(10.0)
    I, J = np.meshgrid(i, i, indexing="ij")
    # a nonsymmetric Toeplitz matrix with its rows reversed (partial pivoting swaps rows)
    toeplitz_flipped = np.where(I >= J, 0.6 ** (I - J), -(0.4 ** (J - I)))[::-1].copy()
    # rows graded from 1 to 10**-4.5 (kappa_inf about 1e5)
    row_graded = (np.cos(0.7 * (I + 1) * (J + 1)) + 2 * np.eye(10)) * 10.0 ** (-I / 2)
    k = np.arange(12.0)
    K, L = np.meshgrid(k, k, indexing="ij")
    cosine = np.cos(0.9 * (K + 1) * (L + 1) ** 1.3) + 0.05 * (K == L)  # kappa_inf about 2.5e3
    h = np.arange(1.0, 7.0)
    hilbert6 = 1.0 / (h[:, None] + h[None, :] - 1)  # kappa_inf about 2.9e7
    return {"toeplitz_flipped": (toeplitz_flipped, np.cos(i + 1)),
            "row_graded": (row_graded, np.sin(i + 0.5)),
            "cosine": (cosine, np.cos(1.3 * k) + 0.25),
            "hilbert6": (hilbert6, np.ones(6))}


RESEARCH = "github.com/SrikaraPranesh/Multi_precision_NLA_kernels, commit fb3a2d7d0d8a1cd5b0e09e7b4801996b4f5de2bc"
RESEARCH_FILES = ["gmresir3.m", "sir3.m", "lutx_chop.m", "trisol.m", "lp_matvec.m", "GMRES/gmres_dd.m"]
CHOP = "github.com/higham/chop, commit 906c31e653ad610effb2402f567b2dab69518176: chop.m, float_params.m, roundit.m"

#: (case, precf) of gmresir3(A, b, precf, 2, 2, iter_max, 1e-6, scale, 0), scale.flag = 0,
#: scale.type = 'g', scale.precon = 'l' (precf: 1 fp16, 2 bfloat16, 3 single).
GMRES_RUNS = [("toeplitz_flipped", 1), ("row_graded", 1), ("cosine", 1), ("hilbert6", 1),
              ("row_graded", 3), ("hilbert6", 3), ("cosine", 2)]
#: (case, precf) of sir3(A, b, precf, 2, 2, iter_max, 0) (precf: 0 half, 1 single).
SIR_RUNS = [("toeplitz_flipped", 0), ("cosine", 0), ("toeplitz_flipped", 1), ("row_graded", 1),
            ("hilbert6", 1)]
#: The largest iter_max tried.
KMAX = 12


def main(research: str) -> None:
    cases = inputs()
    folder_m = Path(research).resolve()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        # the recording gmres_dd.m first on the path, then the research files
        lines = [f"addpath('{folder_m}'); addpath('{folder_m / 'trace'}'); global GMRES_ITS"]
        runs: list = []

        def read(index: int, name: str, a: np.ndarray) -> None:
            path = work / f"in{index}_{name}.bin"
            np.asarray(a, dtype="<f8").tofile(path)
            rows, cols = (a.shape[1], a.shape[0]) if a.ndim == 2 else (a.shape[0], 1)
            lines.append(f"fid = fopen('{path}'); {name} = reshape(fread(fid, Inf, 'double'), {rows}, {cols}); "
                         "fclose(fid);")

        def write(index: int, names: list) -> None:
            for name in names:
                lines.append(f"fid = fopen('{work}/out{index}_{name}.bin', 'w'); fwrite(fid, double({name}(:)), "
                             "'double'); fclose(fid);")

        for case, precf in GMRES_RUNS:
            A, b = cases[case]
            index = len(runs)
            read(index, "A", A.T)  # A.T in C order is A in Octave's column-major order
            read(index, "b", b)
            lines.append(
                "scale = struct('flag', 0, 'type', 'g', 'precon', 'l'); X = []; iters = []; totals = [];\n"
                f"for k = 0:{KMAX}\n"
                f"  GMRES_ITS = []; [x, iter_o, gmres_its_o] = gmresir3(A, b, {precf}, 2, 2, k, 1e-6, scale, 0);\n"
                "  X = [X, x]; iters = [iters, iter_o]; totals = [totals, gmres_its_o];\n"
                "  if isfinite(iter_o), break, end\n"
                "end\n"
                "its = GMRES_ITS;")
            write(index, ["X", "iters", "totals", "its"])
            runs.append({"code": "gmresir3", "case": case, "precf": precf,
                         "call": f"gmresir3(A, b, {precf}, 2, 2, k, 1e-6, struct('flag', 0, 'type', 'g', "
                                 "'precon', 'l'), 0)"})
        for case, precf in SIR_RUNS:
            A, b = cases[case]
            index = len(runs)
            read(index, "A", A.T)
            read(index, "b", b)
            lines.append(
                "X = []; iters = [];\n"
                f"for k = 0:{KMAX}\n"
                f"  [x, iter1] = sir3(A, b, {precf}, 2, 2, k, 0);\n"
                "  X = [X, double(x)]; iters = [iters, iter1];\n"
                "  if isfinite(iter1), break, end\n"
                "end")
            write(index, ["X", "iters"])
            runs.append({"code": "sir3", "case": case, "precf": precf,
                         "call": f"sir3(A, b, {precf}, 2, 2, k, 0)"})
        script = work / "oracle_run.m"
        script.write_text("\n".join(lines) + "\n")
        run = subprocess.run(["octave-cli", "--no-gui", str(script)], capture_output=True, text=True)
        if run.returncode:
            raise SystemExit(run.stderr)
        for index, entry in enumerate(runs):
            A, _ = cases[entry["case"]]
            names = ["X", "iters", "totals", "its"] if entry["code"] == "gmresir3" else ["X", "iters"]
            out = {name: np.fromfile(work / f"out{index}_{name}.bin", dtype="<f8") for name in names}
            X = out.pop("X").reshape(-1, A.shape[0])  # one iterate a row: the run with iter_max = row
            entry["outputs"] = {"x": X.tolist(), **{name: v.tolist() for name, v in out.items()}}
    octave = subprocess.run(["octave-cli", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    oracle = {
        "provenance": {"research": f"{RESEARCH}: {', '.join(RESEARCH_FILES)}", "chop": CHOP,
                       "mp": "mp.m of this folder's README in place of the Advanpix toolbox: double arithmetic",
                       "trace": "trace/gmres_dd.m of this folder's README: records the GMRES iterations of "
                                "each call of GMRES/gmres_dd.m (copied unchanged as gmres_dd_code.m)",
                       "octave": octave,
                       "command": "python tests/data/research_ir/make_oracle.py <folder of those .m files>"},
        "cases": {name: {"A": A.tolist(), "b": b.tolist()} for name, (A, b) in cases.items()},
        "runs": runs,
    }
    (HERE / "oracle.json").write_text(json.dumps(oracle) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
