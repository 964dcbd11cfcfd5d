"""nn.simulate (a torch model's products through a hardware model, float64 accumulation or torch's
own, on rounded operands) against the same model written by hand with quantizers and the hardware
model called directly; and nn.quantize with a format name under torch.compile(fullgraph=True)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from pychop_compat import chop, hardware  # noqa: E402
from pychop_compat.nn import Rounder, quantize, simulate  # noqa: E402


def q(t, fmt="h"):
    return quantize(t, fmt)


def same(a, b):
    """Bit for bit (NaN and the sign of zero included)."""
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a.detach().reshape(-1).numpy().view(np.uint8), b.detach().reshape(-1).numpy().view(np.uint8))


def unit_matmul(a, b, c=None, model="H100", inputs="fp16"):
    """The hardware model called by hand on 2-D tensors (fp32 result as float32)."""
    d = hardware.matmul(a.detach().double().numpy(), b.detach().double().numpy(),
                        None if c is None else c.detach().double().numpy(), beta=1.0,
                        model=hardware.model(model, inputs, "fp32"))
    return torch.from_numpy(d)


def unit_conv2d(x, w, b, stride, padding, groups, spec):
    """A 2-D convolution output element by element by hardware.block_dot on explicit patches in
    (channel, row, column) order (not through unfold)."""
    xp = np.pad(x.detach().double().numpy(), [(0, 0), (0, 0), (padding, padding), (padding, padding)])
    wn, bn = w.detach().double().numpy(), b.detach().double().numpy()
    n, _, height, width = xp.shape
    out_channels, in_group, kh, kw = wn.shape
    per_group = out_channels // groups
    rows, cols = (height - kh) // stride + 1, (width - kw) // stride + 1
    patches = np.empty((n, out_channels, rows, cols, in_group * kh * kw))
    weights = np.empty_like(patches)
    for o in range(out_channels):
        g = o // per_group
        for r in range(rows):
            for c in range(cols):
                window = xp[:, g * in_group:(g + 1) * in_group, r * stride:r * stride + kh, c * stride:c * stride + kw]
                patches[:, o, r, c] = window.reshape(n, -1)
                weights[:, o, r, c] = wn[o].reshape(-1)
    addends = np.broadcast_to(bn[None, :, None, None], patches.shape[:-1])
    return torch.from_numpy(hardware.block_dot(weights, patches, addends, spec).astype(np.float32))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, stride=2, groups=2)
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        return self.fc(x.flatten(1))


class Block(nn.Module):
    """A pre-norm transformer block: one attention head, a GELU MLP."""

    def __init__(self, width=8):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

    def forward(self, x):
        qry, key, val = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        weights = torch.softmax(qry @ key.transpose(-2, -1) / x.shape[-1] ** 0.5, dim=-1)
        x = x + self.proj(weights @ val)
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def seeded(module_class, seed=0):
    torch.manual_seed(seed)
    return module_class()


def test_cnn_under_hardware_model_equals_quantizers_and_the_model_by_hand():
    net = seeded(SmallCNN)
    x = torch.randn(2, 2, 7, 7)
    with simulate("h", hardware="H100"):
        got = net(x)
    spec = hardware.model("H100", "fp16", "fp32")
    h = torch.relu(unit_conv2d(q(x), q(net.conv1.weight), q(net.conv1.bias), 1, 1, 1, spec))
    h = torch.relu(unit_conv2d(q(h), q(net.conv2.weight), q(net.conv2.bias), 2, 0, 2, spec))
    want = unit_matmul(q(h.flatten(1)), q(net.fc.weight).T, q(net.fc.bias))
    assert same(got, want)
    assert not torch.equal(got, net(x))  # the simulation changed something


def block_by_hand(block, x, model, inputs, fmt):
    def linear(layer, v):
        rows = v.reshape(-1, v.shape[-1])
        out = unit_matmul(q(rows, fmt), q(layer.weight, fmt).T, q(layer.bias, fmt), model, inputs)
        return out.reshape(*v.shape[:-1], -1)

    def matmul(a, b):
        return torch.stack([unit_matmul(q(a[i], fmt), q(b[i], fmt), None, model, inputs) for i in range(a.shape[0])])

    qry, key, val = linear(block.qkv, block.norm1(x)).chunk(3, dim=-1)
    weights = torch.softmax(matmul(qry, key.transpose(-2, -1)) / x.shape[-1] ** 0.5, dim=-1)
    x = x + linear(block.proj, matmul(weights, val))
    return x + linear(block.down, F.gelu(linear(block.up, block.norm2(x))))


@pytest.mark.parametrize("fmt,inputs,model", [("h", "fp16", "H100"), ("bf16", "bf16", "A100")])
def test_transformer_block_under_hardware_model_equals_the_block_by_hand(fmt, inputs, model):
    block = seeded(Block)
    x = torch.randn(2, 5, 8)
    with simulate(fmt, hardware=model):
        got = block(x)
    assert same(got, block_by_hand(block, x, model, inputs, fmt))


def test_format_of_float32_is_the_identity_and_float64_accumulation_of_float64():
    net, block = seeded(SmallCNN), seeded(Block)
    x, t = torch.randn(2, 2, 7, 7), torch.randn(2, 5, 8)
    with simulate("single"):
        got_net, got_block = net(x), block(t)
    assert same(got_net, net(x)) and same(got_block, block(t))
    net64, block64, x64, t64 = net.double(), block.double(), x.double(), t.double()
    with simulate("double", accumulate="double"):
        got_net, got_block = net64(x64), block64(t64)
    assert same(got_net, net64(x64)) and same(got_block, block64(t64))


def test_float64_accumulation_rounds_once_to_the_format():
    net = seeded(SmallCNN)
    x = torch.randn(2, 2, 7, 7)
    with simulate("b", accumulate="h"):
        got = net(x)

    def rounded(v):
        return Rounder("h")(v).float()

    def conv(v, layer):
        return rounded(layer._conv_forward(q(v, "b").double(), q(layer.weight, "b").double(),
                                           q(layer.bias, "b").double()))

    h = torch.relu(conv(torch.relu(conv(x, net.conv1)), net.conv2))
    want = rounded(F.linear(q(h.flatten(1), "b").double(), q(net.fc.weight, "b").double(),
                            q(net.fc.bias, "b").double()))
    assert same(got, want)


def test_round_outputs_rounds_every_result():
    block = seeded(Block)
    x = torch.randn(2, 5, 8)
    with simulate("b", round_outputs=True):
        got = block(x)

    def linear(layer, v):
        return q(F.linear(q(v, "b"), q(layer.weight, "b"), q(layer.bias, "b")), "b")

    def matmul(a, b):
        return q(q(a, "b") @ q(b, "b"), "b")

    qry, key, val = linear(block.qkv, q(block.norm1(x), "b")).chunk(3, dim=-1)
    weights = q(torch.softmax(q(matmul(qry, key.transpose(-2, -1)) / x.shape[-1] ** 0.5, "b"), dim=-1), "b")
    h = q(x + linear(block.proj, matmul(weights, val)), "b")
    want = q(h + linear(block.down, q(F.gelu(linear(block.up, q(block.norm2(h), "b"))), "b")), "b")
    assert same(got, want)


def test_each_simulated_function_against_the_hardware_model():
    torch.manual_seed(1)
    a, b, c = torch.randn(3, 4, 20), torch.randn(20, 6), torch.randn(4, 6)
    v, w = torch.randn(20), torch.randn(20)
    with simulate("h", hardware="H100"):
        got = {"matmul": a @ b, "rmatmul": b.__rmatmul__(a[0]), "vector": v @ w, "mv": torch.matmul(a[0], v),
               "mm": torch.mm(a[0], b), "bmm": torch.bmm(a, a.transpose(1, 2)),
               "addmm": torch.addmm(c, a[0], b, beta=0.5, alpha=2.0), "addmm0": c.addmm(a[0], b, beta=0),
               "conv1d": F.conv1d(a, torch.randn(5, 4, 4), torch.randn(5), padding="same", dilation=2),
               "torch.mv": a[0].mv(v), "dot": torch.dot(v, w),
               "baddbmm": torch.baddbmm(c, a, b.expand(3, 20, 6), beta=0.5, alpha=2.0)}
    assert same(got["matmul"], torch.stack([unit_matmul(q(a[i]), q(b)) for i in range(3)]))
    assert same(got["rmatmul"], unit_matmul(q(a[0]), q(b)))
    assert same(got["vector"], unit_matmul(q(v)[None], q(w)[:, None])[0, 0])
    assert same(got["mv"], unit_matmul(q(a[0]), q(v)[:, None])[:, 0])
    assert same(got["mm"], unit_matmul(q(a[0]), q(b)))
    assert same(got["bmm"], torch.stack([unit_matmul(q(a[i]), q(a[i]).T) for i in range(3)]))
    d = hardware.matmul(q(a[0]).double().numpy(), q(b).double().numpy(), q(c).double().numpy(), 2.0, 0.5,
                        model="H100")
    assert same(got["addmm"], torch.from_numpy(d))
    assert same(got["addmm0"], torch.from_numpy(hardware.matmul(q(a[0]).double().numpy(), q(b).double().numpy(),
                                                                model="H100")))
    assert same(got["torch.mv"], got["mv"]) and same(got["dot"], got["vector"])
    assert same(got["baddbmm"], torch.stack([torch.from_numpy(hardware.matmul(
        q(a[i]).double().numpy(), q(b).double().numpy(), q(c).double().numpy(), 2.0, 0.5, model="H100"))
        for i in range(3)]))
    assert got["conv1d"].shape == F.conv1d(a, torch.randn(5, 4, 4), padding="same", dilation=2).shape


def test_conv1d_and_padding_same_against_conv2d_by_hand():
    torch.manual_seed(2)
    x, w, bias = torch.randn(2, 3, 9), torch.randn(4, 3, 3), torch.randn(4)
    with simulate("h", hardware="H100"):
        got = F.conv1d(x, w, bias, padding=1, stride=2)
        same_padding = F.conv1d(x, w, bias, padding="same")
    spec = hardware.model("H100", "fp16", "fp32")
    padded = F.pad(q(x), (1, 1))[:, :, None, :]
    want = unit_conv2d(padded, q(w)[:, :, None, :], q(bias), 1, 0, 1, spec)[:, :, 0, :]
    assert same(same_padding, want)
    assert same(got, want[:, :, ::2])


def test_gradient_is_that_of_torchs_operation_on_the_rounded_operands():
    torch.manual_seed(3)
    layer = nn.Linear(6, 3)
    x = torch.randn(4, 6, requires_grad=True)
    with simulate("h", hardware="H100"):
        y = layer(x)
    y.sum().backward()
    x_ref, layer_ref = x.detach().clone().requires_grad_(), seeded(lambda: nn.Linear(6, 3), 3)
    F.linear(q(x_ref), q(layer_ref.weight), q(layer_ref.bias)).sum().backward()
    assert same(y.detach(), unit_matmul(q(x), q(layer.weight).T, q(layer.bias)))
    assert same(x.grad, x_ref.grad) and same(layer.weight.grad, layer_ref.weight.grad)
    assert same(layer.bias.grad, layer_ref.bias.grad)


def test_simulate_refuses_what_it_cannot_model():
    with pytest.raises(ValueError, match="not both"):
        simulate("h", hardware="H100", accumulate="single")
    with pytest.raises(ValueError, match="not an input format"):
        simulate("q43", hardware="H100")
    with pytest.raises(ValueError, match="not the input format 'fp16' of that model"):
        simulate("bf16", hardware=hardware.model("H100", "fp16", "fp32"))
    with pytest.raises(TypeError, match="GPU name"):
        simulate("h", hardware=3)


@pytest.mark.parametrize("backend", ["eager", pytest.param("aot_eager", marks=pytest.mark.slow)])
def test_quantize_with_a_format_name_compiles_without_graph_breaks(backend):
    """quantize(t, 'float16') built a Rounder (with a lock) while Dynamo traced it: a graph break."""
    import torch._dynamo

    def f(t):
        return quantize(t, "float16", clip=True, grad_format="bfloat16") * 2 + quantize(t, "bf16", "zero")

    torch._dynamo.reset()
    x = torch.randn(9, requires_grad=True)
    y = torch.compile(f, fullgraph=True, backend=backend)(x)  # fullgraph: raises on a graph break
    y.sum().backward()
    x_eager = x.detach().clone().requires_grad_()
    y_eager = f(x_eager)
    y_eager.sum().backward()
    assert same(y, y_eager) and same(x.grad, x_eager.grad)


def test_round_outputs_rounds_in_place_operations_in_place_and_leaves_operands_and_views():
    x = torch.tensor([1 / 3, 2 / 3])
    with simulate("b", round_outputs=True):
        same_tensor, view, copy = x.float(), x[:1], x.clone()
        copy += 1 / 7
        scaled = x.clone().mul_(1 / 7)
    assert same_tensor is x and torch.equal(x, torch.tensor([1 / 3, 2 / 3])) and view._base is x
    assert same(copy, q(q(x, "b") + 1 / 7, "b")) and same(scaled, q(q(x, "b") * (1 / 7), "b"))


def test_empty_batches_give_torchs_shapes():
    a, b = torch.randn(0, 2, 3), torch.randn(0, 3, 4)
    with simulate("h", hardware="H100"):
        got = [torch.bmm(a, b), torch.randn(2, 0, 3) @ torch.randn(3, 4),
               torch.baddbmm(torch.zeros(0, 2, 4), a, b)]
    assert [tuple(t.shape) for t in got] == [(0, 2, 4), (2, 0, 4), (0, 2, 4)]


def test_out_integers_and_the_linalg_alias_as_torch():
    # out= is filled and returned (0.6.0: left as it was, or a TypeError); integer products are exact
    # in every mode (3001^2 = 9006001; the hardware path rounded the integers to fp16); the alias
    # torch.linalg.matmul is simulated as torch.matmul is
    a, b = torch.randn(3, 4), torch.randn(4, 2)
    ints = torch.tensor([[3001]])
    for settings in ({}, {"accumulate": "single"}, {"hardware": "H100"}):
        out = torch.zeros(3, 2)
        with simulate("h", **settings):
            returned = torch.matmul(a, b, out=out)
            reference = torch.matmul(a, b)
            assert (ints @ ints).item() == 9006001
            assert torch.equal(torch.linalg.matmul(a, b), reference)
        assert returned is out and torch.equal(out, reference)


def test_hardware_path_refuses_the_shapes_and_dtypes_torch_refuses():
    # torch.mm takes 2-D operands, bmm 3-D, mv a matrix and a vector, dot vectors of one dtype; the hardware
    # path computed a product for these anyway (torch.mm of 3-D tensors: a batch of products). Oracle:
    # plain torch raises, and so must the context, with the same exception type.
    a, b, m, v = torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(3, 4), torch.randn(4)
    calls = [lambda: torch.mm(a, b), lambda: a.mm(b), lambda: torch.bmm(m, m.T), lambda: torch.mv(m, m.T),
             lambda: torch.dot(m, m), lambda: torch.dot(v, v.double()), lambda: torch.addmm(m, a, b)]
    for call in calls:
        with pytest.raises(Exception) as plain:
            call()
        for grad in (False, True):
            with torch.set_grad_enabled(grad), simulate("h", hardware="H100"):
                with pytest.raises(plain.type):
                    call()


@pytest.mark.parametrize("context", [dict(hardware="H100"), dict(accumulate="h")], ids=["hardware", "accumulate"])
def test_products_refuse_operands_of_two_dtypes_as_torch_does(context):
    # torch's products refuse floating operands of two dtypes ("expected m1 and m2 to have the same dtype"),
    # and their meta kernels do not check it: the hardware and accumulate paths took them (found by review).
    # Oracle: plain torch raises RuntimeError for each call, and so must the context.
    a64, b32 = torch.randn(4, 6, dtype=torch.float64), torch.randn(6, 3)
    x64, w32 = torch.randn(1, 1, 5, 5, dtype=torch.float64), torch.randn(1, 1, 2, 2)
    calls = [lambda: torch.mm(a64, b32), lambda: torch.matmul(b32.T, a64.T), lambda: torch.mv(a64, b32[:, 0]),
             lambda: torch.addmm(torch.zeros(4, 3), a64, a64.T[:, :3]), lambda: F.linear(a64, b32.T),
             lambda: torch.conv2d(x64, w32)]
    for call in calls:
        with pytest.raises(RuntimeError):
            call()
        with simulate("h", **context), pytest.raises(RuntimeError, match="dtype"):
            call()
    with simulate("h", **context):  # one dtype: computed
        assert torch.mm(a64, a64.T).shape == (4, 4)


def test_linear_with_a_vector_weight_or_input_has_torchs_shape():
    # torch's linear takes a 1-D weight (one output feature, no axis for it) and a 1-D input; 0.8.0
    # handed the 1-D weight.T to hardware.matmul and raised.  Small integers: every sum exact, so
    # the model gives torch's own values.
    x, w, weights = torch.arange(24.0).reshape(3, 8) - 9, torch.arange(8.0) - 3, torch.arange(16.0).reshape(2, 8) - 5
    cases = [(x, w, None), (x[0], w, None), (x[0], weights, torch.tensor([1.0, -2.0])), (x[0], w, torch.tensor(4.0)),
             (x.reshape(3, 1, 8), w, None)]
    for input, weight, bias in cases:
        with simulate("h", hardware="H100"):
            got = F.linear(input, weight, bias)
        expected = F.linear(input.double(), weight.double(), None if bias is None else bias.double())
        assert got.shape == expected.shape and torch.equal(got.double(), expected)


def chopped(t, fmt):
    """chop on a NumPy copy (the oracle), back as a tensor."""
    return torch.from_numpy(np.asarray(chop(t.detach().numpy().copy(), {"format": fmt})))


def test_round_outputs_leaves_the_values_of_methods_that_change_none():
    # requires_grad_ and share_memory_ ended in '_' and were rounded in place as arithmetic (0.34375, 0.1015625)
    w = torch.tensor([1 / 3, 0.1])
    original = w.clone()
    with simulate("q43", round_outputs=True):
        w.requires_grad_()
        v = w.detach()
        v.share_memory_().t_().unsqueeze_(0).squeeze_(0)
        v.detach_()
    assert same(w.detach(), original) and same(v, original) and w.requires_grad


def test_round_outputs_rounds_out_and_assigned_elements_in_place():
    # out= was left unrounded while the same result returned was rounded; so were elements set by indexing
    a, b = torch.tensor([1 / 3, 0.1]), torch.tensor([0.1, 1 / 7])
    m = torch.tensor([[1 / 3, 0.1], [0.3, 1 / 7]])
    c, values, indices = torch.empty(2), torch.empty(2), torch.empty(2, dtype=torch.long)
    x, n = torch.full((4,), 1 / 3), torch.zeros(2, dtype=torch.long)
    with simulate("q43", round_outputs=True):
        returned = torch.add(a, b, out=c)
        torch.max(m, 0, out=(values, indices))
        x[1:3] = a
        x[torch.tensor([0])] = 1 / 7
        n[0] = 5
    assert returned is c and same(c, chopped(a + b, "q43"))
    assert same(values, chopped(m.max(0).values, "q43")) and indices.tolist() == [0, 1]
    # the elements written rounded, the one not written (1/3, set before the context) kept
    assert same(x, torch.cat([chopped(torch.tensor([1 / 7]), "q43"), chopped(a, "q43"), torch.tensor([1 / 3])]))
    assert n.tolist() == [5, 0]


@pytest.mark.parametrize("settings", [{}, {"hardware": "H100"}])
def test_addmm_and_baddbmm_in_place_are_simulated(settings):
    # Tensor.addmm_ and baddbmm_ ran as torch computes them, unrounded
    torch.manual_seed(4)
    a, b, c = torch.randn(3, 20), torch.randn(20, 2), torch.randn(3, 2)
    a3, b3, c3 = torch.randn(2, 3, 20), torch.randn(2, 20, 2), torch.randn(2, 3, 2)
    d, d3 = c.clone(), c3.clone()
    with simulate("h", **settings):
        returned = d.addmm_(a, b, beta=0.5, alpha=2.0)
        d3.baddbmm_(a3, b3)
    h = [[chopped(t, "h") for t in ts] for ts in ((a, b, c), *zip(a3, b3, c3))]
    if settings:  # the hardware model called by hand
        want = [torch.from_numpy(hardware.matmul(*(t.double().numpy() for t in ts), alpha, beta, model="H100"))
                for ts, alpha, beta in zip(h, (2.0, 1.0, 1.0), (0.5, 1.0, 1.0))]
    else:  # torch's product on the chopped operands
        want = [torch.addmm(ts[2], ts[0], ts[1], beta=beta, alpha=alpha)
                for ts, alpha, beta in zip(h, (2.0, 1.0, 1.0), (0.5, 1.0, 1.0))]
    assert returned is d and same(d, want[0]) and same(d3, torch.stack(want[1:]))


@pytest.mark.parametrize("method", ["sigmoid_", "relu_", "exp_", "tanh_", "sqrt_", "mul_"])
def test_round_outputs_in_place_operations_keep_their_backward(method):
    # the in-place rounding bumped the version of a tensor the operation saved for backward (RuntimeError
    # "modified by an inplace operation"). Oracle: plain torch (no simulate) out of place on the operand
    # rounded by hand, its gradient w.r.t. that operand: straight-through, it is x's gradient
    r = Rounder("h")
    x = torch.tensor([0.3, 1.7, 2.9], requires_grad=True)
    with simulate("h", round_outputs=True):
        y = x * 1.0
        getattr(y, method)(*([3.0] if method == "mul_" else []))
    y.sum().backward()
    operand = r(x.detach()).requires_grad_()
    expected = getattr(torch, method[:-1])(operand, *([3.0] if method == "mul_" else []))
    expected.sum().backward()
    assert same(y, r(expected)) and same(x.grad, operand.grad)


@pytest.mark.parametrize("call", [lambda x: F.silu(x, inplace=True), lambda x: nn.SiLU(inplace=True)(x),
                                  lambda x: F.elu(x, inplace=True), lambda x: F.leaky_relu(x, 0.1, True),
                                  lambda x: F.hardswish(x, inplace=True)])
def test_round_outputs_rounds_functional_in_place_forms(call):
    # F.silu(x, inplace=True) (name 'silu', its result the operand) was taken for an operand returned as
    # is and left unrounded. Oracle: the same function out of place in plain torch, Rounder applied by hand
    r = Rounder("h")
    x = torch.tensor([0.1, 0.3, 1.7, -0.4])
    with simulate("h", round_outputs=True):
        operand = x.clone()
        got = call(operand)
    assert got is operand and same(got, r(call(r(x).clone())))


@pytest.mark.parametrize("grad", [True, False])
def test_hardware_and_accumulate_give_autocasts_dtype(grad):
    # under torch.autocast the hardware= and accumulate= paths returned float32 (torch: autocast's bfloat16).
    # Oracle: the hardware model called by hand, float64 accumulation rounded to single by hand, each cast
    # to the dtype plain torch's linear has under the same autocast
    torch.manual_seed(0)
    layer, x = nn.Linear(8, 4), torch.randn(3, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.set_grad_enabled(grad):
        dtype = layer(x).dtype
        with simulate("h", hardware="H100"):
            by_hardware = layer(x)
        with simulate("h", accumulate="s"):
            accumulated = layer(x)
    w, b = q(layer.weight).detach(), q(layer.bias).detach()
    assert dtype == by_hardware.dtype == accumulated.dtype == torch.bfloat16
    # (bfloat16 to float32 is exact; NumPy has no bfloat16 for same())
    assert same(by_hardware.float(), unit_matmul(q(x), w.T, b.expand(3, 4)).to(dtype).float())
    assert same(accumulated.float(), Rounder("s")(F.linear(q(x).double(), w.double(), b.double())).to(dtype).float())


def test_hardware_linear_without_input_features_gives_the_bias():
    # F.linear with zero input features crashed (reshape of 0 elements into [-1, 0]). Oracle: mathematics:
    # an empty sum is 0, so each output is the bias (an operand, rounded to the format by hand), broadcast
    weight, bias = torch.zeros(3, 0), torch.tensor([0.1, -2.0, 3.3])
    for shape in [(2, 0), (0,), (4, 2, 0)]:
        with simulate("h", hardware="H100"):
            got = F.linear(torch.ones(shape), weight, bias)
        assert same(got, Rounder("h")(bias).expand(*shape[:-1], 3))
