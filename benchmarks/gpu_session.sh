#!/usr/bin/env bash
# The prepared GPU session (issue 32): every GPU check of pychop_compat in one command that fits in
# one 10-minute device call, its results written under $OUT as it goes.
#
#   OUT=/path/to/results SESSION_COMMIT=<git rev-parse HEAD of the checkout> bash benchmarks/gpu_session.sh
#
# Run from the repository root.  It installs nothing; PYTHONPATH is set to the repository root.
# Stages (each under its own `timeout`; one that fails or times out is recorded as such in
# summary.md and the next stage runs):
#   a. versions   nvidia-smi, Python and the libraries (name: version | name: missing), the commit
#   b.            no CUDA GPU visible to torch or CuPy: print "no GPU: ...", write it to summary.md, exit 0
#   c. gpu-check  python -m pychop_compat gpu-check --skip-bench   (pytest -m gpu, validate per GPU engine/route,
#                 tensor-core tiles against the hardware preset)
#   d. bench      python benchmarks/bench_gpu.py --sizes 1e6 1e8 1e9 --dtypes float32 float64 --repeats 3
#   e. matmul     python benchmarks/gpu_session.py matmul   (fp16 chopped matmul, n = 4096, vs host rows)
#   f. rng        python benchmarks/gpu_session.py rng      (Chop(rng=seed) bits on every array kind)
# Files under $OUT (default ./gpu_session_out): <stage>.log for each stage, matmul.md and rng.md
# (the reports of e and f), summary.md.  Exit status: 0 when every stage that ran passed (and
# without a GPU), 1 otherwise.
#
# GPU_SESSION_REHEARSE=1: on any machine, run e and f on the CPU (torch CPU tensors, small sizes,
# gpu_session.py --rehearse) instead of stopping at b; c and d are skipped, and the summary says so.
# GPU_SESSION_STAGES="gpu-check bench matmul rng": the stages to run after a and b (default: all).
# GPU_CHECK_ARGS: extra arguments for gpu-check (e.g. '--skip-tests', or '--pytest-args "-x"').
# SESSION_COMMIT: the commit, for the summary, where the copy has no .git (a device machine's copy).
set -u

# Stage budgets in seconds: 20 + 300 + 50 + 90 + 30 = 490, plus a few seconds between stages; the first
# run on an H100 took 8 + 99 (pytest -n 8) + 8 + 13 s outside matmul; on an H200 on 2026-11-28 gpu-check's
# pytest -m gpu alone took 139 s (-n 8), validate about 100 s and the tiles about 20 s, so 255 s did not
# suffice; TOTAL_BUDGET caps it: a stage never gets more than what is left.
# Each may be overridden from the environment (e.g. BUDGET_GPU_CHECK=255 GPU_SESSION_STAGES=gpu-check).
BUDGET_VERSIONS=${BUDGET_VERSIONS:-20}     # a: imports of torch, CuPy, JAX, ... and nvidia-smi
BUDGET_GPU_CHECK=${BUDGET_GPU_CHECK:-300}  # c: pytest -m gpu (~9400 tests) + validate on 4 routes + tiles
BUDGET_BENCH=${BUDGET_BENCH:-50}           # d: 3 sizes x 2 dtypes x 4 cases x up to 4 engines
BUDGET_MATMUL=${BUDGET_MATMUL:-90}         # e: device products, host rows (~3 s each), Numba/Triton compiles
BUDGET_RNG=${BUDGET_RNG:-30}               # f: 3 cases x up to 9 array kinds x 2 dtypes, 10^6 values (~8 s on CPUs)
TOTAL_BUDGET=${TOTAL_BUDGET:-490}

START=$SECONDS
INVOKED_FROM=$(pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-gpu_session_out}
case $OUT in /*) ;; *) OUT="$INVOKED_FROM/$OUT" ;; esac
mkdir -p "$OUT" || { echo "cannot create OUT=$OUT" >&2; exit 2; }
cd "$ROOT" || exit 2
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export PYTHONHASHSEED=${PYTHONHASHSEED:-0}
PY=${PYTHON:-python}
command -v "$PY" >/dev/null 2>&1 || PY=python3
REHEARSE=${GPU_SESSION_REHEARSE:-0}
STAGES=${GPU_SESSION_STAGES:-gpu-check bench matmul rng}
SUMMARY="$OUT/summary.md"
STATUS_ROWS=""
ANY_FAILED=0

say() { echo "$*"; echo "$*" >> "$SUMMARY"; }
wanted() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
record() {  # record STAGE STATUS SECONDS BUDGET
    STATUS_ROWS="$STATUS_ROWS| $1 | $2 | $3 | $4 |"$'\n'
}
finish() {
    {
        echo
        echo "## Stages"
        echo
        echo "| stage | status | seconds | budget (s) |"
        echo "|---|---|---:|---:|"
        printf '%s' "$STATUS_ROWS"
        echo
        echo "Total: $((SECONDS - START)) s of the ${TOTAL_BUDGET} s budget."
    } >> "$SUMMARY"
    echo "summary: $SUMMARY ($((SECONDS - START)) s)"
    exit "$1"
}

# run_stage NAME BUDGET LOG SHOWN COMMAND...: COMMAND under timeout, stdout and stderr to LOG;
# SHOWN is how the command is shown (empty: the command itself).
# Sets STAGE_RC (124: timed out) and STAGE_STATUS; records the stage's row.
run_stage() {
    local name=$1 budget=$2 log=$3 shown=$4
    shift 4
    [[ -z $shown ]] && shown="$*"
    local left=$((TOTAL_BUDGET - (SECONDS - START) - 3))
    if ((left < 5)); then
        STAGE_RC=125
        STAGE_STATUS="SKIPPED: no time left of the ${TOTAL_BUDGET} s"
        echo "== $name: $STAGE_STATUS" | tee "$log"
        echo -e "\n## $name: $STAGE_STATUS" >> "$SUMMARY"
        record "$name" "$STAGE_STATUS" 0 "$budget"
        ANY_FAILED=1
        return
    fi
    ((left < budget)) && budget=$left
    echo "== $name (budget ${budget} s): $shown"
    local t0=$SECONDS
    timeout -k 5 "$budget" "$@" > "$log" 2>&1
    STAGE_RC=$?
    local took=$((SECONDS - t0))
    case $STAGE_RC in
        0) STAGE_STATUS="ok" ;;
        124 | 137) STAGE_STATUS="TIMED OUT after ${budget} s" ;;
        1) STAGE_STATUS="FAILED (exit 1: a check failed or disagreed)" ;;
        2) STAGE_STATUS="ERROR (exit 2: the script itself failed; see its log)" ;;
        3) STAGE_STATUS="no GPU (exit 3: nothing checked)" ;;
        *) STAGE_STATUS="FAILED (exit $STAGE_RC)" ;;
    esac
    [[ $STAGE_RC -ne 0 ]] && ANY_FAILED=1
    echo "   $name: $STAGE_STATUS (${took} s)"
    record "$name" "$STAGE_STATUS" "$took" "$budget"
    {
        echo
        echo "## $name: $STAGE_STATUS (${took} s of ${budget} s)"
        echo
        echo "\`$shown\` (log: $(basename "$log"))"
        echo
    } >> "$SUMMARY"
}

fingerprint() {  # run from the repository root
    find pychop_compat benchmarks tests -name '*.py' -type f -not -path '*/__pycache__/*' | LC_ALL=C sort \
        | xargs sha256sum | sha256sum | cut -c1-16
}

tail_of() {  # the end of a log, fenced, for a stage whose own summary is missing
    echo '```'
    tail -n "${2:-15}" "$1"
    echo '```'
}

# --- a. versions ------------------------------------------------------------------------------
{
    echo "# GPU session $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "Host: $(hostname 2>/dev/null || uname -n), $(nproc 2>/dev/null || echo '?') CPU cores; repository: $ROOT"
    if [[ $(git -C "$ROOT" rev-parse --show-toplevel 2>/dev/null) == "$ROOT" ]]; then
        echo "Commit: $(git -C "$ROOT" rev-parse HEAD) ($(git -C "$ROOT" status --short | wc -l | tr -d ' ')" \
             "paths differ from it: git status --short)"
    else
        echo "Commit: no git checkout here"
    fi
    [[ -n ${SESSION_COMMIT:-} ]] && echo "Commit (SESSION_COMMIT, as given by the caller): $SESSION_COMMIT"
    echo "Source fingerprint: $(fingerprint) (sha256 over the *.py files of pychop_compat, benchmarks" \
         "and tests: the function fingerprint() of this script, run on a checkout, tells whether it is the same code)"
    echo "Rehearsal: $([[ $REHEARSE == 1 ]] && echo 'yes (GPU_SESSION_REHEARSE=1: CPU only)' || echo no)"
} > "$SUMMARY"
cat "$SUMMARY"

# One Python for the versions (no single quotes inside: it is a single-quoted shell string).
VERSIONS_PY='
import importlib, platform, sys
print("python:", sys.version.split()[0], "on", platform.platform())
def show(name):
    try:
        module = importlib.import_module(name)
    except ImportError:
        print(name + ": missing")
        return None
    except Exception as exc:  # installed but broken
        print(name + ": missing (" + type(exc).__name__ + " on import: " + str(exc)[:200] + ")")
        return None
    print(name + ": " + str(getattr(module, "__version__", "installed, no __version__")))
    return module
visible = []
torch = show("torch")
if torch is not None:
    try:
        available = torch.cuda.is_available()
        print("torch.version.cuda:", torch.version.cuda)
        print("torch.cuda.is_available():", available)
        if available and torch.cuda.device_count() > 0:
            visible.append("torch")
            print("torch.cuda devices:", [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
    except Exception as exc:
        print("torch.cuda:", type(exc).__name__, exc)
cupy = show("cupy")
if cupy is not None:
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        print("cupy: CUDA runtime", cupy.cuda.runtime.runtimeGetVersion(), "with", count, "device(s)")
        if count > 0:
            visible.append("cupy")
    except Exception as exc:
        print("cupy: no usable CUDA device (" + type(exc).__name__ + ": " + str(exc)[:200] + ")")
for name in ("triton", "numba", "jax", "numpy", "scipy", "mpmath", "ml_dtypes", "array_api_compat", "pytest",
             "hypothesis"):
    show(name)
try:
    import pychop_compat
    from pychop_compat.engines import available_engines
    print("pychop_compat:", pychop_compat.__version__, "engines:", ", ".join(available_engines()))
except Exception as exc:
    print("pychop_compat: cannot import (" + type(exc).__name__ + ": " + str(exc) + ")")
print("cuda-visible-to:", " ".join(visible) or "none")
'
run_stage versions "$BUDGET_VERSIONS" "$OUT/versions.log" "nvidia-smi --query-gpu=...; $PY -c <versions>" bash -c \
    'if command -v nvidia-smi >/dev/null; then
         echo "nvidia-smi: $(timeout 15 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"
     else echo "nvidia-smi: missing"; fi
     "$0" -c "$1"' \
    "$PY" "$VERSIONS_PY"
{
    echo '```'
    grep -v '^cuda-visible-to:' "$OUT/versions.log"
    echo '```'
} >> "$SUMMARY"

# --- b. is there a GPU? -----------------------------------------------------------------------
VISIBLE=$(sed -n 's/^cuda-visible-to: //p' "$OUT/versions.log" | tail -n 1)
if [[ -z $VISIBLE ]]; then  # the versions stage did not finish: ask torch and CuPy directly
    VISIBLE=$(timeout 30 "$PY" -c '
found = []
try:
    import torch
    if torch.cuda.is_available() and torch.cuda.device_count() > 0: found.append("torch")
except Exception: pass
try:
    import cupy
    if cupy.cuda.runtime.getDeviceCount() > 0: found.append("cupy")
except Exception: pass
print(" ".join(found) or "none")' 2>/dev/null)
    VISIBLE=${VISIBLE:-none}
fi
echo
echo "CUDA GPU visible to: $VISIBLE" | tee -a "$SUMMARY"

REHEARSAL_FLAGS=()
if [[ $REHEARSE == 1 ]]; then
    say ""
    say "rehearsal (GPU_SESSION_REHEARSE=1): matmul and rng run on the CPU with torch CPU tensors at small sizes (gpu_session.py --rehearse); gpu-check and bench are skipped; no GPU result comes from this run."
    record gpu-check "skipped (rehearsal)" 0 "$BUDGET_GPU_CHECK"
    record bench "skipped (rehearsal)" 0 "$BUDGET_BENCH"
    STAGES=$(echo " $STAGES " | sed 's/ gpu-check / /; s/ bench / /')
    REHEARSAL_FLAGS=(--rehearse)
elif [[ $VISIBLE == none ]]; then
    say ""
    say "no GPU: neither torch nor CuPy sees a CUDA device on this machine, so nothing was checked (gpu-check, bench, matmul and rng not run)."
    finish 0
fi

# --- c. gpu-check -----------------------------------------------------------------------------
if wanted gpu-check; then
    eval "extra=(${GPU_CHECK_ARGS:-})"  # word splitting with the shell's quoting rules
    run_stage gpu-check "$BUDGET_GPU_CHECK" "$OUT/gpu-check.log" "" "$PY" -m pychop_compat gpu-check --skip-bench \
        ${extra[@]+"${extra[@]}"}
    if grep -q '^pychop_compat GPU check:' "$OUT/gpu-check.log"; then
        sed -n '/^pychop_compat GPU check:/,$p' "$OUT/gpu-check.log" >> "$SUMMARY"  # its closing summary
    else
        tail_of "$OUT/gpu-check.log" 20 >> "$SUMMARY"
    fi
fi

# --- d. bench ---------------------------------------------------------------------------------
if wanted bench; then
    run_stage bench "$BUDGET_BENCH" "$OUT/bench.log" "" "$PY" benchmarks/bench_gpu.py \
        --sizes 1e6 1e8 1e9 --dtypes float32 float64 --repeats 3
    grep -E '^(Device:|\||GB/s)' "$OUT/bench.log" >> "$SUMMARY"
    if [[ $STAGE_RC -ne 0 ]] || ! grep -q '^|' "$OUT/bench.log"; then tail_of "$OUT/bench.log" 10 >> "$SUMMARY"; fi
fi

# --- e. matmul, f. rng ------------------------------------------------------------------------
for stage in matmul rng; do
    wanted "$stage" || continue
    budget_var="BUDGET_${stage^^}"
    rm -f "$OUT/$stage.md"
    run_stage "$stage" "${!budget_var}" "$OUT/$stage.log" "" "$PY" benchmarks/gpu_session.py "$stage" \
        ${REHEARSAL_FLAGS[@]+"${REHEARSAL_FLAGS[@]}"} --report "$OUT/$stage.md"
    if [[ -s $OUT/$stage.md ]]; then
        cat "$OUT/$stage.md" >> "$SUMMARY"
    fi
    if [[ ! -s $OUT/$stage.md ]] || ((STAGE_RC != 0 && STAGE_RC != 1 && STAGE_RC != 3)); then
        tail_of "$OUT/$stage.log" 15 >> "$SUMMARY"
    fi
done

finish "$ANY_FAILED"
