/* The memory-bandwidth measurement (see attn/membw.h). The AVX-512 and
 * AVX2 reads are compiled for them by the pragmas whatever the build flags,
 * and only called after attn_cpu_has / attn_simd_supported said yes. */
#define _DEFAULT_SOURCE /* sysconf's cache sizes */
#include "attn/membw.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/cpu.h"
#include "base/alloc_huge.h"
#include "base/clock.h"

#define PREFETCH_BYTES 1024

#if defined(__x86_64__) && defined(__GNUC__)
/* Before the pragma: included under it, the intrinsics would all require
 * AVX-512 and read_avx2 could not use them. */
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx512f")
/* n floats from p (64-byte aligned, n a multiple of 64). */
static float read_avx512(const float *p, size_t n, size_t ahead) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        const char *c = (const char *)(p + i) + ahead;
        if (ahead)
            for (int k = 0; k < 4; k++)
                _mm_prefetch(c + 64 * k, _MM_HINT_T0);
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

#pragma GCC pop_options

/* The same on AVX2 (an AVX2 CPU's widest loads; the portable loop's narrower
 * ones may not reach the bandwidth on one core). */
__attribute__((target("avx2"))) static float read_avx2(const float *p, size_t n, size_t ahead) {
    __m256 a[8];
    for (int k = 0; k < 8; k++)
        a[k] = _mm256_setzero_ps();
    for (size_t i = 0; i + 64 <= n; i += 64) {
        const char *c = (const char *)(p + i) + ahead;
        if (ahead)
            for (int k = 0; k < 4; k++)
                _mm_prefetch(c + 64 * k, _MM_HINT_T0);
        for (int k = 0; k < 8; k++)
            a[k] = _mm256_add_ps(a[k], _mm256_load_ps(p + i + 8 * k));
    }
    for (int k = 1; k < 8; k++)
        a[0] = _mm256_add_ps(a[0], a[k]);
    float l[8], s = 0.0f;
    _mm256_storeu_ps(l, a[0]);
    for (int k = 0; k < 8; k++)
        s += l[k];
    return s;
}
#define HAVE_AVX512_READ 1
#endif

static float read_plain(const float *p, size_t n) {
    float a[16] = {0};
    for (size_t i = 0; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            a[l] += p[i + l];
    float s = 0.0f;
    for (int l = 0; l < 16; l++)
        s += a[l];
    return s;
}

/* Odd passes prefetch 1 KiB ahead, even ones leave it to the hardware: the
 * best of either (which wins changes with the load). */
static float read_range(const float *p, size_t n, int prefetch) {
#ifdef HAVE_AVX512_READ
    if (attn_cpu_has(ATTN_CPU_AVX512_BW)) return read_avx512(p, n, prefetch ? PREFETCH_BYTES : 0);
    if (attn_simd_supported(ATTN_SIMD_AVX2)) return read_avx2(p, n, prefetch ? PREFETCH_BYTES : 0);
#endif
    (void)prefetch;
    return read_plain(p, n);
}

/* One pass of nt threads over n floats; its seconds. */
static double pass(const float *p, size_t n, int nt, int prefetch, volatile float *sink) {
    const size_t chunk = n / (size_t)nt / 64 * 64;
    float sum = 0.0f;
    const double t0 = attn_now_s();
#pragma omp parallel for num_threads(nt) schedule(static, 1) reduction(+ : sum)
    for (int t = 0; t < nt; t++)
        sum += read_range(p + (size_t)t * chunk, chunk, prefetch);
    const double dt = attn_now_s() - t0;
    *sink += sum;
    return dt;
}

static size_t default_bytes(void) {
    size_t bytes = (size_t)256 << 20;
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    /* Some VMs report the host's whole L3 (here 508 MiB): at most 2 GiB. */
    if (l3 > 0 && (size_t)l3 <= ((size_t)1 << 30) && 2 * (size_t)l3 > bytes) bytes = 2 * (size_t)l3;
#endif
    return bytes;
}

attn_status attn_membw_read(int threads, size_t bytes, int passes, double *bytes_per_s,
                            attn_error *err) {
    const int nt = threads > 0 ? threads : attn_default_threads();
    if (threads < 0 || passes < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "membw: threads %d and passes %d must be >= 0",
                         threads, passes);
    if (!bytes) bytes = default_bytes();
    const size_t n = bytes / sizeof(float) / 64 * 64;
    if (n < (size_t)nt * 64)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "membw: %zu bytes are too few for %d threads",
                         bytes, nt);
    float *p = attn_calloc_streamed(n, sizeof(float));
    if (!p) return attn_fail(err, ATTN_ERR_NOMEM, "membw: out of memory for %zu bytes", bytes);
    /* Written first: calloc's pages would all read as the one zero page. */
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(i & 7);
    volatile float sink = 0.0f;
    pass(p, n, nt, 0, &sink); /* untimed: faults, frequency */
    double best = 1e300;
    for (int r = 0; r < (passes ? passes : 10); r++) {
        const double dt = pass(p, n, nt, r & 1, &sink);
        if (dt < best) best = dt;
    }
    free(p);
    const size_t chunk = n / (size_t)nt / 64 * 64;
    *bytes_per_s = best > 0 ? (double)(chunk * (size_t)nt * sizeof(float)) / best : 0.0;
    return ATTN_OK;
}
