/* libattn-ompwait.so: a short OpenMP spin, set before libgomp reads it.
 *
 * OpenMP threads that wait by spinning collapse on a busy machine: with one
 * other busy process, two spinning threads ran training 5x slower than one
 * thread (each barrier waits for a thread the busy core has descheduled,
 * while its partner burns the other core). Unless the user chose a policy
 * (OMP_WAIT_POLICY or GOMP_SPINCOUNT), this sets GOMP_SPINCOUNT=1000,
 * libgomp's own figure for oversubscribed machines, before a waiting thread
 * sleeps.
 *
 * libgomp reads its environment once, in its constructor. To set it in the
 * same process, code must run after libc's initialisation (it assigns
 * `environ`, which undoes a setenv from the program's .preinit_array) and
 * before libgomp's constructor. A library's constructor runs after its
 * dependencies' ones, so libattn's own would be too late (libgomp is its
 * dependency). This library depends on libc alone and is linked after
 * libgomp into attn and libattn.so, and glibc's loader runs the constructor
 * of a later, independent library first (with either of its sorting
 * algorithms). tests/startup_spin.sh checks what libgomp saw
 * (OMP_DISPLAY_ENV) in attn, in a program linked with libattn.so and in
 * Python loading it. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>

__attribute__((constructor)) static void attn_short_spin(void) {
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT"))
        setenv("GOMP_SPINCOUNT", "1000", 0);
}
