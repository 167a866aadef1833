"""What attn.torch runs, checked on every forward before any C runs
(docs/python.md, "What the drop-ins check"): a GPTModel's module tree must
be the book's chapter-4 GPTModel of its cfg, each parameter a CPU floating
point tensor named and shaped as the C model's table has it (run_list: the
names and shapes are the library's, attn_h_bgpt_params); an attention class's parts
plain nn.Linear and nn.Dropout modules (check_attention). A tree attn does
not run (a head of another width, a wrapped, added, deleted or replaced
module, a hook, a changed mask) raises attn.Error naming the module and
what attn runs there: never a wrong result. The walk is O(modules) and
copies nothing; GELU and LayerNorm instances of classes not attn's are run
once on a probe input, a mask buffer is compared with the causal mask once
per change."""
import math
import weakref

import torch
import torch.nn as nn

from ._lib import Error

EPS = 1e-5  # the book's LayerNorm eps (ATTN_LAYERNORM_EPS in C)
_HOOKS = tuple(n for n in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                           "_backward_pre_hooks") if hasattr(nn.Module(), n))
_GLOBAL_HOOKS = tuple(n for n in ("_global_forward_hooks", "_global_forward_pre_hooks",
                                  "_global_backward_hooks", "_global_backward_pre_hooks")
                      if isinstance(getattr(nn.modules.module, n, None), dict))
# torch's classes the tree holds, and their forward when attn was imported:
# a class whose forward was replaced since (nn.Linear.forward = ...) raises.
_TORCH_FORWARDS = {c: c.forward for c in (nn.Linear, nn.Embedding, nn.Dropout, nn.Sequential,
                                          nn.ModuleList, nn.GELU)}
_ROOT = frozenset(("tok_emb", "pos_emb", "drop_emb", "trf_blocks", "final_norm", "out_head"))
_BLOCK = frozenset(("att", "ff", "norm1", "norm2", "drop_shortcut"))
# chapters 5-7 and appendix E's previous_chapters.py name the block's dropout drop_resid
_BLOCK_RESID = frozenset(("att", "ff", "norm1", "norm2", "drop_resid"))
_ATT = frozenset(("W_query", "W_key", "W_value", "out_proj", "dropout"))
_NONE, _MASK, _CACHE = frozenset(), frozenset(("mask",)), frozenset(("cache_k", "cache_v"))
_WEIGHT, _LINEAR = frozenset(("weight",)), frozenset(("weight", "bias"))
_NORM, _LAYERS = frozenset(("scale", "shift")), frozenset(("layers",))
_LORA, _WRAP = frozenset(("A", "B")), frozenset(("linear", "lora"))
# the Linears of a block (attention's four, the feed-forward's two), as the C table names them
_BLOCK_LINEARS = (("att", "W_query"), ("att", "W_key"), ("att", "W_value"), ("att", "out_proj"),
                  ("ff", "layers", "0"), ("ff", "layers", "2"))
# trf_blocks: ch04/01's nn.Sequential; ch04/03 iterates an nn.ModuleList (swap_model keeps
# the container its model had: the other would not run in the book's forward)
_SEQUENTIAL, _CONTAINERS = frozenset((nn.Sequential,)), (nn.Sequential, nn.ModuleList)


class Rules:
    """The classes a GPTModel takes at each place of the tree (classes:
    place -> frozenset; own: attn's, which compute the book's function),
    and what it has checked once: GELU and LayerNorm instances of other
    classes on a probe input, the mask buffers found causal."""

    def __init__(self, classes, own):
        self.classes = {k: frozenset(v) for k, v in classes.items()}
        self.own = frozenset(own)
        self._fresh()

    def _fresh(self):
        self.probed = weakref.WeakSet()
        self.scales = weakref.WeakKeyDictionary()  # LinearWithLoRA -> (its key, its scale)
        self.masks = {}  # id(mask) -> (mask, its (version, address, shape) when found causal)
        # each class's forward when taken: one replaced on the class since raises
        self.forwards = dict(_TORCH_FORWARDS)
        for cls in set().union(*self.classes.values()) - _TORCH_FORWARDS.keys():
            self.forwards[cls] = cls.forward

    def __getstate__(self):  # pickled and copied without what was checked
        return {"classes": self.classes, "own": self.own}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._fresh()

    def __deepcopy__(self, memo):
        return Rules(self.classes, self.own)


def admit(model, rules):
    """rules with the classes at model's places added (swap_model: the
    book's own classes, from the user's code; torch.nn's are never added,
    they are the book's only where the walk names them). The walk that
    follows checks them."""
    classes = {k: set(v) for k, v in rules.classes.items()}

    def add(place, m):
        if isinstance(m, nn.Module) and not type(m).__module__.startswith("torch."):
            classes[place].add(type(m))

    blocks = model._modules.get("trf_blocks")
    if type(blocks) in _CONTAINERS:
        classes["blocks"] = {type(blocks)}
    for blk in blocks._modules.values() if isinstance(blocks, nn.Module) else ():
        if isinstance(blk, nn.Module):
            sub = blk._modules
            add("block", blk)
            add("att", sub.get("att"))
            add("norm", sub.get("norm1"))
            add("norm", sub.get("norm2"))
            ff = sub.get("ff")
            add("ff", ff)
            layers = ff._modules.get("layers") if isinstance(ff, nn.Module) else None
            if isinstance(layers, nn.Module):
                add("gelu", layers._modules.get("1"))
    add("norm", model._modules.get("final_norm"))
    return Rules(classes, rules.own)


def describe(m):
    """m for a message: its class, with torch's own description of it."""
    if m is None:
        return "missing"
    if not isinstance(m, nn.Module):
        return f"a {type(m).__name__}"
    extra = m.extra_repr() if type(m).__module__.startswith("torch.") else ""
    return f"{type(m).__name__}({extra})"


def hooked(m, forwards=_TORCH_FORWARDS):
    """m has a hook, a forward of its own, or its class's forward is not
    the one forwards holds (replaced on the class since)."""
    d = m.__dict__
    return ("forward" in d or any(d.get(n) for n in _HOOKS)
            or type(m).forward is not forwards.get(type(m), type(m).forward))


def causal(mask, S, cache):
    """mask is the book's causal mask buffer, torch.triu(torch.ones(S, S),
    diagonal=1) (as bools): compared once per change (cache: id -> (mask,
    its version, address and shape when found so))."""
    if not isinstance(mask, torch.Tensor):
        return False
    # (an inference tensor has no version: compared every time)
    key = None if mask.is_inference() else (mask._version, mask.data_ptr(), mask.shape)
    hit = cache.get(id(mask)) if key is not None else None
    if hit is not None and hit[0] is mask and hit[1] == key:
        return True
    if not (mask.is_cpu and mask.layout is torch.strided and mask.shape == (S, S)
            and torch.equal(mask.bool(), torch.ones(S, S, dtype=torch.bool).triu(1))):
        return False
    if len(cache) > 64:
        cache.clear()  # replaced masks are not kept alive
    if key is not None:
        cache[id(mask)] = (mask, key)
    return True


def check_attention(m, name, heads_class, cache):
    """An attn.torch attention class runs in C as the book's class: each
    submodule a plain nn.Linear or nn.Dropout (the wrapper's heads:
    heads_class, each checked so), none with a hook or a forward of its own,
    and its mask buffer the causal one; attn.Error naming the part first."""
    for n, sub in m._modules.items():
        path = f"{name}.{n}"
        if n == "heads" and type(sub) is nn.ModuleList and not hooked(sub):
            for i, h in enumerate(sub._modules.values()):
                if type(h) is not heads_class or hooked(h):
                    raise Error(f"{path}.{i} is {describe(h)}, where attn runs attn.torch's "
                                "CausalAttention, with no hook (attn runs no other module)")
                check_attention(h, f"{path}.{i}", heads_class, cache)
        elif type(sub) not in (nn.Linear, nn.Dropout) or hooked(sub) or sub._modules:
            raise Error(f"{path} is {describe(sub)}, where attn runs a plain nn.Linear or "
                        "nn.Dropout as the book's class, with no hook (attn runs no other "
                        "module)")
    mask = m._buffers.get("mask")
    if mask is not None and not causal(mask, mask.shape[0] if mask.dim() else -1, cache):
        raise Error(f"{name}.mask is not the causal mask torch.triu(torch.ones(S, S), "
                    "diagonal=1) attn runs")


def _fail(path, m, want, why=""):
    raise Error(f"GPTModel: {path} is {describe(m)}{why}, where attn's C model runs {want} "
                "(the book's GPTModel of this cfg; attn runs no other tree)")


def _gelu_ok(m):
    """m computes the book's GELU (the tanh approximation) on a probe."""
    x = torch.linspace(-5.0, 5.0, 41)
    with torch.no_grad():
        y = m(x)
    x = x.double()
    ref = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return (isinstance(y, torch.Tensor) and y.shape == ref.shape and y.is_floating_point()
            and float((y.double() - ref).abs().max()) <= 1e-5)


def _norm_ok(m):
    """m computes the book's LayerNorm with its scale and shift on a probe."""
    scale, shift = m._parameters["scale"], m._parameters["shift"]
    n = scale.numel()
    x = (torch.linspace(-3.0, 5.0, 3 * n).reshape(3, n).sin() * 2 + 0.5).to(scale.dtype)
    with torch.no_grad():
        y = m(x)
    x = x.double()
    mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
    ref = (x - mean) / torch.sqrt(var + EPS) * scale.detach().double() + shift.detach().double()
    tol = 1e-4 if scale.dtype in (torch.float32, torch.float64) else 0.1
    return (isinstance(y, torch.Tensor) and y.shape == ref.shape and y.is_floating_point()
            and float((y.double() - ref).abs().max()) <= tol * (1 + float(ref.abs().max())))


class _Walk:
    """One check of a GPTModel's tree against cfg and the C model's table
    (table: each tensor's name -> shape, in the C model's order, the book's
    named_parameters order): out collects the parameters met, names their
    names, modes the dropouts' training flags."""

    def __init__(self, cfg, rules, table):
        self.cfg, self.rules, self.table = cfg, rules, table
        self.C, self.p = cfg["emb_dim"], cfg["drop_rate"]
        self.out, self.names, self.modes = [], [], set()

    def shape(self, name):
        """The C model's shape of tensor name; attn.Error when it has none."""
        want = self.table.get(name)
        if want is None:
            raise Error(f"GPTModel: parameter {name}: attn's C model of this cfg has no such "
                        "tensor (attn runs no other tree)")
        return want

    def plain(self, m, path):
        """m is called as its class defined it: no hook, no forward of its own."""
        if hooked(m, self.rules.forwards):
            raise Error(f"GPTModel: {path} has a hook or a replaced forward; attn's C model "
                        "runs the whole tree in one call and would skip it (remove it, or run "
                        "the book's PyTorch model)")

    def parts(self, m, path, children, params=_NONE, buffers=_NONE, optional=_NONE):
        """m's submodules, parameters and buffers are these (None entries are absent)."""
        for have, want, kind in ((m._modules, children, "submodule"),
                                 (m._parameters, params, "parameter"),
                                 (m._buffers, buffers, "buffer")):
            if have.keys() == want:
                continue
            got = {k for k, v in have.items() if v is not None}
            if want <= got <= want | optional:
                continue
            extra, missing = sorted(got - want - optional), sorted(want - got)
            what = ", ".join(([f"added {kind} {e}" for e in extra]) +
                             ([f"no {kind} {e}" for e in missing]))
            raise Error(f"GPTModel: {path or 'the model'} ({describe(m)}) has {what}, where "
                        "attn's C model runs the book's GPTModel of this cfg (attn runs no "
                        "other tree)")

    def param(self, t, name):
        shape = self.shape(name)
        if not isinstance(t, torch.Tensor):
            raise Error(f"GPTModel: parameter {name} is {describe(t)}, attn's model takes a "
                        f"tensor of shape {shape}")
        if not t.is_cpu or not t.is_floating_point() or t.layout is not torch.strided:
            raise Error(f"GPTModel: parameter {name} must be a floating point CPU tensor, "
                        f"got {t.dtype} on {t.device} ({t.layout})")
        if t.shape != shape:
            raise Error(f"GPTModel: parameter {name} is {tuple(t.shape)}, attn's model of "
                        f"this cfg takes {shape}", "shape")
        self.out.append(t)
        self.names.append(name)

    def linear(self, m, path):
        if f"{path}.lora.A" in self.table:
            self.lora(m, path)
            return
        if lora_parts(m) is not None:
            _fail(path, m, "a plain nn.Linear (this model's adapters are read from the tree "
                  "before the walk: run the forward again)")
        n_out, n_in = self.shape(f"{path}.weight")
        bias = f"{path}.bias" in self.table
        if type(m) is not nn.Linear:
            _fail(path, m, f"nn.Linear({n_in}, {n_out}, bias={bias})")
        self.plain(m, path)
        self.parts(m, path, _NONE, _LINEAR if "bias" in m._parameters else _WEIGHT)
        self.param(m._parameters["weight"], f"{path}.weight")
        b = m._parameters.get("bias")
        if bias:
            self.param(b, f"{path}.bias")
        elif b is not None:
            _fail(path, m, f"nn.Linear({n_in}, {n_out}, bias=False)")

    def lora(self, m, path):
        """The book's LinearWithLoRA at path (appendix E): its Linear, then
        its LoRALayer's A and B, as the C model's adapter lists them."""
        parts = lora_parts(m)
        if parts is None:
            _fail(path, m, "the book's LinearWithLoRA (.linear an nn.Linear, .lora holding A, "
                           "B and alpha)")
        self.plain(m, path)
        lin, lora = parts
        self.linear(lin, f"{path}.linear")
        self.plain(lora, f"{path}.lora")
        self.parts(lora, f"{path}.lora", _NONE, _LORA)
        self.param(lora._parameters["A"], f"{path}.lora.A")
        self.param(lora._parameters["B"], f"{path}.lora.B")

    def embedding(self, m, path):
        n, d = self.shape(f"{path}.weight")
        if type(m) is not nn.Embedding or m.padding_idx is not None or \
                m.max_norm is not None or m.scale_grad_by_freq or m.sparse:
            _fail(path, m, f"a plain nn.Embedding({n}, {d})")
        self.plain(m, path)
        self.parts(m, path, _NONE, _WEIGHT)
        self.param(m._parameters["weight"], f"{path}.weight")

    def dropout(self, m, path):
        if type(m) is not nn.Dropout:
            _fail(path, m, f"nn.Dropout({self.p})")
        self.plain(m, path)
        self.parts(m, path, _NONE)
        if float(m.p) != self.p:
            raise Error(f"GPTModel: {path} has p = {m.p}, cfg drop_rate {self.p}: attn's model "
                        "takes one rate")
        self.modes.add(m.training)

    def probe(self, m, path, ok, want):
        """m, of a class not attn's, computes want: checked once per instance."""
        if m in self.rules.probed:
            return
        try:
            good = ok(m)
        except Exception as e:  # noqa: BLE001 (the user's module: any failure is a no)
            good, want = False, f"{want} ({type(e).__name__}: {e})"
        if not good:
            _fail(path, m, want, " and differs from it on a probe input")
        self.rules.probed.add(m)

    def norm(self, m, path):
        want = f"the book's LayerNorm({self.C}) (scale, shift, eps {EPS})"
        if type(m) not in self.rules.classes["norm"]:
            _fail(path, m, want)
        self.plain(m, path)
        self.parts(m, path, _NONE, _NORM)
        eps = m.__dict__.get("eps", EPS)
        if eps != EPS:
            _fail(path, m, want, f" with eps = {eps}")
        self.param(m._parameters["scale"], f"{path}.scale")
        self.param(m._parameters["shift"], f"{path}.shift")
        if type(m) not in self.rules.own:
            self.probe(m, path, _norm_ok, want)

    def gelu(self, m, path):
        want = "the book's GELU (tanh approximation)"
        torch_tanh = type(m) is nn.GELU and m.approximate == "tanh"
        if not torch_tanh and type(m) not in self.rules.classes["gelu"]:
            _fail(path, m, want)
        self.plain(m, path)
        self.parts(m, path, _NONE)
        if not torch_tanh and type(m) not in self.rules.own:
            self.probe(m, path, _gelu_ok, want)

    def mask(self, mask, path):
        S = self.cfg["context_length"]
        if not causal(mask, S, self.rules.masks):
            raise Error(f"GPTModel: {path} is not the causal mask "
                        f"torch.triu(torch.ones({S}, {S}), diagonal=1) attn's C model runs")

    def att(self, m, path):
        C, H = self.C, self.cfg["n_heads"]
        if type(m) not in self.rules.classes["att"]:
            _fail(path, m, f"the book's MultiHeadAttention({C}, {C}, num_heads={H})")
        self.plain(m, path)
        self.parts(m, path, _ATT, _NONE, _MASK, _CACHE)
        d = m.__dict__
        if d.get("num_heads") != H or d.get("head_dim") != C // H or d.get("d_out", C) != C:
            raise Error(f"GPTModel: {path} has num_heads = {d.get('num_heads')}, head_dim = "
                        f"{d.get('head_dim')}, d_out = {d.get('d_out')}; attn's C model runs "
                        f"{H} heads of {C // H} (cfg n_heads, emb_dim)")
        sub = m._modules
        for n in ("W_query", "W_key", "W_value", "out_proj"):
            self.linear(sub[n], f"{path}.{n}")
        self.dropout(sub["dropout"], f"{path}.dropout")
        self.mask(m._buffers["mask"], f"{path}.mask")

    def ff(self, m, path):
        C = self.C
        if type(m) not in self.rules.classes["ff"]:
            _fail(path, m, f"the book's FeedForward (Linear({C}, {4 * C}), GELU, "
                           f"Linear({4 * C}, {C}))")
        self.plain(m, path)
        self.parts(m, path, _LAYERS)
        layers, lp = m._modules["layers"], f"{path}.layers"
        if type(layers) is not nn.Sequential or list(layers._modules) != ["0", "1", "2"]:
            _fail(lp, layers, f"nn.Sequential(Linear({C}, {4 * C}), GELU(), "
                              f"Linear({4 * C}, {C}))")
        self.plain(layers, lp)
        self.parts(layers, lp, layers._modules.keys())
        sub = layers._modules
        self.linear(sub["0"], f"{lp}.0")
        self.gelu(sub["1"], f"{lp}.1")
        self.linear(sub["2"], f"{lp}.2")

    def block(self, m, path):
        if type(m) not in self.rules.classes["block"]:
            _fail(path, m, "the book's TransformerBlock")
        self.plain(m, path)
        drop = "drop_resid" if m._modules.keys() == _BLOCK_RESID else "drop_shortcut"
        self.parts(m, path, _BLOCK_RESID if drop == "drop_resid" else _BLOCK)
        sub = m._modules
        self.att(sub["att"], f"{path}.att")
        self.ff(sub["ff"], f"{path}.ff")
        self.norm(sub["norm1"], f"{path}.norm1")
        self.norm(sub["norm2"], f"{path}.norm2")
        self.dropout(sub[drop], f"{path}.{drop}")

    def model(self, model):
        cfg = self.cfg
        self.parts(model, "", _ROOT)
        sub = model._modules
        self.embedding(sub["tok_emb"], "tok_emb")
        self.embedding(sub["pos_emb"], "pos_emb")
        self.dropout(sub["drop_emb"], "drop_emb")
        blocks, L = sub["trf_blocks"], cfg["n_layers"]
        kinds = self.rules.classes.get("blocks", _SEQUENTIAL)
        if type(blocks) not in kinds or list(blocks._modules) != [str(i) for i in range(L)]:
            kind = " or ".join(sorted(f"nn.{k.__name__}" for k in kinds))
            _fail("trf_blocks", blocks, f"{kind} of {L} TransformerBlocks (cfg n_layers)")
        self.plain(blocks, "trf_blocks")
        self.parts(blocks, "trf_blocks", blocks._modules.keys())
        for i, blk in enumerate(blocks._modules.values()):
            self.block(blk, f"trf_blocks.{i}")
        self.norm(sub["final_norm"], "final_norm")
        self.linear(sub["out_head"], "out_head")
        if self.names != list(self.table):  # each of the table's tensors once, in its order
            missing = [n for n in self.table if n not in self.names]
            raise Error(f"GPTModel: the tree's parameters are not attn's C model's: "
                        f"{'no ' + missing[0] if missing else 'another order'} (attn runs no "
                        "other tree)")


def lora_parts(m):
    """(linear, lora) when m has the book's LinearWithLoRA structure (appendix
    E: a module of the user's whose children are .linear, an nn.Linear, and
    .lora, holding the parameters A and B and an alpha); else None."""
    if not isinstance(m, nn.Module) or type(m).__module__.startswith("torch.") or \
            m._modules.keys() != _WRAP:
        return None
    lin, lora = m._modules["linear"], m._modules["lora"]
    if type(lin) is not nn.Linear or not isinstance(lora, nn.Module) or \
            "alpha" not in lora.__dict__ or not _LORA <= lora._parameters.keys():
        return None
    return lin, lora


def _functional_call():
    """torch's public functional_call (torch.func from 2.0, stateless before)."""
    func = getattr(torch, "func", None)
    if func is not None and hasattr(func, "functional_call"):
        return func.functional_call
    from torch.nn.utils import stateless
    return stateless.functional_call


def _lora_probe(m, lin, lora, path):
    """The scale s of m's forward, checked to be linear(x) + s (x A) B on a
    probe (the parameters replaced by random ones through torch's
    functional_call, so B's zeros do not hide the scale): alpha / rank in
    today's book, alpha in its first printing, whatever the user's
    LoRALayer computes, if it is this form."""
    W, A = lin._parameters["weight"], lora._parameters["A"]
    (n_out, n_in), r = W.shape, A.shape[1]
    g = torch.Generator().manual_seed(1234)
    probe = {"linear.weight": torch.randn(n_out, n_in, generator=g),
             "lora.A": torch.randn(n_in, r, generator=g),
             "lora.B": torch.randn(r, n_out, generator=g)}
    if lin._parameters.get("bias") is not None:
        probe["linear.bias"] = torch.randn(n_out, generator=g)
    x = torch.randn(3, n_in, generator=g)
    with torch.no_grad():
        y = _functional_call()(m, probe, (x,))
    if not isinstance(y, torch.Tensor) or y.shape != (3, n_out) or not y.is_floating_point():
        raise Error(f"GPTModel: {path} ({describe(m)}) gives no (N, {n_out}) tensor on a probe, "
                    "where attn runs the book's LinearWithLoRA")
    x, y = x.double(), y.double()
    base = x @ probe["linear.weight"].double().T + probe.get("linear.bias", torch.zeros(1)).double()
    low = x @ probe["lora.A"].double() @ probe["lora.B"].double()
    s = float(((y - base) * low).sum() / (low * low).sum())
    tol = 1e-4 * (1 + float(y.abs().max()))
    if not math.isfinite(s) or float((y - base - s * low).abs().max()) > tol:
        raise Error(f"GPTModel: {path} ({describe(m)}) has the structure of the book's "
                    "LinearWithLoRA but does not compute linear(x) + scale * (x @ A @ B) on a "
                    "probe input; attn runs no other adapter")
    alpha, rank = lora.__dict__.get("alpha"), lora.__dict__.get("rank", r)
    for exact in (alpha, alpha / rank if rank else None):  # the book's own numbers, to the bit
        if isinstance(exact, (int, float)) and abs(s - exact) <= 1e-5 * (1 + abs(exact)):
            return float(exact)
    return s


def _lora_site(m, path, rules):
    """(path + ".", rank, scale) of the LinearWithLoRA m at a Linear's place,
    its shapes checked (attn.Error naming it otherwise)."""
    lin, lora = lora_parts(m)
    W, A, B = lin._parameters.get("weight"), lora._parameters.get("A"), lora._parameters.get("B")
    if not all(isinstance(t, torch.Tensor) and t.dim() == 2 for t in (W, A, B)):
        raise Error(f"GPTModel: {path} ({describe(m)}): its linear.weight, lora.A and lora.B "
                    "must be 2-D tensors (the book's LinearWithLoRA)")
    (n_out, n_in), (a0, r), (b0, b1) = W.shape, A.shape, B.shape
    if a0 != n_in or b0 != r or b1 != n_out or r < 1:
        raise Error(f"GPTModel: {path}: lora.A is {tuple(A.shape)} and lora.B "
                    f"{tuple(B.shape)} on a Linear({n_in}, {n_out}); the book's LinearWithLoRA "
                    f"takes A (in_features, rank) and B (rank, out_features)", "shape")
    key = (lora.__dict__.get("alpha"), lora.__dict__.get("rank"), type(m).forward,
           type(lora).forward, r)
    hit = rules.scales.get(m)
    if hit is None or hit[0] != key:
        try:
            hit = (key, _lora_probe(m, lin, lora, path))
        except (Error, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 (the user's module: any failure is a no)
            raise Error(f"GPTModel: {path} ({describe(m)}) fails on a probe input "
                        f"({type(e).__name__}: {e}); attn runs the book's LinearWithLoRA") from None
        rules.scales[m] = hit
    return f"{path}.", r, hit[1]


def structure(model, cfg, rules):
    """What the C model must hold besides cfg, read from the tree: (head
    width, head bias, LoRA sites), width 0 for the language model's head;
    each site (linear name with its dot, rank, scale) from a LinearWithLoRA
    at a Linear's place. Places that are not what they should be are left to
    run_list's walk, which names them."""
    sub, sites = model._modules, []

    def at(m, path):
        if lora_parts(m) is not None:
            sites.append(_lora_site(m, path, rules))
            return m._modules["linear"]
        return m

    blocks = sub.get("trf_blocks")
    for i, blk in enumerate(blocks._modules.values() if isinstance(blocks, nn.Module) else ()):
        for place in _BLOCK_LINEARS:
            m = blk
            for name in place:
                m = m._modules.get(name) if isinstance(m, nn.Module) else None
            if m is not None:
                at(m, f"trf_blocks.{i}." + ".".join(place))
    head = at(sub.get("out_head"), "out_head")
    width, bias = 0, 0
    w = head._parameters.get("weight") if isinstance(head, nn.Linear) else None
    if isinstance(w, torch.Tensor) and w.dim() == 2 and w.shape[0] >= 1:  # (the walk checks
        # its input width against the table's (width, emb_dim))
        bias = int(head._parameters.get("bias") is not None)
        width = 0 if w.shape[0] == cfg["vocab_size"] and not bias else int(w.shape[0])
    return width, bias, tuple(sites)


def no_global_hooks():
    """attn.Error when a global module hook is registered."""
    for n in _GLOBAL_HOOKS:
        if getattr(nn.modules.module, n):
            raise Error("GPTModel: a global module hook is registered "
                        "(torch.nn.modules.module.register_module_*_hook); attn's C model "
                        "calls no submodule and would skip it")


def run_list(model, cfg, rules, table):
    """(params, training): the tensors attn's C model binds, in its order,
    and whether the dropouts train, after checking model's tree against
    cfg and the C model's table (name -> shape, in its order); attn.Error
    naming the first place that differs."""
    no_global_hooks()
    walk = _Walk(cfg, rules, table)
    walk.model(model)
    modes = walk.modes
    if len(modes) > 1 and cfg["drop_rate"] > 0:
        raise Error("GPTModel: some dropout modules are in training mode, others in eval "
                    "mode; attn's C model runs one mode for the whole model (model.train() "
                    "or model.eval())")
    return walk.out, modes.pop() if modes else model.training
