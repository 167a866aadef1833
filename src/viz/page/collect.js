window.addEventListener("error", function (e) {
  var p = document.getElementById("attn-errors"), m = "error: " + (e.message || String(e)) + "\n";
  if (p) p.textContent += m; else (window.attnErrors = window.attnErrors || []).push(m);
});
