/* attn_pth_write with the size at which zip64 fields start (attn/pth.h).
 * Private: attn_pth_write passes 0xFFFFFFFF, where the classic fields run
 * out; tests pass less to check zip64 files without writing 4 GiB. */
#ifndef ATTN_IO_PTH_WRITE_H
#define ATTN_IO_PTH_WRITE_H

#include <stdint.h>

#include "attn/safetensors.h"
#include "attn/status.h"

attn_status pth_write_zip64_at(const char *path, const attn_st_entry *entries, int count,
                               uint64_t zip64_at, attn_error *err);

#endif
