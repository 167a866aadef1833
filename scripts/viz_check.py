#!/usr/bin/python3
"""Checks of `attn viz` and `attn chapter3 --figures` output (tests/viz_cli.sh).

  viz_check.py torch PAGE.html CKPT_DIR
      The page's attn-data attention against the book's GPTModel
      (scripts/gpt_parity.py) loaded from CKPT_DIR/model.safetensors, run in
      eval mode on the page's token_ids; the weights are caught where the
      book's MultiHeadAttention makes them (torch.softmax). Fails above 1e-5.
  viz_check.py page PAGE.html
      The JSON parses and holds the documented keys with consistent shapes.
  viz_check.py dom DOM.html N_CELLS [LAYER QUERY]
      Chromium's --dump-dom of a page: the script finished (data-ready), the
      in-page error collector is empty, N_CELLS model-view cells, the page
      says that position i+1 was chosen from position i's output, both views
      show the colour scale's legend, and the note on a shortened prompt is
      shown exactly when the prompt was shortened; with LAYER and QUERY (page
      opened with #layer=..&query=..&detail=..) the head view shows that
      query's weights on the page's one scale (colour of sqrt(weight), the
      same for every query: shades compare) and the large heatmap is open.
  viz_check.py why DOM.html POS LAYER
      The DOM after a click on generated character POS's row: position POS-1,
      whose output chose it, is pinned and shaded, POS is marked as the
      character it chose, the row is highlighted, the readout says so.
  viz_check.py png SHOT.png
      The screenshot is not blank: many colours, a fair share of non-white.
  viz_check.py svg FILE.svg ROWS COLS [PAGE.html LAYER HEAD]
      The SVG parses as XML and spans ROWS x COLS cells with data-value; with
      a page, it draws the lower triangle of that head's weights (<= 1e-6).
  viz_check.py figures CHAPTER3_STDOUT FIGDIR
      Every figure parses as XML and, in order, equals a tensor the chapter
      printed (to the printed 4 decimals); the multi-head figures (not printed
      by the chapter) equal the book's MultiHeadAttention weights in PyTorch.
Run with /usr/bin/python3 (torch 1.13.1 for `torch` and `figures`)."""
import html
import json
import os
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
SVG = "{http://www.w3.org/2000/svg}"


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def page_data(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="attn-data">(.*?)</script>', text, re.S)
    if not m:
        fail(f"{path}: no attn-data script")
    return json.loads(m.group(1))


def check_page(path):
    d = page_data(path)
    T, L, H, P = len(d["tokens"]), d["n_layers"], d["n_heads"], d["n_prompt"]
    assert d["format"] == "attn-viz" and d["version"] == 1
    assert len(d["token_ids"]) == T and 1 <= P <= T and len(d["generated"]) == T - P
    assert T <= d["config"]["context_length"] and d["prompt_dropped"] >= 0
    assert len(d["attention"]) == L and all(len(a) == H for a in d["attention"])
    for layer in d["attention"]:
        for head in layer:
            assert [len(r) for r in head] == list(range(1, T + 1))
            for r in head:
                if abs(sum(r) - 1) > 1e-4:
                    fail(f"a row sums to {sum(r)}")
    for g in d["generated"]:
        assert len(g["top"]) == 5 and g["top"][0]["p"] >= g["p"] - 1e-6
        assert d["tokens"][g["position"]] == g["token"]
    print(f"page: {T} tokens ({P} prompt), {L} layers x {H} heads, rows sum to 1")


def book_weights(model_fn):
    """Run model_fn() and return every torch.softmax output it produced."""
    import torch
    caught, real = [], torch.softmax

    def spy(*a, **k):
        out = real(*a, **k)
        caught.append(out.detach().clone())
        return out

    torch.softmax = spy
    try:
        with torch.no_grad():
            model_fn()
    finally:
        torch.softmax = real
    return caught


def check_torch(page, ckpt):
    import numpy as np
    import torch
    sys.path.insert(0, HERE)
    from gpt_parity import GPTModel, st_read
    d = page_data(page)
    tensors, meta = st_read(os.path.join(ckpt, "model.safetensors"))
    cfg = json.loads(meta["config"])
    model = GPTModel(cfg)
    missing, unexpected = model.load_state_dict(
        {k: torch.from_numpy(v) for k, v in tensors.items()}, strict=False)
    assert all(k.endswith(".att.mask") for k in missing) and not unexpected
    model.eval()
    ids = torch.tensor([d["token_ids"]], dtype=torch.int64)
    caught = book_weights(lambda: model(ids))
    if len(caught) != cfg["n_layers"]:
        fail(f"caught {len(caught)} softmax calls, expected {cfg['n_layers']}")
    T, worst = ids.shape[1], 0.0
    for layer, w in enumerate(caught):  # (1, H, T, T)
        for h in range(cfg["n_heads"]):
            ref = w[0, h].numpy()
            for i, row in enumerate(d["attention"][layer][h]):
                worst = max(worst, float(np.abs(np.array(row) - ref[i, :i + 1]).max()))
                if i + 1 < T and ref[i, i + 1:].max() != 0:
                    fail("PyTorch's weights are not causal?")
    print(f"attention vs book GPTModel: max |diff| {worst:.2e} over {len(caught)} layers x "
          f"{cfg['n_heads']} heads x {T} tokens")
    if worst > 1e-5:
        fail("attention differs from PyTorch by more than 1e-5")


def colour(t):
    """page.js's colour(): white -> light blue -> dark blue over [0, 1]."""
    t = max(0.0, min(1.0, t))
    a, m, b = (255, 255, 255), (107, 174, 214), (8, 48, 107)
    if t < 0.5:
        return [a[k] + (m[k] - a[k]) * t / 0.5 for k in range(3)]
    return [m[k] + (b[k] - m[k]) * (t - 0.5) / 0.5 for k in range(3)]


TOK = re.compile(r'<span class="(tok[^"]*)" data-pos="(\d+)"[^>]*?style="([^"]*)"')


def tokens(text):
    """position -> (classes, rgb or None) of the head view's characters."""
    out = {}
    for cls, pos, style in TOK.findall(text):
        m = re.search(r"background: rgb\((\d+), (\d+), (\d+)\)", style)
        out[int(pos)] = (cls.split(), [int(x) for x in m.groups()] if m else None)
    return out


def check_page_text(text, d):
    """What every page says: the i -> i+1 link, the scale's legends, the note."""
    plain = re.sub(r"<[^>]+>", "", text)
    if not re.search(r"the character at position i\+1 was chosen from the output at\s+position i", plain):
        fail("the page does not say that position i+1 was chosen from position i's output")
    for box in ("seq-scale", "grid-scale"):
        m = re.search(r'<span class="scale" id="%s">(.*?)</span></span>' % box, text, re.S)
        ticks = m and re.findall(r'data-weight="([0-9.]+)" style="left: ([0-9.]+)%', m.group(1))
        if not ticks or len(ticks) < 4 or any(abs(float(x) - 100 * float(w) ** 0.5) > 0.01 for w, x in ticks):
            fail(f"no colour-scale legend ({box}) with ticks at sqrt(weight): {ticks}")
    note = re.search(r'<p class="note" id="trimmed"( hidden="")?>(.*?)</p>', text, re.S)
    dropped, P = d["prompt_dropped"], d["n_prompt"]
    if not note:
        fail("no note element for a shortened prompt")
    if dropped and (note.group(1) or f"The prompt had {dropped + P} characters" not in note.group(2)
                    or f"its first {dropped} were left out" not in note.group(2)):
        fail(f"the prompt lost {dropped} characters but the note says: {note.group(0)}")
    if not dropped and not note.group(1):
        fail(f"a note on a prompt that was not shortened: {note.group(0)}")
    return "; says position i+1 came from i's output, two legends" + (
        f", notes {dropped} dropped prompt characters" if dropped else "")


def check_dom(path, n_cells, layer=None, query=None):
    text = open(path, encoding="utf-8").read()
    if 'data-ready="1"' not in text:
        fail("the page's script did not finish (no data-ready)")
    m = re.search(r'<pre id="attn-errors">(.*?)</pre>', text, re.S)
    if not m or m.group(1).strip():
        fail(f"errors in the page: {m.group(1) if m else 'no collector'}")
    d = page_data(path)
    said = check_page_text(text, d)
    cells = len(re.findall(r'<div class="cell" data-layer="\d+" data-head="\d+"', text))
    canvases = len(re.findall(r'<div class="cell"[^>]*><canvas', text))
    if cells != n_cells or canvases != n_cells:
        fail(f"{cells} model-view cells ({canvases} with a canvas), expected {n_cells}")
    what = ""
    if query is not None:  # the page was opened with #layer=L&query=N&detail=L,H
        r = re.search(r'<div id="readout">(.*?)</div>', text, re.S)
        if not r or f"query {query} " not in r.group(1) or f"layer {layer}," not in r.group(1):
            fail(f"the head view does not show query {query} of layer {layer}: {r and r.group(1)}")
        shaded = len(re.findall(r'<span class="tok[^"]*" data-pos="\d+"[^>]*style="background', text))
        if shaded != int(query) + 1:
            fail(f"{shaded} characters shaded, expected {int(query) + 1}")
        if re.search(r'<div id="detail" hidden', text):
            fail("the large heatmap did not open")
        # One scale for every query: the shade is a function of the weight
        # alone (head 0, the one ticked at first), not of the row's maximum.
        row, worst = d["attention"][int(layer)][0][int(query)], 0
        for j, (cls, rgb) in tokens(text).items():
            if j <= int(query):
                want = colour(row[j] ** 0.5)
                worst = max(worst, max(abs(a - b) for a, b in zip(rgb, want)))
        if worst > 1:
            fail(f"shades are not sqrt(weight) on the page's one scale (off by {worst})")
        what = (f"; query {query} pins and shades {shaded} characters on the page's one scale, "
                f"the large view opens")
    print(f"dom: script ran, no errors, {cells} layer x head cells{said}{what}")


def check_why(path, pos, layer):
    """After a click on generated character pos's row (see the usage)."""
    text, pos = open(path, encoding="utf-8").read(), int(pos)
    d, toks = page_data(path), tokens(open(path, encoding="utf-8").read())
    if pos < d["n_prompt"] or pos >= len(d["tokens"]):
        fail(f"position {pos} is not a generated character")
    q = pos - 1
    r = re.search(r'<div id="readout">(.*?)</div>', text, re.S)
    said = r and html.unescape(r.group(1))
    if not said or not said.startswith(f"query {q} ") or f"layer {layer}," not in said:
        fail(f"the head view does not show query {q}: {said}")
    if f"this position's output chose the next character, {json.dumps(d['tokens'][pos], ensure_ascii=False)} at {pos}" not in said:
        fail(f"the readout does not say that {q}'s output chose {pos}: {said}")
    if "pinned" not in toks[q][0] or "chosen" not in toks[pos][0]:
        fail(f"query {q} not pinned ({toks[q][0]}) or {pos} not marked chosen ({toks[pos][0]})")
    if [j for j, (c, _) in toks.items() if "chosen" in c] != [pos]:
        fail("more than one character marked as chosen")
    shaded = sorted(j for j, (_, rgb) in toks.items() if rgb)
    if shaded != list(range(pos)):
        fail(f"shaded {shaded[:3]}..{shaded[-3:]}, expected 0..{q}")
    rows = re.findall(r'<tr data-pos="(\d+)"( class="active")?>', text)
    if [p for p, a in rows if a] != [str(pos)] or len(rows) != len(d["generated"]):
        fail(f"the generated rows highlighted: {[p for p, a in rows if a]}, expected [{pos}]")
    print(f"why: clicking generated {pos} {json.dumps(d['tokens'][pos], ensure_ascii=False)} pins query {q}, the one "
          f"whose output chose it, marks {pos} and its row")


def png_pixels(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), f"PNG type {ctype}/{depth}"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def check_png(path):
    w, h, bpp, rows = png_pixels(path)
    colours, nonwhite, total = set(), 0, 0
    for y in range(0, h, 2):
        r = rows[y]
        for x in range(0, w, 2):
            px = r[x * bpp:x * bpp + 3]
            colours.add(px)
            total += 1
            nonwhite += px != b"\xff\xff\xff"
    share = nonwhite / total
    print(f"screenshot {w}x{h}: {len(colours)} colours, {share:.1%} not white")
    if len(colours) < 50 or share < 0.03:
        fail("the screenshot looks blank")


def svg_cells(path):
    root = ET.parse(path).getroot()
    if root.tag != SVG + "svg":
        fail(f"{path}: root is {root.tag}")
    cells = {}
    for r in root.iter(SVG + "rect"):
        if "data-value" in r.attrib:
            cells[int(r.attrib["data-row"]), int(r.attrib["data-col"])] = float(r.attrib["data-value"])
    rows = 1 + max(i for i, _ in cells) if cells else 0
    cols = 1 + max(j for _, j in cells) if cells else 0
    # Cells not drawn (above the diagonal of a causal heatmap) are masked: 0.
    return rows, cols, [[cells.get((i, j), 0.0) for j in range(cols)] for i in range(rows)], len(cells)


def check_svg(path, rows, cols, page=None, layer=None, head=None):
    r, c, m, n = svg_cells(path)
    if (r, c) != (rows, cols):
        fail(f"{path}: {r}x{c} cells, expected {rows}x{cols}")
    what = f"{n} cells"
    if page:
        d = page_data(page)
        rows_ref = d["attention"][int(layer)][int(head)]
        worst = max(abs(m[i][j] - (rows_ref[i][j] if j <= i else 0.0))
                    for i in range(r) for j in range(c))
        if n != r * (r + 1) // 2 or worst > 1e-6:
            fail(f"{path}: {n} cells (want the lower triangle), max |svg - page| {worst:.2e}")
        what += f" (lower triangle), == the page's layer {layer} head {head} (max diff {worst:.1e})"
    print(f"{os.path.basename(path)}: parses, {r}x{c}, {what}")


NUM = re.compile(r"-?inf|nan|-?\d+\.?\d*(?:e[+-]?\d+)?")


def printed_tensors(text):
    """Every tensor([...]) the chapter printed, as a flat list of floats."""
    out = []
    for m in re.finditer(r"tensor\((\[.*?\])(?:,\s*grad_fn=<\w+>)?\)", text, re.S):
        out.append([float(x) for x in NUM.findall(m.group(1))])
    return out


def check_figures(stdout, figdir):
    tensors = printed_tensors(open(stdout, encoding="utf-8").read())
    figs = sorted(f for f in os.listdir(figdir) if f.endswith(".svg"))
    if len(figs) < 10:
        fail(f"only {len(figs)} figures")
    k, checked = 0, 0
    for f in figs:
        _, _, m, _ = svg_cells(os.path.join(figdir, f))
        flat = [v for row in m for v in row]
        if "mha-head" in f:
            continue  # not printed by the chapter: against PyTorch below
        while k < len(tensors) and not (
                len(tensors[k]) == len(flat) and
                all(a == b or abs(round(a, 4) - b) <= 5e-5 for a, b in zip(flat, tensors[k]))):
            k += 1
        if k == len(tensors):
            fail(f"{f}: no printed table (after the previous figure's) has its values")
        k += 1
        checked += 1
    print(f"figures: {checked} equal the chapter's printed tables, in the book's order")
    try:
        import torch
    except ImportError:
        print("figures: no torch; multi-head figures not compared")
        return
    sys.path.insert(0, HERE)
    from book_attention import MultiHeadAttention
    inputs = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                           [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])
    torch.manual_seed(123)
    mha = MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
    (w,) = book_weights(lambda: mha(torch.stack((inputs, inputs))))
    worst = 0.0
    for h in range(2):
        f = [x for x in figs if f"mha-head{h}" in x]
        assert len(f) == 1, f
        _, _, m, _ = svg_cells(os.path.join(figdir, f[0]))
        for i in range(6):
            for j in range(6):
                worst = max(worst, abs(m[i][j] - float(w[0, h, i, j])))
    print(f"figures: multi-head weights vs the book's MultiHeadAttention: max |diff| {worst:.2e}")
    if worst > 1e-6:
        fail("multi-head figure differs from PyTorch")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "torch":
        check_torch(*args)
    elif cmd == "page":
        check_page(*args)
    elif cmd == "dom":
        check_dom(args[0], int(args[1]), *args[2:])
    elif cmd == "why":
        check_why(*args)
    elif cmd == "png":
        check_png(*args)
    elif cmd == "svg":
        check_svg(args[0], int(args[1]), int(args[2]), *args[3:])
    elif cmd == "figures":
        check_figures(*args)
    else:
        fail(f"unknown check {cmd}")


if __name__ == "__main__":
    main()
