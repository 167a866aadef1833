/* attn/version.h — which attn this is.
 *
 * ATTN_VERSION is the version of the headers a program was compiled with;
 * attn_version() is the version of the library it runs against (they differ
 * when a program built against one release loads another's libattn.so). */
#ifndef ATTN_VERSION_H
#define ATTN_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_VERSION_MAJOR 0
#define ATTN_VERSION_MINOR 1
#define ATTN_VERSION_PATCH 0
#define ATTN_VERSION "0.1.0"

/* "MAJOR.MINOR.PATCH" of the library in use (a static string). */
const char *attn_version(void);

/* A renamed function's old name, kept for one release as a static inline
 * wrapper of the new one: GCC and clang warn where it is still used. */
#if defined(__GNUC__)
#define ATTN_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define ATTN_DEPRECATED(msg)
#endif

#ifdef __cplusplus
}
#endif
#endif
