/* llm.c's GPT-2 .bin (attn/weights_format.h): a 256 int32 header, then the
 * fp32 parameters in its order (wf_layout_llmc). Little-endian, as llm.c
 * writes it on the machines it runs on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "weights_plan.h"

#define HEADER_INTS 256
#define HEADER_BYTES (HEADER_INTS * 4)

static int32_t le32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* Parameter floats of a header's model (a double: a lying header may ask
 * for more than size_t holds). */
static double llmc_floats(double T, double L, double C, double Vp) {
    return Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
}

/* The header: magic, version, sizes that make sense and add up to the file's
 * size. */
static attn_status read_header(const unsigned char *b, size_t got, uint64_t size, const char *path,
                               attn_gpt_config *cfg, int *heads, int64_t *Vp, attn_error *err) {
    if (got < 8 || le32(b) != ATTN_LLMC_MAGIC)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: not an llm.c model file (magic %d expected)",
                         path, ATTN_LLMC_MAGIC);
    if (le32(b + 4) != ATTN_LLMC_VERSION)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: llm.c file version %d; attn reads version %d (fp32 parameters)", path,
                         le32(b + 4), ATTN_LLMC_VERSION);
    if (got < HEADER_BYTES)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: truncated llm.c header (%zu of %d bytes)", path,
                         got, HEADER_BYTES);
    int32_t h[8];
    for (int i = 0; i < 8; i++)
        h[i] = le32(b + 4 * i);
    if (h[2] < 1 || h[3] < 1 || h[4] < 1 || h[5] < 1 || h[6] < 1 || h[7] < h[3])
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: llm.c header sizes max_seq_len %d, vocab_size %d, num_layers %d, "
                         "num_heads %d, channels %d, padded_vocab_size %d are not a model",
                         path, h[2], h[3], h[4], h[5], h[6], h[7]);
    const double want = HEADER_BYTES + 4 * llmc_floats(h[2], h[4], h[6], h[7]);
    if ((double)size != want)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: %s: the header's model needs %.0f bytes, the file has %llu", path,
                         (double)size < want ? "truncated" : "trailing bytes", want,
                         (unsigned long long)size);
    cfg->context_length = h[2];
    cfg->vocab_size = h[3];
    cfg->n_layers = h[4];
    cfg->emb_dim = h[6];
    *heads = h[5];
    *Vp = h[7];
    return ATTN_OK;
}

/* Point the layout's tensors, in order, into the body. */
static attn_status place(wf_layout *l, const unsigned char *body, size_t n, const char *path,
                         attn_error *err) {
    size_t off = 0;
    for (int i = 0; i < l->nt; i++) {
        l->t[i].src = body + off;
        l->t[i].dtype = WF_F32;
        off += 4 * l->t[i].numel;
    }
    if (off != n) return attn_fail(err, ATTN_ERR_STATE, "%s: layout is %zu bytes", path, off);
    return ATTN_OK;
}

static attn_status read_body(attn_file_in *in, const char *path, size_t n, unsigned char **body,
                             attn_error *err) {
    size_t got = 0;
    if (!(*body = malloc(n ? n : 1)))
        return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory for %zu bytes", path, n);
    attn_status s = attn_file_in_read(in, path, *body, n, &got, err);
    if (!s && got != n)
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: truncated (changed while read)", path);
    return s;
}

attn_status wf_import_llmc(const char *path, const attn_gpt_config *hint, double budget,
                           attn_gpt *m, attn_error *err) {
    attn_file_in in;
    unsigned char hdr[HEADER_BYTES], *body = NULL;
    size_t got = 0;
    attn_gpt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int heads = 0;
    int64_t Vp = 0;
    wf_layout l;
    wf_layout_init(&l);
    attn_status s = attn_file_in_open(&in, path, err);
    if (s) return s;
    if (!in.regular) s = attn_fail(err, ATTN_ERR_IO, "%s: not a regular file", path);
    if (!s) s = attn_file_in_read(&in, path, hdr, sizeof hdr, &got, err);
    if (!s) s = read_header(hdr, got, in.size, path, &cfg, &heads, &Vp, err);
    cfg.qkv_bias = 1; /* llm.c's GPT-2 always has both */
    cfg.tie_weights = 1;
    cfg.drop_rate = hint ? hint->drop_rate : 0;
    if (!s) s = wf_set_heads(&cfg, heads, "its header", hint, path, err);
    if (!s) s = wf_check_config(&cfg, (double)in.size, budget, path, err);
    const size_t n = s ? 0 : (size_t)(in.size - HEADER_BYTES);
    if (!s) s = read_body(&in, path, n, &body, err);
    if (!s) s = wf_layout_llmc(&l, &cfg, Vp, err);
    if (!s) s = place(&l, body, n, path, err);
    if (!s) s = wf_build(m, &cfg, &l, path, err);
    wf_layout_free(&l);
    free(body);
    attn_file_in_close(&in);
    return s;
}

attn_status wf_export_llmc(const attn_gpt *m, const char *path, attn_error *err) {
    const attn_gpt_config *c = &m->cfg;
    const int32_t Vp = (c->vocab_size + 127) / 128 * 128; /* llm.c pads to 128 */
    int32_t h[HEADER_INTS] = {ATTN_LLMC_MAGIC, ATTN_LLMC_VERSION, c->context_length, c->vocab_size,
                              c->n_layers,     c->n_heads,        c->emb_dim,        Vp};
    wf_layout l;
    wf_layout_init(&l);
    attn_status s = wf_layout_llmc(&l, c, Vp, err);
    if (!s) s = wf_scatter(&l, m, err);
    attn_atomic_file f;
    if (!s) s = attn_atomic_open(&f, path, err);
    if (!s) s = attn_atomic_write(&f, h, sizeof h, err);
    for (int i = 0; i < l.nt && !s; i++)
        s = attn_atomic_write(&f, l.t[i].buf, l.t[i].numel * sizeof(float), err);
    if (!s) s = attn_atomic_commit(&f, err);
    wf_layout_free(&l);
    return s;
}
