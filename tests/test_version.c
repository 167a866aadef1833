/* attn/version.h: the header's version, the library's and the program's agree. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "attn/version.h"

Test(version, header_equals_library) {
    char parts[32];
    snprintf(parts, sizeof parts, "%d.%d.%d", ATTN_VERSION_MAJOR, ATTN_VERSION_MINOR,
             ATTN_VERSION_PATCH);
    cr_assert_str_eq(ATTN_VERSION, parts);
    cr_assert_str_eq(attn_version(), ATTN_VERSION);
}

Test(version, program_prints_the_library_version) {
    FILE *p = popen(ATTN_BINARY " --version", "r");
    cr_assert_not_null(p);
    char line[64] = "";
    cr_assert_not_null(fgets(line, sizeof line, p));
    cr_assert_eq(pclose(p), 0);
    char want[64];
    snprintf(want, sizeof want, "attn %s\n", attn_version());
    cr_assert_str_eq(line, want);
}
