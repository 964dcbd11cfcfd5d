"""Inputs for the anchor's tensor-core models under GNU Octave, and the stored oracle built from their outputs.

    python make_oracle.py calls DIR      writes DIR/calls.txt and DIR/inputs.bin (driver.m's input)
                                         and DIR/cases.npz (the same inputs, as the oracle stores them)
    python make_oracle.py collect DIR    reads DIR/outputs.bin (driver.m's output) and writes
                                         ../octave_oracle.npz
    python make_oracle.py calls DIR GPU...    the same for these GPUs only (their format pairs);
    python make_oracle.py collect DIR GPU...  adds their outputs to ../octave_oracle.npz (whose
                                         stored inputs must be the generator's)

The inputs, for every format pair of ``pychop_compat.hardware.PRESETS`` (one seeded generator per
pair, so the file is reproducible): random 3 x K x 3 products (K from 4 to 130, several blocks of
every GPU; normal, one-signed, wide-exponent, near-overflow and near-underflow scales; float32
values that both sides round to the input format) and adversarial 1 x K x 1 products built from
chosen terms (ties of the final rounding, cancellation, carries, alignment losses, subnormal inputs
and outputs, overflow of the accumulator within and across blocks, Inf, NaN, Inf * 0, inputs
beyond the format's range, signed zeros), each once in place and once scattered over 40 elements,
and the seven cases of the anchor's model_validation/ExceptionalCasesTest.m.  See README.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ORACLE = HERE.parent / "octave_oracle.npz"

#: The anchor's model function of each GPU (models/*.m).
MODEL_FUNCTIONS = {"V100": "V100TC", "A100": "A100TC", "A2": "A2TC", "A30": "A30TC", "Ada": "AdaTC",
                   "L40S": "L40STC", "H100": "H100TC", "H200": "H200TC", "B200": "B200TC",
                   "MI100": "MI100MC", "MI210": "MI210MC", "MI250": "MI250MC", "MI300X": "MI300XMC"}
#: Input formats: precision (with the implicit bit), smallest and largest normal exponent.
FORMATS = {"fp16": (11, -14, 15), "bf16": (8, -126, 127), "tf32": (11, -126, 127),
           "e4m3": (4, -6, 8), "e5m2": (3, -14, 15), "e4m3fnuz": (4, -7, 7), "e5m2fnuz": (3, -15, 15)}
#: The anchor's names of input formats whose names differ (MI300MC.m's FNUZ formats).
ANCHOR_FORMATS = {"e4m3fnuz": "fp8-e4m3", "e5m2fnuz": "fp8-e5m2"}
OUTPUT_FRACTION_BITS = {"fp16": 10, "fp32": 23}
RANDOM_K = (4, 7, 8, 12, 16, 24, 32, 33, 48, 64, 96, 130)
SCATTERED_K = 40
#: What driver.m writes for an output of a call that raised an error (a NaN with this payload).
FAILED = 0x7FF8DEAD00000000


def format_pairs() -> dict:
    """{(inputs, output): [GPU, ...]} for every preset."""
    from pychop_compat.hardware import PRESETS

    pairs: dict = {}
    for gpu, inputs, output in PRESETS:
        pairs.setdefault((inputs, output), []).append(gpu)
    return pairs


def random_products(rng: np.random.Generator, inputs: str) -> list:
    """(A, B, C) of 3 x K x 3, two per K, the scales taking turns."""
    precision, emin, emax = FORMATS[inputs]
    products = []
    for index, k in enumerate(RANDOM_K * 2):
        scale = index % 5
        if scale == 0:  # normal, both signs
            a, b = rng.standard_normal((3, k)), rng.standard_normal((k, 3))
        elif scale == 1:  # one sign: every truncation lowers the sum
            a, b = rng.random((3, k)), rng.random((k, 3))
        elif scale == 2:  # exponents over a wide range: alignment losses
            a = rng.choice([-1.0, 1.0], (3, k)) * np.ldexp(1 + rng.random((3, k)), rng.integers(-12, 5, (3, k)))
            b = rng.choice([-1.0, 1.0], (k, 3)) * np.ldexp(1 + rng.random((k, 3)), rng.integers(-12, 5, (k, 3)))
        elif scale == 3:  # near the top of the format: products and sums overflow fp16
            a = np.ldexp(1 + rng.random((3, k)), emax - rng.integers(0, 3, (3, k)))
            b = rng.choice([-1.0, 1.0, 1.0], (k, 3)) * np.ldexp(1 + rng.random((k, 3)), rng.integers(-4, 1, (k, 3)))
        else:  # near the bottom: subnormal inputs and tiny products
            a = rng.choice([-1.0, 1.0], (3, k)) * np.ldexp(rng.random((3, k)), emin - rng.integers(-2, precision, (3, k)))
            b = rng.choice([-1.0, 1.0], (k, 3)) * np.ldexp(1 + rng.random((k, 3)), rng.integers(-8, 3, (k, 3)))
        size = np.abs(a).max() * np.abs(b).max()
        c = rng.standard_normal((3, 3)) * size * rng.choice([0.0, 1.0, 2.0**-8])
        products.append((a, b, c))
    return products


def factors(term: float, emin: int) -> tuple:
    """Two factors whose product is ``term``, each as far from the format's range ends as can be."""
    if term == 0 or not np.isfinite(term):
        return term, 1.0
    exponent = int(np.floor(np.log2(abs(term))))
    half = max(exponent // 2, emin)
    return term / 2.0**half, 2.0**half


def adversarial_terms(inputs: str, output: str) -> list:
    """(name, products, c) chosen to stress the model; the products become a . b."""
    precision, emin, emax = FORMATS[inputs]
    f = OUTPUT_FRACTION_BITS[output]
    big = 2.0**emax * (2 - 2.0**(1 - precision))
    out_max = 65504.0 if output == "fp16" else float(np.finfo(np.float32).max)
    tiny_in = 2.0**(emin - precision + 1)
    cases = [
        ("tie down", [1.0, 2.0**-(f + 1)], 0.0),
        ("tie up", [1.0, 3 * 2.0**-(f + 1)], 0.0),
        ("tie from odd", [1 + 2.0**-f, 2.0**-(f + 1)], 0.0),
        ("negative tie", [-1.0, -(2.0**-(f + 1))], 0.0),
        ("tie below one", [1.0, -(2.0**-(f + 2))], 0.0),
        ("tie in c", [2.0**-(f + 1)], 1.0),
        ("just above tie", [1.0, 2.0**-(f + 1), 2.0**-(f + 8)], 0.0),
        ("cancellation", [1.0, -1.0, 2.0**-20], 0.0),
        ("cancellation to zero", [2.0**5, -(2.0**5), 1.0, -1.0], 0.0),
        ("cancellation with c", [-1.0, 2.0**-(f + 2)], 1.0),
        ("lost then cancelled", [1.0, 2.0**-(f + 3), -1.0], 0.0),
        ("near cancellation", [1.0, -(1 - 2.0**-precision)], 0.0),
        ("carry", [1.875] * 8, 1.875),
        ("carry out of a block", [(2 - 2.0**(1 - precision))**2] * 16, 0.0),
        ("carry to the next binade", [1.0, 1 - 2.0**-(f + 1), 2.0**-(f + 1)], 0.0),
        ("alignment loss", [1.0] + [2.0**-(f + 1)] * 3, 0.0),
        ("alignment loss, wide", [1.0] + [2.0**-(f + k) for k in range(1, 8)], 0.0),
        ("alignment loss, negative", [1.0, -(2.0**-(f + 3))], 0.0),
        ("alignment loss to c", [2.0**-(f + 2), 2.0**-(f + 2)], 1.0),
        ("large c", [1.0, 1.0], 2.0**(f + 3)),
        ("subnormal inputs", [tiny_in, 3 * tiny_in, -tiny_in], 0.0),
        ("subnormal input times large", [tiny_in * 2.0**emax, 1.0], 0.0),
        ("tiny products", [2.0**(2 * emin - 2), 2.0**(2 * emin - 1)], 0.0),
        ("fp32 subnormal c", [2.0**(2 * emin)], 2.0**-130),
        ("fp32 subnormal c alone", [0.0], -(2.0**-140)),
        ("fp16 subnormal output", [2.0**-20, -(2.0**-21), 2.0**-26], 0.0),
        ("fp16 subnormal output, negative", [-(2.0**-16), 2.0**-18], 0.0),
        ("fp32 subnormal output", [2.0**-128, 2.0**-131], 0.0),
        ("accumulator overflow", [big * big, big * big], 0.0),
        ("accumulator overflow from c", [big * 2.0**-2], out_max),
        ("just below overflow", [out_max], 0.0),
        ("overflow at the output", [65504.0, 15.0], 0.0),
        ("overflow at the output, tie", [65504.0, 16.0], 0.0),
        ("negative overflow", [-(big * big), -(big * big)], -out_max),
        ("overflow in one block, then cancelled", [out_max / 2] * 2 + [0.0] * 62 + [-(out_max / 2)] * 2, 0.0),
        ("inf", [np.inf, 1.0], 0.0),
        ("-inf", [1.0, -np.inf], 0.0),
        ("inf and -inf", [np.inf, -np.inf], 0.0),
        ("nan", [np.nan, 1.0], 0.0),
        ("c inf", [1.0, 2.0], np.inf),
        ("c -inf, product inf", [np.inf], -np.inf),
        ("c nan", [1.0], np.nan),
        ("input beyond range", [big * 1.2, 1.0], 0.0),
        ("input at range midpoint", [2.0**emax * (2 - 2.0**-precision), 1.0], 0.0),
        ("signed zero c", [0.0, 0.0], -0.0),
        ("negative zero products", [-0.0, 0.0], -0.0),
        ("exact zero from cancellation, c -0", [1.0, -1.0], -0.0),
    ]
    return cases


def adversarial_products(rng: np.random.Generator, inputs: str, output: str) -> list:
    """(A, B, C) of 1 x K x 1 per adversarial case: in place, then scattered over 40 elements."""
    _, emin, _ = FORMATS[inputs]
    products = []
    for name, terms, c in adversarial_terms(inputs, output):
        pairs = [factors(term, emin) for term in terms]
        a = np.array([x for x, _ in pairs])
        b = np.array([y for _, y in pairs])
        products.append((name, a[None, :], b[:, None], np.array([[c]])))
        if len(terms) <= SCATTERED_K:
            where = np.sort(rng.choice(SCATTERED_K, len(terms), replace=False))
            a_scattered, b_scattered = np.zeros(SCATTERED_K), np.zeros(SCATTERED_K)
            a_scattered[where], b_scattered[where] = a, b
            products.append((name + ", scattered", a_scattered[None, :], b_scattered[:, None], np.array([[c]])))
    # The seven cases of the anchor's model_validation/ExceptionalCasesTest.m (which runs them
    # through CustomTC.m with a parameter set that lacks fields Generic_BFMA_TC.m reads, so it stops
    # at its first case): 16 elements, its inputs as its cpfloat calls (toward zero) leave them for
    # the formats it names; every pair runs them all.
    def exceptional(name, a_head, b_head, c):
        a, b = np.zeros(16), np.zeros(16)
        a[:len(a_head)], b[:len(b_head)] = a_head, b_head
        products.append(("anchor's exceptional case " + name, a[None, :], b[:, None], np.array([[c]])))
    exceptional("1: c + a1 * b1 overflows to +Inf", [2.0**127], [1.0], 2.0**127)
    exceptional("2: +Inf * -Inf is -Inf", [np.inf], [-np.inf], 0.0)
    exceptional("3: +Inf + -Inf is NaN", [-np.inf, np.inf], [1.0, 1.0], 0.0)
    exceptional("4: fp16 sum overflows to +Inf", [65504.0, 65504.0], [1.0, 1.0], 0.0)
    exceptional("5: fp16 sum overflows to -Inf", [-65504.0, -65504.0], [1.0, 1.0], 0.0)
    exceptional("6: e5m2 inputs, sum overflows to +Inf", [57344.0, 57344.0], [1.0, 1.0], 0.0)
    exceptional("7: e5m2 inputs, sum overflows to -Inf", [57344.0, 57344.0], [-1.0, -1.0], 0.0)
    # Inf * 0: NaN whatever else the product holds.
    products.append(("inf * 0", np.array([[np.inf, 1.0]]), np.array([[0.0], [1.0]]), np.array([[0.0]])))
    products.append(("inf * 0 with c inf", np.array([[0.0, 1.0]]), np.array([[np.inf], [1.0]]), np.array([[np.inf]])))
    if inputs in ANCHOR_FORMATS:  # the MI300X's fp8 blocks (after the others: their inputs stay as they were)
        for name, terms, c in odd_even_terms():
            pairs = [factors(term, emin) for term in terms]
            a, b = np.array([[x for x, _ in pairs]]), np.array([[y] for _, y in pairs])
            products.append((name, a, b, np.array([[c]])))
            where = np.sort(rng.choice(SCATTERED_K, len(terms), replace=False))
            a_scattered, b_scattered = np.zeros((1, SCATTERED_K)), np.zeros((SCATTERED_K, 1))
            a_scattered[0, where], b_scattered[where, 0] = a[0], b[:, 0]
            products.append((name + ", scattered", a_scattered, b_scattered, np.array([[c]])))
    return products


def odd_even_terms() -> list:
    """(name, products, c) for blocks of 16 whose products at even and odd positions are added
    apart (the MI300X's fp8): small products in one group (each below the other group's last
    bit, their sum not), of both signs, a group that cancels, an addend far below the products."""
    small = 3 * 2.0**-17  # 3/8 of the last bit of 2^10 (24 bits after the leading one)
    gaps = [0.0] * 7
    return [
        ("small products, even group", [v for pair in zip([small] * 8, [1024.0] + gaps) for v in pair], 0.0),
        ("small products, odd group", [v for pair in zip([1024.0] + gaps, [small] * 8) for v in pair], 0.0),
        ("small negative products, even group",
         [v for pair in zip([-small] * 7 + [0.0], [1024.0] + gaps) for v in pair], 0.0),
        ("a group that cancels", [1024.0, small, -1024.0] + [small, 0.0] * 6 + [0.0], 0.0),
        ("addend 25 binades below", [1024.0], -(2.0**-15)),
        ("addend 26 binades below", [1024.0], -(2.0**-16) * 1.5),
        ("addend 30 binades below", [1024.0], -(2.0**-20)),
        ("addend 30 binades below, positive", [1024.0], 2.0**-20),
        ("addend far below a cancelled block", [64.0, -64.0], -(2.0**-40)),
    ]


#: The seed numbers of the first format pairs: their positions in the sorted list of pairs when
#: the file was first made.  They are kept so that adding pairs leaves their inputs as stored.
FIRST_PAIRS = [("bf16", "fp32"), ("e4m3", "fp16"), ("e4m3", "fp32"), ("e5m2", "fp16"), ("e5m2", "fp32"),
               ("fp16", "fp16"), ("fp16", "fp32"), ("tf32", "fp32")]


def seed(inputs: str, output: str) -> list:
    """The generator's seed of a format pair: a first pair's number, else one made from its names
    (so a new pair changes no other pair's inputs)."""
    if (inputs, output) in FIRST_PAIRS:
        return [20261127, FIRST_PAIRS.index((inputs, output))]
    return [20261127, *f"{inputs}_{output}".encode()]


def build_cases() -> dict:
    """{(inputs, output): {'names', 'shapes', 'a', 'b', 'c'}}, the inputs of every format pair,
    as float32 (every value is one: the generators round to float32)."""
    cases = {}
    for inputs, output in sorted(format_pairs()):
        rng = np.random.default_rng(seed(inputs, output))
        named = [("random", a, b, c) for a, b, c in random_products(rng, inputs)]
        named += adversarial_products(rng, inputs, output)
        with np.errstate(over="ignore"):
            as32 = [tuple(np.asarray(x, dtype=np.float32) for x in entry[1:]) for entry in named]
        cases[inputs, output] = dict(
            names=[entry[0] for entry in named],
            shapes=np.array([(a.shape[0], a.shape[1], b.shape[1]) for a, b, _ in as32], dtype=np.int32),
            a=np.concatenate([a.ravel(order="F") for a, _, _ in as32]),
            b=np.concatenate([b.ravel(order="F") for _, b, _ in as32]),
            c=np.concatenate([c.ravel(order="F") for _, _, c in as32]))
    return cases


def split(case: dict) -> list:
    """The (A, B, C) float64 matrices of one format pair's stored inputs."""
    products, ia, ib, ic = [], 0, 0, 0
    for m, k, n in case["shapes"]:
        a = case["a"][ia:ia + m * k].reshape((m, k), order="F")
        b = case["b"][ib:ib + k * n].reshape((k, n), order="F")
        c = case["c"][ic:ic + m * n].reshape((m, n), order="F")
        ia, ib, ic = ia + m * k, ib + k * n, ic + m * n
        products.append((a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)))
    return products


def selected_pairs(gpus: list) -> dict:
    """:func:`format_pairs` with only ``gpus`` (all when empty), pairs without one left out."""
    pairs = {pair: [gpu for gpu in names if not gpus or gpu in gpus] for pair, names in format_pairs().items()}
    return {pair: names for pair, names in pairs.items() if names}


def write_calls(directory: Path, gpus: list) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    cases, pairs = build_cases(), selected_pairs(gpus)
    with open(directory / "calls.txt", "w") as calls, open(directory / "inputs.bin", "wb") as data:
        for (inputs, output), case in cases.items():
            for gpu in pairs.get((inputs, output), []):
                for (a, b, c), (m, k, n) in zip(split(case), case["shapes"]):
                    calls.write(f"{MODEL_FUNCTIONS[gpu]} {ANCHOR_FORMATS.get(inputs, inputs)} {output} {m} {k} {n}\n")
                    for matrix in (a, b, c):
                        data.write(matrix.ravel(order="F").astype("<f8").tobytes())


def collect(directory: Path, gpus: list) -> None:
    if gpus:
        return add_gpus(directory, gpus)
    cases, pairs = build_cases(), format_pairs()
    outputs = np.fromfile(directory / "outputs.bin", dtype="<f8")
    stored, manifest, at = {}, [], 0
    for (inputs, output), case in cases.items():
        key = f"{inputs}_{output}"
        for part in ("shapes", "a", "b", "c"):
            stored[f"{key}_{part}"] = case[part]
        size = int((case["shapes"][:, 0] * case["shapes"][:, 2]).sum())
        failures = {}
        for gpu in pairs[inputs, output]:
            d = outputs[at:at + size]
            at += size
            failed = d.view(np.uint64) == np.uint64(FAILED)
            if failed.any():  # stored as NaN, their indices in the manifest
                failures[gpu] = np.flatnonzero(failed).tolist()
            stored[f"{key}_{gpu}"] = d  # float64: not every output the anchor returns is a float32
        manifest.append(dict(inputs=inputs, output=output, gpus=pairs[inputs, output], names=case["names"],
                             failed=failures))
    assert at == len(outputs), (at, len(outputs))
    stored["manifest"] = np.array(json.dumps(manifest))
    np.savez_compressed(ORACLE, **stored)


def add_gpus(directory: Path, gpus: list) -> None:
    """Add the outputs of ``gpus`` (driver.m's run of ``calls DIR GPU...``) to the stored oracle; a
    format pair that it does not hold yet is added with its inputs."""
    cases, pairs = build_cases(), selected_pairs(gpus)
    outputs = np.fromfile(directory / "outputs.bin", dtype="<f8")
    with np.load(ORACLE) as old:
        stored = {key: old[key] for key in old.files}
    manifest, at = json.loads(str(stored.pop("manifest"))), 0
    entries = {(entry["inputs"], entry["output"]): entry for entry in manifest}
    for (inputs, output), case in cases.items():  # the order of write_calls
        key = f"{inputs}_{output}"
        if (inputs, output) not in entries:
            if (inputs, output) not in pairs:
                continue
            entries[inputs, output] = dict(inputs=inputs, output=output, gpus=[], names=case["names"], failed={})
            manifest.append(entries[inputs, output])
            stored.update({f"{key}_{part}": case[part] for part in ("shapes", "a", "b", "c")})
        entry = entries[inputs, output]
        for part in ("shapes", "a", "b", "c"):  # the same inputs as the stored ones, bit for bit
            assert stored[f"{key}_{part}"].tobytes() == case[part].tobytes(), (key, part)
        size = int((case["shapes"][:, 0] * case["shapes"][:, 2]).sum())
        for gpu in pairs.get((inputs, output), []):
            d = outputs[at:at + size]
            at += size
            failed = d.view(np.uint64) == np.uint64(FAILED)
            if failed.any():
                entry["failed"][gpu] = np.flatnonzero(failed).tolist()
            stored[f"{key}_{gpu}"] = d
            if gpu not in entry["gpus"]:  # a GPU run again keeps its place
                entry["gpus"].append(gpu)
    assert at == len(outputs), (at, len(outputs))
    stored["manifest"] = np.array(json.dumps(manifest))
    np.savez_compressed(ORACLE, **stored)


if __name__ == "__main__":
    {"calls": write_calls, "collect": collect}[sys.argv[1]](Path(sys.argv[2]), sys.argv[3:])
