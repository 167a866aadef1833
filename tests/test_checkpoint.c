/* attn/checkpoint.h and attn/runlock.h through the library API: a commit
 * makes both files live at once and keeps the top-level names, an abort or a
 * half-made save leaves the previous checkpoint, stale debris is cleaned and
 * nothing that is not attn's is (a user's notes in ckpt-7/, their own
 * model.safetensors or .lock), a missing, dangling, file or folder `latest`
 * (what copies without symbolic links make) resolves to the newest complete
 * checkpoint and is repaired, the run lock excludes a second holder and names
 * the first. (The whole-run proofs are tests/train_crash.sh and
 * tests/train_ownership.sh.) */
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
#include "attn/safetensors.h"
#include "support/trainer_check.h"

static char dir[256];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/attn-ckpt-XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void teardown(void) {
    remove_tree(dir);
}

/* A checkpoint file as attn writes one: its format and step in the
 * metadata; the one value tells saves apart. */
static void write_ckpt_file(const char *path, const char *name, int64_t step, float tag) {
    const int64_t shape[1] = {1};
    attn_st_entry e = {"x", "F32", 1, shape, &tag, sizeof tag};
    char step_s[32];
    snprintf(step_s, sizeof step_s, "%lld", (long long)step);
    attn_st_kv meta[2] = {
        {"format", strcmp(name, ATTN_CKPT_MODEL) ? "attn-train-state" : "attn-gpt"},
        {"step", step_s}};
    attn_error err;
    cr_assert_eq(attn_safetensors_write(path, &e, 1, meta, 2, &err), ATTN_OK, "%s", err.msg);
}

static void save(int64_t step, float tag) {
    attn_ckpt_txn t;
    attn_error err;
    char p[ATTN_CKPT_PATH_MAX];
    cr_assert_eq(attn_ckpt_begin(&t, dir, step, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_ckpt_file(&t, ATTN_CKPT_MODEL, p, &err), ATTN_OK);
    write_ckpt_file(p, ATTN_CKPT_MODEL, step, tag);
    cr_assert_eq(attn_ckpt_file(&t, ATTN_CKPT_STATE, p, &err), ATTN_OK);
    write_ckpt_file(p, ATTN_CKPT_STATE, step, tag);
    cr_assert_eq(attn_ckpt_commit(&t, &err), ATTN_OK, "%s", err.msg);
}

static char *at(const char *name) {
    static char p[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", dir, name);
    return p[i];
}

/* The value a checkpoint file holds (-1 when unreadable). */
static float tag_of(const char *path) {
    attn_safetensors st;
    if (attn_safetensors_read(path, &st, NULL)) return -1;
    const attn_st_tensor *t = attn_safetensors_find(&st, "x");
    float v = t ? *(const float *)t->data : -1;
    attn_safetensors_free(&st);
    return v;
}

static int exists(const char *name) {
    struct stat sb;
    return lstat(at(name), &sb) == 0;
}

static void write_text(const char *name, const char *text) {
    cr_assert_eq(attn_file_write_atomic(at(name), text, strlen(text), NULL), ATTN_OK, "%s", name);
}

static void expect_text(const char *name, const char *text) {
    void *data;
    size_t n;
    cr_assert_eq(attn_file_read_all(at(name), 0, &data, &n, NULL), ATTN_OK, "%s", name);
    cr_expect(n == strlen(text) && !memcmp(data, text, n), "%s holds '%.*s', want '%s'", name,
              (int)n, (char *)data, text);
    free(data);
}

static void copy_ckpt(const char *from, const char *to) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp -rL '%s' '%s'", at(from), at(to));
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

TestSuite(checkpoint, .init = setup, .fini = teardown);

Test(checkpoint, commit_switches_both_files_and_keeps_top_names) {
    int64_t step;
    cr_expect_eq(attn_ckpt_exists(dir, &step), 0);
    char live[ATTN_CKPT_PATH_MAX];
    attn_error err;
    cr_expect_eq(attn_ckpt_resolve(dir, live, &err), ATTN_ERR_NOT_FOUND);
    cr_expect(strstr(err.msg, "holds no checkpoint"), "%s", err.msg);
    save(1, 1);
    save(2, 2);
    cr_expect_eq(attn_ckpt_exists(dir, &step), 1);
    cr_expect_eq(step, 2);
    cr_expect_eq(tag_of(at(ATTN_CKPT_MODEL)), 2); /* the top-level names follow latest */
    cr_expect_eq(tag_of(at(ATTN_CKPT_STATE)), 2);
    cr_assert_eq(attn_ckpt_resolve(dir, live, &err), ATTN_OK, "%s", err.msg);
    cr_expect(strstr(live, "/ckpt-2"), "%s", live);
    cr_expect(!exists("ckpt-1"), "the older checkpoint is removed");
    save(2, 2.5f); /* the same step again gets its own folder */
    cr_expect_eq(tag_of(at(ATTN_CKPT_MODEL)), 2.5f);
    cr_expect(!exists("ckpt-2") && exists("ckpt-2.1"));
}

Test(checkpoint, abort_and_debris_leave_the_previous_one) {
    save(5, 5);
    attn_ckpt_txn t;
    char p[ATTN_CKPT_PATH_MAX];
    cr_assert_eq(attn_ckpt_begin(&t, dir, 6, NULL), ATTN_OK);
    cr_assert_eq(attn_ckpt_file(&t, ATTN_CKPT_MODEL, p, NULL), ATTN_OK);
    write_ckpt_file(p, ATTN_CKPT_MODEL, 6, 6);
    attn_ckpt_abort(&t);
    attn_ckpt_abort(&t); /* twice is fine */
    cr_expect_eq(tag_of(at(ATTN_CKPT_MODEL)), 5);
    /* What a killed save leaves: a half-made folder, an empty and a complete
     * newer orphan, temp files. */
    cr_assert_eq(attn_ckpt_begin(&t, dir, 7, NULL), ATTN_OK); /* never committed */
    cr_assert_eq(mkdir(at("ckpt-9"), 0777), 0);
    copy_ckpt("ckpt-5", "ckpt-8");
    write_text(".model.safetensors.tmp-abcdef", "x");
    cr_assert_eq(symlink("ckpt-8", at(".latest.tmp-4242")), 0);
    /* Not attn's: other names, a user's file in a checkpoint's name, a
     * checkpoint file with the user's content, a temp folder of theirs. */
    cr_assert_eq(mkdir(at("ckpt-notes"), 0777), 0);
    cr_assert_eq(mkdir(at(".mine.tmp-1"), 0777), 0);
    write_text(".mine.tmp-1/keep.txt", "k");
    cr_assert_eq(mkdir(at("ckpt-3"), 0777), 0);
    write_text("ckpt-3/notes.txt", "mine");
    cr_assert_eq(mkdir(at("ckpt-4"), 0777), 0);
    write_text("ckpt-4/model.safetensors", "my own weights");
    cr_assert_eq(mkdir(at(".ckpt-2.tmp-77"), 0777), 0);
    write_text(".ckpt-2.tmp-77/notes.txt", "n");
    int removed = -1;
    attn_error err;
    cr_expect_eq(attn_ckpt_clean_stale(dir, &removed, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(removed, 5);
    cr_expect(exists("ckpt-5") && !exists("ckpt-9") && !exists("ckpt-8"));
    struct stat sb;
    cr_expect(lstat(t.tmp, &sb) != 0 && !exists(".latest.tmp-4242"), "%s", t.tmp);
    cr_expect(exists("ckpt-notes") && exists(".mine.tmp-1/keep.txt"));
    expect_text("ckpt-3/notes.txt", "mine");
    expect_text("ckpt-4/model.safetensors", "my own weights");
    expect_text(".ckpt-2.tmp-77/notes.txt", "n");
    cr_expect_eq(tag_of(at(ATTN_CKPT_STATE)), 5);
}

Test(checkpoint, user_entries_survive_saves_and_remove_all) {
    cr_assert_eq(mkdir(at("ckpt-7"), 0777), 0);
    write_text("ckpt-7/notes.txt", "mine");
    write_text("notes.txt", "top");
    int64_t step;
    cr_expect_eq(attn_ckpt_exists(dir, &step), 0, "a user's ckpt-7/ is no checkpoint");
    save(7, 7); /* the name is taken: a suffix */
    cr_expect(exists("ckpt-7.1"));
    save(8, 8);
    cr_expect(!exists("ckpt-7.1") && exists("ckpt-8"));
    expect_text("ckpt-7/notes.txt", "mine");
    int removed = -1;
    attn_error err;
    cr_assert_eq(attn_ckpt_remove_all(dir, &removed, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(removed, 4); /* latest, the two links, ckpt-8 */
    cr_expect(!exists("latest") && !exists("ckpt-8") && !exists(ATTN_CKPT_MODEL));
    expect_text("ckpt-7/notes.txt", "mine");
    expect_text("notes.txt", "top");
    cr_expect_eq(attn_ckpt_exists(dir, &step), 0);
}

Test(checkpoint, a_users_top_level_file_is_never_replaced) {
    write_text(ATTN_CKPT_MODEL, "my own weights");
    char name[64];
    cr_expect_eq(attn_ckpt_find_foreign(dir, name, sizeof name), 1);
    cr_expect_str_eq(name, ATTN_CKPT_MODEL);
    attn_ckpt_txn t;
    attn_error err;
    char p[ATTN_CKPT_PATH_MAX];
    cr_assert_eq(attn_ckpt_begin(&t, dir, 1, &err), ATTN_OK);
    cr_assert_eq(attn_ckpt_file(&t, ATTN_CKPT_MODEL, p, &err), ATTN_OK);
    write_ckpt_file(p, ATTN_CKPT_MODEL, 1, 1);
    cr_assert_eq(attn_ckpt_file(&t, ATTN_CKPT_STATE, p, &err), ATTN_OK);
    write_ckpt_file(p, ATTN_CKPT_STATE, 1, 1);
    cr_expect_eq(attn_ckpt_commit(&t, &err), ATTN_ERR_IO);
    cr_expect(strstr(err.msg, "is not attn's"), "%s", err.msg);
    expect_text(ATTN_CKPT_MODEL, "my own weights");
    /* A user's file named latest is neither replaced nor taken for a pointer. */
    remove_tree(dir);
    cr_assert_eq(mkdir(dir, 0777), 0);
    write_text("latest", "my notes on the latest run");
    cr_expect_eq(attn_ckpt_find_foreign(dir, name, sizeof name), 1);
    cr_assert_eq(attn_ckpt_begin(&t, dir, 1, &err), ATTN_OK);
    cr_assert_eq(attn_ckpt_file(&t, ATTN_CKPT_STATE, p, &err), ATTN_OK);
    write_ckpt_file(p, ATTN_CKPT_STATE, 1, 1);
    cr_expect_eq(attn_ckpt_commit(&t, &err), ATTN_ERR_IO);
    expect_text("latest", "my notes on the latest run");
    cr_expect(!exists("ckpt-1"), "the refused checkpoint is taken back");
}

/* Each way a copy or a user leaves latest: it resolves to the newest complete
 * checkpoint (an incomplete newer one is passed over), nothing is cleaned
 * away, and repair points latest at it again. */
Test(checkpoint, a_broken_latest_resolves_to_the_newest_complete_one) {
    static const char *const kinds[] = {"missing", "dangling", "a file", "a folder"};
    for (int k = 0; k < 4; k++) {
        remove_tree(dir);
        cr_assert_eq(mkdir(dir, 0777), 0);
        save(30, 30);
        copy_ckpt("ckpt-30", "ckpt-20");             /* an older complete one */
        cr_assert_eq(mkdir(at("ckpt-40"), 0777), 0); /* a newer, cut copy: no state */
        write_ckpt_file(at("ckpt-40/" ATTN_CKPT_MODEL), ATTN_CKPT_MODEL, 40, 40);
        cr_assert_eq(unlink(at("latest")), 0);
        const char *want = "ckpt-30";
        if (k == 1) cr_assert_eq(symlink("ckpt-50", at("latest")), 0);
        if (k == 2) write_text("latest", "ckpt-30");
        if (k == 3) {
            copy_ckpt("ckpt-30", "latest");
            want = "ckpt-30.1"; /* the folder becomes a checkpoint of its own */
        }
        char live[ATTN_CKPT_PATH_MAX], what[512];
        attn_error err;
        int64_t step;
        cr_expect_eq(attn_ckpt_exists(dir, &step), 1, "%s", kinds[k]);
        cr_expect_eq(step, 40, "%s: the newest checkpoint material", kinds[k]);
        cr_assert_eq(attn_ckpt_resolve(dir, live, &err), ATTN_OK, "%s: %s", kinds[k], err.msg);
        cr_expect(strstr(live, "/ckpt-30") && !strstr(live, "ckpt-30."), "%s: %s", kinds[k], live);
        int removed = -1;
        cr_expect_eq(attn_ckpt_clean_stale(dir, &removed, &err), ATTN_OK);
        cr_expect_eq(removed, 0, "%s: nothing goes without a live pointer", kinds[k]);
        cr_assert_eq(attn_ckpt_repair(dir, what, sizeof what, &err), ATTN_OK, "%s", err.msg);
        cr_expect(strstr(what, "it now names") && strstr(what, want), "%s: %s", kinds[k], what);
        char target[64] = "";
        ssize_t n = readlink(at("latest"), target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        cr_expect_str_eq(target, want, "%s", kinds[k]);
        cr_expect(exists("ckpt-20") && exists("ckpt-30") && exists("ckpt-40"), "%s", kinds[k]);
        save(31, 31); /* the next save supersedes all older ones */
        cr_expect(!exists("ckpt-20") && !exists("ckpt-30") && !exists("ckpt-30.1"), "%s", kinds[k]);
        cr_expect(exists("ckpt-40"), "%s: a newer one that is not superseded stays", kinds[k]);
        cr_expect_eq(tag_of(at(ATTN_CKPT_MODEL)), 31);
    }
}

Test(checkpoint, older_layout_is_read) {
    write_ckpt_file(at(ATTN_CKPT_STATE), ATTN_CKPT_STATE, 12, 12);
    write_ckpt_file(at(ATTN_CKPT_MODEL), ATTN_CKPT_MODEL, 12, 12);
    char live[ATTN_CKPT_PATH_MAX];
    int64_t step;
    cr_expect_eq(attn_ckpt_exists(dir, &step), 1);
    cr_expect_eq(step, 12);
    cr_assert_eq(attn_ckpt_resolve(dir, live, NULL), ATTN_OK);
    cr_expect_str_eq(live, dir);
    save(13, 13); /* converts: the regular files, attn's, become links */
    char target[64] = "";
    cr_expect_gt(readlink(at(ATTN_CKPT_MODEL), target, sizeof target), 0);
    cr_expect_eq(tag_of(at(ATTN_CKPT_MODEL)), 13);
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

Test(checkpoint, a_users_lock_file_is_left_alone) {
    write_text(ATTN_RUN_LOCK_FILE, "my padlock combination\n");
    attn_run_lock l;
    attn_error err;
    cr_expect_eq(attn_run_lock_acquire(&l, dir, "attn", &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "not attn's lock file"), "%s", err.msg);
    expect_text(ATTN_RUN_LOCK_FILE, "my padlock combination\n");
    write_text(ATTN_RUN_LOCK_FILE, "pid 123: attn train --out x\n"); /* a killed run's */
    cr_expect_eq(attn_run_lock_acquire(&l, dir, "attn", &err), ATTN_OK, "%s", err.msg);
    attn_run_lock_release(&l);
}
