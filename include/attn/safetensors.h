/* attn/safetensors.h — safetensors files (the format PyTorch users share
 * weights in; https://github.com/huggingface/safetensors).
 *
 * Layout: u64 little-endian N, N bytes of JSON header
 *   {"__metadata__": {"key": "value", ...},
 *    "name": {"dtype": "F32", "shape": [out, in], "data_offsets": [begin, end]}, ...}
 * padded with spaces, then the byte buffer; offsets are relative to the buffer.
 *
 * attn writes tensors contiguously, sorted by element size (largest first)
 * then name, with the header padded to a multiple of 8 bytes so every tensor
 * is aligned. Reading is strict: valid JSON object, known dtypes, shapes and
 * offsets that agree, offsets inside the buffer, contiguous and
 * non-overlapping, no trailing bytes, no duplicate names, string-only metadata.
 * Tensor names and layouts are PyTorch's state_dict ones (attn/param.h). */
#ifndef ATTN_SAFETENSORS_H
#define ATTN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "attn/param.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_ST_MAX_DIMS 8
/* Largest header accepted on read (the reference implementation's limit). */
#define ATTN_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* One string metadata entry (for writing). */
typedef struct attn_st_kv {
    const char *key;
    const char *value;
} attn_st_kv;

/* One tensor to write. dtype is a safetensors dtype name ("F32", "I64", "U8",
 * ...); nbytes must equal numel(shape) * element size. */
typedef struct attn_st_entry {
    const char *name;
    const char *dtype;
    int ndim;
    const int64_t *shape;
    const void *data;
    size_t nbytes;
} attn_st_entry;

/* One tensor of a file read into memory. */
typedef struct attn_st_tensor {
    char *name;
    char dtype[8]; /* "F32", "F64", "I64", ... */
    size_t elem_size;
    int ndim;
    int64_t shape[ATTN_ST_MAX_DIMS];
    size_t numel;
    size_t begin, end; /* byte offsets into the data buffer */
    /* Points into the loaded file; aligned for the dtype when the writer
     * aligned it (attn does), so use memcpy for files from elsewhere. */
    const void *data;
} attn_st_tensor;

typedef struct attn_safetensors {
    attn_st_tensor *tensors; /* in header order */
    int count;
    char **meta_keys; /* __metadata__ entries, in header order */
    char **meta_values;
    int meta_count;
    void *buf_; /* private: the file image */
    size_t size_;
} attn_safetensors;

/* Element size of a safetensors dtype name, 0 if unknown. */
size_t attn_st_dtype_size(const char *dtype);

/* Write tensors + metadata atomically (attn/fileio.h). Names must be unique
 * and non-empty, "__metadata__" is reserved. meta may be NULL when
 * meta_count == 0. */
attn_status attn_safetensors_write(const char *path, const attn_st_entry *entries, int count,
                                   const attn_st_kv *meta, int meta_count, attn_error *err);

/* Write every parameter of list (its data, as F32, PyTorch shapes). */
attn_status attn_safetensors_write_params(const char *path, const attn_param_list *list,
                                          const attn_st_kv *meta, int meta_count, attn_error *err);

/* Read and validate a whole file into *st (zeroed first; release with
 * attn_safetensors_free). Errors name the file: ATTN_ERR_IO (cannot read),
 * ATTN_ERR_FORMAT (truncated, bad header length, invalid JSON, bad entry). */
attn_status attn_safetensors_read(const char *path, attn_safetensors *st, attn_error *err);

/* The header alone (regular files): names, dtypes, shapes and metadata,
 * checked as attn_safetensors_read checks them against the file's size, with
 * every tensor's data NULL. Reads 8 + header bytes, whatever the file holds:
 * a checkpoint's config and shapes without its weights. */
attn_status attn_safetensors_read_header(const char *path, attn_safetensors *st, attn_error *err);
/* Same, from an in-memory image (copied); name is used in messages. */
attn_status attn_safetensors_parse(const void *buf, size_t len, const char *name,
                                   attn_safetensors *st, attn_error *err);

void attn_safetensors_free(attn_safetensors *st);

/* Lookups; NULL when absent. */
const attn_st_tensor *attn_safetensors_find(const attn_safetensors *st, const char *name);
const char *attn_safetensors_meta(const attn_safetensors *st, const char *key);

/* *out = metadata value `key` read as a decimal integer in [0, max], strictly:
 * ASCII digits only (no sign, space, "0x" or trailing text), no overflow.
 * ATTN_ERR_NOT_FOUND when absent, ATTN_ERR_FORMAT otherwise; messages name
 * the file (name), the key and the value. */
attn_status attn_safetensors_meta_u64(const attn_safetensors *st, const char *name, const char *key,
                                      uint64_t max, uint64_t *out, attn_error *err);

/* Copy the file's tensors into list's data buffers, strictly: every
 * parameter present, no extra tensors (both listed by name, ATTN_ERR_NOT_FOUND
 * for missing, ATTN_ERR_FORMAT for extras), dtype F32 (ATTN_ERR_FORMAT), shape
 * equal (ATTN_ERR_SHAPE, message shows both). Everything is checked before
 * anything is copied, so on failure list's buffers are unchanged. name is used
 * in messages (the path). */
attn_status attn_safetensors_to_params(const attn_safetensors *st, const char *name,
                                       const attn_param_list *list, attn_error *err);

/* The same from the file at path whose header hdr is
 * (attn_safetensors_read_header): each tensor read straight into its
 * parameter, so no image of the file is held beside the parameters (a
 * model loads at its own size, not twice it). A file that shrank since is
 * ATTN_ERR_FORMAT; on a failure after the checks some buffers may hold
 * the file's values. */
attn_status attn_safetensors_read_params(const char *path, const attn_safetensors *hdr,
                                         const attn_param_list *list, attn_error *err);

/* The file's tensors into list's buffers, then free: a regular file
 * through attn_safetensors_read_header + attn_safetensors_read_params, a
 * stream read whole (attn_safetensors_read + attn_safetensors_to_params). */
attn_status attn_safetensors_load_params(const char *path, const attn_param_list *list,
                                         attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
