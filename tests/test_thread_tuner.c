/* The adaptive thread count of `attn train` (cli/threads.c): fed step times
 * as a loaded or a quiet machine would give them, it must end on the faster
 * count, set OpenMP's count to it, and space its probes out while the choice
 * stands. The times are made up: the policy is under test, not the machine. */
/* First: it sets its feature macros before any system header. */
#include "../cli/threads.c"

#include <criterion/criterion.h>
#include <omp.h>

/* Steps of `seconds(threads)` from step `from` to `to`; returns the count in
 * use at each step's start (what OpenMP would run it with). */
static void run(cli_thread_tuner *t, int64_t from, int64_t to, double s1, double smax) {
    for (int64_t step = from; step <= to; step++) {
        const int n = omp_get_max_threads();
        cli_tuner_step(t, step, n == 1 ? s1 : smax);
    }
}

Test(thread_tuner, keeps_all_cores_when_they_are_faster) {
    cli_use_threads(2, 1);
    cli_thread_tuner t;
    cli_tuner_init(&t, 2);
    run(&t, 1, 2000, 0.2, 0.1);
    cr_assert_eq(t.cur, 2);
    cr_assert_eq(omp_get_max_threads(), 2);
    /* Probes at 50, then 250, 500, 1000, 2000 steps apart: few steps on one thread. */
    cr_assert(t.steps_one > 0 && t.steps_one <= 5 * 4, "%lld steps on 1 thread",
              (long long)t.steps_one);
    cr_assert(t.interval >= 1000, "interval %lld", (long long)t.interval);
}

Test(thread_tuner, moves_to_one_thread_when_it_is_faster_and_back) {
    cli_use_threads(2, 1);
    cli_thread_tuner t;
    cli_tuner_init(&t, 2);
    run(&t, 1, 400, 0.1, 0.15); /* a busy machine: one thread wins */
    cr_assert_eq(t.cur, 1);
    cr_assert_eq(omp_get_max_threads(), 1);
    cr_assert(t.steps_one > 300, "%lld", (long long)t.steps_one);
    run(&t, 401, 2000, 0.2, 0.1); /* quiet again: the next probe goes back */
    cr_assert_eq(t.cur, 2);
    cr_assert_eq(omp_get_max_threads(), 2);
}

Test(thread_tuner, a_small_difference_does_not_switch) {
    cli_use_threads(2, 1);
    cli_thread_tuner t;
    cli_tuner_init(&t, 2);
    run(&t, 1, 1000, 0.098, 0.1); /* 2% apart: within the 5% margin */
    cr_assert_eq(t.cur, 2);
    cr_assert_eq(omp_get_max_threads(), 2);
}

Test(thread_tuner, one_core_never_probes) {
    cli_use_threads(1, 1);
    cli_thread_tuner t;
    cli_tuner_init(&t, 1);
    run(&t, 1, 500, 0.1, 0.01);
    cr_assert_eq(t.steps_one, 0);
    cr_assert_eq(omp_get_max_threads(), 1);
}
