"""attn.torch.GPTModel against the book's chapter-4 GPTModel, written out
here (not imported from attn): the book's chapter-5 loop (train_model_simple
as the book writes it; vocab 1000, context 32, emb 64, 2 layers, 2 heads,
drop 0.1, batch 2) for 20 steps on both, with the logits and with targets=
(and with attn.torch.AdamW for the book's torch.optim.AdamW), gives the same
losses within 1e-5 and the same greedy samples;
same weights after torch.manual_seed, the same state_dict (strict, both
ways); swap_model shares the book model's storage; dtypes and errors."""
import contextlib
import io
import warnings

import pytest
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

import attn
import attn.torch as at
from attn._torch_sdpa import have_bf16

# The book, chapter 4: tests/python/book_ch4.py (written out, not attn's).
from book_ch4 import GELU, FeedForward, GPTModel, LayerNorm, MultiHeadAttention, TransformerBlock  # noqa: F401


def generate_text_simple(model, idx, max_new_tokens, context_size):
    for _ in range(max_new_tokens):
        idx_cond = idx[:, -context_size:]
        with torch.no_grad():
            logits = model(idx_cond)
        logits = logits[:, -1, :]
        probas = torch.softmax(logits, dim=-1)
        idx_next = torch.argmax(probas, dim=-1, keepdim=True)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx


# ---------------------------------------------------- the book, chapter 5
# (gpt_train.py; tiktoken's GPT-2 encoding replaced by the characters below)


class GPTDatasetV1(Dataset):
    def __init__(self, txt, tokenizer, max_length, stride):
        self.input_ids = []
        self.target_ids = []
        token_ids = tokenizer.encode(txt, allowed_special={"<|endoftext|>"})
        for i in range(0, len(token_ids) - max_length, stride):
            input_chunk = token_ids[i:i + max_length]
            target_chunk = token_ids[i + 1: i + max_length + 1]
            self.input_ids.append(torch.tensor(input_chunk))
            self.target_ids.append(torch.tensor(target_chunk))

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, idx):
        return self.input_ids[idx], self.target_ids[idx]


class CharTokenizer:
    """Stands in for tiktoken.get_encoding("gpt2"): id ord(c) - 32, 95 for a
    newline (ids 0..95 for the text below)."""

    def encode(self, text, allowed_special=None):
        return [95 if c == "\n" else ord(c) - 32 for c in text]

    def decode(self, ids):
        return "".join("\n" if i == 95 else chr(i + 32) for i in ids)


def create_dataloader_v1(txt, batch_size=4, max_length=256, stride=128, shuffle=True,
                         drop_last=True, num_workers=0):
    dataset = GPTDatasetV1(txt, CharTokenizer(), max_length, stride)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                      num_workers=num_workers)


def text_to_token_ids(text, tokenizer):
    encoded = tokenizer.encode(text)
    encoded_tensor = torch.tensor(encoded).unsqueeze(0)
    return encoded_tensor


def token_ids_to_text(token_ids, tokenizer):
    flat = token_ids.squeeze(0)
    return tokenizer.decode(flat.tolist())


def calc_loss_batch(input_batch, target_batch, model, device):
    input_batch, target_batch = input_batch.to(device), target_batch.to(device)
    logits = model(input_batch)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())
    return loss


def calc_loss_loader(data_loader, model, device, num_batches=None):
    total_loss = 0.
    if len(data_loader) == 0:
        return float("nan")
    elif num_batches is None:
        num_batches = len(data_loader)
    else:
        num_batches = min(num_batches, len(data_loader))
    for i, (input_batch, target_batch) in enumerate(data_loader):
        if i < num_batches:
            loss = calc_loss_batch(input_batch, target_batch, model, device)
            total_loss += loss.item()
        else:
            break
    return total_loss / num_batches


def evaluate_model(model, train_loader, val_loader, device, eval_iter):
    model.eval()
    with torch.no_grad():
        train_loss = calc_loss_loader(train_loader, model, device, num_batches=eval_iter)
        val_loss = calc_loss_loader(val_loader, model, device, num_batches=eval_iter)
    model.train()
    return train_loss, val_loss


def generate_and_print_sample(model, tokenizer, device, start_context):
    model.eval()
    context_size = model.pos_emb.weight.shape[0]
    encoded = text_to_token_ids(start_context, tokenizer).to(device)
    with torch.no_grad():
        token_ids = generate_text_simple(
            model=model, idx=encoded, max_new_tokens=50, context_size=context_size)
        decoded_text = token_ids_to_text(token_ids, tokenizer)
        print(decoded_text.replace("\n", " "))
    model.train()


def train_model_simple(model, train_loader, val_loader, optimizer, device, num_epochs,
                       eval_freq, eval_iter, start_context, tokenizer):
    train_losses, val_losses, track_tokens_seen = [], [], []
    tokens_seen = 0
    global_step = -1
    for epoch in range(num_epochs):
        model.train()
        for input_batch, target_batch in train_loader:
            optimizer.zero_grad()
            loss = calc_loss_batch(input_batch, target_batch, model, device)
            loss.backward()
            optimizer.step()
            tokens_seen += input_batch.numel()
            global_step += 1
            if global_step % eval_freq == 0:
                train_loss, val_loss = evaluate_model(
                    model, train_loader, val_loader, device, eval_iter)
                train_losses.append(train_loss)
                val_losses.append(val_loss)
                track_tokens_seen.append(tokens_seen)
                print(f"Ep {epoch+1} (Step {global_step:06d}): "
                      f"Train loss {train_loss:.3f}, Val loss {val_loss:.3f}")
        generate_and_print_sample(model, tokenizer, device, start_context)
    return train_losses, val_losses, track_tokens_seen


# ------------------------------------------------------------------ tests

CFG = {"vocab_size": 1000, "context_length": 32, "emb_dim": 64, "n_heads": 2, "n_layers": 2,
       "drop_rate": 0.1, "qkv_bias": False}
SMALL = dict(CFG, vocab_size=96)
TEXT = "".join(f"First Citizen: before we proceed any further, hear me speak {i}.\n"
               "All: speak, speak! you are all resolved rather to die than to famish?\n"
               for i in range(6))[:750]


def _run_chapter5(make_model, targets, optimizer_cls=torch.optim.AdamW):
    """gpt_train.py's main at a reduced size, 20 steps: (the loss of each
    step, train_model_simple's result, what it printed, the model)."""
    step_losses = []

    def loss_of_batch(input_batch, target_batch, model, device):
        if targets:  # attn's fused head + loss
            loss = model(input_batch.to(device), targets=target_batch.to(device))
        else:
            loss = book_calc_loss_batch(input_batch, target_batch, model, device)
        if model.training:
            step_losses.append(loss.item())
        return loss

    book_calc_loss_batch = globals()["calc_loss_batch"]
    globals()["calc_loss_batch"] = loss_of_batch
    try:
        torch.manual_seed(123)
        model = make_model()
        optimizer = optimizer_cls(model.parameters(), lr=5e-4, weight_decay=0.1)
        split_idx = int(0.90 * len(TEXT))
        train_loader = create_dataloader_v1(TEXT[:split_idx], batch_size=2, max_length=32,
                                            stride=32, drop_last=True, shuffle=True)
        val_loader = create_dataloader_v1(TEXT[split_idx:], batch_size=2, max_length=32,
                                          stride=32, drop_last=False, shuffle=False)
        assert len(train_loader) == 10 and len(val_loader) == 1
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            result = train_model_simple(model, train_loader, val_loader, optimizer, "cpu",
                                        num_epochs=2, eval_freq=5, eval_iter=1,
                                        start_context="All: speak", tokenizer=CharTokenizer())
    finally:
        globals()["calc_loss_batch"] = book_calc_loss_batch
    return step_losses, result, out.getvalue().splitlines(), model


@pytest.fixture(scope="module")
def book_run():
    return _run_chapter5(lambda: GPTModel(CFG), targets=False)


@pytest.mark.parametrize("targets,attn_adamw", [(False, False), (True, False), (True, True)],
                         ids=["logits", "targets", "targets+attn.torch.AdamW"])
def test_chapter5_loop_matches_the_book(book_run, targets, attn_adamw):
    steps, (train_l, val_l, seen), printed, model = _run_chapter5(
        lambda: at.GPTModel(CFG), targets, at.AdamW if attn_adamw else torch.optim.AdamW)
    b_steps, (b_train, b_val, b_seen), b_printed, b_model = book_run
    assert len(steps) == 20 and len(b_steps) == 20
    assert steps == pytest.approx(b_steps, abs=1e-5, rel=0)
    assert train_l == pytest.approx(b_train, abs=1e-5, rel=0)
    assert val_l == pytest.approx(b_val, abs=1e-5, rel=0)
    assert seen == b_seen
    samples = [line for line in printed if not line.startswith("Ep ")]
    assert samples == [line for line in b_printed if not line.startswith("Ep ")]
    assert len(samples) == 2 and samples[0].startswith("All: speak")
    sd, b_sd = model.state_dict(), b_model.state_dict()
    assert list(sd) == list(b_sd)
    for k in sd:
        assert torch.allclose(sd[k], b_sd[k], atol=2e-5, rtol=0), k


def test_weights_and_state_dict_are_the_books():
    torch.manual_seed(7)
    book = GPTModel(dict(SMALL, qkv_bias=True))
    after_book = torch.rand(3)
    torch.manual_seed(7)
    ours = at.GPTModel(dict(SMALL, qkv_bias=True))
    assert torch.equal(torch.rand(3), after_book)  # the generator consumed alike
    sd, b_sd = ours.state_dict(), book.state_dict()
    assert list(sd) == list(b_sd)
    assert "trf_blocks.1.att.mask" in sd and "trf_blocks.0.att.W_query.bias" in sd
    assert all(torch.equal(sd[k], b_sd[k]) for k in sd)
    # strict both ways, and the outputs follow the loaded weights
    torch.manual_seed(8)
    other = GPTModel(dict(SMALL, qkv_bias=True))
    ours.load_state_dict(other.state_dict(), strict=True)
    book.load_state_dict(ours.state_dict(), strict=True)
    ours.eval(), other.eval()
    x = torch.randint(0, 96, (2, 32))
    assert torch.allclose(ours(x), other(x), atol=1e-5, rtol=0)


def test_gradients_and_dropout_match_the_book():
    torch.manual_seed(3)
    book = GPTModel(SMALL)
    ours = at.swap_model(book)
    x, y = torch.randint(0, 96, (2, 32)), torch.randint(0, 96, (2, 32))
    grads = {}
    for name, model, targets in (("book", book, False), ("logits", ours, False),
                                 ("targets", ours, True)):
        book.zero_grad(set_to_none=True)
        torch.manual_seed(11)
        if targets:
            loss = model(x, targets=y)
        else:
            loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        (2 * loss).backward()  # a scaled loss: its gradient reaches the fused path's
        grads[name] = (loss.item(), {k: p.grad.clone() for k, p in book.named_parameters()})
    for name in ("logits", "targets"):
        assert grads[name][0] == pytest.approx(grads["book"][0], abs=1e-5)
        for k, g in grads["book"][1].items():
            assert torch.allclose(grads[name][1][k], g, atol=1e-5, rtol=1e-4), (name, k)


def _ce_case(model, book, x, y, loss_of, after=None):
    """loss_of(logits) with model, the dropout masks of seed 11: the loss,
    its grad_fn's name, the gradients (of the book's parameters: model may
    share them) and torch's generator after."""
    book.zero_grad(set_to_none=True)
    torch.manual_seed(11)
    logits = model(x)
    loss = loss_of(logits)
    if after:
        after(logits)
    (3 * loss).backward()
    return (loss.item(), type(loss.grad_fn).__name__,
            {k: p.grad.clone() for k, p in book.named_parameters()}, torch.rand(2))


def test_cross_entropy_of_the_logits_runs_in_attn():
    """F.cross_entropy of the logits' (B*T, V) view with the default
    arguments runs in attn (_LogitsLoss: no logits gradient in torch; -100
    targets ignored as torch's default ignore_index, chapter 7's); every
    other form and an in-place change run PyTorch's. Each gives the book's
    loss and gradients, and leaves torch's generator where the book does."""
    torch.manual_seed(3)
    book = GPTModel(SMALL)
    ours = at.swap_model(book)
    x, y = torch.randint(0, 96, (2, 32)), torch.randint(0, 96, (2, 32))
    F = nn.functional
    y_ign = y.clone()
    y_ign[0, :5] = -100
    w = torch.rand(96)
    cases = [  # (loss of the logits, routed to attn, applied to the logits after the loss)
        (lambda l: F.cross_entropy(l.flatten(0, 1), y.flatten()), True, None),
        (lambda l: F.cross_entropy(l.view(-1, 96), y.view(-1)), True, None),
        (lambda l: F.cross_entropy(l.reshape(64, 96), y.reshape(64).int().long()), True, None),
        (lambda l: nn.CrossEntropyLoss()(l.flatten(0, 1), y.flatten()), True, None),
        (lambda l: F.cross_entropy(l.flatten(0, 1), y.flatten()), True, lambda l: l.mul_(0)),
        (lambda l: F.cross_entropy(l.flatten(0, 1), y.flatten(), reduction="sum"), False, None),
        (lambda l: F.cross_entropy(l.flatten(0, 1), y.flatten(), label_smoothing=0.1), False,
         None),
        (lambda l: F.cross_entropy(l.flatten(0, 1), y_ign.flatten()), True, None),  # ch07's -100
        (lambda l: F.cross_entropy(l.flatten(0, 1), y_ign.flatten().clamp(min=-1),
                                   ignore_index=-1), False, None),
        (lambda l: F.cross_entropy(l.flatten(0, 1), y.flatten(), weight=w), False, None),
        (lambda l: F.cross_entropy(l.mul_(1.5).flatten(0, 1), y.flatten()), False, None),
        (lambda l: F.cross_entropy(l.flatten(0, 1).clone(), y.flatten()), False, None),
        (lambda l: F.cross_entropy(l[:, :16].flatten(0, 1), y[:, :16].flatten()), False, None),
    ]
    for i, (loss_of, routed, after) in enumerate(cases):
        ref = _ce_case(book, book, x, y, loss_of, after)
        got = _ce_case(ours, book, x, y, loss_of, after)
        assert (got[1] == "_LogitsLossBackward") == routed, (i, got[1])
        # rel: reduction="sum" gives ~300, where one float32 ulp is 3e-5
        assert got[0] == pytest.approx(ref[0], rel=1e-6, abs=1e-5), i
        for k, g in ref[2].items():
            assert torch.allclose(got[2][k], g, atol=1e-5, rtol=1e-4), (i, k)
        assert torch.equal(got[3], ref[3]), i  # the generator: the same draws
    # Another forward between the loss and its backward: the same gradients.
    ours.zero_grad(set_to_none=True)
    torch.manual_seed(11)
    loss = F.cross_entropy(ours(x).flatten(0, 1), y.flatten())
    ours(y)
    (3 * loss).backward()
    ref = _ce_case(book, book, x, y, cases[0][0])
    for k, p in book.named_parameters():
        assert torch.allclose(p.grad, ref[2][k], atol=1e-5, rtol=1e-4), k
    # Without gradients (the book's calc_loss_loader): the loss in C.
    ours.eval()
    book.eval()
    with torch.no_grad():
        a = F.cross_entropy(ours(x).flatten(0, 1), y.flatten())
        b = F.cross_entropy(book(x).flatten(0, 1), y.flatten())
    assert a.grad_fn is None and a.item() == pytest.approx(b.item(), abs=1e-6)
    # The logits look and behave as a plain tensor.
    ours.train()
    logits = ours(x)
    assert isinstance(logits, torch.Tensor) and repr(logits).startswith("tensor([[[")
    assert repr(logits).endswith("grad_fn=<_GPTFunctionBackward>)")
    assert type(logits[:, -1, :]) is torch.Tensor and type(logits * 2) is torch.Tensor
    weights = [p.detach().clone() for p in ours.parameters()]
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
    with torch.no_grad():
        next(ours.parameters()).add_(1.0)  # a weight changed before backward: torch's error
    with pytest.raises(RuntimeError, match="inplace"):
        loss.backward()
    with torch.no_grad():
        for p, w0 in zip(ours.parameters(), weights):
            p.copy_(w0)


def test_large_logits_live_on_attn_memory_until_dropped(monkeypatch):
    """Logits past 4 MiB are made on attn_h_alloc_huge's memory (2 MiB
    pages): the book's values, the loss routed as for small ones, freed
    when the last tensor on them goes (and not before)."""
    import gc
    from attn import _torch_gpt
    freed = []
    real_del = _torch_gpt._HugeMemory.__del__
    monkeypatch.setattr(_torch_gpt._HugeMemory, "__del__",
                        lambda self: (freed.append(self.ptr), real_del(self)))
    cfg = dict(SMALL, vocab_size=5000, context_length=256, n_layers=1)
    torch.manual_seed(4)
    book = GPTModel(cfg).eval()
    ours = at.swap_model(book)
    x = torch.randint(0, 5000, (1, 256))
    logits = ours(x)  # 1 x 256 x 5000 floats: 5.1 MB
    assert logits.shape == (1, 256, 5000) and logits.dtype == torch.float32
    assert logits.is_contiguous()
    with torch.no_grad():
        ref = book(x)
    assert torch.allclose(logits, ref, atol=1e-5, rtol=1e-4)
    flat = logits.flatten(0, 1)
    loss = nn.functional.cross_entropy(flat, x.flatten())
    assert type(loss.grad_fn).__name__ == "_LogitsLossBackward"
    loss.backward()
    del logits, loss
    gc.collect()
    assert freed == []  # flat still uses the memory, unchanged
    assert torch.allclose(flat, ref.flatten(0, 1), atol=1e-5, rtol=1e-4)
    del flat
    gc.collect()
    assert len(freed) == 1


def test_lean_head_gives_the_same_gradients():
    """The loss path's lean head (128-row chunks, used past 512 MiB of
    logits) against its plain one, forced on a small model: 150 rows, two
    chunks."""
    torch.manual_seed(12)
    m = at.GPTModel(SMALL)
    x, y = torch.randint(0, 96, (5, 30)), torch.randint(0, 96, (5, 30))
    out = []
    for lean in (0, 1):
        attn._c.attn_h_bgpt_set_lean(m._bridge().h, lean)
        m.zero_grad(set_to_none=True)
        torch.manual_seed(2)
        loss = m(x, targets=y)
        loss.backward()
        out.append((loss.item(), [p.grad.clone() for p in m.parameters()]))
    assert out[0][0] == pytest.approx(out[1][0], abs=1e-6)
    for a, b in zip(out[0][1], out[1][1]):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5)


def test_backward_after_another_forward():
    torch.manual_seed(4)
    m = at.GPTModel(SMALL)
    x1, x2 = torch.randint(0, 96, (2, 16)), torch.randint(0, 96, (2, 16))
    torch.manual_seed(1)
    m(x1).sum().backward()
    want = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    torch.manual_seed(1)  # the same dropout masks
    y1 = m(x1).sum()
    m(x2)  # the C model's activations are now x2's
    y1.backward()
    for p, g in zip(m.parameters(), want):
        assert torch.allclose(p.grad, g, atol=1e-6, rtol=1e-5)


def test_one_graph_through_the_model_twice():
    """Two forwards in one graph (both paths): each backward's gradients
    reach .grad, though one backward pass runs both."""
    torch.manual_seed(13)
    book = GPTModel(SMALL).eval()
    ours = at.swap_model(book)
    x1, x2 = torch.randint(0, 96, (2, 16)), torch.randint(0, 96, (2, 16))
    y1, y2 = torch.randint(0, 96, (2, 16)), torch.randint(0, 96, (2, 16))

    def ce(logits, y):
        return nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())

    (ce(book(x1), y1) + 3 * ce(book(x2), y2)).backward()
    want = [p.grad.clone() for p in book.parameters()]
    for loss in (lambda: ce(ours(x1), y1) + 3 * ce(ours(x2), y2),
                 lambda: ours(x1, targets=y1) + 3 * ours(x2, targets=y2)):
        book.zero_grad(set_to_none=True)
        loss().backward()
        for p, g in zip(book.parameters(), want):
            assert torch.allclose(p.grad, g, atol=1e-5, rtol=1e-4)


def test_autograd_grad_results_are_kept():
    """torch.autograd.grad hands back the C model's gradient tensors: they
    are the caller's from then on, never written by a later step."""
    torch.manual_seed(15)
    m = at.GPTModel(SMALL).eval()
    x, y = torch.randint(0, 96, (2, 8)), torch.randint(0, 96, (2, 8))
    g1, = torch.autograd.grad(m(x).sum(), [m.out_head.weight])
    keep = g1.clone()
    g2, = torch.autograd.grad(m(x, targets=y), [m.out_head.weight])
    g3, = torch.autograd.grad(m(y).sum(), [m.out_head.weight])
    assert torch.equal(g1, keep) and not torch.equal(g2, g1) and not torch.equal(g3, g1)


def test_threads_share_one_model():
    """Forwards and backwards from two threads on one model (the C calls
    take turns; a backward whose activations were overwritten redoes its
    forward) give what one thread gives."""
    import threading
    torch.manual_seed(14)
    m = at.GPTModel(SMALL).eval()
    xs = [torch.randint(0, 96, (2, 8 + 4 * i)) for i in range(2)]
    want = []
    for x in xs:
        m.zero_grad(set_to_none=True)
        out = m(x)
        out.square().mean().backward()
        want.append((out.detach(), m.out_head.weight.grad.clone()))
    got, errors = [None, None], []

    def work(i):
        try:
            for _ in range(4):
                out = m(xs[i])
                g, = torch.autograd.grad(out.square().mean(), [m.out_head.weight])
                got[i] = (out.detach(), g)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for (o, g), (wo, wg) in zip(got, want):
        assert torch.allclose(o, wo, atol=1e-6, rtol=0)
        assert torch.allclose(g, wg, atol=1e-6, rtol=1e-5)


def test_swap_model_shares_storage():
    torch.manual_seed(5)
    book = GPTModel(SMALL)
    ours = at.swap_model(book)
    assert isinstance(ours, at.GPTModel) and ours.training == book.training
    for (k, p), (k2, q) in zip(book.named_parameters(), ours.named_parameters()):
        assert k == k2 and p is q
    assert list(ours.state_dict()) == list(book.state_dict())
    book.eval(), ours.eval()
    x = torch.randint(0, 96, (1, 20))
    assert torch.allclose(ours(x), book(x), atol=1e-5, rtol=0)
    with torch.no_grad():
        book.out_head.weight.mul_(2.0)  # seen by the other
        ours.trf_blocks[1].norm2.scale.add_(0.5)
    assert torch.allclose(ours(x), book(x), atol=1e-5, rtol=0)
    with pytest.raises(attn.Error, match="structure"):
        at.swap_model(nn.Linear(2, 2))


def test_generate_text_simple_runs_unchanged():
    torch.manual_seed(6)
    book = GPTModel(SMALL)
    ours = at.swap_model(book).eval()
    book.eval()
    idx = torch.tensor([[33, 76, 76]])
    a = generate_text_simple(ours, idx, 40, SMALL["context_length"])  # past the context
    assert torch.equal(a, generate_text_simple(book, idx, 40, SMALL["context_length"]))


def test_dtypes_and_precision():
    torch.manual_seed(9)
    book = GPTModel(SMALL).eval()
    x, y = torch.randint(0, 96, (2, 32)), torch.randint(0, 96, (2, 32))
    ref = book(x)
    ours = at.swap_model(book)
    if not have_bf16():
        with pytest.raises(attn.Error, match="BF16|bf16"):
            at.GPTModel(SMALL, precision="bf16")
        return
    torch.manual_seed(9)
    m16 = at.GPTModel(SMALL, precision="bf16").eval()
    assert (m16(x) - ref).abs().max().item() < 0.1  # bf16 products, fp32 sums
    m16(x, targets=y).backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in m16.parameters())
    ours.to(torch.bfloat16)
    out = ours(x)
    assert out.dtype == torch.bfloat16 and (out.float() - ref).abs().max().item() < 0.2
    ours(x, targets=y).backward()
    assert book.out_head.weight.grad.dtype == torch.bfloat16
    ours.to(torch.float64)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = ours(x)
    assert out.dtype == torch.float64 and (out.float() - ref).abs().max().item() < 0.2
    with pytest.raises(attn.Error, match="precision"):
        at.GPTModel(SMALL, precision="fp16")


def test_errors():
    with pytest.raises(attn.Error, match="n_layers"):
        at.GPTModel({k: v for k, v in SMALL.items() if k != "n_layers"})
    with pytest.raises(attn.Error, match="divisible"):
        at.GPTModel(dict(SMALL, emb_dim=63))
    m = at.GPTModel(SMALL)
    with pytest.raises(attn.Error, match="context_length"):
        m(torch.zeros((1, 33), dtype=torch.long))
    with pytest.raises(attn.Error, match="outside"):
        m(torch.full((1, 4), 96, dtype=torch.long))
    with pytest.raises(attn.Error, match="targets must be"):
        m(torch.zeros((1, 4), dtype=torch.long), targets=torch.zeros((1, 5), dtype=torch.long))


@pytest.mark.skipif(torch.backends.mkl.is_available(),
                    reason="MKL builds draw bernoulli_ another way (attn falls back to torch's)")
@pytest.mark.parametrize("skip_draws", [0, 1, 311, 623, 624, 625, 1500])
def test_c_draw_is_torch_bernoulli(skip_draws):
    """attn_h_torch_bernoulli on torch.get_rng_state() bytes: torch's own
    bernoulli_ values, and the generator state torch's draw leaves, from any
    position of mt19937's 624-word block."""
    from attn import _torch_gpt as tg
    torch.manual_seed(5)
    torch.empty(skip_draws, dtype=torch.int32).random_()  # skip_draws 32-bit draws
    for n, keep in ((1, 0.9), (37, 0.5), (5000, 0.9), (1249, 0.0), (300, 1.0)):
        state = torch.get_rng_state()
        got = torch.empty(n, dtype=torch.uint8)
        attn._lib.call(tg.lib.attn_h_torch_bernoulli, state.data_ptr(), state.numel(), keep,
                       got.data_ptr(), n)
        want = torch.empty(n, dtype=torch.uint8).bernoulli_(keep)
        assert torch.equal(got, want), (n, keep)
        assert torch.equal(state, torch.get_rng_state()), (n, keep)
    bad = torch.zeros(100, dtype=torch.uint8)
    with pytest.raises(attn.Error, match="generator state"):
        attn._lib.call(tg.lib.attn_h_torch_bernoulli, bad.data_ptr(), 100, 0.9,
                       got.data_ptr(), 1)


def test_masks_drawn_in_c_equal_torch_drawn_masks():
    """The training forward's masks drawn in C (the default where the
    build's draw matches) against the same masks drawn by torch and given
    (the fallback), both paths: the same loss, gradients and logits, and
    torch's generator left where the book's model leaves it."""
    from attn import _torch_gpt as tg
    torch.manual_seed(8)
    book = GPTModel(SMALL)
    ours = at.swap_model(book)
    x, y = torch.randint(0, 96, (2, 24)), torch.randint(0, 96, (2, 24))
    torch.manual_seed(21)
    book(x)
    after_book = torch.rand(4)
    saved = tg._C_DRAWS
    runs = {}
    try:
        for drawn in (True, False):
            tg._C_DRAWS = drawn
            for targets in (False, True):
                book.zero_grad(set_to_none=True)
                torch.manual_seed(21)
                if targets:
                    out = ours(x, targets=y)
                    assert torch.equal(torch.rand(4), after_book)
                    out.backward()
                else:
                    out = ours(x)
                    assert torch.equal(torch.rand(4), after_book)
                    nn.functional.cross_entropy(out.flatten(0, 1), y.flatten()).backward()
                runs[drawn, targets] = (out.detach().clone(),
                                        [p.grad.clone() for p in book.parameters()])
    finally:
        tg._C_DRAWS = saved
    for targets in (False, True):
        a, b = runs[True, targets], runs[False, targets]
        assert torch.equal(a[0], b[0]), targets
        for ga, gb in zip(a[1], b[1]):
            assert torch.equal(ga, gb), targets
