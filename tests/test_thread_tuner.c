/* The adaptive thread count (attn/thread_tuner.h): fed step times as a loaded
 * or a quiet machine would give them, it must end on the faster count and
 * space its probes out while the choice stands. The times are made up: the
 * policy is under test, not the machine. */
#include "attn/thread_tuner.h"

#include <criterion/criterion.h>

/* Steps of `seconds(threads)` from step `from` to `to`, each run with the
 * count the tuner asked for after the step before; returns that count. */
static int run(attn_thread_tuner *t, int n, int64_t from, int64_t to, double s1, double smax) {
    for (int64_t step = from; step <= to; step++)
        n = attn_thread_tuner_step(t, step, n == 1 ? s1 : smax);
    return n;
}

Test(thread_tuner, keeps_all_cores_when_they_are_faster) {
    attn_thread_tuner t;
    attn_thread_tuner_init(&t, 2);
    cr_assert_eq(run(&t, t.cur, 1, 2000, 0.2, 0.1), 2);
    cr_assert_eq(t.cur, 2);
    /* Probes at 50, then 250, 500, 1000, 2000 steps apart: few steps on one thread. */
    cr_assert(t.steps_one > 0 && t.steps_one <= 5 * 4, "%lld steps on 1 thread",
              (long long)t.steps_one);
    cr_assert(t.interval >= 1000, "interval %lld", (long long)t.interval);
}

Test(thread_tuner, moves_to_one_thread_when_it_is_faster_and_back) {
    attn_thread_tuner t;
    attn_thread_tuner_init(&t, 2);
    int n = run(&t, t.cur, 1, 400, 0.1, 0.15); /* a busy machine: one thread wins */
    cr_assert_eq(n, 1);
    cr_assert_eq(t.cur, 1);
    cr_assert(t.steps_one > 300, "%lld", (long long)t.steps_one);
    n = run(&t, n, 401, 2000, 0.2, 0.1); /* quiet again: the next probe goes back */
    cr_assert_eq(n, 2);
    cr_assert_eq(t.cur, 2);
}

Test(thread_tuner, a_small_difference_does_not_switch) {
    attn_thread_tuner t;
    attn_thread_tuner_init(&t, 2);
    cr_assert_eq(run(&t, t.cur, 1, 1000, 0.098, 0.1), 2); /* 2% apart: within the 5% margin */
    cr_assert_eq(t.cur, 2);
}

Test(thread_tuner, one_core_never_probes) {
    attn_thread_tuner t;
    attn_thread_tuner_init(&t, 1);
    cr_assert_eq(run(&t, 1, 1, 500, 0.1, 0.01), 1);
    cr_assert_eq(t.steps_one, 0);
}
