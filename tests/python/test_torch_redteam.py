"""Issue 46's red team for the drop-in attn.torch: misuse of GPTModel,
swap_model and the attention classes as a user may write it (bad inputs,
resized and replaced parameters, replaced, wrapped, added and deleted
modules, hooks, dtypes and devices, .data replaced between forward and
backward, create_graph, pickling, threads, no_grad, eval/train). Every case
ends in a clean exception (attn.Error, or the one torch raises for the
book's model) raised before any C runs, or in the book's result (the book's
chapter-4 model, tests/python/book_ch4.py, run by PyTorch). `make
test-sanitize` runs it under ASan (tests/python/pyenv.sh). The issue's
failures: 2 (test_wrong_parameter_shapes_raise), 3 (the chapter-6 head,
test_tree_changes_raise_before_c), 4 (test_data_replaced_between_forward_
and_backward), 6 (test_logits_pickle_as_a_plain_tensor), 9
(test_create_graph_raises, test_empty_batch_or_sequence_raises)."""
import copy
import io
import pickle
import threading
import time
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import attn
import attn.torch as at
from book_ch4 import GPTModel as BookGPT
from book_ch4 import LayerNorm as BookLayerNorm

CFG = {"vocab_size": 100, "context_length": 16, "emb_dim": 32, "n_heads": 2, "n_layers": 2,
       "drop_rate": 0.1, "qkv_bias": False}
X = torch.tensor([[3, 14, 15, 92, 65, 35, 89, 79], [2, 71, 82, 81, 82, 84, 59, 0]])
Y = torch.tensor([[14, 15, 92, 65, 35, 89, 79, 32], [71, 82, 81, 82, 84, 59, 0, 45]])


def pair(seed=1, swap=False, cfg=CFG):
    """(book, ours) with the same weights: ours swap_model(book) (sharing
    its modules) or an attn.torch.GPTModel of its own."""
    torch.manual_seed(seed)
    book = BookGPT(cfg)
    if swap:
        return book, at.swap_model(book)
    torch.manual_seed(seed)
    return book, at.GPTModel(cfg)


def run(model, x=X, y=Y, seed=11):
    """The chapter-5 loss of model on (x, y) with the dropout masks of seed:
    (logits, loss, {name: gradient})."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    logits = model(x)
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
    loss.backward()
    grads = {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
    return logits.detach().clone(), loss.item(), grads


def assert_same(got, want, atol=1e-5):
    assert torch.allclose(got[0], want[0], atol=atol, rtol=0)
    assert got[1] == pytest.approx(want[1], abs=atol)
    assert got[2].keys() == want[2].keys()
    for k, g in want[2].items():
        if g is None:
            assert got[2][k] is None, k
        else:
            assert torch.allclose(got[2][k], g, atol=atol, rtol=1e-4), k


def assert_book(mutate, swap=False, atol=1e-5):
    """mutate(model) applied to the book's model and to ours: the same logits,
    loss and gradients (in training mode: the same dropout masks)."""
    book, ours = pair(swap=False)
    mutate(book)
    mutate(ours)
    assert_same(run(ours), run(book), atol)


def c_calls(model):
    return model._bridge().calls


# ------------------------------------------------------------- inputs


@pytest.mark.parametrize("idx, match", [
    (X.float(), "integer token ids"),
    (X[0], r"\(B, T\)"),
    (X[None], r"\(B, T\)"),
    (X[:0], "empty: batch size B = 0"),
    (X[:, :0], "empty: sequence length T = 0"),
    (torch.zeros((1, 17), dtype=torch.long), "context_length"),
    (torch.full((1, 4), 100), "outside"),
    (torch.full((1, 4), -1), "outside"),
    ([[1, 2, 3]], "torch.Tensor"),
    (X.bool(), "integer token ids"),
])
def test_bad_ids_raise(idx, match):
    _, ours = pair()
    for model in (ours, ours.eval()):
        with pytest.raises(attn.Error, match=match):
            model(idx)


def test_empty_batch_or_sequence_raises():
    """Issue 46, failure 9: B = 0 or T = 0 names the empty dimension, from
    Python and from the C library alike."""
    _, ours = pair()
    with pytest.raises(attn.Error, match=r"in_idx is empty: batch size B = 0 \(shape \(0, 4\)"):
        ours(torch.zeros((0, 4), dtype=torch.long))
    with pytest.raises(attn.Error, match="in_idx is empty: sequence length T = 0"):
        ours(torch.zeros((2, 0), dtype=torch.long), targets=torch.zeros((2, 0), dtype=torch.long))
    from attn import _torch_gpt as tg
    bridge, logits = ours._bridge(), torch.empty(1)
    for B, T, match in ((0, 4, r"the batch is empty \(B = 0\)"),
                        (2, 0, r"the sequences are empty \(T = 0\)")):
        with pytest.raises(attn.Error, match=match):
            attn._lib.call(tg.lib.attn_h_bgpt_forward, bridge.h, None, None, B, T, 0, None, 0,
                           0, logits.data_ptr(), None)


def test_bad_targets_raise():
    _, ours = pair()
    with pytest.raises(attn.Error, match="targets must be"):
        ours(X, targets=Y[:, :4])
    with pytest.raises(attn.Error, match="outside"):
        ours(X, targets=torch.full_like(Y, 100))
    with pytest.raises(attn.Error, match="integer token ids"):
        ours(X, targets=Y.float())


def test_unusual_ids_give_the_books_result():
    """int32 ids, a non-contiguous view: the book's logits."""
    book, ours = pair()
    book.eval(), ours.eval()
    xt = X.t().contiguous().t()  # the same values, column-major
    assert not xt.is_contiguous()
    with torch.no_grad():
        want = book(X)
        for idx in (X.int(), xt):
            assert torch.allclose(ours(idx), want, atol=1e-5, rtol=0)


# ------------------------------------------------------- parameters


def test_wrong_parameter_shapes_raise():
    """Issue 46, failure 2: a parameter of another shape (a read past the
    tensor in C before) raises attn.Error naming it, and no C runs (an
    out_head.weight of another height is a head of that width, as in the
    book's model: test_other_heads_run_as_the_book)."""
    for name, make in (("tok_emb.weight", lambda m: m.tok_emb),
                       ("out_head.weight", lambda m: m.out_head)):
        for swap in (False, True):
            _, ours = pair(swap=swap)
            shape = (5, 32) if name == "tok_emb.weight" else (3, 31)
            make(ours).weight = nn.Parameter(torch.randn(shape))
            calls = c_calls(ours)
            with pytest.raises(attn.Error, match=name.replace(".", r"\.")):
                ours(X)
            with pytest.raises(attn.Error, match=name.replace(".", r"\.")):
                ours(X, targets=Y)
            assert c_calls(ours) == calls


@pytest.mark.parametrize("case", ["data-shape", "bias-shape", "dtype", "int", "meta",
                                  "complex", "none", "storage"])
def test_bad_parameters_raise(case):
    _, ours = pair()
    if case == "data-shape":
        ours.trf_blocks[1].att.W_value.weight.data = torch.randn(32, 31)
    elif case == "bias-shape":
        ours.trf_blocks[0].ff.layers[0].bias.data = torch.randn(127)
    elif case == "dtype":
        ours.trf_blocks[0].norm1.scale.data = torch.ones(32, dtype=torch.float64)
    elif case == "int":
        ours.pos_emb.weight = nn.Parameter(torch.zeros(16, 32, dtype=torch.int32),
                                           requires_grad=False)
    elif case == "meta":
        ours.to("meta")
    elif case == "complex":
        ours.to(torch.complex64)
    elif case == "none":
        ours.out_head.weight = None
    elif case == "storage":  # the storage behind a parameter shrunk (as FSDP frees one)
        storage = getattr(torch.Tensor, "untyped_storage", None) or torch.Tensor._storage
        storage(ours.out_head.weight).resize_(64)
    with pytest.raises(attn.Error, match="parameter|one dtype"):
        ours(X)


def test_parameter_variants_give_the_books_result():
    """A non-contiguous parameter of the right shape, frozen parameters,
    tied weights and a block used twice run as the book's model."""
    def transposed(m):
        m.out_head.weight.data = m.out_head.weight.data.t().contiguous().t()

    def freeze(m):  # chapter 6: all frozen but the last block and the final norm
        for p in m.parameters():
            p.requires_grad = False
        for p in list(m.trf_blocks[-1].parameters()) + list(m.final_norm.parameters()):
            p.requires_grad = True

    def tie(m):
        m.out_head.weight = m.tok_emb.weight

    def shared_block(m):
        m.trf_blocks[1] = m.trf_blocks[0]

    for mutate in (transposed, freeze, tie, shared_block):
        assert_book(mutate)


def test_every_parameter_frozen():
    book, ours = pair()
    ours.requires_grad_(False)
    logits = ours(X)
    assert logits.grad_fn is None
    loss = F.cross_entropy(logits.flatten(0, 1), Y.flatten())
    with pytest.raises(RuntimeError, match="does not require grad"):
        loss.backward()


def test_dtypes_run_as_the_book_in_float32():
    book, ours = pair()
    book.eval(), ours.eval()
    with torch.no_grad():
        want = book(X)
    ours.double()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ours(X)
    assert got.dtype == torch.float64
    assert torch.allclose(got.float(), want, atol=1e-4, rtol=0)
    ours.half()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ours(X)
    assert got.dtype == torch.float16 and torch.isfinite(got).all()


# ------------------------------------------------------ the module tree


class LinearWithLoRA(nn.Module):  # the book's appendix E
    def __init__(self, linear, rank=2, alpha=4):
        super().__init__()
        self.linear = linear
        self.A = nn.Parameter(torch.randn(linear.in_features, rank) * 0.01)
        self.B = nn.Parameter(torch.zeros(rank, linear.out_features))
        self.alpha = alpha

    def forward(self, x):
        return self.linear(x) + self.alpha * (x @ self.A @ self.B)


class MyLayerNorm(BookLayerNorm):  # the same function, a class neither attn's nor the model's
    pass


class SwiGLU(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))

    def forward(self, x):
        return self.layers(x)


def _append_block(m):
    m.trf_blocks.append(copy.deepcopy(m.trf_blocks[0]))


def _hook(m):
    m.trf_blocks[0].ff.register_forward_hook(lambda mod, i, o: o * 2)


def _pre_hook(m):
    m.final_norm.register_forward_pre_hook(lambda mod, i: (i[0] * 0,))


def _backward_hook(m):
    m.trf_blocks[1].norm2.register_full_backward_hook(lambda mod, gi, go: None)


def _forward(m):
    m.final_norm.forward = lambda x: x


def _weight_norm(m):
    torch.nn.utils.weight_norm(m.out_head)


def _prune(m):
    import torch.nn.utils.prune as prune
    prune.random_unstructured(m.out_head, "weight", amount=0.3)


def _parametrize(m):
    import torch.nn.utils.parametrize as P

    class Twice(nn.Module):
        def forward(self, w):
            return 2 * w

    P.register_parametrization(m.trf_blocks[0].att.W_key, "weight", Twice())


def _set_heads(m):
    m.trf_blocks[1].att.num_heads = 4
    m.trf_blocks[1].att.head_dim = 8


def _mask(m):
    m.trf_blocks[0].att.mask.zero_()  # attention to the future


def _mask_shape(m):
    m.trf_blocks[0].att.mask = torch.triu(torch.ones(8, 8), diagonal=1)


TREE_CASES = [  # (name, change, the error names)
    ("wrapped-head", lambda m: setattr(m, "out_head", nn.Sequential(m.out_head)), "out_head"),
    ("lora", lambda m: setattr(m.trf_blocks[0].att, "W_query",
                               LinearWithLoRA(m.trf_blocks[0].att.W_query)),
     r"trf_blocks\.0\.att\.W_query"),
    ("torch-layernorm", lambda m: setattr(m, "final_norm", nn.LayerNorm(32)), "final_norm"),
    ("users-layernorm", lambda m: setattr(m.trf_blocks[1], "norm1", MyLayerNorm(32)),
     r"trf_blocks\.1\.norm1"),
    ("eps", lambda m: setattr(m.final_norm, "eps", 1e-6), "final_norm.*eps"),
    ("feedforward", lambda m: setattr(m.trf_blocks[0], "ff", SwiGLU(32)), r"trf_blocks\.0\.ff"),
    ("exact-gelu", lambda m: m.trf_blocks[0].ff.layers.__setitem__(1, nn.GELU()),
     r"ff\.layers\.1"),
    ("relu", lambda m: m.trf_blocks[1].ff.layers.__setitem__(1, nn.ReLU()), r"ff\.layers\.1"),
    ("del-module", lambda m: delattr(m, "final_norm"), "final_norm"),
    ("del-block", lambda m: m.trf_blocks.__delitem__(1), "trf_blocks"),
    ("add-block", _append_block, "trf_blocks"),
    ("add-module", lambda m: setattr(m.trf_blocks[0], "adapter", nn.Linear(32, 32)),
     "adapter"),
    ("add-parameter", lambda m: setattr(m.final_norm, "extra", nn.Parameter(torch.ones(1))),
     "extra"),
    ("add-buffer", lambda m: m.register_buffer("step", torch.zeros(1)), "step"),
    ("identity-dropout", lambda m: setattr(m, "drop_emb", nn.Identity()), "drop_emb"),
    ("dropout-rate", lambda m: setattr(m.trf_blocks[1].drop_shortcut, "p", 0.5),
     r"drop_shortcut has p = 0.5"),
    ("modulelist", lambda m: setattr(m, "trf_blocks", nn.ModuleList(m.trf_blocks)),
     "trf_blocks"),
    ("embedding-vocab", lambda m: setattr(m, "tok_emb", nn.Embedding(50, 32)), "tok_emb"),
    ("padding-idx", lambda m: setattr(m, "tok_emb", nn.Embedding(100, 32, padding_idx=0)),
     "tok_emb"),
    ("heads", _set_heads, r"trf_blocks\.1\.att"),
    ("mask", _mask, r"trf_blocks\.0\.att\.mask"),
    ("mask-shape", _mask_shape, r"trf_blocks\.0\.att\.mask"),
    ("forward-hook", _hook, r"trf_blocks\.0\.ff has a hook"),
    ("pre-hook", _pre_hook, "final_norm has a hook"),
    ("backward-hook", _backward_hook, r"trf_blocks\.1\.norm2 has a hook"),
    ("forward", _forward, "final_norm has a hook or a replaced forward"),
    ("weight-norm", _weight_norm, "out_head"),
    ("prune", _prune, "out_head"),
    ("parametrize", _parametrize, r"trf_blocks\.0\.att\.W_key"),
    ("mixed-modes", lambda m: m.trf_blocks[0].drop_shortcut.eval(), "eval mode"),
]


@pytest.mark.parametrize("swap", [False, True], ids=["GPTModel", "swap_model"])
@pytest.mark.parametrize("name, change, match", TREE_CASES, ids=[c[0] for c in TREE_CASES])
def test_tree_changes_raise_before_c(name, change, match, swap):
    """Issue 46, failure 3 (chapter 6's nn.Linear(768, 2) head: (B, T, V)
    logits, then a crash in the backward) and the tree changes of build item
    2: attn.Error naming the module, before any C runs; both paths."""
    _, ours = pair(swap=swap)
    change(ours)
    calls = c_calls(ours)
    with pytest.raises(attn.Error, match=match):
        ours(X)
    with pytest.raises(attn.Error, match=match):
        ours(X, targets=Y)
    assert c_calls(ours) == calls


def _last_token(model, seed=11):
    """Chapter 6's loss on the last token: (logits, loss, {name: gradient})."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    logits = model(X)[:, -1, :]
    loss = F.cross_entropy(logits, torch.tensor([0, 1]))
    loss.backward()
    grads = {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
    return logits.detach().clone(), loss.item(), grads


def test_chapter_6_runs_as_the_book():
    """The book's chapter 6 on swap_model(book) and on GPTModel: freeze,
    a 2-way head, unfreeze, loss on the last token: the book's logits, loss
    and gradients (None for the frozen tensors), run in C (issue 46 made it
    an error instead of a segfault; issue 49 runs it)."""
    for swap in (False, True):
        book, model = pair(swap=swap)
        book = copy.deepcopy(book)
        for m in (book, model):
            for p in m.parameters():
                p.requires_grad = False
            torch.manual_seed(123)
            m.out_head = nn.Linear(in_features=32, out_features=2)
            for p in m.trf_blocks[-1].parameters():
                p.requires_grad = True
        calls = c_calls(model)
        assert_same(_last_token(model), _last_token(book))
        assert c_calls(model) > calls  # in attn's C model


@pytest.mark.parametrize("swap", [False, True], ids=["GPTModel", "swap_model"])
def test_other_heads_run_as_the_book(swap):
    """out_head replaced by nn.Linear(32, 100) (a bias), or its weight by a
    (3, 32) tensor: a head of that width, the book's numbers."""
    def biased(m):
        torch.manual_seed(5)
        m.out_head = nn.Linear(32, 100)

    def three(m):
        m.out_head.weight = nn.Parameter(torch.linspace(-1, 1, 96).reshape(3, 32))

    for change, run_it in ((biased, run), (three, _last_token)):
        book, ours = pair(swap=swap)
        book = copy.deepcopy(book)
        change(book)
        change(ours)
        assert_same(run_it(ours), run_it(book))


def test_tree_changes_that_are_the_books_run():
    """torch's tanh GELU, a hook on the whole model, a mask changed and put
    back, and every dropout in eval mode under a training model: the book's
    result."""
    assert_book(lambda m: [blk.ff.layers.__setitem__(1, nn.GELU(approximate="tanh"))
                           for blk in m.trf_blocks])
    seen = []

    def hooked(m):
        m.register_forward_hook(lambda mod, i, o: seen.append(o.shape))
    assert_book(hooked)
    assert seen == [(2, 8, 100), (2, 8, 100)]

    def dropouts_eval(m):
        for mod in m.modules():
            if isinstance(mod, nn.Dropout):
                mod.eval()
    assert_book(dropouts_eval)
    _, ours = pair()
    mask = ours.trf_blocks[0].att.mask
    saved = mask.clone()
    mask.zero_()
    with pytest.raises(attn.Error, match="mask"):
        ours(X)
    mask.copy_(saved)
    ours(X)


def test_forward_replaced_on_a_class_raises():
    """A class's forward replaced after attn took it (a LoRA tutorial's
    monkeypatch): the book's class of the user's code, and torch's
    nn.Linear."""
    class Norm(BookLayerNorm):
        pass

    torch.manual_seed(1)
    book = BookGPT(CFG)
    book.final_norm = Norm(32)
    ours = at.swap_model(book)
    ours(X)
    Norm.forward = lambda self, x: x
    with pytest.raises(attn.Error, match="final_norm has a hook or a replaced forward"):
        ours(X)
    linear = nn.Linear.forward
    nn.Linear.forward = lambda self, x: linear(self, x) * 2
    try:
        _, ours = pair()
        with pytest.raises(attn.Error, match=r"trf_blocks\.0\.att\.W_query has a hook"):
            ours(X)
        mha = at.MultiHeadAttention(8, 8, 6, 0.0, num_heads=2)
        with pytest.raises(attn.Error, match="W_query"):
            mha(torch.randn(1, 6, 8))
    finally:
        nn.Linear.forward = linear
    ours(X)


def test_global_hook_raises():
    _, ours = pair()
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    try:
        with pytest.raises(attn.Error, match="global module hook"):
            ours(X)
    finally:
        handle.remove()
    ours(X)


def test_swap_model_checks_the_books_classes():
    """swap_model probes the GELU and LayerNorm classes of the user's code:
    the exact GELU, a LayerNorm with another eps, an unbiased variance or a
    missing part raise; the book's classes pass."""
    class UnbiasedLayerNorm(BookLayerNorm):
        def forward(self, x):
            mean = x.mean(dim=-1, keepdim=True)
            var = x.var(dim=-1, keepdim=True, unbiased=True)
            return self.scale * (x - mean) / torch.sqrt(var + self.eps) + self.shift

    def exact_gelu(m):
        for blk in m.trf_blocks:
            blk.ff.layers[1] = nn.GELU()

    def unbiased(m):
        m.final_norm = UnbiasedLayerNorm(32)

    def eps(m):
        m.trf_blocks[0].norm2.eps = 1e-6

    def no_head(m):
        del m.out_head

    for change, match in ((exact_gelu, r"ff\.layers\.1"), (unbiased, "final_norm"),
                          (eps, "norm2"), (no_head, "out_head")):
        torch.manual_seed(1)
        book = BookGPT(CFG)
        change(book)
        with pytest.raises(attn.Error, match=f"swap_model.*{match}"):
            at.swap_model(book)
    with pytest.raises(attn.Error, match="structure"):
        at.swap_model(nn.Linear(2, 2))
    # a class of the user's code added later at a place: not the one swap_model saw
    book, ours = pair(swap=True)
    ours.final_norm = UnbiasedLayerNorm(32)
    with pytest.raises(attn.Error, match="final_norm"):
        ours(X)
    ours.final_norm = BookLayerNorm(32)  # the class swap_model saw: a new instance runs
    with torch.no_grad():
        ours.eval()(X)


# --------------------------------------------- between forward and backward


@pytest.mark.parametrize("path", ["logits-sum", "cross-entropy", "targets"])
@pytest.mark.parametrize("change", ["other-shape", "same-shape"])
def test_data_replaced_between_forward_and_backward(path, change):
    """Issue 46, failure 4: m.tok_emb.weight.data replaced after the
    forward (a heap overflow in the C backward before): attn.Error at
    backward, on each path."""
    _, ours = pair()
    if path == "logits-sum":
        loss = ours(X).sum()
    elif path == "cross-entropy":
        loss = F.cross_entropy(ours(X).flatten(0, 1), Y.flatten())
    else:
        loss = ours(X, targets=Y)
    shape = (5, 32) if change == "other-shape" else (100, 32)
    ours.tok_emb.weight.data = torch.randn(shape)
    with pytest.raises(attn.Error, match=r"tok_emb\.weight changed between the forward"):
        loss.backward()


def test_in_place_change_between_forward_and_backward_is_torchs_error():
    _, ours = pair()
    loss = F.cross_entropy(ours(X).flatten(0, 1), Y.flatten())
    with torch.no_grad():
        ours.out_head.weight.mul_(2)
    with pytest.raises(RuntimeError, match="inplace"):
        loss.backward()


def test_parameter_replaced_after_forward_gets_the_books_gradient():
    """A new Parameter set after the forward: the backward runs with the
    tensors the forward used (as the book's graph does): the old one gets
    the book's gradient, the new one none."""
    got = []
    for model in pair():
        torch.manual_seed(2)
        logits = model(X)
        old = model.out_head.weight
        model.out_head.weight = nn.Parameter(torch.zeros(100, 32))
        F.cross_entropy(logits.flatten(0, 1), Y.flatten()).backward()
        assert model.out_head.weight.grad is None
        got.append(old.grad)
    assert torch.allclose(got[0], got[1], atol=1e-5, rtol=1e-4)


# --------------------------------------------------------------- autograd


@pytest.mark.parametrize("path", ["logits-sum", "cross-entropy", "targets"])
def test_create_graph_raises(path):
    """Issue 46, failure 9: a gradient with create_graph=True (no graph
    before, silently) raises attn.Error."""
    _, ours = pair()
    for how in ("grad", "backward"):
        if path == "logits-sum":
            loss = ours(X).square().mean()
        elif path == "cross-entropy":
            loss = F.cross_entropy(ours(X).flatten(0, 1), Y.flatten())
        else:
            loss = ours(X, targets=Y)
        with pytest.raises(attn.Error, match="attn's backward is not differentiable"):
            if how == "grad":
                torch.autograd.grad(loss, [ours.out_head.weight], create_graph=True)
            else:
                loss.backward(create_graph=True)


def test_attention_create_graph_raises():
    torch.manual_seed(3)
    mha = at.MultiHeadAttention(8, 8, 6, 0.0, num_heads=2)
    x = torch.randn(2, 6, 8, requires_grad=True)
    with pytest.raises(attn.Error, match="not differentiable"):
        torch.autograd.grad(mha(x).sum(), [x], create_graph=True)
    q, k, v = (torch.randn(1, 2, 6, 4, requires_grad=True) for _ in range(3))
    out = at.scaled_dot_product_attention(q, k, v, is_causal=True)
    with pytest.raises(attn.Error, match="not differentiable"):
        torch.autograd.grad(out.sum(), [q], create_graph=True)


def test_backward_twice():
    """Without retain_graph: torch's error (the logits path) or attn's (the
    fused loss); with it the logits path accumulates twice the book's."""
    book, ours = pair()
    with pytest.raises(RuntimeError, match="second time"):
        loss = F.cross_entropy(ours(X).flatten(0, 1), Y.flatten())
        loss.backward()
        loss.backward()
    with pytest.raises(attn.Error, match="backward twice"):
        loss = ours(X, targets=Y)
        loss.backward(retain_graph=True)
        loss.backward()
    for model in (book, ours):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(4)
        loss = F.cross_entropy(model(X).flatten(0, 1), Y.flatten())
        loss.backward(retain_graph=True)
        loss.backward()
    for p, q in zip(book.parameters(), ours.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=2e-5, rtol=1e-4)


def test_no_grad_inference_mode_eval_and_train():
    book, ours = pair()
    for train in (False, True):
        book.train(train), ours.train(train)
        for ctx in (torch.no_grad, torch.inference_mode):
            with ctx():
                torch.manual_seed(5)
                want = book(X)
                torch.manual_seed(5)
                got = ours(X)
            assert got.grad_fn is None
            assert torch.allclose(got, want, atol=1e-5, rtol=0), (train, ctx)


# ----------------------------------------------------------- pickling


def test_logits_pickle_as_a_plain_tensor():
    """Issue 46, failure 6: torch.save, pickle and copy of GPTModel's logits
    (an RLock in their attn bookkeeping refused before) give plain tensors,
    as those of the book's logits would be."""
    _, ours = pair()
    ours.eval()
    with torch.no_grad():
        plain = ours(X)
    logits = ours(X)
    for t in (logits, logits.flatten(0, 1), plain):
        buf = io.BytesIO()
        torch.save(t, buf)
        buf.seek(0)
        for back in (torch.load(buf), pickle.loads(pickle.dumps(t)), copy.copy(t)):
            assert type(back) is torch.Tensor and torch.equal(back.detach(), plain.view_as(back))
    back = copy.deepcopy(plain)
    assert type(back) is torch.Tensor and torch.equal(back, plain)
    assert back.data_ptr() != plain.data_ptr()
    # a non-leaf: torch refuses to deepcopy it as it refuses the book's logits
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(logits * 1)
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(logits)


def test_model_pickles_and_copies():
    book, ours = pair(swap=True)
    ours.eval()
    with torch.no_grad():
        want = ours(X)
        for again in (pickle.loads(pickle.dumps(ours)), copy.deepcopy(ours)):
            assert torch.allclose(again(X), want, atol=0, rtol=0)
            again.final_norm = nn.LayerNorm(32)  # the copy's tree is its own
            with pytest.raises(attn.Error, match="final_norm"):
                again(X)
        assert torch.equal(ours(X), want)


# ------------------------------------------------------------ threads


def test_threads_with_a_parameter_swapped_meanwhile():
    """Forwards in two threads while a third replaces out_head.weight's
    .data by fresh tensors of the wrong shape and of the right one (the
    same values): each forward gives the book's logits or attn.Error naming
    out_head, never a crash or another number (attn reads each parameter
    from one snapshot, whose storage it holds through the C call; a
    replaced tensor is freed). Contiguous ones only: torch's own copy of a
    non-contiguous parameter races with .data replaced under it, in the
    book's model as in any torch op."""
    book, ours = pair()
    book.eval(), ours.eval()
    with torch.no_grad():
        want = book(X)
    good = ours.out_head.weight.data.clone()
    three = torch.linspace(-1, 1, 96).reshape(3, 32)  # a 3-wide head: the book's logits of it
    book3 = copy.deepcopy(book)
    book3.out_head.weight.data = three.clone()
    with torch.no_grad():
        want3 = book3(X)
    fresh = [lambda: three.clone(), lambda: good.clone(), lambda: torch.randn(100, 31),
             lambda: good.clone()]
    stop, outcomes, errors = threading.Event(), [], []

    def forward():
        try:
            while not stop.is_set():
                try:
                    with torch.no_grad():
                        out = ours(X)
                    ref = want3 if out.shape == want3.shape else want
                    outcomes.append(bool(torch.allclose(out, ref, atol=1e-5, rtol=0)))
                except attn.Error as e:
                    outcomes.append(str(e))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    def swap():
        for i in range(600):
            ours.out_head.weight.data = fresh[i % 4]()
            time.sleep(0.0002)  # let the forwards run between swaps
        ours.out_head.weight.data = good
        stop.set()

    threads = [threading.Thread(target=forward) for _ in range(2)]
    threads.append(threading.Thread(target=swap))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    odd = [o for o in outcomes if o is not True and "out_head" not in str(o)]
    assert outcomes and not odd, odd[:3]
    with torch.no_grad():
        assert torch.allclose(ours(X), want, atol=1e-5, rtol=0)


# ------------------------------------------------ the attention classes


def test_attention_parameter_of_another_shape_raises():
    """attn.torch.MultiHeadAttention copies each weight into C: one of
    another shape (a read past it before) raises, at the forward and, after
    a .data replaced, at the backward."""
    torch.manual_seed(6)
    mha = at.MultiHeadAttention(8, 8, 6, 0.0, num_heads=2)
    x = torch.randn(2, 6, 8, requires_grad=True)
    good = mha.W_key.weight.data
    mha.W_key.weight.data = torch.randn(2, 2)
    with pytest.raises(attn.Error, match=r"W_key\.weight"):
        mha(x)
    mha.W_key.weight.data = good
    y = mha(x).sum()
    mha.W_value.weight.data = torch.randn(1, 8)
    with pytest.raises(attn.Error, match=r"W_value\.weight"):
        y.backward()
    torch.manual_seed(6)
    sa = at.SelfAttention_v1(3, 2)
    sa.W_key = nn.Parameter(torch.rand(1, 1))
    with pytest.raises(attn.Error, match="W_key"):
        sa(torch.rand(6, 3))


def test_attention_input_replaced_before_backward_raises():
    torch.manual_seed(7)
    mha = at.MultiHeadAttention(8, 8, 6, 0.0, num_heads=2)
    x = torch.randn(2, 6, 8, requires_grad=True)
    h = x * 1  # a float32 contiguous input: the one the function saves
    y = mha(h).sum()
    h.data = torch.randn(1, 2, 8)
    with pytest.raises(attn.Error, match="changed between the forward and the backward"):
        y.backward()
    q, k, v = (torch.randn(1, 2, 6, 4, requires_grad=True) for _ in range(3))
    out = at.scaled_dot_product_attention(q * 1, k, v, is_causal=True).sum()
    k.data = torch.randn(1, 2, 3, 4)
    with pytest.raises(attn.Error, match="changed between the forward and the backward"):
        out.backward()


def _mha():
    torch.manual_seed(8)
    return at.MultiHeadAttention(8, 8, 6, 0.0, num_heads=2)


def _wrapper():
    torch.manual_seed(8)
    return at.MultiHeadAttentionWrapper(8, 4, 6, 0.0, num_heads=2)


ATTENTION_CASES = [  # (make, change, the error names)
    (_mha, lambda m: setattr(m, "W_query", LinearWithLoRA(m.W_query)), "W_query"),
    (_mha, lambda m: setattr(m, "out_proj", nn.Sequential(m.out_proj)), "out_proj"),
    (_mha, lambda m: m.W_key.register_forward_hook(lambda *a: None), "W_key"),
    (_mha, lambda m: setattr(m.W_value, "forward", lambda x: x), "W_value"),
    (_mha, lambda m: m.mask.zero_(), "mask"),
    (_mha, lambda m: setattr(m, "extra", nn.LayerNorm(8)), "extra"),
    (_mha, lambda m: delattr(m, "W_key"), "W_key"),
    (_wrapper, lambda m: m.heads.__setitem__(1, nn.Linear(8, 4)), r"heads\.1"),
    (_wrapper, lambda m: m.heads[0].mask.fill_(1), r"heads\.0\.mask"),
]


@pytest.mark.parametrize("make, change, match", ATTENTION_CASES)
def test_attention_tree_changes_raise(make, change, match):
    """The attention classes run their parts in C as the book's class: a
    wrapped, replaced, hooked, added or deleted part, or a changed mask,
    raises attn.Error naming it."""
    m = make()
    change(m)
    with pytest.raises(attn.Error, match=match):
        m(torch.randn(2, 6, 8))
