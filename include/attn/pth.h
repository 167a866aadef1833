/* attn/pth.h — PyTorch state_dict files: what
 * `torch.save(model.state_dict(), "model.pth")` writes (PyTorch >= 1.6).
 *
 * Layout: a zip archive, entries stored uncompressed, all under one folder
 * `<archive>/`:
 *   data.pkl    the state_dict, pickled (protocol 2): an OrderedDict of
 *               name -> torch._utils._rebuild_tensor_v2(storage, offset,
 *               shape, stride, requires_grad, hooks); each storage is a
 *               persistent id ('storage', torch.<T>Storage, key, device, numel)
 *   data/<key>  each storage's bytes, little-endian
 *   version     "3\n"; byteorder "little" (newer PyTorch)
 *
 * Reading never runs anything: the pickle is read by a restricted
 * interpreter that knows only the opcodes torch.save emits for a state_dict
 * and only the globals collections.OrderedDict, torch._utils._rebuild_tensor_v2,
 * torch._utils._rebuild_parameter and torch.<T>Storage; anything else is
 * ATTN_ERR_FORMAT naming the opcode or the global. Tensors must be
 * contiguous and inside their storage; tensors may share a storage (tied
 * weights). Compressed entries are refused (torch.save never compresses). */
#ifndef ATTN_PTH_H
#define ATTN_PTH_H

#include "attn/safetensors.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read a state_dict file into *out (zeroed first; release it with
 * attn_safetensors_free): one tensor per entry in the file's order, name =
 * key, dtype "F32", "F64", "F16", "BF16", "I64", "I32", "I16", "I8", "U8" or
 * "BOOL", data pointing into storage the struct owns (begin/end are byte
 * offsets into it; tied tensors point into the same bytes). No metadata.
 * ATTN_ERR_IO when the file cannot be read, ATTN_ERR_FORMAT for anything
 * that is not a state_dict of contiguous tensors; messages name the path. */
attn_status attn_pth_read(const char *path, attn_safetensors *out, attn_error *err);

/* Write entries as a state_dict file that torch.load (weights_only=True too)
 * reads back as an OrderedDict of CPU tensors, in the given order, each with
 * its own storage. dtypes as above (ATTN_ERR_INVALID_ARG for others, for
 * empty or repeated names and for nbytes that disagree with the shape).
 * Atomic (attn/fileio.h); data is aligned to 64 bytes in the file as
 * torch.save aligns it; zip64 fields where a size or offset needs them
 * (files of 4 GiB and more). */
attn_status attn_pth_write(const char *path, const attn_st_entry *entries, int count,
                           attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
