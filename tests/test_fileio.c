/* Whole-file reads and atomic writes (attn/fileio.h): round trips, clear
 * errors naming the path, and that a failed or aborted write leaves no file
 * behind and an existing target unchanged. Each test works in its own temp
 * dir. */
#include "io_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>

#include "attn/fileio.h"

static const char *dir;

static void setup(void) {
    dir = tio_mkdtemp();
}
static void teardown(void) {
    tio_rmtree(dir);
}

TestSuite(fileio, .init = setup, .fini = teardown);

Test(fileio, read_all_returns_bytes_and_terminator) {
    const char *p = tio_path(dir, "a.txt");
    tio_write(p, "hello\0world", 11);
    void *data;
    size_t n;
    attn_error err;
    cr_assert_eq(attn_file_read_all(p, 0, &data, &n, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(n, 11);
    cr_assert(memcmp(data, "hello\0world", 11) == 0);
    cr_assert_eq(((char *)data)[11], '\0');
    free(data);
}

Test(fileio, read_all_empty_file) {
    const char *p = tio_path(dir, "empty");
    tio_write(p, "", 0);
    void *data;
    size_t n = 99;
    attn_error err;
    cr_assert_eq(attn_file_read_all(p, 0, &data, &n, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(n, 0);
    cr_assert_eq(((char *)data)[0], '\0');
    free(data);
}

Test(fileio, read_all_missing_file_names_path_and_reason) {
    const char *p = tio_path(dir, "nope.bin");
    void *data = (void *)1;
    size_t n = 1;
    attn_error err;
    cr_assert_eq(attn_file_read_all(p, 0, &data, &n, &err), ATTN_ERR_IO);
    cr_assert_null(data);
    cr_assert_eq(n, 0);
    cr_assert(strstr(err.msg, p), "%s", err.msg);
    cr_assert(strstr(err.msg, "No such file or directory"), "%s", err.msg);
}

Test(fileio, read_all_directory_is_an_error) {
    void *data;
    size_t n;
    attn_error err;
    cr_assert_eq(attn_file_read_all(dir, 0, &data, &n, &err), ATTN_ERR_IO);
    cr_assert(strstr(err.msg, "Is a directory"), "%s", err.msg);
}

Test(fileio, read_all_respects_size_limit) {
    const char *p = tio_path(dir, "big");
    char buf[100] = {0};
    tio_write(p, buf, sizeof buf);
    void *data;
    size_t n;
    attn_error err;
    cr_assert_eq(attn_file_read_all(p, 99, &data, &n, &err), ATTN_ERR_IO);
    cr_assert(strstr(err.msg, "limit of 99 bytes"), "%s", err.msg);
    cr_assert_eq(attn_file_read_all(p, 100, &data, &n, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(n, 100);
    free(data);
}

Test(fileio, read_all_from_a_pipe_grows_the_buffer) {
    /* /proc files report size 0, like pipes: exercises the growing path. */
    void *data;
    size_t n;
    attn_error err;
    cr_assert_eq(attn_file_read_all("/proc/self/status", 0, &data, &n, &err), ATTN_OK, "%s",
                 err.msg);
    cr_assert_gt(n, 0);
    cr_assert(strstr(data, "Name:"));
    free(data);
}

Test(fileio, write_atomic_creates_and_replaces) {
    const char *p = tio_path(dir, "out.bin");
    attn_error err;
    cr_assert_eq(attn_file_write_atomic(p, "first", 5, &err), ATTN_OK, "%s", err.msg);
    size_t n;
    unsigned char *b = tio_slurp(p, &n);
    cr_assert(n == 5 && memcmp(b, "first", 5) == 0);
    free(b);
    cr_assert_eq(attn_file_write_atomic(p, "second!", 7, &err), ATTN_OK, "%s", err.msg);
    b = tio_slurp(p, &n);
    cr_assert(n == 7 && memcmp(b, "second!", 7) == 0);
    free(b);
    cr_assert_eq(tio_count_entries(dir), 1, "temp file left behind");
}

Test(fileio, write_atomic_relative_path) {
    cr_assert_eq(chdir(dir), 0);
    attn_error err;
    cr_assert_eq(attn_file_write_atomic("rel.txt", "x", 1, &err), ATTN_OK, "%s", err.msg);
    size_t n;
    unsigned char *b = tio_slurp(tio_path(dir, "rel.txt"), &n);
    cr_assert(b && n == 1 && b[0] == 'x');
    free(b);
    cr_assert_eq(tio_count_entries(dir), 1);
}

Test(fileio, new_file_mode_follows_umask_existing_mode_kept) {
    umask(022);
    const char *p = tio_path(dir, "m.bin");
    attn_error err;
    cr_assert_eq(attn_file_write_atomic(p, "a", 1, &err), ATTN_OK, "%s", err.msg);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0644, "mode %o", st.st_mode & 0777);
    cr_assert_eq(chmod(p, 0600), 0);
    cr_assert_eq(attn_file_write_atomic(p, "b", 1, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
}

Test(fileio, streaming_write_commit) {
    const char *p = tio_path(dir, "s.bin");
    attn_atomic_file f;
    attn_error err;
    cr_assert_eq(attn_atomic_open(&f, p, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(access(p, F_OK), -1, "target must not exist before commit");
    cr_assert_eq(attn_atomic_write(&f, "ab", 2, &err), ATTN_OK);
    cr_assert_eq(attn_atomic_write(&f, "", 0, &err), ATTN_OK);
    cr_assert_eq(attn_atomic_write(&f, "cde", 3, &err), ATTN_OK);
    cr_assert_eq(tio_count_entries(dir), 1); /* just the temp file */
    cr_assert_eq(attn_atomic_commit(&f, &err), ATTN_OK, "%s", err.msg);
    size_t n;
    unsigned char *b = tio_slurp(p, &n);
    cr_assert(n == 5 && memcmp(b, "abcde", 5) == 0);
    free(b);
    cr_assert_eq(tio_count_entries(dir), 1);
    /* Handle is spent: more writes are a state error; abort is a no-op. */
    cr_assert_eq(attn_atomic_write(&f, "x", 1, &err), ATTN_ERR_STATE);
    cr_assert_eq(attn_atomic_commit(&f, &err), ATTN_ERR_STATE);
    attn_atomic_abort(&f);
    attn_atomic_abort(&f);
    b = tio_slurp(p, &n);
    cr_assert(n == 5 && memcmp(b, "abcde", 5) == 0);
    free(b);
}

/* Zero blocks are skipped (holes), the bytes read back the same: runs of
 * zeros at the start, between data, across calls and at the end (the size
 * set without a last write), a zero tail shorter than a block, and a direct
 * target (a FIFO-like /dev/null: no seek) written whole. */
Test(fileio, sparse_write_reads_back_the_same_bytes) {
    const size_t B = (size_t)1 << 16, n = 7 * B + 100;
    unsigned char *want = calloc(2 * n, 1);
    cr_assert_not_null(want);
    for (size_t i = 2 * B + 5; i < 3 * B + 7; i++)
        want[i] = (unsigned char)(i * 7 + 1);
    want[5 * B] = 9;
    want[n + B + 3] = 4; /* the second call: zeros, a byte, zeros to its end */
    const char *p = tio_path(dir, "sparse.bin");
    attn_atomic_file f;
    attn_error err;
    cr_assert_eq(attn_atomic_open(&f, p, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_atomic_write_sparse(&f, want, n, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_atomic_write_sparse(&f, want + n, n, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_atomic_commit(&f, &err), ATTN_OK, "%s", err.msg);
    size_t got;
    unsigned char *b = tio_slurp(p, &got);
    cr_assert_eq(got, 2 * n);
    cr_assert(memcmp(b, want, 2 * n) == 0);
    free(b);
    /* All zeros, whole blocks: the file is its size with nothing written. */
    const char *z = tio_path(dir, "zeros.bin");
    memset(want, 0, 2 * n);
    cr_assert_eq(attn_atomic_open(&f, z, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_atomic_write_sparse(&f, want, 4 * B, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_atomic_commit(&f, &err), ATTN_OK, "%s", err.msg);
    b = tio_slurp(z, &got);
    cr_assert(got == 4 * B && memcmp(b, want, got) == 0);
    free(b);
    cr_assert_eq(attn_atomic_open(&f, "/dev/null", &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_atomic_write_sparse(&f, want, 2 * B, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_atomic_commit(&f, &err), ATTN_OK, "%s", err.msg);
    free(want);
}

Test(fileio, streaming_abort_leaves_existing_target_unchanged) {
    const char *p = tio_path(dir, "keep.bin");
    tio_write(p, "original", 8);
    attn_atomic_file f;
    attn_error err;
    cr_assert_eq(attn_atomic_open(&f, p, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_atomic_write(&f, "partial new content", 19, &err), ATTN_OK);
    attn_atomic_abort(&f);
    size_t n;
    unsigned char *b = tio_slurp(p, &n);
    cr_assert(n == 8 && memcmp(b, "original", 8) == 0);
    free(b);
    cr_assert_eq(tio_count_entries(dir), 1, "temp file left behind");
}

Test(fileio, streaming_abort_without_target_leaves_nothing) {
    const char *p = tio_path(dir, "never.bin");
    attn_atomic_file f;
    attn_error err;
    cr_assert_eq(attn_atomic_open(&f, p, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_atomic_write(&f, "xyz", 3, &err), ATTN_OK);
    attn_atomic_abort(&f);
    cr_assert_eq(tio_count_entries(dir), 0);
}

/* A real write failure: cap the file size (RLIMIT_FSIZE) so write() fails
 * with EFBIG part-way through. Criterion runs each test in its own process. */
Test(fileio, failed_write_leaves_target_unchanged_and_no_temp) {
    const char *p = tio_path(dir, "target.bin");
    tio_write(p, "old contents", 12);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {.rlim_cur = 1000, .rlim_max = RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    static char big[5000];
    memset(big, 'z', sizeof big);
    attn_error err;
    cr_assert_eq(attn_file_write_atomic(p, big, sizeof big, &err), ATTN_ERR_IO);
    cr_assert(strstr(err.msg, p), "%s", err.msg);
    cr_assert(strstr(err.msg, strerror(EFBIG)), "%s", err.msg);
    size_t n;
    unsigned char *b = tio_slurp(p, &n);
    cr_assert(n == 12 && memcmp(b, "old contents", 12) == 0);
    free(b);
    cr_assert_eq(tio_count_entries(dir), 1, "temp file left behind");

    /* Streaming form: the failing write aborts by itself. */
    attn_atomic_file f;
    cr_assert_eq(attn_atomic_open(&f, p, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_atomic_write(&f, big, 900, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_atomic_write(&f, big, 900, &err), ATTN_ERR_IO);
    cr_assert_eq(tio_count_entries(dir), 1, "temp file left behind");
    cr_assert_eq(attn_atomic_commit(&f, &err), ATTN_ERR_STATE);
    attn_atomic_abort(&f);
    b = tio_slurp(p, &n);
    cr_assert(n == 12 && memcmp(b, "old contents", 12) == 0);
    free(b);
}

Test(fileio, rename_over_directory_fails_cleanly) {
    const char *p = tio_path(dir, "sub");
    cr_assert_eq(mkdir(p, 0755), 0);
    attn_error err;
    cr_assert_eq(attn_file_write_atomic(p, "data", 4, &err), ATTN_ERR_IO);
    cr_assert(strstr(err.msg, p), "%s", err.msg);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(tio_count_entries(dir), 1, "temp file left behind");
}

Test(fileio, missing_directory_is_an_error_naming_the_path) {
    const char *p = tio_path(dir, "no/such/dir/out.npy");
    attn_error err;
    cr_assert_eq(attn_file_write_atomic(p, "data", 4, &err), ATTN_ERR_IO);
    cr_assert(strstr(err.msg, p), "%s", err.msg);
    cr_assert(strstr(err.msg, "No such file or directory"), "%s", err.msg);
    cr_assert_eq(tio_count_entries(dir), 0);
}

Test(fileio, empty_and_trailing_slash_paths_rejected) {
    attn_error err;
    cr_assert_eq(attn_file_write_atomic("", "x", 1, &err), ATTN_ERR_INVALID_ARG);
    cr_assert_eq(attn_file_write_atomic(tio_path(dir, "d/"), "x", 1, &err), ATTN_ERR_IO);
    cr_assert_eq(tio_count_entries(dir), 0);
}

Test(fileio, abort_on_zeroed_handle_touches_nothing) {
    /* A zeroed handle has fd 0: abort/write/commit must not use stdin. */
    int before = fcntl(0, F_GETFD);
    attn_atomic_file f;
    memset(&f, 0, sizeof f);
    attn_error err;
    cr_assert_eq(attn_atomic_write(&f, "x", 1, &err), ATTN_ERR_STATE);
    cr_assert_eq(attn_atomic_commit(&f, &err), ATTN_ERR_STATE);
    attn_atomic_abort(&f);
    attn_atomic_abort(NULL);
    cr_assert_eq(fcntl(0, F_GETFD), before);
}

/* An output that is an input, under any name, is refused; anything else is not. */
Test(fileio, an_output_that_is_an_input_is_refused) {
    char in[512], lnk[512], hard[512], other[512], dang[512], rel[512];
    snprintf(in, sizeof in, "%s", tio_path(dir, "in.npy"));
    snprintf(lnk, sizeof lnk, "%s", tio_path(dir, "link.npy"));
    snprintf(hard, sizeof hard, "%s", tio_path(dir, "hard.npy"));
    snprintf(other, sizeof other, "%s", tio_path(dir, "other.npy"));
    snprintf(dang, sizeof dang, "%s", tio_path(dir, "dangling.npy"));
    tio_write(in, "x", 1);
    tio_write(other, "y", 1);
    cr_assert_eq(symlink("in.npy", lnk), 0);
    cr_assert_eq(link(in, hard), 0);
    cr_assert_eq(symlink("not-yet.npy", dang), 0);
    const char *inputs[3] = {NULL, other, in};
    attn_error err;
    const char *same[3] = {in, lnk, hard};
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(attn_file_check_not_input(same[i], inputs, 3, &err), ATTN_ERR_INVALID_ARG,
                     "%s", same[i]);
        cr_expect(strstr(err.msg, same[i]) && strstr(err.msg, "is the input"), "%s", err.msg);
    }
    snprintf(rel, sizeof rel, "%s/../%s/in.npy", dir, strrchr(dir, '/') + 1);
    cr_expect_eq(attn_file_check_not_input(rel, inputs, 3, NULL), ATTN_ERR_INVALID_ARG, "%s", rel);
    cr_expect_eq(attn_file_check_not_input(dang, inputs, 3, NULL), ATTN_OK, "not written yet");
    cr_expect_eq(attn_file_check_not_input(tio_path(dir, "new.npy"), inputs, 3, NULL), ATTN_OK);
    cr_expect_eq(attn_file_check_not_input(other, inputs, 2, NULL), ATTN_ERR_INVALID_ARG);
    cr_expect_eq(attn_file_check_not_input(in, inputs, 2, NULL), ATTN_OK, "in is not among 2");
    const char *dev[1] = {"/dev/null"}; /* a device is written in place: no input */
    cr_expect_eq(attn_file_check_not_input("/dev/null", dev, 1, NULL), ATTN_OK);
    cr_expect_eq(attn_file_check_not_input("-", inputs, 3, NULL), ATTN_OK);
}
