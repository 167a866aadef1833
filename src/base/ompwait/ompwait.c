/* libattn-ompwait.so: settings that libgomp and OpenBLAS read once, as they
 * load, set before they do.
 *
 * 1. A short OpenMP spin. OpenMP threads that wait by spinning collapse on a
 * busy machine: with one other busy process, two spinning threads ran
 * training 5x slower than one thread (each barrier waits for a thread the
 * busy core has descheduled, while its partner burns the other core).
 * Unless the user chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT), this
 * sets GOMP_SPINCOUNT=1000, libgomp's own figure for oversubscribed
 * machines, before a waiting thread sleeps.
 *
 * 2. OpenBLAS's kernels on Intel CPUs newer than its table. Debian 12's
 * OpenBLAS (0.3.21) picks its kernels by CPUID family/model; a model it does
 * not list (Emerald Rapids, 6/207, for one) falls back to "Prescott", SSE3
 * kernels at a quarter of the AVX-512 rate (sgemm 1024^3 on 2 cores: 26.7
 * vs 104.8 GFLOP/s). Unless the user set OPENBLAS_CORETYPE, an Intel CPU
 * gets the kernels its features allow: SkylakeX with AVX-512 (F, CD, BW, DQ,
 * VL; the single-precision kernels OpenBLAS also uses for Cooper Lake and
 * Sapphire Rapids), Haswell with AVX2 and FMA. Other vendors are left to
 * OpenBLAS's own detection.
 *
 * Both libraries read their environment in their constructors. To set it in
 * the same process, code must run after libc's initialisation (it assigns
 * `environ`, which undoes a setenv from the program's .preinit_array) and
 * before those constructors. A library's constructor runs after its
 * dependencies' ones, so libattn's own would be too late (libgomp and
 * OpenBLAS are its dependencies). This library depends on libc alone and is
 * linked after them into attn and libattn.so, and glibc's loader runs the
 * constructor of a later, independent library first (with either of its
 * sorting algorithms). tests/startup_spin.sh checks what libgomp and
 * OpenBLAS saw in attn, in a program linked with libattn.so and in Python
 * loading it. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>

#include "attn/cpu.h" /* compiled in beside this file: hidden */

__attribute__((constructor)) static void attn_startup_env(void) {
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT"))
        setenv("GOMP_SPINCOUNT", "1000", 0);
    const char *core = getenv("OPENBLAS_CORETYPE") ? NULL : attn_cpu_openblas_core();
    if (core) setenv("OPENBLAS_CORETYPE", core, 0);
}
