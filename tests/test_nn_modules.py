"""lower() and the quantized layers: forward and backward against the layer's formula with
chop applied where the documentation says (input, weight, bias, output; their gradients)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from pychop_compat import chop  # noqa: E402
from pychop_compat.nn import (OptimLP, QuantizedConv2d, QuantizedLayerNorm, QuantizedLinear,  # noqa: E402
                              Quantizer, lower)


def fl(t, fmt, mode=1):
    return chop(t.detach(), {"format": fmt, "round": mode})


def test_lower_replaces_layers_and_shares_parameters():
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.LayerNorm(8),
                        nn.Sequential(nn.Linear(8, 3), nn.Tanh()), nn.Conv1d(1, 1, 1), nn.Conv3d(1, 1, 1))
    low = lower(net, weight="b", activation="h")
    assert [type(m).__name__ for m in low[:4]] == ["QuantizedConv2d", "ReLU", "Flatten", "QuantizedLayerNorm"]
    assert type(low[4][0]) is QuantizedLinear and type(low[5]).__name__ == "QuantizedConv1d"
    assert type(low[6]).__name__ == "QuantizedConv3d"
    assert type(net[0]) is nn.Conv2d  # not inplace: the original is untouched
    assert torch.equal(low[0].weight, net[0].weight) and low[0].weight is not net[0].weight
    same = lower(net, weight="b", inplace=True, layers=(nn.Linear,))
    assert same is net and type(net[4][0]) is QuantizedLinear and type(net[0]) is nn.Conv2d
    assert isinstance(net[4][0], nn.Linear)  # still a Linear for code that checks
    with pytest.raises(ValueError, match="lower supports"):
        lower(net, layers=(nn.BatchNorm1d,))
    with pytest.raises(TypeError, match="from_module"):
        QuantizedLinear.from_module(nn.Conv1d(1, 1, 1))


def test_quantized_linear_forward_and_backward_formula():
    """y = fl_a(fl_a(x) fl_w(W)^T + fl_w(b));  dL/dx = fl_g(fl_g(dL/dy) fl_w(W)),
    dL/dW = fl_g(fl_g(dL/dy)^T fl_a(x)), dL/db = fl_g(sum fl_g(dL/dy))."""
    torch.manual_seed(0)
    layer = QuantizedLinear(6, 4, weight="q43", activation="b", gradient="h", dtype=torch.float64)
    x = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(5, 4, dtype=torch.float64)
    y = layer(x)
    xq, wq, bq = fl(x, "b"), fl(layer.weight, "q43"), fl(layer.bias, "q43")
    assert torch.equal(y, fl(xq @ wq.T + bq, "b"))
    y.backward(upstream)
    gy = fl(upstream, "h")
    assert torch.equal(x.grad, fl(gy @ wq, "h"))
    assert torch.equal(layer.weight.grad, fl(gy.T @ xq, "h"))
    assert torch.equal(layer.bias.grad, fl(gy.sum(0), "h"))


def test_quantized_conv_and_layernorm_forward():
    torch.manual_seed(1)
    conv = nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect", dtype=torch.float64)
    qconv = QuantizedConv2d.from_module(conv, weight="q52", activation="b")
    x = torch.randn(2, 2, 5, 5, dtype=torch.float64)
    want = fl(F.conv2d(F.pad(fl(x, "b"), (1, 1, 1, 1), mode="reflect"), fl(conv.weight, "q52"),
                  fl(conv.bias, "q52")), "b")
    assert torch.equal(qconv(x), want)
    norm = QuantizedLayerNorm(7, weight="h", activation="q43", dtype=torch.float64)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2)
        norm.bias.uniform_(-1, 1)
    z = torch.randn(3, 7, dtype=torch.float64)
    want = fl(F.layer_norm(fl(z, "q43"), (7,), fl(norm.weight, "h"), fl(norm.bias, "h"), norm.eps), "q43")
    assert torch.equal(norm(z), want)


def test_lowered_model_trains_and_compiles_without_graph_breaks():
    torch.manual_seed(2)
    x = torch.randn(64, 4)
    y = (x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]))
    model = lower(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1)),
                  weight="b", activation="b", gradient=("b", "stochastic"))
    opt = OptimLP(torch.optim.SGD(model.parameters(), lr=0.05), weight=("b", "stochastic"))
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.2 * losses[0]
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    compiled(x).sum().backward()  # fullgraph=True raises on any graph break


def test_lowering_keeps_the_training_mode():
    # a model lowered in eval() mode has every new submodule in eval mode (0.6.0: the quantizers trained)
    lowered = lower(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()).eval(), weight="h")
    assert not any(module.training for module in lowered.modules())
    assert all(module.training for module in lower(torch.nn.Linear(3, 3), weight="h").modules())


def test_quantizer_refuses_rounding_options_of_a_pass_without_format():
    # forward=None / backward=None pass values unchanged: a mode or random source given there would
    # be silently ignored (0.7.0 accepted them), so it is refused, naming the argument
    for kwargs, name in (({"forward": None, "forward_round": "stochastic"}, "forward_round"),
                         ({"forward": None, "forward_rng": 3}, "forward_rng"),
                         ({"forward": None, "forward_rng": None}, "forward_rng"),  # None: chop's sources
                         ({"backward_round": "down"}, "backward_round"),
                         ({"backward_rng": torch.Generator()}, "backward_rng")):
        with pytest.raises(ValueError, match=name):
            Quantizer(**kwargs)
    # with the format given, the same options are taken: a forward pass leaves x = 1/3 unchanged, and
    # the backward one rounds the gradient 1/3 down to fp16 (chop), as documented
    x = torch.tensor([1 / 3], dtype=torch.float64, requires_grad=True)
    y = Quantizer(None, "h", backward_round="down")(x)
    assert torch.equal(y.detach(), x.detach())
    y.backward(torch.tensor([1 / 3], dtype=torch.float64))
    assert torch.equal(x.grad, fl(torch.tensor([1 / 3], dtype=torch.float64), "h", 3))
