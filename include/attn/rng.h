/* attn/rng.h — a random generator that reproduces PyTorch's CPU generator.
 *
 * Same seed, same numbers as torch.manual_seed(seed) followed by the same
 * sequence of torch calls (verified against Debian's PyTorch 1.13.1):
 *   - the engine is MT19937 seeded with the classic init_genrand(seed);
 *   - torch.rand / Tensor.uniform_(a, b) on float32: one 32-bit draw per
 *     element, (draw & 0xFFFFFF) * 2^-24, then * (b - a) + a;
 *   - dropout masks come from one of two streams, because PyTorch builds with
 *     and without MKL draw Bernoulli masks differently (attn_dropout_stream).
 *
 * The struct is plain data: copy it to snapshot, write it to a file to
 * checkpoint (see attn_rng_state_bytes). */
#ifndef ATTN_RNG_H
#define ATTN_RNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_MT_N 624

typedef struct attn_rng {
    uint32_t mt[ATTN_MT_N];
    uint32_t index; /* next word of mt to temper; ATTN_MT_N = refill */
    uint64_t seed;  /* the seed given to attn_rng_seed               */
    /* Box–Muller spare, as PyTorch's generator keeps one for scalar normals. */
    int has_next_double_normal;
    double next_double_normal;
} attn_rng;

/* Which Bernoulli stream dropout draws its masks from. */
typedef enum attn_dropout_stream {
    /* Non-MKL PyTorch builds (Debian's python3-torch): per element one 53-bit
     * double from two draws ((uint64)d1 << 32 | d2) & (2^53-1), * 2^-53;
     * keep when < 1-p. */
    ATTN_STREAM_TORCH_CPU = 0,
    /* MKL builds on Intel CPUs (the book's printed tables): one 32-bit draw s
     * seeds an MCG31 (x0 = s mod (2^31-1), 0 -> 1, a = 1132489760); element i
     * is kept when x_i / (2^31-1) < 1-p, x_{i+1} = a*x_i mod (2^31-1). */
    ATTN_STREAM_TORCH_MKL = 1,
    /* Not drawn: the masks come from the caller (attn_dropout_given in
     * attn/dropout.h), e.g. drawn by PyTorch itself. Never parsed from a
     * name, never recorded in a checkpoint. */
    ATTN_STREAM_GIVEN = 2
} attn_dropout_stream;

/* torch.manual_seed(seed). Seeds above 2^32-1 use their low 32 bits, as
 * PyTorch's mt19937 does. */
void attn_rng_seed(attn_rng *rng, uint64_t seed);

/* One raw 32-bit draw (PyTorch: generator->random()). */
uint32_t attn_rng_u32(attn_rng *rng);

/* Two draws combined as (uint64)first << 32 | second (generator->random64()). */
uint64_t attn_rng_u64(attn_rng *rng);

/* n raw draws, as n calls of attn_rng_u32 (vectorised). */
void attn_rng_fill_u32(attn_rng *rng, uint32_t *out, size_t n);

/* The torch-cpu dropout stream's test for n elements, as n calls of
 * attn_rng_u64: element k is kept when (draw & (2^53 - 1)) * 2^-53 < keep.
 * packed == 0: out[k] = 1 or 0; packed != 0: bit k & 7 of out[k >> 3] (LSB
 * first; the bytes are overwritten, the last one padded with zeros). */
void attn_rng_keep_mask(attn_rng *rng, double keep, uint8_t *out, size_t n, int packed);

/* n draws skipped, as n calls of attn_rng_u32 whose results are dropped
 * (whole refills are not tempered: fast enough to replay a long run). */
void attn_rng_skip(attn_rng *rng, uint64_t n);

/* torch.empty((), dtype=torch.int64).random_(): two draws w0, w1 ->
 * ((uint64)w0 << 32 | w1) mod 2^63. A DataLoader iterator's base seed and a
 * RandomSampler's seed are drawn so. */
int64_t attn_rng_int64(attn_rng *rng);

/* torch.randperm(n, generator=g) with g = torch.Generator().manual_seed(seed)
 * (its low 32 bits), on the CPU: perm = 0..n-1, then for i in 0..n-2 swap
 * perm[i] and perm[i + z], z = the next draw mod (n - i). A RandomSampler's
 * order of dataset indices. */
void attn_randperm(uint64_t seed, size_t *perm, size_t n);

/* torch.rand(n): n float32 values in [0, 1), row-major order. */
void attn_rng_rand(attn_rng *rng, float *out, size_t n);

/* Tensor.uniform_(lo, hi) on a float32 tensor of n elements. */
void attn_rng_uniform(attn_rng *rng, float *out, size_t n, float lo, float hi);

/* torch.nn.init.kaiming_uniform_(t, a=sqrt(5)) on a float32 tensor of n
 * elements whose fan_in is fan_in (a 2-D tensor's dim 1):
 * U(-bound, bound), bound = sqrt(3) gain / sqrt(fan_in), gain =
 * sqrt(2 / (1 + a^2)), computed in double as torch.nn.init does (nn.Linear's
 * weight, a LoRA adapter's A). */
void attn_rng_kaiming_uniform(attn_rng *rng, float *out, size_t n, int fan_in);

/* Tensor.normal_(mean, std) on a contiguous float32 tensor of n elements,
 * reproducing PyTorch's CPU kernel (batched Box–Muller over 16 values when
 * n >= 16, scalar path otherwise). */
void attn_rng_normal(attn_rng *rng, float *out, size_t n, float mean, float std);

/* PyTorch's CPU generator state as torch.get_rng_state() gives it and
 * torch.set_rng_state() takes it (PyTorch 1.13's CPUGeneratorImplState,
 * little-endian): the seed (u64 at 0), mt19937's left (i32 at 8) and next
 * (u64 at 16) and its 624 words (u64 each from 24); the normal-sample
 * caches after them are neither read nor written. */
#define ATTN_TORCH_RNG_STATE_BYTES 5056

/* rng from such a state; -1 if len is not ATTN_TORCH_RNG_STATE_BYTES or the
 * position or a word is out of range (rng unchanged). */
int attn_rng_from_torch_state(attn_rng *rng, const uint8_t *state, size_t len);
/* rng's engine (words and position) written into such a state, its other
 * bytes kept; -1 if len is wrong. */
int attn_rng_to_torch_state(const attn_rng *rng, uint8_t *state, size_t len);

/* Parse "torch-cpu" / "torch-mkl"; returns 0 on success, -1 otherwise
 * ("given" is not a stream a user can choose). */
int attn_dropout_stream_parse(const char *name, attn_dropout_stream *out);
const char *attn_dropout_stream_name(attn_dropout_stream s);

#ifdef __cplusplus
}
#endif
#endif
