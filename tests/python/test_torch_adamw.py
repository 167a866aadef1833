"""attn.torch.AdamW against torch.optim.AdamW: the same parameters after
steps (float32 in C, float64 and views in torch ops), param groups with
their own settings, state_dicts loaded both ways, closures, and the
arguments it refuses."""
import pytest
import torch
import torch.nn as nn

import attn
import attn.torch as at


def _model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(13, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 5))


def _steps(model, opt, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(n):
        x = torch.randn(8, 13, generator=g)
        y = torch.randint(0, 5, (8,), generator=g)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _close(a, b, tol):
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb
        assert torch.allclose(va, vb, atol=tol, rtol=0), (ka, (va - vb).abs().max())


@pytest.mark.parametrize("kw", [{}, {"lr": 5e-4, "weight_decay": 0.1},
                                {"betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.0}])
def test_steps_match_torch(kw):
    ours, ref = _model(1), _model(1)
    lo = _steps(ours, at.AdamW(ours.parameters(), **kw), 12)
    lr = _steps(ref, torch.optim.AdamW(ref.parameters(), **kw), 12)
    assert lo == pytest.approx(lr, abs=1e-6, rel=0)
    _close(ours, ref, 1e-6)
    # the update happened: the weights moved away from the start
    assert not torch.allclose(ours[0].weight, _model(1)[0].weight)


def test_groups_float64_and_views_match_torch():
    def setup(cls):
        m = _model(2)
        m[3].double()  # a float64 layer: torch ops, not attn's kernel
        groups = [{"params": m[0].parameters(), "lr": 2e-3},
                  {"params": list(m[2].parameters()) + list(m[3].parameters()),
                   "weight_decay": 0.0}]
        return m, cls(groups, lr=1e-3)

    def run(m, opt):
        g = torch.Generator().manual_seed(3)
        for _ in range(6):
            x = torch.randn(4, 13, generator=g)
            opt.zero_grad()
            h = m[2](m[1](m[0](x))).double()
            m[3](h).square().mean().backward()
            opt.step()

    (a, oa), (b, ob) = setup(at.AdamW), setup(torch.optim.AdamW)
    run(a, oa)
    run(b, ob)
    _close(a, b, 1e-6)
    assert a[3].weight.dtype == torch.float64


def test_state_dict_loads_both_ways_and_continues_alike():
    a, b = _model(4), _model(4)
    oa, ob = at.AdamW(a.parameters(), lr=1e-3), torch.optim.AdamW(b.parameters(), lr=1e-3)
    _steps(a, oa, 3)
    _steps(b, ob, 3)
    sa, sb = oa.state_dict(), ob.state_dict()
    assert sa["param_groups"][0].keys() >= {"lr", "betas", "eps", "weight_decay", "amsgrad"}
    assert sorted(sa["state"][0]) == sorted(sb["state"][0]) == ["exp_avg", "exp_avg_sq", "step"]
    # swap: attn's optimizer continues from torch's state and the other way
    oa.load_state_dict(sb)
    ob.load_state_dict(sa)
    a.load_state_dict(b.state_dict())
    b2 = _model(4)
    b2.load_state_dict(a.state_dict())
    ob2 = torch.optim.AdamW(b2.parameters(), lr=1e-3)
    ob2.load_state_dict(sb)
    la = _steps(a, oa, 4, seed=9)
    lb = _steps(b2, ob2, 4, seed=9)
    assert la == pytest.approx(lb, abs=1e-6, rel=0)
    assert oa.state[a[0].weight]["step"].item() == 7


def test_closure_and_params_without_grad():
    m = _model(5)
    opt = at.AdamW(m.parameters())
    frozen = m[0].bias.detach().clone()
    m[0].bias.requires_grad_(False)
    x = torch.randn(2, 13)

    def closure():
        opt.zero_grad()
        loss = m(x).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert isinstance(loss, torch.Tensor)
    assert torch.equal(m[0].bias, frozen)
    assert m[0].bias not in opt.state


@pytest.mark.parametrize("kw", [{"amsgrad": True}, {"maximize": True}, {"lr": -1.0},
                                {"betas": (1.0, 0.9)}, {"weight_decay": -0.1}])
def test_refused(kw):
    with pytest.raises(attn.Error):
        at.AdamW(_model(6).parameters(), **kw)


def test_sparse_gradient_refused():
    emb = nn.Embedding(10, 4, sparse=True)
    opt = at.AdamW(emb.parameters())
    emb(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(attn.Error, match="sparse"):
        opt.step()


def test_docstrings():
    assert "torch.optim.AdamW" in at.AdamW.__doc__ and at.AdamW.step.__doc__
