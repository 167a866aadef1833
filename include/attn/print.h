/* attn/print.h — format a float32 tensor exactly as PyTorch 1.13 prints it.
 *
 * repr(tensor) / print(tensor) with PyTorch's default print options
 * (precision 4, threshold 1000, edgeitems 3, linewidth 80, automatic sci
 * mode) for a row-major float32 tensor of 0 to ATTN_PRINT_MAX_DIMS dims:
 *
 *   tensor([0.4419, 0.6515, 0.5683])          1-D
 *   tensor([[2., 2.],                          2-D, one row a line, integer-
 *           [0., 2.]])                         valued tensors as "2."
 *   tensor([3.6812e-04, 1.0019e-42, 0.0000e+00])   sci mode when PyTorch picks it
 *   tensor(1.8524)                             0-dim
 *
 * 3-D and deeper nest with blank lines between blocks; when numel > threshold
 * each dim longer than 2*edgeitems shows its first and last edgeitems entries
 * around "...". Column width, sci-mode choice, inf/-inf/nan and the line
 * wrapping of long rows follow torch/_tensor_str.py. Optional suffixes
 * (e.g. "grad_fn=<MmBackward0>") are placed as PyTorch places them: after
 * ", " on the last line, or on a new line when that line would pass linewidth.
 * The library only formats into memory; it never prints. */
#ifndef ATTN_PRINT_H
#define ATTN_PRINT_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_PRINT_MAX_DIMS 8
#define ATTN_PRINT_MAX_SUFFIXES 4

typedef struct attn_print_options {
    int precision;  /* digits after the point (PyTorch default 4)              */
    long threshold; /* summarise when numel > threshold (1000)                */
    int edgeitems;  /* entries kept at each end of a summarised dim (3)       */
    int linewidth;  /* wrap 1-D rows at this many characters (80)             */
    int sci_mode;   /* -1: PyTorch chooses (default), 0: never, 1: always      */
    /* Extra repr parts after the data, e.g. "grad_fn=<MmBackward0>" or
     * "requires_grad=True"; NULL entries end the list early. */
    const char *suffixes[ATTN_PRINT_MAX_SUFFIXES];
} attn_print_options;

/* PyTorch's defaults, no suffixes. */
void attn_print_options_default(attn_print_options *opts);

/* Format data (row-major, shape[ndim]) as repr(torch.tensor(data)) would:
 * returns a malloc'd NUL-terminated string in *out (caller frees).
 * opts may be NULL for the defaults. An empty tensor prints as
 * "tensor([])" (with ", size=(0, 3)" when it is not 1-D, as PyTorch adds).
 * Fails on ndim outside [0, ATTN_PRINT_MAX_DIMS], a negative dim, data == NULL
 * with numel > 0, bad options or out of memory. */
attn_status attn_tensor_repr(const float *data, int ndim, const int64_t *shape,
                             const attn_print_options *opts, char **out, attn_error *err);

/* The same text written into buf (capacity cap, always NUL-terminated when
 * cap > 0); *needed (if not NULL) receives strlen of the full text. Fails
 * with ATTN_ERR_INVALID_ARG when the text (plus NUL) does not fit. */
attn_status attn_tensor_format(const float *data, int ndim, const int64_t *shape,
                               const attn_print_options *opts, char *buf, size_t cap,
                               size_t *needed, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
