/* attn/checkpoint.h and attn/runlock.h through the library API: a commit
 * makes both files live at once and keeps the top-level names, an abort or a
 * half-made save leaves the previous checkpoint, stale debris is cleaned,
 * the run lock excludes a second holder and names the first. (The whole-run
 * crash proofs are tests/train_crash.sh.) */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/runlock.h"
#include "support/trainer_check.h"

static char dir[256];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/attn-ckpt-XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void teardown(void) {
    remove_tree(dir);
}

static void save(int64_t step, const char *a, const char *b) {
    attn_ckpt_txn t;
    attn_error err;
    char p[ATTN_CKPT_PATH_MAX];
    cr_assert_eq(attn_ckpt_begin(&t, dir, step, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_ckpt_file(&t, "a.txt", p, &err), ATTN_OK);
    cr_assert_eq(attn_file_write_atomic(p, a, strlen(a), &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_ckpt_file(&t, "b.txt", p, &err), ATTN_OK);
    cr_assert_eq(attn_file_write_atomic(p, b, strlen(b), &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_ckpt_commit(&t, &err), ATTN_OK, "%s", err.msg);
}

static void expect_file(const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    void *data;
    size_t n;
    cr_assert_eq(attn_file_read_all(p, 0, &data, &n, NULL), ATTN_OK, "%s", p);
    cr_expect(n == strlen(text) && !memcmp(data, text, n), "%s holds '%.*s', want '%s'", p, (int)n,
              (char *)data, text);
    free(data);
}

static int exists(const char *name) {
    char p[512];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &sb) == 0;
}

TestSuite(checkpoint, .init = setup, .fini = teardown);

Test(checkpoint, commit_switches_both_files_and_keeps_top_names) {
    int64_t step;
    cr_expect_eq(attn_ckpt_exists(dir, &step), 0);
    char live[ATTN_CKPT_PATH_MAX];
    attn_error err;
    cr_expect_eq(attn_ckpt_resolve(dir, live, &err), ATTN_ERR_NOT_FOUND);
    cr_expect(strstr(err.msg, "holds no checkpoint"), "%s", err.msg);
    save(1, "a1", "b1");
    save(2, "a2", "b2");
    cr_expect_eq(attn_ckpt_exists(dir, &step), 1);
    cr_expect_eq(step, 2);
    expect_file("a.txt", "a2"); /* the top-level names follow latest */
    expect_file("b.txt", "b2");
    cr_assert_eq(attn_ckpt_resolve(dir, live, &err), ATTN_OK, "%s", err.msg);
    cr_expect(strstr(live, "/ckpt-2"), "%s", live);
    cr_expect(!exists("ckpt-1"), "the older checkpoint is removed");
    save(2, "a2'", "b2'"); /* the same step again gets its own folder */
    expect_file("a.txt", "a2'");
    cr_expect(!exists("ckpt-2") && exists("ckpt-2.1"));
}

Test(checkpoint, abort_and_debris_leave_the_previous_one) {
    save(5, "a5", "b5");
    attn_ckpt_txn t;
    char p[ATTN_CKPT_PATH_MAX];
    cr_assert_eq(attn_ckpt_begin(&t, dir, 6, NULL), ATTN_OK);
    cr_assert_eq(attn_ckpt_file(&t, "a.txt", p, NULL), ATTN_OK);
    cr_assert_eq(attn_file_write_atomic(p, "a6", 2, NULL), ATTN_OK);
    attn_ckpt_abort(&t);
    attn_ckpt_abort(&t); /* twice is fine */
    expect_file("a.txt", "a5");
    /* What a killed save leaves: a half-made folder, an orphan, temp files. */
    cr_assert_eq(attn_ckpt_begin(&t, dir, 7, NULL), ATTN_OK); /* never committed */
    char q[512];
    snprintf(q, sizeof q, "%s/ckpt-9", dir);
    cr_assert_eq(mkdir(q, 0777), 0);
    snprintf(q, sizeof q, "%s/.loss.csv.tmp-abcdef", dir);
    cr_assert_eq(attn_file_write_atomic(q, "x", 1, NULL), ATTN_OK);
    /* Not ours: other names, and folders holding folders. */
    snprintf(q, sizeof q, "%s/ckpt-notes", dir);
    cr_assert_eq(mkdir(q, 0777), 0);
    snprintf(q, sizeof q, "%s/.mine.tmp-1", dir);
    cr_assert_eq(mkdir(q, 0777), 0);
    snprintf(q, sizeof q, "%s/.mine.tmp-1/keep.txt", dir);
    cr_assert_eq(attn_file_write_atomic(q, "k", 1, NULL), ATTN_OK);
    snprintf(q, sizeof q, "%s/.mine.tmp-1/sub", dir);
    cr_assert_eq(mkdir(q, 0777), 0);
    int removed = -1;
    attn_error err;
    cr_expect_eq(attn_ckpt_clean_stale(dir, &removed, &err), ATTN_ERR_IO);
    cr_expect(strstr(err.msg, "cannot remove stale files"), "%s", err.msg);
    cr_expect_eq(removed, 3);
    cr_expect(exists("ckpt-5") && !exists("ckpt-9"));
    cr_expect(exists("ckpt-notes") && exists(".mine.tmp-1/keep.txt"));
    expect_file("b.txt", "b5");
}

Test(checkpoint, older_layout_is_read) {
    char p[512];
    snprintf(p, sizeof p, "%s/train_state.safetensors", dir);
    cr_assert_eq(attn_file_write_atomic(p, "s", 1, NULL), ATTN_OK);
    char live[ATTN_CKPT_PATH_MAX];
    int64_t step;
    cr_expect_eq(attn_ckpt_exists(dir, &step), 1);
    cr_expect_eq(step, -1);
    cr_assert_eq(attn_ckpt_resolve(dir, live, NULL), ATTN_OK);
    cr_expect_str_eq(live, dir);
}

Test(checkpoint, run_lock_excludes_a_second_holder) {
    attn_run_lock a, b;
    attn_error err;
    cr_assert_eq(attn_run_lock_acquire(&a, dir, "first holder", &err), ATTN_OK, "%s", err.msg);
    /* flock locks belong to an open file: a second open conflicts even here. */
    cr_expect_eq(attn_run_lock_acquire(&b, dir, "second", &err), ATTN_ERR_STATE);
    char want[64];
    snprintf(want, sizeof want, "pid %ld: first holder", (long)getpid());
    cr_expect(strstr(err.msg, want) && strstr(err.msg, "in use by another run"), "%s", err.msg);
    attn_run_lock_release(&a);
    cr_expect(!exists(ATTN_RUN_LOCK_FILE), "released lock file removed");
    cr_assert_eq(attn_run_lock_acquire(&b, dir, "second", &err), ATTN_OK, "%s", err.msg);
    attn_run_lock_release(&b);
    attn_run_lock_release(&b); /* twice is fine */
}
