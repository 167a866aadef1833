/* PyTorch-compatible CPU generator: MT19937 plus PyTorch's rules for turning
 * draws into floats (see attn/rng.h for the rules themselves). */
#include "attn/rng.h"

#include <math.h>
#include <string.h>

#include "vec_clones.h"

#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfU
#define MT_UPPER 0x80000000U
#define MT_LOWER 0x7fffffffU

void attn_rng_seed(attn_rng *rng, uint64_t seed) {
    memset(rng, 0, sizeof *rng);
    rng->seed = seed;
    rng->mt[0] = (uint32_t)(seed & 0xffffffffU);
    for (uint32_t i = 1; i < ATTN_MT_N; i++)
        rng->mt[i] = 1812433253U * (rng->mt[i - 1] ^ (rng->mt[i - 1] >> 30)) + i;
    rng->index = ATTN_MT_N;
}

/* The twist in three runs so that each loop has a fixed dependence distance
 * (>= 227) and vectorises: the words from 227 on mix in words already
 * twisted in this pass, as the one-at-a-time recurrence does. */
static inline uint32_t twist(uint32_t a, uint32_t b, uint32_t m) {
    const uint32_t y = (a & MT_UPPER) | (b & MT_LOWER);
    return m ^ (y >> 1) ^ (-(y & 1U) & MT_MATRIX_A);
}

ATTN_VEC_PROC(mt_refill, (attn_rng * rng), (rng), {
    uint32_t *mt = rng->mt;
    enum { N = ATTN_MT_N, K = ATTN_MT_N - MT_M };
    for (int i = 0; i < K; i++)
        mt[i] = twist(mt[i], mt[i + 1], mt[i + MT_M]);
    for (int i = K; i < N - 1; i++)
        mt[i] = twist(mt[i], mt[i + 1], mt[i - K]);
    mt[N - 1] = twist(mt[N - 1], mt[0], mt[MT_M - 1]);
    rng->index = 0;
})

static inline uint32_t temper(uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    return y ^ (y >> 18);
}

uint32_t attn_rng_u32(attn_rng *rng) {
    if (rng->index >= ATTN_MT_N) mt_refill(rng);
    return temper(rng->mt[rng->index++]);
}

ATTN_VEC_PROC(temper_run, (const uint32_t *mt, uint32_t *out, size_t k), (mt, out, k), {
    for (size_t i = 0; i < k; i++)
        out[i] = temper(mt[i]);
})

void attn_rng_fill_u32(attn_rng *rng, uint32_t *out, size_t n) {
    while (n > 0) {
        if (rng->index >= ATTN_MT_N) mt_refill(rng);
        size_t k = ATTN_MT_N - rng->index;
        if (k > n) k = n;
        temper_run(rng->mt + rng->index, out, k);
        rng->index += (uint32_t)k;
        out += k;
        n -= k;
    }
}

void attn_rng_skip(attn_rng *rng, uint64_t n) {
    while (n > 0) {
        if (rng->index >= ATTN_MT_N) mt_refill(rng);
        const uint64_t k = ATTN_MT_N - rng->index;
        if (k > n) {
            rng->index += (uint32_t)n;
            return;
        }
        rng->index = ATTN_MT_N;
        n -= k;
    }
}

int64_t attn_rng_int64(attn_rng *rng) {
    return (int64_t)(attn_rng_u64(rng) & ((UINT64_C(1) << 63) - 1));
}

void attn_randperm(uint64_t seed, size_t *perm, size_t n) {
    attn_rng g;
    attn_rng_seed(&g, seed);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = 0; i + 1 < n; i++) {
        const size_t z = attn_rng_u32(&g) % (n - i);
        const size_t t = perm[i];
        perm[i] = perm[i + z];
        perm[i + z] = t;
    }
}

/* (d & (2^53 - 1)) * 2^-53 < keep exactly when d & (2^53 - 1) < ceil(keep *
 * 2^53): the scaling by 2^53 is exact, so one integer compare per element. */
static uint64_t keep_threshold(double keep) {
    if (!(keep > 0.0)) return 0;
    if (keep >= 1.0) return UINT64_C(1) << 53;
    return (uint64_t)ceil(keep * 0x1.0p53);
}

/* Draws of n 64-bit values in chunks of CHUNK: 2 * CHUNK words at a time. */
#define KEEP_CHUNK 256

/* out[j] = draw j (words 2j, 2j + 1) < thr, for j < m. */
ATTN_VEC_PROC(keep_bytes, (const uint32_t *w, size_t m, uint64_t thr, uint8_t *out),
              (w, m, thr, out), {
                  for (size_t j = 0; j < m; j++) {
                      const uint64_t d = ((uint64_t)(w[2 * j] & 0x1FFFFFU) << 32) | w[2 * j + 1];
                      out[j] = d < thr;
                  }
              })

void attn_rng_keep_mask(attn_rng *rng, double keep, uint8_t *out, size_t n, int packed) {
    const uint64_t thr = keep_threshold(keep);
    uint32_t w[2 * KEEP_CHUNK];
    uint8_t bytes[KEEP_CHUNK];
    for (size_t k0 = 0; k0 < n; k0 += KEEP_CHUNK) {
        const size_t m = n - k0 < KEEP_CHUNK ? n - k0 : KEEP_CHUNK;
        attn_rng_fill_u32(rng, w, 2 * m);
        if (!packed) {
            keep_bytes(w, m, thr, out + k0);
            continue;
        }
        /* k0 is a multiple of 8: whole bytes, the last one possibly partial
         * (its bits past m zero). Eight 0/1 bytes to one byte: the multiply
         * moves byte b's bit to bit 56 + b, and no two partial products
         * share a bit, so nothing carries. */
        keep_bytes(w, m, thr, bytes);
        memset(bytes + m, 0, (8 - m % 8) % 8);
        for (size_t j = 0; j < m; j += 8) {
            uint64_t x;
            memcpy(&x, bytes + j, sizeof x);
            out[(k0 + j) >> 3] = (uint8_t)((x * UINT64_C(0x0102040810204080)) >> 56);
        }
    }
}

uint64_t attn_rng_u64(attn_rng *rng) {
    uint64_t hi = attn_rng_u32(rng);
    uint64_t lo = attn_rng_u32(rng);
    return (hi << 32) | lo;
}

/* PyTorch's uniform_real_distribution<float>: 24 random bits. */
static inline float uniform_float(attn_rng *rng) {
    return (float)(attn_rng_u32(rng) & 0xFFFFFFU) * 0x1.0p-24f;
}

/* PyTorch's uniform_real_distribution<double>: 53 random bits of random64. */
static inline double uniform_double(attn_rng *rng) {
    return (double)(attn_rng_u64(rng) & ((UINT64_C(1) << 53) - 1)) * 0x1.0p-53;
}

void attn_rng_rand(attn_rng *rng, float *out, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = uniform_float(rng);
}

/* PyTorch scales in double (its CPU accumulate type for float), rounds once. */
void attn_rng_uniform(attn_rng *rng, float *out, size_t n, float lo, float hi) {
    const double range = (double)(hi - lo);
    for (size_t i = 0; i < n; i++)
        out[i] = (float)((double)(attn_rng_u32(rng) & 0xFFFFFFU) * 0x1.0p-24 * range + (double)lo);
}

void attn_rng_kaiming_uniform(attn_rng *rng, float *out, size_t n, int fan_in) {
    const double a = sqrt(5.0), gain = sqrt(2.0 / (1.0 + a * a));
    const double bound = sqrt(3.0) * (gain / sqrt((double)fan_in));
    attn_rng_uniform(rng, out, n, (float)-bound, (float)bound);
}

/* PyTorch's normal_fill_16: Box–Muller on pairs (j, j + 8) of 16 uniforms. */
static void normal_fill_16(float *data, float mean, float std) {
    const double two_pi = 6.283185307179586476925286766559;
    for (int j = 0; j < 8; j++) {
        const float u1 = 1.0f - data[j]; /* (0, 1] so log is finite */
        const float u2 = data[j + 8];
        const float radius = sqrtf(-2.0f * logf(u1));
        const float theta = (float)(two_pi * (double)u2);
        data[j] = radius * cosf(theta) * std + mean;
        data[j + 8] = radius * sinf(theta) * std + mean;
    }
}

/* PyTorch's scalar normal_distribution<double> (used for n < 16). */
static double normal_double(attn_rng *rng, double mean, double std) {
    if (rng->has_next_double_normal) {
        rng->has_next_double_normal = 0;
        return rng->next_double_normal * std + mean;
    }
    const double u1 = uniform_double(rng);
    const double u2 = uniform_double(rng);
    const double r = sqrt(-2.0 * log1p(-u2));
    const double theta = 2.0 * 3.14159265358979323846 * u1;
    rng->has_next_double_normal = 1;
    rng->next_double_normal = r * sin(theta);
    return r * cos(theta) * std + mean;
}

void attn_rng_normal(attn_rng *rng, float *out, size_t n, float mean, float std) {
    if (n < 16) {
        for (size_t i = 0; i < n; i++)
            out[i] = (float)normal_double(rng, mean, std);
        return;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = uniform_float(rng);
    for (size_t i = 0; i + 16 <= n; i += 16)
        normal_fill_16(out + i, mean, std);
    if (n % 16 != 0) {
        float *tail = out + n - 16; /* PyTorch redraws the last 16 values */
        for (int i = 0; i < 16; i++)
            tail[i] = uniform_float(rng);
        normal_fill_16(tail, mean, std);
    }
}

int attn_dropout_stream_parse(const char *name, attn_dropout_stream *out) {
    if (!name) return -1;
    if (strcmp(name, "torch-cpu") == 0) {
        *out = ATTN_STREAM_TORCH_CPU;
        return 0;
    }
    if (strcmp(name, "torch-mkl") == 0) {
        *out = ATTN_STREAM_TORCH_MKL;
        return 0;
    }
    return -1;
}

const char *attn_dropout_stream_name(attn_dropout_stream s) {
    return s == ATTN_STREAM_TORCH_MKL ? "torch-mkl"
           : s == ATTN_STREAM_GIVEN   ? "given"
                                      : "torch-cpu";
}

/* mt19937 (ATen) counts `left` down to a refill at 1 and reads word `next`:
 * after a refill left = 624, next = 0, and each draw decrements left after
 * testing it, so word i is next while left = 625 - i; left == 1 means the
 * next draw refills first (attn: index 624). */
enum { TS_SEED = 0, TS_LEFT = 8, TS_NEXT = 16, TS_WORDS = 24 };

int attn_rng_from_torch_state(attn_rng *rng, const uint8_t *state, size_t len) {
    if (!rng || !state || len != ATTN_TORCH_RNG_STATE_BYTES) return -1;
    int32_t left;
    uint64_t next, seed, w;
    memcpy(&seed, state + TS_SEED, sizeof seed);
    memcpy(&left, state + TS_LEFT, sizeof left);
    memcpy(&next, state + TS_NEXT, sizeof next);
    if (left < 1 || left > ATTN_MT_N || (left > 1 && next != (uint64_t)(ATTN_MT_N + 1 - left)))
        return -1;
    attn_rng r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < ATTN_MT_N; i++) {
        memcpy(&w, state + TS_WORDS + 8 * (size_t)i, sizeof w);
        if (w > 0xffffffffU) return -1;
        r.mt[i] = (uint32_t)w;
    }
    r.seed = seed;
    r.index = left == 1 ? ATTN_MT_N : (uint32_t)next;
    *rng = r;
    return 0;
}

int attn_rng_to_torch_state(const attn_rng *rng, uint8_t *state, size_t len) {
    if (!rng || !state || len != ATTN_TORCH_RNG_STATE_BYTES) return -1;
    const int32_t left = rng->index >= ATTN_MT_N ? 1 : (int32_t)(ATTN_MT_N + 1 - rng->index);
    const uint64_t next = rng->index >= ATTN_MT_N ? ATTN_MT_N : rng->index;
    memcpy(state + TS_LEFT, &left, sizeof left);
    memcpy(state + TS_NEXT, &next, sizeof next);
    for (int i = 0; i < ATTN_MT_N; i++) {
        const uint64_t w = rng->mt[i];
        memcpy(state + TS_WORDS + 8 * (size_t)i, &w, sizeof w);
    }
    return 0;
}
