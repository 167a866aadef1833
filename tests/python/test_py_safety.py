"""Issue 31, "no crash from Python": a handle closed while another thread uses
it (6), integers crossing into C unchecked (11), scale=inf and a wrong-shaped
mask buffer accepted (13), and errors that were not attn.Error (15)."""
import threading

import numpy as np
import pytest

import attn
from attn import _lib


def test_close_while_forward_runs_never_frees_memory_in_use():
    """Item 6: close() in one thread while another runs m(x) crashed (use after
    free); now close waits for the call, and later calls raise attn.Error."""
    x = np.random.default_rng(1).standard_normal((16, 64, 64)).astype(np.float32)
    for _ in range(6):
        m = attn.MultiHeadAttention(64, 64, 64, 0.0, num_heads=4, seed=1)
        outcome, started = [], threading.Event()

        def run():
            started.set()
            try:
                for _ in range(50):
                    outcome.append(m(x).shape)
            except attn.Error as e:
                outcome.append(str(e))

        t = threading.Thread(target=run)
        t.start()
        started.wait()
        m.close()
        t.join()
        assert m.closed
        assert outcome and "closed" in str(outcome[-1])
        with pytest.raises(attn.Error, match="closed"):
            m(x)


def test_close_waits_for_the_call_in_flight():
    m = attn.CausalAttention(8, 8, 16, 0.0, seed=1)
    hold = m._core.hold()
    hold.__enter__()  # a call in flight
    closer = threading.Thread(target=m.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive()  # close waits: the memory is still the call's
    assert m._core._h.address is not None
    hold.__exit__(None, None, None)
    closer.join(5)
    assert not closer.is_alive() and m.closed


def test_calls_on_one_module_do_not_mix():
    """Two shapes on one module from two threads: each call gets its own
    result (the module's activations belong to one call at a time)."""
    m = attn.MultiHeadAttention(8, 8, 32, 0.0, num_heads=2, seed=3)
    xs = [np.random.default_rng(i).standard_normal((1 + i, 4 + 7 * i, 8)).astype(np.float32)
          for i in range(2)]
    want = [m(x) for x in xs]
    bad = []

    def run(i):
        for _ in range(100):
            if not np.array_equal(m(xs[i]), want[i]):
                bad.append(i)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


@pytest.mark.parametrize("value", [2**32 + 5, 2**31, -1])
def test_ints_are_range_checked_not_truncated(value):
    """Item 11: a C int was taken modulo 2^32 (2**32+5 acted as 5)."""
    with pytest.raises(ValueError, match="context_length"):
        attn.CausalAttention(4, 4, value, 0.0, seed=1)
    with pytest.raises(ValueError, match="set_num_threads: n"):
        attn.set_num_threads(value)


def test_generate_ints_range_checked(checkpoint):
    with attn.GPT.load(checkpoint) as gpt:
        with pytest.raises(ValueError, match="window"):
            gpt.generate("a", 3, window=2**32 + 5)
        with pytest.raises(ValueError, match="top_k"):
            gpt.generate("a", 3, top_k=2**32 + 1)
        with pytest.raises(ValueError, match="top_k"):
            attn.viz(gpt, "a", top_k=2**32 + 1)
        with pytest.raises(TypeError, match="max_new_tokens"):
            gpt.generate("a", 3.0)
        assert gpt.generate("a", 3, top_k=np.int64(5)) == gpt.generate("a", 3, top_k=5)


def test_set_num_threads_types():
    before = attn.get_num_threads()
    with pytest.raises(TypeError, match="set_num_threads: n"):
        attn.set_num_threads("2")
    with pytest.raises(TypeError):
        attn.set_num_threads(True)
    with pytest.raises(TypeError, match="blas_threads"):
        attn.set_num_threads(1, 1.5)
    assert attn.get_num_threads() == before
    # both an attn.Error and the built-in, for callers catching either
    with pytest.raises(attn.Error):
        attn.set_num_threads(0)


def test_sdpa_scale_must_be_finite_and_positive():
    """Item 13: scale=inf returned NaN without complaint."""
    torch = pytest.importorskip("torch")
    import attn.torch as at
    q = torch.randn(1, 1, 4, 8)
    for scale in (float("inf"), float("nan"), 0.0, -1.0):
        with pytest.raises(ValueError, match="scale"):
            at.scaled_dot_product_attention(q, q, q, scale=scale)
    assert torch.isfinite(at.scaled_dot_product_attention(q, q, q, scale=0.5)).all()


def test_load_state_dict_refuses_wrong_shaped_mask():
    """Item 13: a (3, 3) mask for context_length 6 was accepted."""
    m = attn.CausalAttention(3, 2, 6, 0.0, seed=1)
    sd = m.state_dict()
    sd["mask"] = np.zeros((3, 3), np.float32)
    with pytest.raises(attn.Error, match=r"mask must be \(6, 6\)"):
        m.load_state_dict(sd)
    w = attn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, seed=1)
    sd = w.state_dict()
    sd["heads.1.mask"] = np.zeros((6,), np.float32)
    with pytest.raises(attn.Error, match="heads.1.mask"):
        w.load_state_dict(sd)
    m.load_state_dict(m.state_dict())  # the right shape still loads


def test_surrogate_in_prompt_is_attn_error(checkpoint):
    """Item 15: a lone surrogate raised UnicodeEncodeError."""
    with attn.GPT.load(checkpoint) as gpt:
        with pytest.raises(attn.Error, match="generate: prompt"):
            gpt.generate("a\ud800", 2)
        with pytest.raises(attn.Error, match="generate: stop"):
            gpt.generate("a", 2, stop="\udfff")
        with pytest.raises(attn.Error, match="viz: prompt"):
            attn.viz(gpt, "\ud800")


def test_huge_mask_refused_before_allocating():
    """Item 15: MultiHeadAttention(4, 4, 1 << 20, ...) raised numpy's
    MemoryError for its 4 TiB mask; now attn.Error naming the size."""
    with pytest.raises(attn.Error, match=r"needs 4398046511104 bytes \(4096.0 GiB\)"):
        attn.MultiHeadAttention(4, 4, 1 << 20, 0.0, num_heads=1, seed=1)


def test_huge_weights_refused_before_allocating():
    d = 1 << 20  # 3 x (2^20)^2 floats, and their gradients: 24 TiB
    with pytest.raises(attn.Error, match=r"d_in 1048576, d_out 1048576 needs "
                                         r"26388279066624 bytes"):
        attn.SelfAttention_v2(d, d, seed=1)


def test_non_cpu_tensor_is_attn_error():
    """Item 15: a tensor not on the CPU reached torch's own errors
    (AssertionError for CUDA without CUDA); the meta device stands in here."""
    torch = pytest.importorskip("torch")
    import attn.torch as at
    x = torch.empty(1, 4, 4, device="meta")
    m = attn.MultiHeadAttention(4, 4, 8, 0.0, num_heads=2, seed=1)
    with pytest.raises(attn.Error, match="forward: x must be on the CPU"):
        m(x)
    with pytest.raises(attn.Error, match="on the CPU"):
        at.MultiHeadAttention(4, 4, 8, 0.0, num_heads=2)(x)


def test_cint_helper():
    assert _lib.cint("n", np.int32(7)) == 7
    for bad in ("2", 2.0, True, None):
        with pytest.raises(TypeError, match="n must be an integer"):
            _lib.cint("n", bad)
    with pytest.raises(ValueError, match=r"n must be in \[0, 2147483647\], got 2147483648"):
        _lib.cint("n", 2**31)


def test_view_save_through_a_symlink_in_a_run_folder(checkpoint, tmp_path):
    """View.save writes as attn viz --out does (attn's atomic writer): a
    symlink inside the run folder that leads to a folder outside is refused
    (it names a folder), never replaced by a file inside the run; a symlink
    to a file outside has its target replaced, the link staying."""
    import attn
    outside = tmp_path / "outside"
    outside.mkdir()
    mine = checkpoint / "mine_links"
    mine.mkdir()
    (mine / "to_dir").symlink_to(outside)
    (outside / "page.html").write_text("old")
    (mine / "to_file").symlink_to(outside / "page.html")
    view = attn.viz(checkpoint, "ab")
    with pytest.raises(attn.Error, match="Is a directory"):
        view.save(mine / "to_dir")
    assert (mine / "to_dir").is_symlink()
    view.save(mine / "to_file")
    assert (mine / "to_file").is_symlink()
    assert (outside / "page.html").read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in mine.iterdir()) == ["to_dir", "to_file"]
