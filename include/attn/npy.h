/* attn/npy.h — NumPy .npy files (format versions 1.0, 2.0, 3.0).
 *
 * Supported dtypes: '<f4' (float32) for tensors, '<i4' / '<i8' (int32/int64)
 * for token ids, '<f8' (float64, what np.random.rand gives) read only to be
 * converted (attn_npy_load_as_f32). C order only, 0..8 dims. Anything else is rejected with a
 * message naming the file and what was found versus expected, e.g.
 *   "x.npy: unsupported dtype '<f8' (float64); expected '<f4' (float32)".
 * Writers emit version 1.0 headers (2.0 when the header needs it) laid out as
 * numpy.save does, atomically (attn/fileio.h). Assumes a little-endian host. */
#ifndef ATTN_NPY_H
#define ATTN_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_NPY_MAX_DIMS 8

typedef enum attn_npy_dtype {
    ATTN_NPY_F32 = 1, /* '<f4' */
    ATTN_NPY_I32 = 2, /* '<i4' */
    ATTN_NPY_I64 = 3, /* '<i8' */
    ATTN_NPY_F64 = 4  /* '<f8' */
} attn_npy_dtype;

/* Bit masks of accepted dtypes for attn_npy_load. */
#define ATTN_NPY_ACCEPT_F32 (1u << ATTN_NPY_F32)
#define ATTN_NPY_ACCEPT_IDS ((1u << ATTN_NPY_I32) | (1u << ATTN_NPY_I64))
#define ATTN_NPY_ACCEPT_ANY (ATTN_NPY_ACCEPT_F32 | ATTN_NPY_ACCEPT_IDS)
#define ATTN_NPY_ACCEPT_F64 (1u << ATTN_NPY_F64)
/* Anything attn_npy_to_f32 converts. */
#define ATTN_NPY_ACCEPT_NUMERIC (ATTN_NPY_ACCEPT_ANY | ATTN_NPY_ACCEPT_F64)

typedef struct attn_npy {
    attn_npy_dtype dtype;
    int ndim;                         /* 0 for a scalar */
    int64_t shape[ATTN_NPY_MAX_DIMS]; /* row-major (C order) */
    size_t numel;                     /* product of shape (1 for a scalar) */
    void *data;                       /* numel elements of dtype; malloc'd, owned */
} attn_npy;

/* Element size of a dtype in bytes; its numpy descr ("<f4") and name ("float32"). */
size_t attn_npy_dtype_size(attn_npy_dtype t);
const char *attn_npy_dtype_descr(attn_npy_dtype t);
const char *attn_npy_dtype_name(attn_npy_dtype t);

/* Read path into *out (zeroed first; release with attn_npy_free). accept is a
 * mask of ATTN_NPY_ACCEPT_*; a dtype outside it is ATTN_ERR_FORMAT naming the
 * dtype found and those expected. Errors: not a .npy (bad magic), unknown
 * version, truncated header or data, trailing bytes, malformed header dict,
 * unsupported dtype, fortran_order True, more than 8 dims. */
attn_status attn_npy_load(const char *path, unsigned accept, attn_npy *out, attn_error *err);

/* Shorthands: float32 only; token ids (int32 or int64, kept as stored). */
attn_status attn_npy_load_f32(const char *path, attn_npy *out, attn_error *err);
attn_status attn_npy_load_ids(const char *path, attn_npy *out, attn_error *err);

/* Parse an in-memory .npy image of len bytes (name is used in messages);
 * the data is copied, buf is not kept. */
attn_status attn_npy_parse(const void *buf, size_t len, const char *name, unsigned accept,
                           attn_npy *out, attn_error *err);

/* Convert token ids in place to ATTN_NPY_I64 or ATTN_NPY_I32. int64 -> int32
 * fails (ATTN_ERR_INVALID_ARG, naming the index and value) when a value does
 * not fit; a float32 array is ATTN_ERR_FORMAT. On failure a is unchanged. */
attn_status attn_npy_convert_ids(attn_npy *a, attn_npy_dtype to, const char *name, attn_error *err);

/* Convert a float64, int32 or int64 array in place to float32 (a float32
 * one is left as it is), rounding to nearest as numpy's astype(np.float32)
 * does: integers beyond 2^24 and most float64 values are rounded. A finite
 * float64 or integer value whose magnitude exceeds float32's range is an
 * error (ATTN_ERR_INVALID_ARG naming the flat index and value) rather than
 * an infinity; NaN and +-inf stay as they are. On failure a is unchanged. */
attn_status attn_npy_to_f32(attn_npy *a, const char *name, attn_error *err);

/* Read a float input: float32 as stored; float64, int32 and int64 converted
 * by attn_npy_to_f32. *from (may be NULL) gets the dtype found in the file.
 * Other dtypes are ATTN_ERR_FORMAT naming the accepted ones. */
attn_status attn_npy_load_as_f32(const char *path, attn_npy *out, attn_npy_dtype *from,
                                 attn_error *err);

/* Check rank and dims. dims[i] < 0 means "any size". dim_names is a
 * human-readable tuple for messages, e.g. "(B, T, d_in)" (may be NULL).
 * Messages: "input.npy: expected rank 3 (B, T, d_in), got rank 2" and
 * "input.npy: expected shape (B, T, d_in) = (*, *, 4), got (2, 6, 3)";
 * code ATTN_ERR_SHAPE. */
attn_status attn_npy_expect_shape(const attn_npy *a, const char *name, int ndim,
                                  const int64_t *dims, const char *dim_names, attn_error *err);

/* Free a's data and zero it (safe on a zeroed struct). */
void attn_npy_free(attn_npy *a);

/* Write a C-order array atomically. ndim 0..8; shape entries must be >= 0. */
attn_status attn_npy_save(const char *path, attn_npy_dtype dtype, const void *data, int ndim,
                          const int64_t *shape, attn_error *err);
attn_status attn_npy_save_f32(const char *path, const float *data, int ndim, const int64_t *shape,
                              attn_error *err);
attn_status attn_npy_save_i64(const char *path, const int64_t *data, int ndim, const int64_t *shape,
                              attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
