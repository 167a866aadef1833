/* MKL's MCG31 stream for torch-mkl dropout masks (see mcg31.h): its
 * constants and the portable row drawers (mcg31_rows.c picks and splits). */
#include "mcg31.h"

const uint32_t attn_mcg31_apow[ATTN_MCG31_BLOCK + 1] = {
    1u,          1132489760u, 826537482u,  289798557u,  480863449u,  1381340036u, 1582925527u,
    1918178478u, 1286028348u, 482167044u,  262060616u,  1856662125u, 839877947u,  1997268203u,
    458714024u,  650347998u,  1918607382u, 2085354693u, 1261383659u, 1816347431u, 1783934141u,
    285758602u,  279985208u,  1010574554u, 30702993u,   469757411u,  1637715577u, 1187464119u,
    1330445151u, 436034412u,  703704746u,  486810570u,  837482658u,  798392200u,  1706415731u,
    1968606305u, 2137751365u, 1003692128u, 2073629851u, 662837670u,  753596838u,  459361368u,
    986648931u,  1857770552u, 1566002675u, 1132829524u, 399935603u,  1534314615u, 1472569047u,
    914362312u,  795348828u,  779928485u,  203817745u,  267625473u,  328103190u,  1652824835u,
    173842903u,  366072057u,  1902437057u, 1536317309u, 1425941789u, 700394750u,  1843706813u,
    1262432117u, 286907447u,
};

uint32_t attn_mcg31_pow(uint64_t e) {
    uint32_t r = 1, b = ATTN_MCG31_A;
    for (; e; e >>= 1) {
        if (e & 1) r = attn_mcg31_mul(r, b);
        b = attn_mcg31_mul(b, b);
    }
    return r;
}

uint32_t attn_mcg31_threshold(double p) {
    /* x / m is monotone in x, so PyTorch's test has one cut point. */
    const double keep = 1.0 - p;
    uint32_t lo = 0, hi = ATTN_MCG31_M;
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if ((double)mid / (double)ATTN_MCG31_M >= keep)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Blocks of 64: every state x a^j is one multiply from the block's start,
 * so the compiler sees independent lanes. */
void attn_mcg31_keep_generic(uint32_t x, uint32_t thr, uint8_t *keep, size_t n) {
    for (size_t i = 0; i < n; i += ATTN_MCG31_BLOCK) {
        const size_t m = n - i < ATTN_MCG31_BLOCK ? n - i : ATTN_MCG31_BLOCK;
        for (size_t j = 0; j < m; j++)
            keep[i + j] = attn_mcg31_mul(x, attn_mcg31_apow[j]) < thr;
        x = attn_mcg31_mul(x, attn_mcg31_apow[ATTN_MCG31_BLOCK]);
    }
}

void attn_mcg31_mult_generic(uint32_t x, uint32_t thr, float scale, float *mult, size_t n) {
    for (size_t i = 0; i < n; i += ATTN_MCG31_BLOCK) {
        const size_t m = n - i < ATTN_MCG31_BLOCK ? n - i : ATTN_MCG31_BLOCK;
        for (size_t j = 0; j < m; j++)
            mult[i + j] = attn_mcg31_mul(x, attn_mcg31_apow[j]) < thr ? scale : 0.0f;
        x = attn_mcg31_mul(x, attn_mcg31_apow[ATTN_MCG31_BLOCK]);
    }
}
