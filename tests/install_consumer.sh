#!/usr/bin/env bash
# `make install` works for a consumer: install into a temporary prefix, then
# build and run a small program against it with pkg-config (static and
# shared), using the umbrella header <attn/attn.h>.
#   bash tests/install_consumer.sh ATTN SRCDIR
set -euo pipefail
attn=$1
build=$(dirname "$attn")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc=$(find "$tmp/prefix" -name attn.pc | head -1)
[ -n "$pc" ] || { echo "FAIL no attn.pc installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
cat > "$tmp/consumer.c" <<'C'
#include <attn/attn.h>
#include <stdio.h>
int main(void) {
    attn_rng rng;
    attn_mha mha;
    attn_error err;
    attn_rng_seed(&rng, 123);
    if (attn_mha_init(&mha, 3, 2, 6, 0.0, 2, 0, &rng, &err) != ATTN_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    /* seed 000 In [39]: the book's MultiHeadAttention, first row 0.3190 0.4858 */
    const float x[6 * 3] = {0.43f, 0.15f, 0.89f, 0.55f, 0.87f, 0.66f, 0.57f, 0.85f, 0.64f,
                            0.22f, 0.58f, 0.33f, 0.77f, 0.25f, 0.10f, 0.05f, 0.80f, 0.55f};
    float y[6 * 2];
    attn_attention_cache cache;
    if (attn_attention_cache_init(&cache, 1, 6, 2, 2, &err) != ATTN_OK) return 1;
    attn_forward_mode mode = {0, NULL, ATTN_STREAM_TORCH_CPU};
    if (attn_mha_forward(&mha, x, 1, 6, y, &mode, &cache, &err) != ATTN_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("%.4f %.4f\n", (double)y[0], (double)y[1]);
    attn_attention_cache_free(&cache);
    attn_mha_free(&mha);
    return 0;
}
C
cc -std=c11 -Wall -Werror "$tmp/consumer.c" -o "$tmp/consumer_shared" $(pkg-config --cflags --libs attn) \
  -Wl,-rpath,"$(pkg-config --variable=libdir attn)"
cc -std=c11 -Wall -Werror "$tmp/consumer.c" -o "$tmp/consumer_static" $(pkg-config --cflags attn) \
  "$(pkg-config --variable=libdir attn)/libattn.a" $(pkg-config --libs --static attn | sed "s/-lattn//; s/-L[^ ]*//g")
for v in shared static; do
  out=$("$tmp/consumer_$v")
  if [ "$out" != "0.3190 0.4858" ]; then echo "FAIL $v consumer printed '$out'"; exit 1; fi
  echo "ok   $v consumer: $out"
done
test -x "$tmp/prefix/bin/attn" || { echo "FAIL attn not installed"; exit 1; }
# The Python package (issue 19), for /usr/bin/python3: it finds the installed
# library (not the build tree's) without LD_LIBRARY_PATH.
site=$(find "$tmp/prefix/lib" -path '*-packages/attn/__init__.py' | head -1)
[ -n "$site" ] || { echo "FAIL the Python package is not installed"; exit 1; }
py=$(cd "$tmp" && env -u LD_LIBRARY_PATH -u ATTN_LIBRARY PYTHONPATH="$(dirname "$(dirname "$site")")" \
  /usr/bin/python3 -c 'import attn, os; print(os.path.realpath(attn.library), attn.__version__)')
want="$(realpath "$tmp/prefix/lib/libattn.so.0") $("$tmp/prefix/bin/attn" --version | cut -d' ' -f2)"
[ "$py" = "$want" ] || { echo "FAIL python: '$py', want '$want'"; exit 1; }
echo "ok   python package: $py"
echo "2 passed, 0 failed"
