"""Products "as on a GPU": linalg.matmul(..., hardware=) and chopped arrays' matrix products
through the block-FMA models, bit for bit with hardware.matmul and with the GPU's own results."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from pychop_compat import chopped, hardware, linalg
from pychop_compat.formats import lookup_format
from pychop_compat.arithmetic import Arithmetic

ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(31)
A = RNG.standard_normal((37, 50))
B = RNG.standard_normal((50, 23))
H100 = hardware.model("H100", "fp16", "fp32")


def _bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def test_linalg_matmul_with_a_gpu_name_is_hardware_matmul():
    expected = hardware.matmul(A, B, model=H100)
    got = linalg.matmul(A, B, "h", hardware="H100")
    assert got.dtype == np.float64 and np.array_equal(_bits(got), _bits(expected))
    assert not np.array_equal(got, linalg.matmul(A, B, "h"))  # not the chopped scalar steps
    # A model object; single operands give a single result, as linalg.matmul's always do.
    single = linalg.matmul(A.astype(np.float32), B.astype(np.float32), "h", hardware=H100)
    assert single.dtype == np.float32
    assert np.array_equal(_bits(single), _bits(hardware.matmul(A.astype(np.float32), B.astype(np.float32),
                                                                 model=H100)))


@pytest.mark.parametrize("options, inputs", [("bfloat16", "bf16"), ("tf32", "tf32"),
                                             ("float8_e4m3fn", "e4m3"), ("float8_e5m2", "e5m2"),
                                             ({"format": "c", "params": [11, 15]}, "fp16")])
def test_the_input_format_is_that_of_the_options(options, inputs):
    expected = hardware.matmul(A, B, model=hardware.model("A100" if inputs[0] != "e" else "H100", inputs))
    got = linalg.matmul(A, B, options, hardware="A100" if inputs[0] != "e" else "H100")
    assert np.array_equal(_bits(got), _bits(expected))


def test_vectors_dot_and_matvec():
    full = hardware.matmul(A, B, model=H100)
    assert np.array_equal(_bits(linalg.matvec(A, B[:, 0], "h", hardware="H100")), _bits(full[:, 0]))
    assert np.array_equal(_bits(linalg.matmul(A[0], B, "h", hardware="H100")), _bits(full[0]))
    assert _bits(linalg.dot(A[0], B[:, 0], "h", hardware="H100")) == _bits(full[0, 0])


def _validation_cases():
    spec = importlib.util.spec_from_file_location("hardware_validation", ROOT / "tools" / "hardware_validation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {(case["gpu"], case["inputs"], case["output"]): case for case in module.load_cases()}


@pytest.mark.parametrize("inputs, options", [("e4m3", "float8_e4m3fn"), ("e5m2", "float8_e5m2")])
def test_the_gpu_results_of_model_validation(inputs, options):
    # The H100's fp8 lines with fp32 output have no addend: each line is one inner product.
    case = _validation_cases()["H100", inputs, "fp32"]
    a, b, d = case["a"][::50], case["b"][::50], case["d"][::50]
    assert not case["c"].any()
    got = [linalg.dot(x, y, options, hardware="H100") for x, y in zip(a, b)]
    assert np.array_equal(_bits(got), d.view(np.uint32))
    chopped_rows = chopped(a, options, hardware="H100")
    diagonal = np.diagonal((chopped_rows @ chopped(b.T, options, hardware="H100")).values)
    assert np.array_equal(_bits(diagonal), d.view(np.uint32))


def test_chopped_products_go_through_the_model():
    expected = _bits(hardware.matmul(A, B, model=H100))
    x, y = chopped(A, "h", hardware="H100"), chopped(B, "h", hardware="H100")
    for product in (x @ y, np.matmul(x, y), np.dot(x, y), x.dot(y), np.einsum("ij,jk->ik", x, y), x @ B):
        assert np.array_equal(_bits(product.values), expected)
    assert np.array_equal(_bits((x[0] @ y).values), expected[0])
    # Everything else rounds as before; the sums keep the arithmetic's method.
    plain = chopped(A, "h", method="pairwise")
    with_model = chopped(A, "h", method="pairwise", hardware="H100")
    assert np.array_equal((with_model + 1).values, (plain + 1).values)
    assert np.array_equal(with_model.sum(axis=0).values, plain.sum(axis=0).values)


def test_the_arithmetic_carries_the_model():
    arith = Arithmetic("h", hardware=H100)
    assert arith.hardware is H100 and arith.product_settings == {"hardware": H100}
    assert arith.with_settings(strict=True).hardware is H100
    assert Arithmetic("h").product_settings == {"method": "recursive", "block_size": 32}
    assert "hardware='H100'" in repr(Arithmetic("h", hardware="H100"))
    x = chopped(A, arith)
    assert np.array_equal(_bits((x @ chopped(B, arith)).values), _bits(hardware.matmul(A, B, model=H100)))


@pytest.mark.parametrize("kwargs, message", [
    (dict(method="fma"), "give no method="),
    (dict(accumulate="s"), "give no method="),
    (dict(options={"format": "h", "round": 5}), "round to nearest without bit flips"),
    (dict(options={"format": "h", "flip": 1}), "round to nearest without bit flips"),
    (dict(options="s"), "not an input format of matrix units"),
    (dict(options="q43"), "not an input format of matrix units"),
    (dict(options="bf16", hardware=H100), "is not the input format 'fp16'"),
    (dict(hardware="H1000"), "No model for GPU 'H1000'"),
])
def test_linalg_refuses_what_the_model_cannot_do(kwargs, message):
    kwargs = dict(dict(options="h", hardware="H100"), **kwargs)
    with pytest.raises(ValueError, match=message):
        linalg.matmul(A, B, kwargs.pop("options"), **kwargs)


def test_linalg_refuses_other_hardware_values():
    with pytest.raises(TypeError, match="GPU name such as 'H100' or a hardware.BlockFMA"):
        linalg.matmul(A, B, "h", hardware=16)


def test_fnuz_formats_reach_the_mi300x_models_through_linalg_and_chopped_arrays():
    """A FNUZ format is named by its emin and encoding beside t and emax: linalg.matmul and chopped
    arrays with hardware='MI300X' compute hardware.matmul's products of that
    format (inputs in range: the options' rounding and the model's saturating one agree)."""
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((3, 40)), rng.standard_normal((40, 2))
    for name, inputs in (("float8_e4m3fnuz", "e4m3fnuz"), ("float8_e5m2fnuz", "e5m2fnuz")):
        expected = np.asarray(hardware.matmul(A, B, model="MI300X", inputs=inputs), np.float64)
        got = linalg.matmul(A, B, {"format": name}, hardware="MI300X")
        assert np.array_equal(np.asarray(got, np.float64), expected)
        product = chopped(A, {"format": name}, hardware="MI300X") @ chopped(B, {"format": name}, hardware="MI300X")
        assert np.array_equal(product.values, expected)
        fmt = lookup_format(name)
        assert hardware.model_for_format("MI300X", fmt.t, fmt.emax, name, emin=fmt.emin, encoding=fmt.encoding) \
            == hardware.model("MI300X", inputs, "fp32")
    # chop's 'q43' has e4m3fnuz's t and emax but emin -6 and IEEE encoding: no matrix unit's format
    q43 = lookup_format("q43")
    with pytest.raises(ValueError, match="not an input format of matrix units"):
        hardware.model_for_format("MI300X", q43.t, q43.emax, "q43", emin=q43.emin, encoding=q43.encoding)
    with pytest.raises(ValueError, match="not an input format of matrix units"):
        linalg.matmul(A, B, {"format": "q43"}, hardware="MI300X")
    with pytest.raises(TypeError, match="both emin and encoding"):
        hardware.model_for_format("MI300X", 4, 7, "e4m3fnuz", emin=-7)


@pytest.mark.parametrize("name, inputs", [("float8_e4m3fnuz", "e4m3fnuz"), ("float8_e5m2fnuz", "e5m2fnuz")])
def test_fnuz_formats_reach_the_mi300x_models_in_nn_simulate(name, inputs):
    torch = pytest.importorskip("torch")
    from pychop_compat import nn

    rng = np.random.default_rng(6)
    A, B = rng.standard_normal((3, 40)), rng.standard_normal((40, 2))
    with nn.simulate(name, hardware="MI300X"):
        simulated = torch.tensor(A) @ torch.tensor(B)
    expected = np.asarray(hardware.matmul(A, B, model="MI300X", inputs=inputs), np.float64)
    assert np.array_equal(simulated.numpy().astype(np.float64), expected)


def test_model_for_format_names_the_model_of_a_format_or_refuses():
    """fp16 is [t=11, emax=15]: H100's fp16 model; a model of other inputs, another format or text
    for a number get clear errors."""
    assert hardware.model_for_format("H100", 11, 15, "format 'h'") == hardware.model("H100", "fp16", "fp32")
    assert hardware.model_for_format("h100", np.int64(8), 127, "bf16") == hardware.model("H100", "bf16", "fp32")
    with pytest.raises(ValueError, match="not the input format 'fp16' of that model"):
        hardware.model_for_format(hardware.model("H100", "fp16", "fp32"), 8, 127, "bf16")
    with pytest.raises(ValueError, match="not an input format of matrix units"):
        hardware.model_for_format("H100", 24, 127, "single")
    with pytest.raises(TypeError, match="t and emax must be integers"):
        hardware.model_for_format("H100", "11", 15, "fp16")


def test_chopped_refuses_what_the_model_cannot_do():
    with pytest.raises(ValueError, match="a GPU of hardware.PRESETS"):
        chopped(A, "h", hardware="H1000")
    with pytest.raises(TypeError, match="GPU name such as 'H100'"):
        chopped(A, "h", hardware=16)
    with pytest.raises(ValueError, match="round to nearest without bit flips"):
        chopped(A, "h", round=5, hardware="H100")
    with pytest.raises(ValueError, match="not an input format of matrix units"):
        chopped(A, "s", hardware="H100") @ chopped(B, "s", hardware="H100")


def test_torch_tensors_through_a_host_copy():
    torch = pytest.importorskip("torch")
    got = linalg.matmul(torch.from_numpy(A), torch.from_numpy(B), "h", hardware="H100")
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    assert np.array_equal(_bits(got.numpy()), _bits(hardware.matmul(A, B, model=H100)))


def test_chopped_torch_tensors_go_through_the_model():
    torch = pytest.importorskip("torch")
    x = chopped(torch.from_numpy(A), "h", hardware="H100")
    product = x @ chopped(torch.from_numpy(B), "h", hardware="H100")
    assert np.array_equal(_bits(product.detach().numpy()), _bits(hardware.matmul(A, B, model=H100)))


def test_chopped_jax_arrays_go_through_the_model_eager_and_traced():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)  # linalg on JAX arrays needs float64 (as conftest's engines do)
    expected = _bits(hardware.matmul(A, B, model=H100))

    def product(a, b):
        return (chopped(a, "h", hardware="H100") @ chopped(b, "h", hardware="H100")).values

    assert np.array_equal(_bits(product(jnp.asarray(A), jnp.asarray(B))), expected)
    assert np.array_equal(_bits(jax.jit(product)(jnp.asarray(A), jnp.asarray(B))), expected)
