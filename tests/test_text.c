/* The growing text buffer (attn/text.h): appends of every kind land in
 * order and NUL-terminated, printf's long output takes the path past its
 * small stack buffer, and free leaves a zeroed buffer that starts again. */
#include <criterion/criterion.h>
#include <string.h>

#include "attn/text.h"

Test(text, appends_land_in_order_and_terminated) {
    attn_text t = {0};
    attn_text_puts(&t, "kind,epoch\n");
    attn_text_putn(&t, "loss,1xyz", 6);
    attn_text_printf(&t, ",%d,%.3f\n", 42, 0.5);
    cr_assert_not(t.oom);
    cr_expect_str_eq(t.s, "kind,epoch\nloss,1,42,0.500\n");
    cr_expect_eq(t.len, strlen(t.s));
    attn_text_free(&t);
    cr_expect_null(t.s);
    cr_expect_eq(t.len + t.cap, 0);
}

Test(text, long_printf_and_growth_past_the_first_block) {
    attn_text t = {0};
    char word[601];
    memset(word, 'a', 600);
    word[600] = '\0';
    for (int i = 0; i < 20; i++) /* 20 x 602 bytes: past 4096, twice doubled */
        attn_text_printf(&t, "%s%02d", word, i);
    cr_assert_not(t.oom);
    cr_expect_eq(t.len, 20 * 602);
    cr_expect_eq(strlen(t.s), t.len);
    cr_expect(t.cap > t.len);
    cr_expect_eq(memcmp(t.s + 19 * 602 + 600, "19", 2), 0);
    attn_text_free(&t);
    attn_text_puts(&t, "again");
    cr_expect_str_eq(t.s, "again");
    attn_text_free(&t);
}
