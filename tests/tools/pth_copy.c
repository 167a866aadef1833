/* pth_copy IN.safetensors OUT.pth [ZIP64_AT]: the tensors of a safetensors
 * file, in its order, written by attn_pth_write, or with zip64 fields from
 * ZIP64_AT bytes on (io/pth_write.h; 0: every entry) so that zip64 files are
 * checked without writing 4 GiB. tests/pth_torch_live.sh has torch.load read
 * the result. Exit 1 with the error on stderr. */
#include <stdio.h>
#include <stdlib.h>

#include "attn/pth.h"
#include "io/pth_write.h"

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: pth_copy IN.safetensors OUT.pth [ZIP64_AT]\n");
        return 2;
    }
    attn_safetensors st;
    attn_error err = {0};
    attn_status s = attn_safetensors_read(argv[1], &st, &err);
    attn_st_entry *e = s ? NULL : calloc((size_t)st.count + 1, sizeof *e);
    if (!s && !e) s = attn_fail(&err, ATTN_ERR_NOMEM, "out of memory");
    for (int i = 0; !s && i < st.count; i++) {
        const attn_st_tensor *t = &st.tensors[i];
        e[i] = (attn_st_entry){t->name, t->dtype, t->ndim, t->shape, t->data, t->end - t->begin};
    }
    if (!s && argc == 4)
        s = pth_write_zip64_at(argv[2], e, st.count, strtoull(argv[3], NULL, 10), &err);
    else if (!s)
        s = attn_pth_write(argv[2], e, st.count, &err);
    free(e);
    attn_safetensors_free(&st);
    if (s) fprintf(stderr, "pth_copy: %s\n", err.msg);
    return s ? 1 : 0;
}
