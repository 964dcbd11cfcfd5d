"""OptimLP against hand-written low-precision training loops (written here, from the
update formulas of SGD with momentum and of Adam, with chop as the rounding)."""

from __future__ import annotations

import copy
import math
import pickle

import pytest

torch = pytest.importorskip("torch")

from pychop_compat import chop  # noqa: E402
from pychop_compat.nn import OptimLP, Rounder  # noqa: E402


def _problem(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(32, 5, generator=g)
    y = torch.randn(32, 1, generator=g)
    w0 = torch.randn(1, 5, generator=g)
    return x, y, w0


def _grad(w, x, y, scale=1.0):
    """Gradient of scale * mean((x w^T - y)^2) at w, by autograd on a fresh leaf."""
    leaf = w.clone().requires_grad_(True)
    (scale * ((x @ leaf.T - y) ** 2).mean()).backward()
    return leaf.grad


def _on_grid(t, fmt):
    return torch.equal(chop(t, {"format": fmt}), t)


def test_sgd_momentum_matches_hand_written_loop():
    x, y, w0 = _problem()
    lr, mu = 0.05, 0.9
    # The hand-written loop: g = fl_h(grad); m' = mu m + g (m' = g at the first step);
    # w = fl_b(w - lr m'); m = fl_q52(m') stored: SGD's update, each quantity rounded to
    # its format when it is stored (the documented order: state rounded after the step).
    w, m = w0.clone(), None
    for _ in range(6):
        g = chop(_grad(w, x, y), {"format": "h"})
        m = g.clone() if m is None else m * mu + g
        w = chop(w.add(m, alpha=-lr), {"format": "b"})
        m = chop(m, {"format": "q52"})

    model = torch.nn.Linear(5, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(w0)
    opt = OptimLP(torch.optim.SGD(model.parameters(), lr=lr, momentum=mu, foreach=False),
                  weight="b", grad="h", state="q52")
    for _ in range(6):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
    assert torch.equal(model.weight.detach(), w)
    assert torch.equal(opt.state[model.weight]["momentum_buffer"], m)
    # The rounding mattered: an unrounded run ends elsewhere.
    plain = w0.clone()
    for _ in range(6):
        plain = plain - lr * _grad(plain, x, y)
    assert not torch.equal(plain, w)


def test_adam_with_accumulator_and_state_formats():
    x, y, w0 = _problem(1)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    # Hand-written Adam (Kingma & Ba; torch's arithmetic order) on an fp32-like accumulator
    # 'b' weights, state: exp_avg in 'h', exp_avg_sq in 'b', the weight used = fl_q43(accumulator).
    acc = chop(w0.clone(), {"format": "s"})
    w = chop(acc, {"format": "q43"})
    m = torch.zeros_like(w0)
    v = torch.zeros_like(w0)
    for step in range(1, 5):
        g = _grad(w, x, y)
        m = m.lerp(g, 1 - b1)
        v = v * b2 + (1 - b2) * g * g
        denom = (v.sqrt() / math.sqrt(1 - b2**step)) + eps
        acc = acc.addcdiv(m, denom, value=-lr / (1 - b1**step))
        acc = chop(acc, {"format": "s"})
        w = chop(acc, {"format": "q43"})
        m, v = chop(m, {"format": "h"}), chop(v, {"format": "b"})  # stored rounded

    model = torch.nn.Linear(5, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(w0)
    opt = OptimLP(torch.optim.Adam(model.parameters(), lr=lr, betas=(b1, b2), eps=eps, foreach=False),
                  weight="q43", state={"exp_avg": "h", "exp_avg_sq": "b"}, accumulator="s")
    with torch.no_grad():  # the first weight seen by the model is fl_q43(w0), as in the loop
        model.weight.copy_(chop(w0, {"format": "q43"}))
    for _ in range(4):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
    state = opt.state[model.weight]
    assert _on_grid(state["exp_avg"], "h") and _on_grid(state["exp_avg_sq"], "b")
    assert torch.equal(state["exp_avg"], m) and torch.equal(state["exp_avg_sq"], v)
    assert torch.equal(opt.accumulators[model.weight], acc)
    assert torch.equal(model.weight.detach(), w)
    assert float(state["step"]) == 4.0  # the step counter is not rounded


def test_loss_scaling_keeps_small_gradients():
    """A gradient of 2^-30 underflows to 0 in fp16 (xmins = 2^-24); scaled by 2^16 it survives."""
    p = torch.nn.Parameter(torch.zeros(3))
    target = 2.0**-30
    for scale, expected in ((1.0, 0.0), (2.0**16, -0.5 * target)):
        p.data.zero_()
        opt = OptimLP(torch.optim.SGD([p], lr=0.5), grad="h", loss_scale=scale)
        opt.zero_grad()
        opt.scale_loss((p * target).sum()).backward()  # d/dp = target (times the scale)
        opt.step()
        # update = lr * fl_h(target * scale) / scale: exact, as target * 2^16 = 2^-14 is in fp16
        assert p.detach().tolist() == [expected] * 3


def test_dynamic_loss_scale_skips_overflowing_steps():
    p = torch.nn.Parameter(torch.ones(2))
    opt = OptimLP(torch.optim.SGD([p], lr=0.125), grad="h", loss_scale=2.0**20, dynamic_loss_scale=True,
                  growth_interval=2)
    opt.zero_grad()
    opt.scale_loss(p.sum()).backward()  # gradient 2^20 > fp16's xmax: Inf after rounding
    opt.step()
    assert p.detach().tolist() == [1.0, 1.0] and opt.loss_scale == 2.0**19 and opt.skipped_steps == 1
    for _ in range(2):
        opt.zero_grad()
        opt.scale_loss(p.sum() * 2.0**-10).backward()  # 2^9 fits fp16
        opt.step()
    assert opt.loss_scale == 2.0**20 and opt.good_steps == 0
    assert p.detach().tolist() == [1.0 - 2 * 0.125 * 2.0**-10] * 2  # exact: powers of two


def test_stochastic_weight_rounding_keeps_small_updates_on_average():
    """Updates below half an ulp vanish with round to nearest; stochastic rounding keeps them in expectation."""
    torch.manual_seed(0)
    n = 20000
    for rounding, expect_moved in (("nearest", False), ("stochastic", True)):
        p = torch.nn.Parameter(torch.ones(n))
        opt = OptimLP(torch.optim.SGD([p], lr=1.0), weight=("b", rounding))
        p.grad = torch.full((n,), 2.0**-10)  # ulp of bfloat16 at 1 (below) is 2^-8: a quarter ulp
        opt.step()
        mean_update = 1.0 - float(p.detach().double().mean())
        if expect_moved:  # each weight is 1 - 2^-8 with probability 1/4: mean 2^-10
            assert abs(mean_update - 2.0**-10) < 4 * 2.0**-8 * math.sqrt(0.25 * 0.75 / n)
        else:
            assert mean_update == 0.0


def test_state_dict_round_trip():
    x, y, w0 = _problem(2)

    def make():
        model = torch.nn.Linear(5, 1)
        with torch.no_grad():
            model.weight.copy_(w0)
            model.bias.zero_()
        opt = OptimLP(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5), weight="b", grad="h",
                      state="h", accumulator="s", loss_scale=4.0)
        return model, opt

    def train(model, opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            opt.scale_loss(((model(x) - y) ** 2).mean()).backward()
            opt.step()

    model, opt = make()
    train(model, opt, 3)
    saved_model = copy.deepcopy(model.state_dict())
    saved = copy.deepcopy(opt.state_dict())
    train(model, opt, 2)

    model2, opt2 = make()
    model2.load_state_dict(saved_model)
    opt2.load_state_dict(saved)
    train(model2, opt2, 2)
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="OptimLP"):
        opt2.load_state_dict({"state": {}})


def test_wrapper_errors_and_scheduler():
    p = torch.nn.Parameter(torch.ones(2))
    with pytest.raises(TypeError, match="torch.optim.Optimizer"):
        OptimLP("sgd")
    with pytest.raises(ValueError, match="loss_scale"):
        OptimLP(torch.optim.SGD([p], lr=0.1), loss_scale=0.0)
    opt = OptimLP(torch.optim.SGD([p], lr=0.1), weight=Rounder("h"))
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    p.grad = torch.ones(2)
    opt.step()
    scheduler.step()
    assert opt.optimizer.param_groups[0]["lr"] == 0.05


def test_optimizers_that_call_the_closure_again_within_a_step_are_refused():
    # LBFGS re-evaluates the closure inside its step, where OptimLP cannot round the gradients.
    model = torch.nn.Linear(4, 1)
    with pytest.raises(TypeError, match="closure"):
        OptimLP(torch.optim.LBFGS(model.parameters()), weight="b")


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_copies_and_pickles_train_on_as_the_original_would(how):
    x, y, w0 = _problem(3)
    lr, mu = 0.05, 0.9
    # The hand-written loop (momentum SGD on a q52 accumulator, 'b' weights, q52 state), as a list
    # of the weights after each step.
    acc, w, m, weights = chop(w0, {"format": "q52"}), w0.clone(), None, []
    for _ in range(2):
        g = _grad(w, x, y)
        m = g.clone() if m is None else m * mu + g
        acc = chop(acc.add(m, alpha=-lr), {"format": "q52"})
        w = chop(acc, {"format": "b"})
        m = chop(m, {"format": "q52"})
        weights.append(w)

    def step(model, opt):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()

    model = torch.nn.Linear(5, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(w0)
    opt = OptimLP(torch.optim.SGD(model.parameters(), lr=lr, momentum=mu, foreach=False),
                  weight="b", state="q52", accumulator="q52")
    calls = []
    opt.register_step_pre_hook(lambda *args: calls.append("original"))
    torch.optim.lr_scheduler.StepLR(opt, step_size=1)  # (it wraps opt.step, which a copy must not keep)
    step(model, opt)
    twin_opt = copy.deepcopy(opt) if how == "deepcopy" else pickle.loads(pickle.dumps(opt))
    (twin,) = twin_opt.param_groups[0]["params"]
    assert twin is not model.weight
    twin_model = torch.nn.Linear(5, 1, bias=False)
    twin_model.weight = twin
    step(twin_model, twin_opt)
    assert torch.equal(twin.detach(), weights[1])
    assert torch.equal(model.weight.detach(), weights[0])  # the original untouched
    # Hooks are not copied (as SGD's), and nothing is patched class-wide: another OptimLP's hook runs once.
    other = OptimLP(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1))
    other.register_step_pre_hook(lambda *args: calls.append("other"))
    other.step()
    assert calls == ["original", "other"]


def test_hooks_run_where_torch_runs_them_for_a_plain_optimizer():
    def events_of(wrap):
        p = torch.nn.Parameter(torch.ones(2))
        opt = wrap(torch.optim.SGD([p], lr=0.5))
        events = []

        def note(name):
            return lambda o, *args: events.append((name, o is opt, *args[:1]))

        def drop_closure(o, args, kwargs):
            events.append(("step_pre", o is opt, len(args), sorted(kwargs)))
            return (args, {})

        def add_entry(o, state_dict):
            events.append(("state_dict_post", o is opt))
            return {**state_dict, "note": 1}

        def remove_entry(o, state_dict):
            events.append(("load_state_dict_pre", o is opt, state_dict.pop("note")))

        opt.register_step_pre_hook(drop_closure)
        opt.register_step_post_hook(lambda o, args, kwargs: events.append(("step_post", o is opt, len(args),
                                                                           sorted(kwargs))))
        opt.register_state_dict_pre_hook(note("state_dict_pre"))
        opt.register_state_dict_post_hook(add_entry)
        opt.register_load_state_dict_pre_hook(remove_entry)
        opt.register_load_state_dict_post_hook(note("load_state_dict_post"), prepend=True)
        p.grad = torch.ones(2)
        loss = opt.step(closure=lambda: 3.0)  # dropped by the pre-hook: no loss
        state_dict = opt.state_dict()
        opt.load_state_dict(state_dict)
        return events, loss, state_dict["note"], p.tolist()

    expected = events_of(lambda sgd: sgd)
    assert expected[1:] == (None, 1, [0.5, 0.5])
    assert events_of(OptimLP) == expected


@pytest.mark.parametrize("fmt", ["h", "q43"])
def test_sparse_gradients_are_rounded_as_their_dense_nonzeros(fmt):
    # a sparse gradient (nn.Embedding(sparse=True)) crashed the rounding (NotImplementedError for 'h', a
    # numpy conversion for 'q43'). Oracle: the same gradient computed dense by plain torch, rounded by
    # a Rounder by hand, and the SGD update w - lr * g written out (duplicate indices summed first)
    weight = torch.linspace(-1, 1, 30).reshape(10, 3)
    ids = torch.tensor([1, 2, 1, 7])
    emb = torch.nn.Embedding(10, 3, sparse=True, _weight=weight.clone())
    opt = OptimLP(torch.optim.SGD(emb.parameters(), lr=0.5), grad=fmt)
    (emb(ids).sum(0) @ torch.tensor([0.37, -1.1, 3.3])).backward()
    opt.step()
    dense = weight.clone().requires_grad_()
    (torch.nn.functional.embedding(ids, dense).sum(0) @ torch.tensor([0.37, -1.1, 3.3])).backward()
    assert emb.weight.grad.is_sparse
    assert torch.equal(emb.weight.grad.to_dense(), Rounder(fmt)(dense.grad))
    assert torch.equal(emb.weight.detach(), weight - 0.5 * Rounder(fmt)(dense.grad))
