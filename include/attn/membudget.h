/* attn/membudget.h — sizes checked before allocation.
 *
 * Every model, module and buffer size a user gives (a config, a flag,
 * checkpoint metadata) is compared with a budget before anything is
 * allocated: the machine's available memory, or a limit the user set
 * (`--max-memory 2G`). The estimates come from the configs alone
 * (attn_gpt_config_memory in attn/gpt.h, attn_module_memory in
 * attn/module.h). */
#ifndef ATTN_MEMBUDGET_H
#define ATTN_MEMBUDGET_H

#include <stddef.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes the machine can give now: /proc/meminfo's MemAvailable, else
 * sysconf's available pages; 0 when neither says. */
double attn_mem_available(void);

/* "2G", "512M", "64k", "1.5G", "1000": bytes, with an optional binary
 * suffix K, M, G or T (1024-based; "GiB" and "GB" read the same); a decimal
 * number (attn/parse.h), > 0. ATTN_ERR_INVALID_ARG otherwise. */
attn_status attn_parse_size(const char *s, double *bytes);

/* "812 B", "64.0 MiB", "4.30 GiB", "1.2e+03 TiB" into buf; returns buf. */
const char *attn_size_text(double bytes, char *buf, size_t cap);

/* ATTN_OK when need bytes fit the budget (budget <= 0: attn_mem_available(),
 * and nothing is checked when that is unknown). Else ATTN_ERR_NOMEM:
 * "WHAT needs about N, more than M (the limit given / the memory available
 * now)". */
attn_status attn_mem_check(double need, double budget, const char *what, attn_error *err);

#ifdef __cplusplus
}
#endif

#endif
