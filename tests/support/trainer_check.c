/* Criterion checks shared by the trainer tests (see trainer_check.h). */
#include "trainer_check.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void expect_same_params(const attn_gpt *a, const attn_gpt *b, const char *what) {
    const attn_param_list *pa = attn_gpt_params(a), *pb = attn_gpt_params(b);
    for (int i = 0; i < pa->count; i++)
        cr_expect(
            memcmp(pa->items[i].data, pb->items[i].data, pa->items[i].numel * sizeof(float)) == 0,
            "%s %s", pa->items[i].name, what);
}

void expect_same_steps(attn_trainer *a, attn_trainer *b, int steps) {
    attn_error err;
    for (int i = 0; i < steps; i++) {
        attn_train_record ra, rb;
        cr_assert_eq(attn_trainer_step(a, &ra, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_trainer_step(b, &rb, &err), ATTN_OK, "%s", err.msg);
        cr_expect(memcmp(&ra.loss, &rb.loss, sizeof ra.loss) == 0, "step %d: %.9g vs %.9g", i,
                  (double)ra.loss, (double)rb.loss);
    }
}

void remove_tree(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0, "%s", cmd);
}
