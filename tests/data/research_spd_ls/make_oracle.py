"""Write ``oracle.json``: GNU Octave runs of the research codes' CG-IR and least-squares GMRES-IR.

Run from the repository root with GNU Octave on the path and a folder holding the research
files (see ``README.md``)::

    python tests/data/research_spd_ls/make_oracle.py /path/to/research_m_files

Inputs go to Octave and outputs come back as raw little-endian doubles (``fwrite``/``fread``),
so both are the same bits on each side.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


def spd_inputs() -> dict:
    """Symmetric positive definite test matrices (mirrored from the upper triangle, so exactly
    symmetric, as ``chol_lp`` requires) and right-hand sides; no random numbers."""
    def mirrored(a: np.ndarray) -> np.ndarray:
        return np.triu(a) + np.triu(a, 1).T

    i = np.arange(10.0)
    grade = 10.0 ** (i / 3)
    kms_graded = mirrored(0.5 ** np.abs(i[:, None] - i[None, :]) * grade[:, None] * grade[None, :])
    j = np.arange(1.0, 13.0)
    lehmer = mirrored(np.minimum.outer(j, j) / np.maximum.outer(j, j))
    tridiagonal = 2 * np.eye(16) - np.eye(16, k=1) - np.eye(16, k=-1)
    return {"kms_graded": (kms_graded, np.cos(i + 1)), "lehmer": (lehmer, np.sin(j)),
            "tridiagonal": (tridiagonal, np.cos(np.arange(16.0)) + 0.5)}


def ls_inputs() -> dict:
    """Full-rank least-squares problems (``m > n``) and right-hand sides; no random numbers."""
    k, j = np.arange(12.0)[:, None], np.arange(5.0)[None, :]
    cosine = np.cos((k + 1) * (j + 1) * 0.7) + 0.1 * np.sin(k + j)
    t = np.linspace(0.0, 1.0, 15)[:, None]
    vandermonde = t ** np.arange(6.0)[None, :]
    k2, j2 = np.arange(14.0)[:, None], np.arange(4.0)[None, :]
    graded = (np.cos(0.3 * (k2 + 1) * (j2 + 2)) + (k2 == j2)) * 10.0 ** (-2 * j2)
    return {"cosine": (cosine, np.sin(np.arange(12.0) + 0.5)),
            "vandermonde": (vandermonde, np.exp(-np.linspace(0.0, 1.0, 15))),
            "graded": (graded, np.cos(np.arange(14.0) * 1.3))}


RESEARCH = "github.com/SrikaraPranesh/Multi_precision_NLA_kernels, commit fb3a2d7d0d8a1cd5b0e09e7b4801996b4f5de2bc"
RESEARCH_FILES = ["cgir3.m", "gmreslsir3.m", "chol_lp.m", "house_qr_lp.m", "hgemm.m", "ip_chop.m", "trisol.m",
                  "scaling_algorithms/spd_diag_scale.m", "PCG/pcg_dd.m", "GMRES/lsqgmres_dq.m"]
CHOP = "github.com/higham/chop, commit 906c31e653ad610effb2402f567b2dab69518176: chop.m, float_params.m, roundit.m"

#: (case, precf, scale.flag, scale.pert, iter_max) of cgir3(A, b, precf, 2, 2, iter_max, 1e-6, scale, 0).
CG_RUNS = [("kms_graded", 1, 1, 0, 10), ("kms_graded", 1, 1, 2, 10), ("lehmer", 1, 1, 0, 10),
           ("tridiagonal", 1, 1, 0, 10), ("lehmer", 2, 0, 0, 10), ("tridiagonal", 2, 0, 0, 10)]
#: (case, iter_max) of gmreslsir3(A, b, 0, 2, 4, iter_max, 1e-6, 1).
LS_RUNS = [(case, steps) for case in ("cosine", "vandermonde", "graded") for steps in (1, 2, 3)]


def main(research: str) -> None:
    spd, ls = spd_inputs(), ls_inputs()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        lines = [f"addpath('{Path(research).resolve()}');"]

        def read(name: str, a: np.ndarray) -> None:
            path = work / f"in{len(runs)}_{name}.bin"
            np.asarray(a, dtype="<f8").tofile(path)
            lines.append(f"fid = fopen('{path}'); {name} = reshape(fread(fid, Inf, 'double'), "
                         f"{a.shape[1] if a.ndim == 2 else a.shape[0]}, {a.shape[0] if a.ndim == 2 else 1}); "
                         "fclose(fid);")

        def write(index: int, names: list) -> None:
            for name in names:
                lines.append(f"fid = fopen('{work}/out{index}_{name}.bin', 'w'); fwrite(fid, double({name}(:)), "
                             "'double'); fclose(fid);")

        runs: list = []
        for case, precf, flag, pert, iter_max in CG_RUNS:
            A, b = spd[case]
            read("A", A.T)  # A.T in C order is A in Octave's column-major order
            read("b", b)
            lines.append(f"scale = struct('flag', {flag}, 'theta', 0.1, 'pert', {pert}); "
                         f"[x, iter, pcg_its] = cgir3(A, b, {precf}, 2, 2, {iter_max}, 1e-6, scale, 0);")
            write(len(runs), ["x", "iter", "pcg_its"])
            runs.append({"code": "cgir3", "case": case,
                         "call": f"cgir3(A, b, {precf}, 2, 2, {iter_max}, 1e-6, struct('flag', {flag}, "
                                 f"'theta', 0.1, 'pert', {pert}), 0)"})
        for case, iter_max in LS_RUNS:
            A, b = ls[case]
            read("A", A.T)
            read("b", b)
            lines.append(f"[opdata, x, iter, gmresits] = gmreslsir3(A, b, 0, 2, 4, {iter_max}, 1e-6, 1); "
                         "its = cellfun(@numel, opdata.gmreserrvec) - 1;")
            write(len(runs), ["x", "iter", "gmresits", "its"])
            runs.append({"code": "gmreslsir3", "case": case,
                         "call": f"gmreslsir3(A, b, 0, 2, 4, {iter_max}, 1e-6, 1)"})
        script = work / "oracle_run.m"
        script.write_text("\n".join(lines) + "\n")
        run = subprocess.run(["octave-cli", "--no-gui", str(script)], capture_output=True, text=True)
        if run.returncode:
            raise SystemExit(run.stderr)
        for index, entry in enumerate(runs):
            names = ["x", "iter", "pcg_its"] if entry["code"] == "cgir3" else ["x", "iter", "gmresits", "its"]
            entry["outputs"] = {name: np.fromfile(work / f"out{index}_{name}.bin", dtype="<f8").tolist()
                                for name in names}
    octave = subprocess.run(["octave-cli", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    oracle = {
        "provenance": {"research": f"{RESEARCH}: {', '.join(RESEARCH_FILES)}", "chop": CHOP,
                       "mp": "mp.m of this folder's README in place of the Advanpix toolbox: double arithmetic",
                       "octave": octave,
                       "command": "python tests/data/research_spd_ls/make_oracle.py <folder of those .m files>"},
        "spd": {name: {"A": A.tolist(), "b": b.tolist()} for name, (A, b) in spd.items()},
        "ls": {name: {"A": A.tolist(), "b": b.tolist()} for name, (A, b) in ls.items()},
        "runs": runs,
    }
    (HERE / "oracle.json").write_text(json.dumps(oracle) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
