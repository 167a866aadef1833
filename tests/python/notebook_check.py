#!/usr/bin/python3
"""Checks of examples/chapter3.ipynb (tests/python/notebook.sh).

  notebook_check.py run NOTEBOOK OUT.ipynb WORKDIR
      Execute the notebook headless (nbclient, the python3 kernel) in WORKDIR;
      fails on any error output.
  notebook_check.py tables OUT.ipynb CHAPTER3.txt
      Every tensor the notebook printed, in order, equals the one `attn
      chapter3` printed at the same place (the same numbers, as text).
  notebook_check.py stream
      Prints the dropout stream this PyTorch draws (attn chapter3 --rng).
  notebook_check.py html OUT.ipynb PAGE.html CHECKED.html
      Export with nbconvert (the lab template); CHECKED.html is the same page
      with a probe that, once loaded, records on <body data-attn-viz> what the
      inline attention view's frame holds and hides the rest of the page (so
      a screenshot shows the view).
  notebook_check.py dom DOM.html
      Chromium's --dump-dom of CHECKED.html: one inline view, its script ran
      (data-ready), no page errors, one model-view cell per layer x head."""
import re
import sys

TENSOR = re.compile(r"tensor\((\[.*?\]|[-\d.e+inf]+)(?:,\s*(?:grad_fn=<\w+>|requires_grad=True))?\)",
                    re.S)


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def run(path, out, workdir):
    import nbclient
    import nbformat
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": workdir}})
    try:
        client.execute()
    except Exception as e:  # CellExecutionError names the cell and the traceback
        nbformat.write(nb, out)
        fail(f"the notebook failed: {e}")
    nbformat.write(nb, out)
    n = sum(c.cell_type == "code" for c in nb.cells)
    print(f"executed {n} code cells without an error")


def stdout_of(path):
    import nbformat
    nb = nbformat.read(path, as_version=4)
    text = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            if o.get("output_type") == "error":
                fail(f"an error output: {o.get('ename')}: {o.get('evalue')}")
            if o.get("output_type") == "stream" and o.get("name") == "stdout":
                text.append(o["text"])
    return "".join(text)


def tensors(text):
    """The number part of every printed tensor, whitespace normalised."""
    return [re.sub(r"\s+", " ", m.group(1)) for m in TENSOR.finditer(text)]


def tables(path, chapter):
    ours = tensors(stdout_of(path))
    ref = tensors(open(chapter, encoding="utf-8").read())
    if len(ours) != len(ref):
        fail(f"the notebook printed {len(ours)} tensors, attn chapter3 {len(ref)}")
    for i, (a, b) in enumerate(zip(ours, ref)):
        if a != b:
            fail(f"tensor {i + 1}: notebook {a[:120]} vs attn chapter3 {b[:120]}")
    print(f"tables: the notebook's {len(ours)} printed tensors equal attn chapter3's, in order")


def stream():
    import torch
    intel = "GenuineIntel" in open("/proc/cpuinfo").read()
    print("torch-mkl" if torch.backends.mkl.is_available() and intel else "torch-cpu")


PROBE = """<script>
window.addEventListener("load", function () {
  var out = [];
  document.querySelectorAll("iframe.attn-viz").forEach(function (f) {
    var d = f.contentDocument, b = d && d.body, e = d && d.getElementById("attn-errors");
    out.push([b && b.dataset.ready === "1" ? "ready" : "not-ready",
              d ? d.querySelectorAll("div.cell[data-layer]").length : -1,
              e ? JSON.stringify(e.textContent.trim()) : "no-collector"].join(" "));
    // Bring the view to the top (for the screenshot): hide what surrounds it.
    for (var n = f; n && n !== document.body; n = n.parentElement)
      Array.prototype.forEach.call(n.parentElement.children, function (c) {
        if (c !== n) c.style.display = "none";
      });
  });
  document.body.setAttribute("data-attn-viz", out.join(" | ") || "no-view");
});
</script>
"""


def html(path, page, checked):
    import nbconvert
    import nbformat
    nb = nbformat.read(path, as_version=4)
    body, _ = nbconvert.HTMLExporter(template_name="lab").from_notebook_node(nb)
    with open(page, "w", encoding="utf-8") as f:
        f.write(body)
    n = body.count('<iframe class="attn-viz"')
    if n != 1:
        fail(f"{n} inline attention views in the exported page, expected 1")
    with open(checked, "w", encoding="utf-8") as f:
        f.write(body.replace("</body>", PROBE + "</body>"))
    print(f"html: exported {len(body)} bytes with one inline attention view")


def dom(path, cells):
    text = open(path, encoding="utf-8").read()
    m = re.search(r'data-attn-viz="([^"]*)"', text)
    if not m:
        fail("the probe did not run (no data-attn-viz)")
    got = m.group(1).replace("&quot;", '"')
    want = f'ready {cells} ""'
    if got != want:
        fail(f"the inline view: '{got}', expected '{want}' (ready, {cells} cells, no errors)")
    print(f"dom: the inline view's script ran, {cells} layer x head cells, no page errors")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"run": run, "tables": tables, "stream": stream, "html": html,
     "dom": lambda p, c: dom(p, int(c))}[cmd](*args)


if __name__ == "__main__":
    main()
