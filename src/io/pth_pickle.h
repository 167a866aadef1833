/* The restricted unpickler behind attn_pth_read (attn/pth.h): data.pkl of a
 * torch.save'd state_dict into a list of tensor descriptions. Private. */
#ifndef ATTN_IO_PTH_PICKLE_H
#define ATTN_IO_PTH_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/safetensors.h"
#include "attn/status.h"

/* One torch.<T>Storage class and the safetensors dtype of its elements. */
typedef struct pth_dtype {
    const char *storage; /* "FloatStorage" */
    const char *dtype;   /* "F32" */
    size_t elem_size;
} pth_dtype;

extern const pth_dtype PTH_DTYPES[];
extern const int PTH_NDTYPES;

/* A storage named by a persistent id: its key (the zip entry data/<key>). */
typedef struct pth_storage {
    char *key;
    int dtype; /* index into PTH_DTYPES */
    uint64_t numel;
} pth_storage;

/* A tensor as _rebuild_tensor_v2 describes it (offset and strides in
 * elements, unchecked against the storage). */
typedef struct pth_tensor {
    char *name;
    int storage; /* index into pth_pickle.storages */
    int64_t offset;
    int ndim;
    int64_t shape[ATTN_ST_MAX_DIMS];
    int64_t stride[ATTN_ST_MAX_DIMS];
} pth_tensor;

typedef struct pth_pickle {
    pth_tensor *tensors; /* in the dict's order */
    int count;
    pth_storage *storages; /* distinct keys */
    int nstorages;
} pth_pickle;

/* Interpret the n bytes of a pickle (never executes anything); the result
 * must be a dict of string keys to tensors. name is used in messages.
 * ATTN_ERR_FORMAT for anything else, ATTN_ERR_NOMEM. */
attn_status pth_unpickle(const unsigned char *pkl, size_t n, const char *name, pth_pickle *out,
                         attn_error *err);
void pth_pickle_free(pth_pickle *p);

#endif
