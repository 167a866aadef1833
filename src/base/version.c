/* The library's version (attn/version.h). */
#include "attn/version.h"

const char *attn_version(void) {
    return ATTN_VERSION;
}
