"""`attn viz`'s page from Python: attn.viz(model_or_dir, prompt) returns a
View that Jupyter shows inline (an iframe holding the page in srcdoc: the
same self-contained page, no network) and that .save(path) writes."""
import html
import os

import ctypes

from . import _lib
from ._lib import lib
from .gpt import GPT
from .modules import _index


_CHECK, _WRITE = lib.attn_ckpt_output_check, lib.attn_file_write_atomic


def _check_output(path, source):
    """attn's one output check (attn/checkpoint.h): never inside a run
    folder, never on the checkpoint shown or the corpus it was trained on."""
    err = _lib.error()
    status = _CHECK(_lib.path(source), _lib.path(path), None, 0, None, 0, ctypes.byref(err))
    _lib.check(status, err)


class View:
    """One attention page: html (the whole page, as `attn viz --out` writes
    it), shown inline by Jupyter (_repr_html_), written by save()."""

    def __init__(self, page, height=720, source=None):
        self.html = page
        self.height = height
        self.source = source  # the checkpoint shown: its files are never written

    def _repr_html_(self):
        # srcdoc: the page travels inside the notebook (no file, no server, no
        # network); its text is attn's own, with every string JSON-escaped.
        return ('<iframe class="attn-viz" style="width: 100%%; height: %dpx; '
                'border: 1px solid #ddd" srcdoc="%s"></iframe>'
                % (self.height, html.escape(self.html, quote=True)))

    def save(self, path):
        """Write the page to path as `attn viz --out` does: the one output
        check, then attn's atomic writer (a temporary file beside the final
        target and a rename; a symlink stays and its target is replaced)."""
        path = os.fspath(path)
        _check_output(path, self.source)
        data = self.html.encode("utf-8")
        err = _lib.error()
        _lib.check(_WRITE(_lib.path(path), data, len(data), ctypes.byref(err)), err)
        return path

    def __repr__(self):
        return f"attn.View({len(self.html)} characters of HTML)"


def viz(model_or_dir, prompt, generate=0, *, seed=1337, temperature=0.8, top_k=200, height=720):
    """The page `attn viz --checkpoint DIR --prompt PROMPT --generate N` makes,
    for a GPT or a checkpoint folder: the head view, the model view and, with
    generate > 0, the sampled characters (the same text as attn generate with
    the same seed)."""
    own = not isinstance(model_or_dir, GPT)
    gpt = GPT.load(model_or_dir) if own else model_or_dir
    try:
        p = _lib.text(prompt, "viz: prompt")
        generate, top_k = _index(generate, "viz: generate"), _index(top_k, "viz: top_k")
        temperature = _lib.cfloat("viz: temperature", temperature)
        seed = _index(seed, "viz: seed", -2**63, 2**64 - 1) % 2**64
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        with gpt._live() as h:  # close() in another thread waits for the page
            _lib.call(lib.attn_h_viz_html, h, p, len(p), generate, temperature, top_k, seed,
                      _lib.text(gpt.source, "viz: source"), ctypes.byref(out),
                      ctypes.byref(n))
        src = gpt.source
        source = os.fspath(src) if isinstance(src, (str, bytes, os.PathLike)) else None
        return View(_lib.take_string(out.value), height, source)
    finally:
        if own:
            gpt.close()
