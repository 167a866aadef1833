/* Memory budgets (see attn/membudget.h). */
#define _DEFAULT_SOURCE /* sysconf's _SC_AVPHYS_PAGES */

#include "attn/membudget.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attn/parse.h"

double attn_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[128];
        unsigned long long kb = 0;
        int found = 0;
        while (!found && fgets(line, sizeof line, f))
            found = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
        fclose(f);
        if (found) return (double)kb * 1024.0;
    }
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
}

attn_status attn_parse_size(const char *s, double *bytes) {
    static const char units[] = "KMGT";
    char num[64];
    if (!s) return ATTN_ERR_INVALID_ARG;
    size_t n = strlen(s);
    /* The suffix: [KMGT] then an optional "B" or "iB". */
    double scale = 1.0;
    if (n >= 2 && (s[n - 1] == 'B' || s[n - 1] == 'b')) {
        n--;
        if (n >= 2 && s[n - 1] == 'i') n--;
        if (n < 2 || !strchr(units, s[n - 1] & ~0x20)) return ATTN_ERR_INVALID_ARG;
    }
    if (n >= 2 && s[n - 1] && strchr(units, s[n - 1] & ~0x20)) {
        for (const char *u = units; *u != (s[n - 1] & ~0x20); u++)
            scale *= 1024.0;
        scale *= 1024.0;
        n--;
    }
    if (n == 0 || n >= sizeof num) return ATTN_ERR_INVALID_ARG;
    memcpy(num, s, n);
    num[n] = '\0';
    double x;
    if (attn_parse_float(num, &x) || !(x > 0)) return ATTN_ERR_INVALID_ARG;
    *bytes = x * scale;
    return ATTN_OK;
}

const char *attn_size_text(double bytes, char *buf, size_t cap) {
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024.0) {
        snprintf(buf, cap, "%.0f B", bytes);
        return buf;
    }
    int u = 0;
    bytes /= 1024.0;
    while (u < 3 && bytes >= 1024.0) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, cap,
             bytes < 10    ? "%.2f %s"
             : bytes < 1e4 ? "%.1f %s"
                           : "%.3g %s",
             bytes, units[u]);
    return buf;
}

attn_status attn_mem_check(double need, double budget, const char *what, attn_error *err) {
    const int given = budget > 0;
    const double limit = given ? budget : attn_mem_available();
    if (limit <= 0 || need <= limit) return ATTN_OK;
    char a[32], b[32];
    return attn_fail(err, ATTN_ERR_NOMEM, "%s needs about %s, more than %s (%s)", what,
                     attn_size_text(need, a, sizeof a), attn_size_text(limit, b, sizeof b),
                     given ? "the limit given" : "the memory available now");
}
