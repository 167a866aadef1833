/* The adaptive thread count (see attn/thread_tuner.h). */
#include "attn/thread_tuner.h"

enum { PROBE = 4, FIRST = 50, BASE = 250, MAX_INTERVAL = 2000 };

void attn_thread_tuner_init(attn_thread_tuner *t, int max) {
    *t = (attn_thread_tuner){.max = max, .cur = max, .next = FIRST, .interval = BASE};
}

int attn_thread_tuner_step(attn_thread_tuner *t, int64_t step, double step_s) {
    if (t->max < 2) return t->cur;
    const int other = t->cur == 1 ? t->max : 1;
    if ((t->phase == 2 ? other : t->cur) == 1) t->steps_one++;
    if (t->phase == 0) { /* waiting for the next probe */
        if (step >= t->next) t->phase = 1, t->k = 0, t->t_cur = 0.0;
        return t->cur;
    }
    if (t->phase == 1) { /* timing the count in use */
        t->t_cur += step_s;
        if (++t->k < PROBE) return t->cur;
        t->phase = 2, t->k = 0, t->t_alt = 0.0;
        return other;
    }
    /* Timing the other count; its first step starts its threads: not counted. */
    if (t->k++ > 0) t->t_alt += step_s;
    if (t->k <= PROBE) return other;
    if (t->t_alt < 0.95 * t->t_cur) {
        t->cur = other;
        t->interval = BASE;
    } else {
        t->interval = t->interval * 2 < MAX_INTERVAL ? t->interval * 2 : MAX_INTERVAL;
    }
    t->phase = 0;
    t->next = step + t->interval;
    return t->cur;
}
