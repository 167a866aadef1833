#!/usr/bin/env bash
# `make install` works for a consumer: `make install PREFIX=DIR` puts
# everything under DIR (and DESTDIR=STAGE under STAGE/DIR); the installed
# library and attn link no CUDA and no MPI library; `pkg-config --cflags
# --libs attn` works with only the CPU core's .pc files in sight (no Open
# MPI, no CUDA development files) and names neither; a program built with
# only pkg-config (shared and static, umbrella header <attn/attn.h>) runs
# the module example of README.md (the book's MultiHeadAttention) and the
# GPT example of docs/library.md (sampling a checkpoint, the same text as
# `attn generate`), and opens the installed CUDA engine plug-in.
#   bash tests/install_consumer.sh ATTN SRCDIR
set -euo pipefail
attn=$1
src=$2
build=$(cd "$(dirname "$attn")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL $*"; exit 1; }
heavy='libcublas|libcudart|libcuda\.so|libmpi|libopen-rte|libopen-pal'

# make install without rebuilding (-o build: the suite's build folder as it is).
prefix=$tmp/prefix
make -s -C "$src" -o build install BUILD="$build" PREFIX="$prefix" > "$tmp/install.log" ||
  fail "make install PREFIX: $(cat "$tmp/install.log")"
pc=$(find "$prefix" -name attn.pc | head -1)
[ -n "$pc" ] || fail "no attn.pc under PREFIX $prefix"
libdir=$(cd "$(dirname "$pc")/.." && pwd)
want=(bin/attn include/attn/attn.h include/attn/cuda.h "${libdir#"$prefix"/}/libattn.a"
  "${libdir#"$prefix"/}/libattn.so" "${libdir#"$prefix"/}/libattn-ompwait.so")
for m in cuda mpi; do
  [ -e "$build/libattn-$m.so" ] && want+=("${libdir#"$prefix"/}/libattn-$m.so")
done
for f in "${want[@]}"; do [ -e "$prefix/$f" ] || fail "make install PREFIX=DIR: no DIR/$f"; done
echo "ok   make install PREFIX=DIR: ${want[*]}"
make -s -C "$src" -o build install BUILD="$build" PREFIX=/opt/attn-stage-test DESTDIR="$tmp/stage" \
  > "$tmp/stage.log" || fail "make install DESTDIR: $(cat "$tmp/stage.log")"
for f in "${want[@]}"; do
  [ -e "$tmp/stage/opt/attn-stage-test/$f" ] || fail "make install DESTDIR=S PREFIX=P: no S/P/$f"
done
[ ! -e /opt/attn-stage-test ] || fail "DESTDIR install wrote outside DESTDIR"
echo "ok   make install DESTDIR=S PREFIX=P: everything under S/P"

for f in "$prefix/bin/attn" "$libdir/libattn.so"; do
  ! ldd "$f" | grep -Eq "$heavy" || fail "ldd $f lists $(ldd "$f" | grep -Eo "$heavy[^ ]*" | tr '\n' ' ')"
done
echo "ok   ldd of the installed attn and libattn.so: no CUDA, no MPI library"

# pkg-config seeing only attn.pc (in place: it finds its prefix from there)
# and the .pc files of what the CPU core needs.
mkdir "$tmp/pc"
for dep in $(sed -n 's/^Requires.private: //p' "$pc"); do # libcjson libpcre2-8 libxxhash libzip openblas
  f=$(pkg-config --variable=pcfiledir "$dep")/$dep.pc
  ln -s "$(readlink -f "$f")" "$tmp/pc/$dep.pc"
done
export PKG_CONFIG_LIBDIR=$tmp/pc:$(dirname "$pc")
flags=$(pkg-config --cflags --libs attn) || fail "pkg-config --cflags --libs attn without MPI/CUDA .pc files"
static_flags=$(pkg-config --libs --static attn) || fail "pkg-config --libs --static attn"
if grep -Eiq 'mpi|cuda|cublas' <<<"$flags $static_flags"; then fail "attn.pc names MPI or CUDA: $flags $static_flags"; fi
echo "ok   pkg-config --cflags --libs attn: $flags"

cat > "$tmp/consumer.c" <<'C'
#include <attn/attn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The book's MultiHeadAttention (seed 000 In [39]: first row 0.3190 0.4858). */
static int mha(void) {
    attn_rng rng;
    attn_mha mha;
    attn_error err;
    attn_rng_seed(&rng, 123);
    if (attn_mha_init(&mha, 3, 2, 6, 0.0, 2, 0, &rng, &err) != ATTN_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
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

/* attn generate --checkpoint DIR --prompt P --max-new-tokens N --seed S. */
static int gpt(const char *dir, const char *prompt, int n, unsigned long long seed) {
    attn_gpt model;
    attn_tokenizer tok;
    attn_error err;
    if (attn_gpt_load_checkpoint(dir, &model, &tok, NULL, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    attn_generate_options o;
    attn_generate_options_default(&o);
    o.seed = seed;
    attn_generator g;
    int rc = attn_generator_init(&g, &model, &tok, &o, &err) ||
             attn_generator_prompt(&g, prompt, strlen(prompt), &err);
    if (!rc) {
        fputs(prompt, stdout);
        for (int i = 0; i < n && !g.stopped && !rc; i++) {
            char u8[8];
            int len;
            rc = attn_generator_next(&g, NULL, u8, &len, &err);
            if (!rc) fwrite(u8, 1, (size_t)len, stdout);
        }
        fputc('\n', stdout);
        attn_generator_free(&g);
    }
    if (rc) fprintf(stderr, "%s\n", err.msg);
    attn_gpt_free(&model);
    attn_tokenizer_free(&tok);
    return rc != 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "mha") == 0) return mha();
    if (argc == 6 && strcmp(argv[1], "gpt") == 0)
        return gpt(argv[2], argv[3], atoi(argv[4]), strtoull(argv[5], NULL, 10));
    if (argc == 2 && strcmp(argv[1], "cuda") == 0) { /* opens the CUDA engine plug-in */
        attn_error err;
        attn_status s = attn_cuda_check(&err);
        puts(s ? err.msg : "a CUDA device is ready");
        return 0;
    }
    return 2;
}
C
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror "$tmp/consumer.c" -o "$tmp/consumer_shared" $flags \
  -Wl,-rpath,"$(pkg-config --variable=libdir attn)"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror "$tmp/consumer.c" -o "$tmp/consumer_static" $(pkg-config --cflags attn) \
  "$(pkg-config --variable=libdir attn)/libattn.a" $(sed "s/-lattn//; s/-L[^ ]*//g" <<<"$static_flags")
echo "ok   consumers built with only pkg-config (shared, static)"

# The module example.
for v in shared static; do
  out=$("$tmp/consumer_$v" mha)
  [ "$out" = "0.3190 0.4858" ] || fail "$v consumer's MultiHeadAttention printed '$out'"
  echo "ok   $v consumer, the book's MultiHeadAttention: $out"
done

# The GPT example: a tiny checkpoint made by the installed attn, sampled by
# the consumers and by attn generate: the same text.
for i in $(seq 1 40); do echo "ROMEO: To be, or not to be, that is the question $((i % 7))."; done > "$tmp/c.txt"
cat > "$tmp/cfg.json" <<'JSON'
{"context_length": 32, "emb_dim": 32, "n_heads": 2, "n_layers": 2, "batch_size": 4,
 "max_steps": 30, "eval_interval": 30, "eval_iters": 1}
JSON
"$prefix/bin/attn" train --data "$tmp/c.txt" --config "$tmp/cfg.json" --threads 1 --out "$tmp/run" \
  > "$tmp/train.log" 2>&1 || fail "installed attn train: $(cat "$tmp/train.log")"
"$prefix/bin/attn" generate --checkpoint "$tmp/run" --prompt "ROMEO:" --max-new-tokens 60 --seed 7 \
  > "$tmp/attn.txt" 2> /dev/null || fail "installed attn generate"
for v in shared static; do
  "$tmp/consumer_$v" gpt "$tmp/run" "ROMEO:" 60 7 > "$tmp/$v.txt" || fail "$v consumer's GPT example"
  cmp -s "$tmp/attn.txt" "$tmp/$v.txt" ||
    fail "$v consumer sampled '$(cat "$tmp/$v.txt")', attn generate '$(cat "$tmp/attn.txt")'"
  echo "ok   $v consumer, the GPT example: the text attn generate prints ($(wc -c < "$tmp/$v.txt") bytes)"
done

# GPT-2's vocabulary is installed (md5 as scripts/get-data.sh checks it), and
# from a folder outside the source tree, with no ATTN_GPT2_DIR, the installed
# attn trains with it and reads GPT-2 files of other programs (Hugging Face,
# llm.c) with it (issue 47).
while IFS='|' read -r n file md5 url; do
  [ "$n" = gpt2 ] || continue
  f=$prefix/share/attn/$file
  [ "$(md5sum < "$f" 2> /dev/null | cut -d' ' -f1)" = "$md5" ] || fail "make install: no $f with md5 $md5"
done < <(sed -n '/^FILES="/,/^"/p' "$src/scripts/get-data.sh")
echo "ok   make install: GPT-2's vocabulary in PREFIX/share/attn/gpt2"
cat > "$tmp/gpt2.json" <<'JSON'
{"tokenizer": "gpt2", "context_length": 16, "emb_dim": 32, "n_heads": 2, "n_layers": 1,
 "qkv_bias": true, "tie_weights": true, "batch_size": 2, "max_steps": 2, "eval_interval": 2,
 "eval_iters": 1}
JSON
away() { (cd "$tmp" && env -u ATTN_GPT2_DIR "$@"); }
away "$prefix/bin/attn" train --data "$tmp/c.txt" --config "$tmp/gpt2.json" --threads 1   --out "$tmp/g2" > "$tmp/g2.log" 2>&1 || fail "installed attn train --tokenizer gpt2: $(cat "$tmp/g2.log")"
for fmt in hf llmc; do
  away "$prefix/bin/attn" export "$tmp/g2" "$tmp/g2.$fmt" --format $fmt > /dev/null 2> "$tmp/x.err" ||
    fail "export --format $fmt: $(cat "$tmp/x.err")"
  f=$tmp/g2.$fmt
  [ -d "$f" ] && f=$(find "$f" -name '*.safetensors' | head -1)
  away "$prefix/bin/attn" generate "$f" --prompt "ROMEO:" --max-new-tokens 4 --seed 1     > "$tmp/g.txt" 2> "$tmp/g.err" || fail "installed attn generate $fmt file: $(cat "$tmp/g.err")"
  echo "ok   from $tmp: attn generate on a $fmt file: $(head -c 60 "$tmp/g.txt" | tr '\n' ' ')"
done
pyenv=(env -u LD_LIBRARY_PATH -u ATTN_LIBRARY -u ATTN_GPT2_DIR
  PYTHONPATH="$(dirname "$(dirname "$(find "$prefix/lib" -path '*-packages/attn/__init__.py' | head -1)")")")
out=$(cd "$tmp" && "${pyenv[@]}" /usr/bin/python3 - "$tmp/g2.hf" "$tmp/g2.llmc" <<'PY'
import glob, os, sys
import attn, attn.tokenizer
enc = attn.tokenizer.get_encoding("gpt2")
assert enc.encode("Hello, world") == [15496, 11, 995]
for f in sys.argv[1:]:
    if os.path.isdir(f):
        f = glob.glob(os.path.join(f, "*.safetensors"))[0]
    with attn.GPT.load(f) as g:
        assert g.config["vocab_size"] == 50257
print(attn.tokenizer.gpt2_dir())
PY
) || fail "python from $tmp: get_encoding / GPT.load of hf and llmc files: $out"
[ "$(realpath "$out")" = "$(realpath "$prefix/share/attn/gpt2")" ] ||
  fail "python found the vocabulary in $out, not the installed copy"
echo "ok   python from $tmp: get_encoding(\"gpt2\") and GPT.load of hf and llmc files ($out)"

# The installed CUDA engine plug-in: found beside libattn.so and opened (on
# a machine without a GPU it then says so).
if [ -e "$build/libattn-cuda.so" ]; then
  out=$("$tmp/consumer_shared" cuda)
  case $out in
    "a CUDA device is ready" | "no CUDA device: "* | "no CUDA driver "*", so no CUDA device: "*)
      echo "ok   shared consumer opened $libdir/libattn-cuda.so: $out" ;;
    *) fail "shared consumer, CUDA engine: $out" ;;
  esac
  "$prefix/bin/attn" generate --checkpoint "$tmp/run" --device cuda --max-new-tokens 5 \
    > /dev/null 2> "$tmp/cuda.err" || true
  ! grep -q -e "was not found" -e "cannot open" "$tmp/cuda.err" ||
    fail "installed attn --device cuda: $(cat "$tmp/cuda.err")"
  echo "ok   installed attn --device cuda opened the plug-in: $(head -c 120 "$tmp/cuda.err")"
fi

# The Python package (issue 19), for /usr/bin/python3: it finds the installed
# library (not the build tree's) without LD_LIBRARY_PATH.
site=$(find "$prefix/lib" -path '*-packages/attn/__init__.py' | head -1)
[ -n "$site" ] || fail "the Python package is not installed"
py=$(cd "$tmp" && env -u LD_LIBRARY_PATH -u ATTN_LIBRARY PYTHONPATH="$(dirname "$(dirname "$site")")" \
  /usr/bin/python3 -c 'import attn, os; print(os.path.realpath(attn.library), attn.__version__)')
want="$(realpath "$libdir/libattn.so.0") $("$prefix/bin/attn" --version | cut -d' ' -f2)"
[ "$py" = "$want" ] || fail "python: '$py', want '$want'"
echo "ok   python package: $py"
echo "all install checks passed"
