"""The parameters of a block-FMA matrix-multiply unit, and the published ones of real GPUs.

A :class:`BlockFMA` describes one configuration of the parameterised model of
Khattak and Mikaitis (HPEC 2025; "Accurate models of NVIDIA tensor cores", ACM
TACO): a block of ``fma_size`` products is computed exactly, the products and the
accumulator are aligned to the largest exponent and truncated to
``accumulator_fraction_bits + extra_alignment_bits`` bits after it, added without
normalisation in between, and the sum is rounded once to the output format.

The presets are the parameters their MATLAB models use per GPU and format pair
(github north-numerical-computing/MATLAB-tensor-core, ``models/*.m`` at commit
b12b5a700957655375a1b0c1d0c26e76065da015), written out here as data.  AMD's MI300X
is the anchor's CDNA3 model, ``models/MI300MC.m`` as of commit
edb6822258ed53fe8caa7095f3dae0b9e4e8279f: at b12b5a7 ``MI300XMC.m`` still calls it,
but the file was deleted (d12a5b3).  AMD's MI100 (CDNA1, ``models/MI100MC.m``) adds a
block exactly and rounds once (``block_sum='exact'``); the MI210 and MI250 (CDNA2,
``models/MI210MC.m``, which ``MI250MC.m`` calls) round every product and every sum of a
pairwise tree to fp32 (``block_sum='pairwise'``).  fp8 inputs on the MI300X are AMD's FNUZ
formats (``'e4m3fnuz'``, ``'e5m2fnuz'``), added in blocks of 16 in two interleaved groups
(``odd_even_groups``).
"""

from __future__ import annotations

import dataclasses
import numbers
import operator
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ..formats import catalogue_format

__all__ = ["BlockFMA", "PRESETS", "model", "model_for_format", "INPUT_FORMATS", "OUTPUT_FORMATS",
           "ROUNDING_MODES", "BLOCK_SUMS"]

#: Input format names a model accepts, and the catalogue format each means
#: (NVIDIA's E4M3 is the OCP format without infinities, largest finite 448; the MI300X's fp8
#: formats are the FNUZ ones, largest finite 240 and 57344, which the inputs saturate to).
INPUT_FORMATS: Dict[str, str] = {
    "fp16": "fp16", "bf16": "bf16", "tf32": "tf32",
    "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz", "e5m2fnuz": "float8_e5m2fnuz",
}
#: Output (accumulator) format names, and the catalogue format each means.
OUTPUT_FORMATS: Dict[str, str] = {"fp16": "fp16", "fp32": "fp32"}
#: Rounding modes of the block result: toward zero, to nearest (ties to even), up, down.
ROUNDING_MODES = ("rz", "rne", "ru", "rd")
#: How a block adds its products and addend: aligned to the largest exponent and truncated
#: (every NVIDIA GPU, the MI300X), exactly (the MI100), or in a pairwise tree of rounded sums
#: (the MI210 and MI250); see :class:`BlockFMA`.
BLOCK_SUMS = ("aligned", "exact", "pairwise")


@dataclass(frozen=True)
class BlockFMA:
    """One block-FMA configuration of a matrix-multiply unit.

    Parameters
    ----------
    input_format : str
        Format of the elements of A and B: one of :data:`INPUT_FORMATS`.
    output_format : str
        Format of C and D (the accumulator): ``'fp32'`` or ``'fp16'``.
    fma_size : int
        Number of products added in one block before one normalisation and rounding;
        longer inner products accumulate block after block, the rounded result of a
        block being the addend of the next.
    extra_alignment_bits : int
        Bits kept beyond ``accumulator_fraction_bits`` after the largest exponent
        when the terms are aligned (the rest are truncated).  A negative value keeps
        fewer (fp8 inputs on Ada and Hopper); the rounded block result then keeps at
        most ``accumulator_fraction_bits + extra_alignment_bits`` fraction bits.
    rounding : str
        Rounding of the block result to the output format: one of :data:`ROUNDING_MODES`.
    min_alignment_exponent : int
        The alignment exponent is at least this, even when every term is smaller.
    normalised_products : bool
        False: a product's exponent is the sum of its factors' exponents, its
        significand in [0, 4) (no normalisation of the products before alignment).
    input_subnormals, output_subnormals : bool
        False: subnormal inputs (or a subnormal addend and result) are flushed to zero.
    accumulator_fraction_bits : int
        Fraction bits of the aligned terms before the extra bits (fp32's 23).
    accumulator_emin : int
        Smallest exponent of the addend when it is aligned (fp32's -126): the addend's exponent
        counts as at least this for the alignment exponent (and, with ``late_addend_bits``, in
        the late addition), but none of its bits is dropped there; they are truncated (or
        rounded toward minus infinity) only with the other terms, as above.  Every preset has
        -126, at most the output format's emin.
    name : str
        A label, such as ``'H100'``.
    late_addend_bits : int or None
        None: the addend is aligned with the products (every preset but the MI300X's).  An
        integer: the products alone are aligned and added first (to their largest
        exponent; the addend's exponent is ``accumulator_emin`` when it is 0), then
        the addend joins in a two-operand alignment where the operand of the smaller
        exponent is rounded toward minus infinity to the larger one's last bit, with
        this many more bits when the products' sum is that operand (AMD CDNA3: 7).  With
        fewer ``accumulator_fraction_bits`` than the output format, the addend keeps its bits
        until then, and those below the sum's last bit are rounded toward minus infinity too.
    block_sum : str
        How a block adds its products and addend, one of :data:`BLOCK_SUMS`.
        ``'aligned'`` (every preset but the MI100's, MI210's and MI250's): as described
        above.  ``'exact'`` (AMD CDNA1, MI100): the products and the addend are added
        exactly and the sum is rounded once (``rounding``, ``output_subnormals``).
        ``'pairwise'`` (AMD CDNA2, MI210 and MI250; ``fma_size`` a power of two): every
        product is rounded to the output format, then the products are added in a
        pairwise tree (halves first, ``((p1 + p2) + (p3 + p4))`` for four) and the
        addend last, each sum rounded to the output format; without
        ``output_subnormals`` every rounded product and sum below the smallest normal
        number is flushed to zero.  With ``'exact'`` and ``'pairwise'`` the alignment
        fields (``extra_alignment_bits``, ``min_alignment_exponent``,
        ``normalised_products``, ``accumulator_fraction_bits``, ``accumulator_emin``)
        play no part.
    odd_even_groups : bool
        True (AMD CDNA3 with fp8 inputs; needs ``late_addend_bits`` and an ``fma_size`` of 2
        or more): a block's products at even and at odd positions are two groups, each
        aligned to its own largest exponent and added as above; the group sum of the smaller
        exponent is rounded toward minus infinity to the other's last bit, the two are added,
        and the addend joins late (``late_addend_bits``), except that an addend whose
        exponent lies more than ``accumulator_fraction_bits + extra_alignment_bits + 1``
        below the products' adds nothing (it is not rounded down to minus one unit).
    """

    input_format: str = "fp16"
    output_format: str = "fp32"
    fma_size: int = 16
    extra_alignment_bits: int = 0
    rounding: str = "rz"
    min_alignment_exponent: int = -1024
    normalised_products: bool = False
    input_subnormals: bool = True
    output_subnormals: bool = True
    accumulator_fraction_bits: int = 23
    accumulator_emin: int = -126
    name: str = "custom"
    late_addend_bits: Optional[int] = None
    block_sum: str = "aligned"
    odd_even_groups: bool = False

    def __post_init__(self) -> None:
        for name, allowed in (("input_format", sorted(INPUT_FORMATS)), ("output_format", sorted(OUTPUT_FORMATS)),
                              ("rounding", ROUNDING_MODES), ("block_sum", BLOCK_SUMS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}.")
        for name in ("fma_size", "extra_alignment_bits", "min_alignment_exponent", "accumulator_fraction_bits",
                     "accumulator_emin", "late_addend_bits"):
            value = getattr(self, name)
            if not (isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
                    or (value is None and name == "late_addend_bits")):
                raise ValueError(f"{name} must be an integer, got {value!r}.")
            if value is not None:
                # a Python int, so that every check below and the kernels see the same value (the
                # overflow check in np.int64 wrapped round and let sums past 2**62 through)
                object.__setattr__(self, name, operator.index(value))
        for name in ("normalised_products", "input_subnormals", "output_subnormals", "odd_even_groups"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}.")
        if self.fma_size < 1:
            raise ValueError(f"fma_size must be a positive integer, got {self.fma_size}.")
        # negative extra bits are real (fp8 on Ada and Hopper keep 23 - 10), fewer than no bits at all are not
        if self.accumulator_fraction_bits < 0:
            raise ValueError(f"accumulator_fraction_bits must be at least 0, got {self.accumulator_fraction_bits}.")
        if self.accumulator_fraction_bits + self.extra_alignment_bits < 0:
            raise ValueError("accumulator_fraction_bits + extra_alignment_bits must be at least 0 (the bits kept "
                             f"after the largest exponent), got {self.accumulator_fraction_bits} + "
                             f"{self.extra_alignment_bits}.")
        if self.block_sum != "aligned" and self.late_addend_bits is not None:
            raise ValueError(f"late_addend_bits needs block_sum='aligned', got block_sum={self.block_sum!r}.")
        if self.block_sum == "pairwise" and self.fma_size & (self.fma_size - 1):
            raise ValueError(f"block_sum='pairwise' needs an fma_size that is a power of two, got {self.fma_size}.")
        if self.late_addend_bits is not None and (self.late_addend_bits < 0 or self.extra_alignment_bits < 0):
            raise ValueError("late_addend_bits and extra_alignment_bits must be nonnegative with a late addend, "
                             f"got {self.late_addend_bits} and {self.extra_alignment_bits}.")
        if self.odd_even_groups and (self.late_addend_bits is None or self.fma_size < 2):
            raise ValueError("odd_even_groups needs late_addend_bits and an fma_size of 2 or more, got "
                             f"{self.late_addend_bits} and {self.fma_size}.")
        # The aligned block sums are int64: fma_size + 1 terms below 2^(f + x + 2) (shifted left by the late
        # addend's bits) must stay below 2^62, or the sums wrap round silently.
        kept = self.accumulator_fraction_bits + self.extra_alignment_bits + (self.late_addend_bits or 0)
        # (integers: any size is compared, none overflows a float)
        if self.block_sum == "aligned" and (self.fma_size + 1) << (kept + 2) > 1 << 62:
            raise ValueError(f"accumulator_fraction_bits + extra_alignment_bits (+ late_addend_bits) = {kept} "
                             f"with fma_size {self.fma_size} makes the block sums overflow int64.")

    def replace(self, **changes: object) -> "BlockFMA":
        """A copy with the given fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def _generation(name: str, fma_size: int, extra_bits: int, min_exponent: int, fp16_min_exponent: int,
                tf32_fma: int, fp8: Optional[Tuple[int, int, str]], inputs: Tuple[str, ...],
                fp8_to_fp16: bool = False) -> Dict[Tuple[str, str, str], BlockFMA]:
    """The presets of one GPU: fp32 output truncates, fp16 output (of fp16 inputs)
    rounds to nearest with its own alignment floor; tf32 and fp8 inputs have their
    own block sizes and (fp8) extra bits and rounding; fp8 inputs with fp16 output
    (``fp8_to_fp16``) round the fp32 configuration's block to nearest."""
    presets: Dict[Tuple[str, str, str], BlockFMA] = {}
    for inputs_name in inputs:
        base = BlockFMA(inputs_name, "fp32", fma_size, extra_bits, "rz", min_exponent, name=name)
        if inputs_name == "tf32":
            presets[name, inputs_name, "fp32"] = base.replace(fma_size=tf32_fma)
        elif inputs_name in ("e4m3", "e5m2"):
            assert fp8 is not None
            fp8_fma, fp8_extra_bits, fp8_rounding = fp8
            presets[name, inputs_name, "fp32"] = base.replace(
                fma_size=fp8_fma, extra_alignment_bits=fp8_extra_bits, rounding=fp8_rounding)
        else:
            presets[name, inputs_name, "fp32"] = base
        if inputs_name == "fp16":
            presets[name, inputs_name, "fp16"] = base.replace(
                output_format="fp16", rounding="rne", min_alignment_exponent=fp16_min_exponent)
        if inputs_name in ("e4m3", "e5m2") and fp8_to_fp16:
            presets[name, inputs_name, "fp16"] = presets[name, inputs_name, "fp32"].replace(
                output_format="fp16", rounding="rne")
    return presets


_ALL = ("fp16", "bf16", "tf32", "e4m3", "e5m2")
_AMPERE = ("fp16", "bf16", "tf32")

#: The named models, keyed by (GPU, input format, output format); see :func:`model`.
#: fp8 inputs with fp16 output have one on Ada and L40S only: the H100, H200 and B200
#: disagree with every configuration tried (docs/hardware.rst).
PRESETS: Dict[Tuple[str, str, str], BlockFMA] = {}
PRESETS.update(_generation("V100", 4, 0, -1024, -19, 4, None, ("fp16",)))
for _gpu in ("A100", "A2", "A30"):
    PRESETS.update(_generation(_gpu, 8, 1, -132, -20, 4, None, _AMPERE))
for _gpu in ("Ada", "L40S"):
    PRESETS.update(_generation(_gpu, 8, 1, -132, -20, 4, (16, -10, "rz"), _ALL, fp8_to_fp16=True))
for _gpu in ("H100", "H200"):
    PRESETS.update(_generation(_gpu, 16, 2, -133, -21, 8, (32, -10, "rz"), _ALL))
PRESETS.update(_generation("B200", 16, 2, -133, -21, 8, (32, 2, "rz"), _ALL))
# AMD CDNA3 (MI300X; the anchor's MI300MC.m, see the module's description): blocks of 8 (tf32:
# 4) products with one extra bit, no alignment floor, the addend added after the products (7
# more bits when they are the smaller), the block rounded to nearest; fp32 output only.
for _inputs, _fma_size in (("fp16", 8), ("bf16", 8), ("tf32", 4)):
    PRESETS["MI300X", _inputs, "fp32"] = BlockFMA(_inputs, "fp32", _fma_size, 1, "rne", late_addend_bits=7,
                                                  name="MI300X")
# Its fp8 inputs (FNUZ, as MI300MC.m has them): blocks of 16, the products at odd and at even
# positions aligned and added apart, the addend joining late as above.
for _inputs in ("e4m3fnuz", "e5m2fnuz"):
    PRESETS["MI300X", _inputs, "fp32"] = BlockFMA(_inputs, "fp32", 16, 1, "rne", late_addend_bits=7,
                                                  odd_even_groups=True, name="MI300X")
# AMD CDNA1 (MI100; the anchor's MI100MC.m): blocks of 4 fp16 or 2 bf16 products added to the
# addend exactly and rounded once to nearest, with subnormals.
for _inputs, _fma_size in (("fp16", 4), ("bf16", 2)):
    PRESETS["MI100", _inputs, "fp32"] = BlockFMA(_inputs, "fp32", _fma_size, rounding="rne", block_sum="exact",
                                                 name="MI100")
# AMD CDNA2 (MI210 and MI250; the anchor's MI210MC.m): blocks of 4 products (bf16 too), each
# product and each sum of the pairwise tree rounded to nearest fp32, the addend added last;
# subnormal inputs, products and sums flushed to zero.
for _gpu in ("MI210", "MI250"):
    for _inputs in ("fp16", "bf16"):
        PRESETS[_gpu, _inputs, "fp32"] = BlockFMA(_inputs, "fp32", 4, rounding="rne", input_subnormals=False,
                                                  output_subnormals=False, block_sum="pairwise", name=_gpu)


def model(gpu: str, inputs: str = "fp16", output: str = "fp32") -> BlockFMA:
    """The published block-FMA model of ``gpu``'s matrix units for one format pair.

    Parameters
    ----------
    gpu : str
        ``'V100'``, ``'A100'``, ``'A2'``, ``'A30'``, ``'Ada'``, ``'L40S'``, ``'H100'``,
        ``'H200'``, ``'B200'``, ``'MI100'``, ``'MI210'``, ``'MI250'`` or ``'MI300X'``
        (case-insensitive; AMD's with fp32 output only: the MI300X with fp16, bf16,
        tf32, e4m3fnuz or e5m2fnuz inputs, the others with fp16 or bf16).
    inputs : str
        Format of A and B: ``'fp16'``, ``'bf16'``, ``'tf32'``, ``'e4m3'``, ``'e5m2'``,
        ``'e4m3fnuz'`` or ``'e5m2fnuz'`` (one of :data:`INPUT_FORMATS`).
    output : str
        Format of C and D: ``'fp32'`` or ``'fp16'``.

    Returns
    -------
    BlockFMA

    Raises
    ------
    TypeError
        For a ``gpu``, ``inputs`` or ``output`` that is not a string.
    ValueError
        For a GPU or format pair without a model.

    Examples
    --------
    >>> from pychop_compat import hardware
    >>> m = hardware.model('H100', 'fp16', 'fp32')
    >>> m.fma_size, m.extra_alignment_bits, m.rounding
    (16, 2, 'rz')
    """
    for name, value in (("gpu", gpu), ("inputs", inputs), ("output", output)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string such as 'H100', 'fp16' or 'fp32', got {value!r}.")
    gpus = {key[0].lower(): key[0] for key in PRESETS}
    key = (gpus.get(gpu.lower(), gpu), inputs.lower(), output.lower())
    if key not in PRESETS:
        known = sorted({k[0] for k in PRESETS})
        raise ValueError(f"No model for GPU {gpu!r} with {inputs!r} inputs and {output!r} output "
                         f"(GPUs: {known}; see hardware.PRESETS for the format pairs).")
    return PRESETS[key]


def model_for_format(hardware: Any, t: int, emax: int, described: str, *, emin: Optional[int] = None,
                     encoding: Optional[str] = None) -> BlockFMA:
    """The model a ``hardware=`` argument names for inputs of the format ``[t, emax]``.

    Parameters
    ----------
    hardware : str or BlockFMA
        A GPU name of :data:`PRESETS` (its model for that input format, with fp32 output) or a
        model, whose input format must be that format.
    t, emax : int
        Significand bits (with the implicit one) and largest exponent of the inputs' format.
    described : str
        How the messages name that format (for example ``"options' format 'h'"``).
    emin, encoding : int and str, optional
        The format's smallest normal exponent and its encoding (``Format.encoding``), both
        given to name the FNUZ formats (``'e4m3fnuz'``, ``'e5m2fnuz'``), which ``t`` and
        ``emax`` alone do not tell from others: chop's ``'q43'`` has e4m3fnuz's ``t`` and
        ``emax``, e5m2fnuz has e5m2's.  Without them no FNUZ format is named.

    Returns
    -------
    BlockFMA

    Raises
    ------
    TypeError
        For a ``hardware`` that is neither a string nor a :class:`BlockFMA`, and for ``t`` or
        ``emax`` not an integer.
    ValueError
        For a format that is no input format of matrix units, or not the given model's, and for
        an unknown GPU name (:func:`model`).
    """
    if not isinstance(hardware, (str, BlockFMA)):
        raise TypeError(f"hardware must be a GPU name such as 'H100' or a hardware.BlockFMA, "
                        f"not {type(hardware).__name__}.")
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (t, emax)):
        raise TypeError(f"t and emax must be integers, got t={t!r}, emax={emax!r}.")
    if (emin is None) != (encoding is None):
        raise TypeError("give both emin and encoding (to name a FNUZ format), or neither.")
    exact = emin is not None

    def names(catalogued: Any) -> bool:
        # Without emin and encoding the FNUZ formats are left out: t and emax do not tell them
        # from others (chop's 'q43' has e4m3fnuz's, with a larger emin; e5m2fnuz has e5m2's).
        fmt = catalogue_format(catalogued)
        if (fmt.t, fmt.emax) != (t, emax):
            return False
        if not exact:
            return fmt.encoding != "fnuz"
        return fmt.emin == emin and (fmt.encoding == "fnuz") == (encoding == "fnuz")

    inputs = next((name for name, catalogued in INPUT_FORMATS.items() if names(catalogued)), None)
    if isinstance(hardware, BlockFMA):
        if inputs != hardware.input_format:
            raise ValueError(f"{described} [t={t}, emax={emax}] is not the input format "
                             f"{hardware.input_format!r} of that model ({hardware.name!r}).")
        return hardware
    if inputs is None:
        raise ValueError(f"{described} [t={t}, emax={emax}] is not an input format of matrix units "
                         f"(hardware.INPUT_FORMATS: {sorted(INPUT_FORMATS)}).")
    return model(hardware, inputs, "fp32")
