"""The book's chapter 6 (the classifier), chapter 7 (padded batches, -100
targets) and appendix E (LoRA), its own code (tests/python/book_ch67.py,
written out as the book writes it), on
attn.torch.swap_model(book_model) and attn.torch.GPTModel: every step's
loss within 1e-5 of the book's PyTorch model, the same evaluation losses,
predictions and accuracies; the tensors the book freezes get no gradient;
the hostile edits (requires_grad toggled between steps, the head replaced
again with another width, a LoRA of mismatched shapes or another function,
alpha changed) run as the book's model does or raise attn.Error."""
import copy

import pytest
import torch
import torch.nn as nn

import attn
import attn.torch as at

from book_ch4 import GPTModel
from book_ch67 import (LinearWithLoRA, LoRALayer, calc_accuracy_loader, calc_loss_batch,
                       calc_loss_batch_ch7, custom_collate_fn, make_classifier,
                       replace_linear_with_lora, train_classifier_simple)

CFG = {"vocab_size": 97, "context_length": 16, "emb_dim": 32, "n_heads": 4, "n_layers": 3,
       "drop_rate": 0.1, "qkv_bias": True}
TOL = 1e-5
LR = 5e-5  # the book's (gpt_class_finetune.py's AdamW(lr=5e-5, weight_decay=0.1))


def _loader(seed, batches=3, B=4, T=12, classes=2):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, CFG["vocab_size"], (B, T), generator=g),
             torch.randint(0, classes, (B,), generator=g)) for _ in range(batches)]


def _pair(kind, cfg=CFG):
    """(the book's model, attn's) with the same weights."""
    torch.manual_seed(123)
    book = GPTModel(cfg)
    if kind == "swap":
        return book, at.swap_model(copy.deepcopy(book))
    torch.manual_seed(123)
    return book, at.GPTModel(cfg)


def _same(a, b, what):
    assert len(a) == len(b), what
    for i, (x, y) in enumerate(zip(a, b)):
        assert abs(x - y) <= TOL, f"{what}[{i}]: book {x!r}, attn {y!r}"


def _train(model, loaders, seed, epochs=2, lr=None):
    torch.manual_seed(seed)  # the dropout masks: drawn in the same order by both
    opt = torch.optim.AdamW((p for p in model.parameters() if p.requires_grad), lr=lr or LR,
                            weight_decay=0.1)
    return train_classifier_simple(model, loaders[0], loaders[1], opt, "cpu", num_epochs=epochs,
                                   eval_freq=2, eval_iter=2)


def _check_runs(book, mine, seed=0, classes=2):
    loaders = (_loader(seed, classes=classes), _loader(seed + 100, batches=2, classes=classes))
    want, got = _train(book, loaders, seed), _train(mine, loaders, seed)
    for k, what in enumerate(("train losses", "val losses", "train accs", "val accs")):
        _same(want[k], got[k], what)
    assert want[4] == got[4]
    _same(want[5], got[5], "step losses")
    book.eval()
    mine.eval()
    for x, _ in loaders[1]:
        with torch.no_grad():
            a, b = book(x)[:, -1, :], mine(x)[:, -1, :]
        assert b.shape == a.shape
        assert torch.equal(a.argmax(-1), b.argmax(-1))
        assert float((a - b).abs().max()) <= TOL
    for (n, p), (m, q) in zip(book.named_parameters(), mine.named_parameters()):
        assert n == m
        assert (p.grad is None) == (q.grad is None), n
        # (within 2 lr: AdamW normalises a gradient that is zero in exact
        # arithmetic, W_key's bias (softmax is shift-invariant per row) or a
        # vanishing entry, into a step of up to lr whatever its rounding noise)
        assert float((p - q).abs().max()) <= 2 * LR, n


@pytest.mark.parametrize("kind", ["swap", "gptmodel"])
def test_chapter6_classifier(kind):
    book, mine = _pair(kind)
    for m in (book, mine):
        torch.manual_seed(7)
        make_classifier(m, CFG["emb_dim"], 2)
    _check_runs(book, mine)
    frozen = [n for n, p in mine.named_parameters() if not p.requires_grad]
    assert frozen and all(dict(mine.named_parameters())[n].grad is None for n in frozen)
    assert calc_accuracy_loader(_loader(5), book, "cpu") == \
        calc_accuracy_loader(_loader(5), mine, "cpu")


@pytest.mark.parametrize("kind", ["swap", "gptmodel"])
def test_appendix_e_lora(kind):
    book, mine = _pair(kind)
    for m in (book, mine):
        torch.manual_seed(7)
        make_classifier(m, CFG["emb_dim"], 2)
        for p in m.parameters():
            p.requires_grad = False
        torch.manual_seed(8)
        replace_linear_with_lora(m, rank=4, alpha=8)
    assert isinstance(mine.out_head, LinearWithLoRA)
    _check_runs(book, mine, seed=3)
    trainable = [n for n, p in mine.named_parameters() if p.requires_grad]
    assert trainable and all(".lora." in n for n in trainable)
    # LoRA on a language model (the head vocab_size wide), the book's loss on every token
    book, mine = _pair(kind)
    for m in (book, mine):
        torch.manual_seed(9)
        replace_linear_with_lora(m, rank=2, alpha=2)
        for n, p in m.named_parameters():
            p.requires_grad = ".lora." in n
    x, y = _loader(4, B=2, T=8)[0][0], _loader(5, B=2, T=8)[0][0]
    for m in (book, mine):
        m.eval()
    losses = []
    for m in (book, mine):
        loss = nn.functional.cross_entropy(m(x).flatten(0, 1), y.flatten())
        loss.backward()
        losses.append(loss.item())
    _same([losses[0]], [losses[1]], "LM loss")
    for (n, p), (_, q) in zip(book.named_parameters(), mine.named_parameters()):
        assert (p.grad is None) == (q.grad is None), n
        if p.grad is not None:
            assert float((p.grad - q.grad).abs().max()) <= 1e-5, n
    with pytest.raises(attn.Error, match="LoRA|adapter"):
        with torch.no_grad():
            mine(x, use_cache=True)  # attn's KV cache runs no adapter: said, not wrong


def test_hostile_edits():
    book, mine = _pair("swap")
    for m in (book, mine):
        torch.manual_seed(7)
        make_classifier(m, CFG["emb_dim"], 2)
    _check_runs(book, mine, seed=1)
    for m in (book, mine):  # toggled between steps: everything trains, then only the head
        for p in m.parameters():
            p.requires_grad = True
    _check_runs(book, mine, seed=2)
    for m in (book, mine):
        for n, p in m.named_parameters():
            p.requires_grad = n.startswith("out_head")
        torch.manual_seed(11)  # the head replaced again: 3 classes
        m.out_head = nn.Linear(CFG["emb_dim"], 3)
    _check_runs(book, mine, seed=4, classes=3)
    for m in (book, mine):  # appendix E's LoRA, then alpha changed
        for p in m.parameters():
            p.requires_grad = False
        torch.manual_seed(12)
        replace_linear_with_lora(m, rank=2, alpha=4)
    _check_runs(book, mine, seed=5, classes=3)
    for m in (book, mine):
        for mod in m.modules():
            if isinstance(mod, LoRALayer):
                mod.alpha = 1.5
    _check_runs(book, mine, seed=6, classes=3)
    x = _loader(0)[0][0]
    # a LoRA of mismatched shapes: an attn.Error naming it, never a wrong number
    good_B = mine.trf_blocks[0].att.W_query.lora.B
    mine.trf_blocks[0].att.W_query.lora.B = nn.Parameter(torch.zeros(3, CFG["emb_dim"]))
    with pytest.raises(attn.Error, match=r"trf_blocks\.0\.att\.W_query"):
        mine(x)
    mine.trf_blocks[0].att.W_query.lora.B = good_B

    class Squared(LoRALayer):  # the structure, another function
        def forward(self, x):
            return (x @ self.A @ self.B) ** 2

    lora = mine.trf_blocks[1].ff.layers[0].lora
    sq = Squared(1, 1, 1, 1)
    sq.A, sq.B, sq.alpha, sq.rank = lora.A, lora.B, lora.alpha, lora.rank
    mine.trf_blocks[1].ff.layers[0].lora = sq
    with pytest.raises(attn.Error, match=r"trf_blocks\.1\.ff\.layers\.0"):
        mine(x)
    mine.trf_blocks[1].ff.layers[0].lora = lora
    handle = mine.out_head.lora.register_forward_hook(lambda *a: None)
    with pytest.raises(attn.Error, match="hook"):
        mine(x)
    handle.remove()
    mine.out_head.lora.A = nn.Parameter(torch.zeros(CFG["emb_dim"], 2, dtype=torch.float64))
    with pytest.raises(attn.Error, match="dtype|one dtype"):
        mine(x)
    with torch.no_grad():  # a head of a wrong input width
        mine.out_head = nn.Linear(CFG["emb_dim"] + 1, 2)
        with pytest.raises(attn.Error, match="out_head"):
            mine(x)


@pytest.mark.parametrize("kind", ["swap", "gptmodel"])
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_chapter7_padded_batches(kind, lora):
    """Chapter 7's custom_collate_fn batches (pad 96 = the tiny vocabulary's
    last id, as 50256 is GPT-2's; -100 after the first pad) and chapter 5's
    loss: attn's masked cross-entropy in C (the loss's node is attn's), every
    step within 1e-5 of the book's, a batch with every target ignored NaN
    with zero gradients as torch's."""
    book, mine = _pair(kind)
    if lora:
        for m in (book, mine):
            for p in m.parameters():
                p.requires_grad = False
            torch.manual_seed(8)
            replace_linear_with_lora(m, rank=4, alpha=8)
    g = torch.Generator().manual_seed(2)
    items = [torch.randint(0, 96, (int(n),), generator=g).tolist() for n in (3, 9, 5, 11, 2, 7)]
    batches = [custom_collate_fn(items[i:i + 3], pad_token_id=96) for i in (0, 3)]
    assert all(bool((y == -100).any()) for _, y in batches)
    losses = {}
    for name, m in (("book", book), ("attn", mine)):
        torch.manual_seed(3)
        opt = torch.optim.AdamW((p for p in m.parameters() if p.requires_grad), lr=5e-4,
                                weight_decay=0.1)
        m.train()
        out = losses[name] = []
        for _ in range(2):
            for x, y in batches:
                opt.zero_grad()
                loss = calc_loss_batch_ch7(x, y, m, "cpu")
                if name == "attn":
                    assert type(loss.grad_fn).__name__.startswith("_LogitsLoss"), loss.grad_fn
                loss.backward()
                opt.step()
                out.append(loss.item())
    _same(losses["book"], losses["attn"], "chapter 7 step losses")
    x, y = batches[0]
    y = torch.full_like(y, -100)
    mine.eval()
    mine.zero_grad(set_to_none=True)
    loss = calc_loss_batch_ch7(x, y, mine, "cpu")
    loss.backward()
    assert loss.item() != loss.item()  # NaN, as torch's mean over no row
    assert all(float(p.grad.abs().max()) == 0 for p in mine.parameters() if p.grad is not None)
