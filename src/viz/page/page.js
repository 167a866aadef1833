(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("attn-data").textContent);
  var L = D.n_layers, H = D.n_heads, T = D.tokens.length, P = D.n_prompt;
  var $ = function (id) { return document.getElementById(id); };
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  /* What a character looks like on screen (space, newline visible). */
  function shown(c) {
    if (c === " ") return "\u2423";
    if (c === "\n") return "\u21b5";
    if (c === "\t") return "\u21e5";
    return c;
  }
  function w(l, h, i, j) { var r = D.attention[l][h][i]; return j < r.length ? r[j] : 0; }
  /* white -> light blue -> dark blue, as the SVG heatmaps */
  function colour(t) {
    t = Math.max(0, Math.min(1, t));
    var a = [255, 255, 255], m = [107, 174, 214], b = [8, 48, 107], c = [0, 0, 0], k;
    for (k = 0; k < 3; k++)
      c[k] = Math.round(t < 0.5 ? a[k] + (m[k] - a[k]) * t / 0.5 : m[k] + (b[k] - m[k]) * (t - 0.5) / 0.5);
    return c;
  }
  function fmt(x) { return x.toFixed(4); }
  /* The page's one colour scale: sqrt(weight) over [0, 1], the same for
   * every character, layer and head (so shades compare), with small weights
   * still visible. */
  function shade(v) { return colour(Math.sqrt(Math.max(0, v))); }
  function legend(box) {
    var bar = el("span", "scale-bar");
    bar.title = "colour = sqrt(weight), 0 (white) to 1 (dark blue)";
    box.appendChild(bar);
    [0, 0.01, 0.1, 0.25, 0.5, 1].forEach(function (v) {
      var t = el("span", "tick", String(v));
      t.style.left = (100 * Math.sqrt(v)) + "%";
      t.dataset.weight = v;
      box.appendChild(t);
    });
  }
  legend($("seq-scale"));
  legend($("grid-scale"));

  /* ---- header ---- */
  var U = D.unit || "characters";
  $("title").textContent = "Attention of " + (D.source || "a GPT") + " on " + T + " " + U;
  $("summary").textContent = L + " layers \u00d7 " + H + " heads; " + P + " prompt " + U +
    (T > P ? " + " + (T - P) + " generated (orange, dashed)" : "") +
    ". Weights: causal softmax(QK\u1d40/\u221a" + (D.config.emb_dim / H) +
    "), eval mode, before dropout; each row sums to 1.";
  /* A prompt longer than the model reads kept its last characters. */
  var dropped = D.prompt_dropped || 0;
  if (dropped > 0) {
    $("trimmed").hidden = false;
    $("trimmed").textContent = "The prompt had " + (dropped + P) + " " + U + "; the model reads at most " +
      "context_length = " + D.config.context_length + (T > P ? " (the generated ones included)" : "") +
      ", so its first " + dropped + " were left out and the page shows the last " + P +
      ", as attn generate keeps the last context_length.";
  }

  /* ---- head view ---- */
  var layerSel = $("layer"), headBox = $("heads"), seq = $("seq"), readout = $("readout");
  var l, h, i;
  for (l = 0; l < L; l++) { var o = el("option", null, "layer " + l); o.value = l; layerSel.appendChild(o); }
  var headChecks = [];
  for (h = 0; h < H; h++) {
    var lab = el("label"), cb = el("input");
    cb.type = "checkbox"; cb.checked = h === 0; cb.value = h;
    lab.appendChild(cb); lab.appendChild(document.createTextNode(" head " + h));
    headBox.appendChild(lab); headChecks.push(cb);
  }
  var toks = [];
  for (i = 0; i < T; i++) {
    var s = el("span", "tok" + (i >= P ? " gen" : ""), shown(D.tokens[i]));
    s.dataset.pos = i;
    seq.appendChild(s); toks.push(s);
    if (D.tokens[i] === "\n") seq.appendChild(el("br"));
  }
  var pinned = -1, current = -1, genRows = [];
  function selectedHeads() {
    var r = [];
    headChecks.forEach(function (c) { if (c.checked) r.push(+c.value); });
    return r;
  }
  function rowWeights(q) {
    var hs = selectedHeads(), lay = +layerSel.value, r = new Array(q + 1).fill(0), j, k;
    for (k = 0; k < hs.length; k++) for (j = 0; j <= q; j++) r[j] += w(lay, hs[k], q, j) / hs.length;
    return r;
  }
  function topFive(g) {
    return g.top.map(function (t) { return JSON.stringify(t.token) + " " + fmt(t.p); }).join("  ");
  }
  /* Position q+1 was sampled from q's output: say so both ways. */
  function genInfo(q) {
    var s = "", g;
    if (q >= P) {
      g = D.generated[q - P];
      s += "\ngenerated: sampled from the output at position " + (q - 1) + " " +
        JSON.stringify(D.tokens[q - 1]) + " with p = " + fmt(g.p) + "; top 5: " + topFive(g);
    }
    if (q + 1 >= P && q + 1 < T) {
      g = D.generated[q + 1 - P];
      s += "\nthis position's output chose the next character, " + JSON.stringify(g.token) + " at " +
        (q + 1) + ", with p = " + fmt(g.p) + "; top 5: " + topFive(g);
    }
    return s;
  }
  function paint(q) {
    current = q;
    toks.forEach(function (t) {
      t.style.background = ""; t.title = "";
      t.classList.remove("query"); t.classList.remove("chosen"); t.classList.remove("chooser");
    });
    /* The generated-characters row of the character q's output chose. */
    genRows.forEach(function (tr) { tr.classList.toggle("active", q >= 0 && +tr.dataset.pos === q + 1); });
    if (q < 0) { readout.textContent = "Hover over a character (click to pin it)."; return; }
    if (q + 1 >= P && q + 1 < T) toks[q + 1].classList.add("chosen");
    if (q >= P) toks[q - 1].classList.add("chooser");
    var hs = selectedHeads();
    if (!hs.length) { readout.textContent = "Tick at least one head."; return; }
    var r = rowWeights(q), j, best = 0;
    for (j = 0; j <= q; j++) {
      var c = shade(r[j]);
      toks[j].style.background = "rgb(" + c.join(",") + ")";
      toks[j].style.color = Math.sqrt(r[j]) > 0.55 ? "#fff" : "";
      toks[j].title = "weight of " + JSON.stringify(D.tokens[q]) + " (" + q + ") on " +
        JSON.stringify(D.tokens[j]) + " (" + j + "): " + fmt(r[j]);
      if (r[j] > r[best]) best = j;
    }
    for (j = q + 1; j < T; j++) toks[j].style.color = "";
    toks[q].classList.add("query");
    readout.textContent = "query " + q + " " + JSON.stringify(D.tokens[q]) + ", layer " + layerSel.value +
      ", head" + (hs.length > 1 ? "s " + hs.join("+") + " (mean)" : " " + hs[0]) +
      ": strongest on " + best + " " + JSON.stringify(D.tokens[best]) + " (" + fmt(r[best]) + ")" + genInfo(q);
  }
  seq.addEventListener("mouseover", function (e) {
    var p = e.target.dataset ? e.target.dataset.pos : undefined;
    if (p !== undefined && pinned < 0) paint(+p);
  });
  seq.addEventListener("mouseout", function (e) {
    if (pinned < 0 && !seq.contains(e.relatedTarget)) paint(-1);
  });
  seq.addEventListener("click", function (e) {
    var p = e.target.dataset ? e.target.dataset.pos : undefined;
    if (p === undefined) return;
    if (pinned >= 0) toks[pinned].classList.remove("pinned");
    pinned = +p === pinned ? -1 : +p;
    if (pinned >= 0) toks[pinned].classList.add("pinned");
    paint(+p);
  });
  function repaint() { paint(pinned >= 0 ? pinned : current); }
  /* Left / right arrows move the pinned character (long prompts). */
  document.addEventListener("keydown", function (e) {
    if (pinned < 0 || (e.key !== "ArrowLeft" && e.key !== "ArrowRight")) return;
    var q = Math.max(0, Math.min(T - 1, pinned + (e.key === "ArrowLeft" ? -1 : 1)));
    toks[pinned].classList.remove("pinned");
    pinned = q; toks[q].classList.add("pinned"); paint(q);
    e.preventDefault();
  });
  layerSel.addEventListener("change", repaint);
  headChecks.forEach(function (c) { c.addEventListener("change", repaint); });
  $("all-heads").addEventListener("click", function () { headChecks.forEach(function (c) { c.checked = true; }); repaint(); });
  $("one-head").addEventListener("click", function () { headChecks.forEach(function (c, k) { c.checked = k === 0; }); repaint(); });
  paint(T - 1);

  /* ---- generated characters: each row shows the query whose output chose it ---- */
  if (D.generated.length) {
    var tb = $("gen");
    var hr = el("tr");
    ["position", "character", "chosen by the output at", "p", "top 5 alternatives (p)"].forEach(function (x) { hr.appendChild(el("th", null, x)); });
    tb.appendChild(hr);
    var pin = function (q) {
      if (pinned >= 0) toks[pinned].classList.remove("pinned");
      pinned = q;
      if (q >= 0) toks[q].classList.add("pinned");
    };
    D.generated.forEach(function (g) {
      var tr = el("tr"), q = g.position - 1;
      tr.dataset.pos = g.position;
      tr.appendChild(el("td", null, String(g.position)));
      tr.appendChild(el("td", null, JSON.stringify(g.token)));
      tr.appendChild(el("td", null, q + " " + JSON.stringify(D.tokens[q])));
      var td = el("td", null, fmt(g.p)), bar = el("span", "bar");
      bar.style.width = Math.round(g.p * 80) + "px"; td.appendChild(bar); tr.appendChild(td);
      tr.appendChild(el("td", null, topFive(g)));
      tr.addEventListener("mouseenter", function () { if (pinned < 0) paint(q); });
      tr.addEventListener("click", function () {
        pin(pinned === q ? -1 : q); paint(q);
        seq.scrollTop = Math.max(0, toks[q].offsetTop - seq.clientHeight / 2);
      });
      tb.appendChild(tr); genRows.push(tr);
    });
    tb.addEventListener("mouseleave", function () { if (pinned < 0) paint(-1); });
  } else {
    $("gen-section").hidden = true;
  }

  /* ---- model view ---- */
  function drawMatrix(canvas, l, h, cell, margin) {
    var n = T, ctx = canvas.getContext("2d"), img = ctx.createImageData(n, n), i, j;
    for (i = 0; i < n; i++) for (j = 0; j < n; j++) {
      var v = j <= i ? w(l, h, i, j) : 0, c = shade(v), k = 4 * (i * n + j);
      img.data[k] = c[0]; img.data[k + 1] = c[1]; img.data[k + 2] = c[2]; img.data[k + 3] = 255;
    }
    if (cell === 1 && !margin) { ctx.putImageData(img, 0, 0); return; }
    var off = document.createElement("canvas");
    off.width = n; off.height = n; off.getContext("2d").putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, margin || 0, margin || 0, n * cell, n * cell);
  }
  var grid = $("grid"), thumb = Math.max(48, Math.min(120, Math.floor(1000 / H) - 10));
  grid.style.gridTemplateColumns = "max-content repeat(" + H + ", " + (thumb + 6) + "px)";
  grid.appendChild(el("div"));
  for (h = 0; h < H; h++) grid.appendChild(el("div", "rowlab", "head " + h));
  for (l = 0; l < L; l++) {
    grid.appendChild(el("div", "rowlab", "layer " + l));
    for (h = 0; h < H; h++) {
      var cellDiv = el("div", "cell"), cv = el("canvas");
      cellDiv.dataset.layer = l; cellDiv.dataset.head = h;
      cellDiv.title = "layer " + l + ", head " + h + " (click to open)";
      cv.width = T; cv.height = T; cv.style.width = thumb + "px"; cv.style.height = thumb + "px";
      drawMatrix(cv, l, h, 1, 0);
      cellDiv.appendChild(cv);
      cellDiv.addEventListener("click", openDetail.bind(null, l, h, true));
      grid.appendChild(cellDiv);
    }
  }

  /* ---- one head, large, axes labelled with the characters ---- */
  var det = { l: 0, h: 0 }, big = $("big"), zoom = $("zoom"), tip = $("tip"), M = 0;
  zoom.value = Math.max(7, Math.min(24, Math.floor(900 / T)));
  function drawDetail() {
    var cell = +zoom.value, lab = cell >= 7, n = T, ctx, i;
    M = lab ? 18 + Math.round(cell * 0.2) : 28;
    big.width = M + n * cell + 2; big.height = M + n * cell + 2;
    ctx = big.getContext("2d");
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, big.width, big.height);
    drawMatrix(big, det.l, det.h, cell, M);
    ctx.fillStyle = "#222"; ctx.textAlign = "center"; ctx.textBaseline = "middle";
    ctx.font = (lab ? Math.min(16, Math.round(cell * 0.8)) : 9) + "px monospace";
    for (i = 0; i < n; i++) {
      if (!lab && i % 10) continue;
      var t = lab ? shown(D.tokens[i]) : String(i), x = M + (i + 0.5) * cell;
      ctx.fillStyle = i >= P ? "#a33b00" : "#222";
      ctx.fillText(t, x, M / 2);
      ctx.fillText(t, M / 2, x);
    }
    $("detail-title").textContent = "Layer " + det.l + ", head " + det.h +
      ": row = query (attending), column = key (attended to); the page's colour scale (\u221aweight)";
  }
  function openDetail(l, h, scroll) {
    det.l = l; det.h = h; $("detail").hidden = false; drawDetail();
    if (scroll) $("detail").scrollIntoView({ block: "nearest" });
  }
  zoom.addEventListener("input", drawDetail);
  big.addEventListener("mousemove", function (e) {
    var r = big.getBoundingClientRect(), cell = +zoom.value;
    var j = Math.floor((e.clientX - r.left - M) / cell), i = Math.floor((e.clientY - r.top - M) / cell);
    if (i < 0 || j < 0 || i >= T || j >= T) { tip.textContent = ""; return; }
    tip.textContent = "query " + i + " " + JSON.stringify(D.tokens[i]) + " \u2192 key " + j + " " +
      JSON.stringify(D.tokens[j]) + ": " + (j <= i ? fmt(w(det.l, det.h, i, j)) : "0 (masked: a later character)");
  });
  $("close").addEventListener("click", function () { $("detail").hidden = true; });
  /* #layer=L, #query=N (pin a character), #detail=L,H (open a head): for links. */
  var mq = /query=(\d+)/.exec(location.hash), md = /detail=(\d+),(\d+)/.exec(location.hash);
  var ml = /layer=(\d+)/.exec(location.hash);
  if (ml && +ml[1] < L) { layerSel.value = ml[1]; repaint(); }
  if (mq && +mq[1] < T) {
    pinned = +mq[1]; toks[pinned].classList.add("pinned"); paint(pinned);
    seq.scrollTop = Math.max(0, toks[pinned].offsetTop - seq.clientHeight / 2);
  }
  if (md && +md[1] < L && +md[2] < H) openDetail(+md[1], +md[2]);
  document.body.dataset.ready = "1";
})();
