/* SPDX-License-Identifier: MIT */
/*
 * fuzz_alloc.c: the heap watch of fuzz.h, and fuzz_fail.
 *
 * Under AddressSanitizer (every libFuzzer build) the sanitizer's malloc
 * and free hooks do the counting; in a plain build this file replaces
 * glibc's allocation functions with ones that count and call glibc's own.
 * Either way each allocation counts for the bytes it really holds.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"

#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ALLOC_HOOKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ALLOC_HOOKS 1
#endif
#endif

/* GLOBAL (test): the watch. Any thread allocates, so all atomic. */
static atomic_bool watching;
static _Atomic long long held; /* since fuzz_alloc_begin; may go below 0 */
static _Atomic long long peak;

static void
note(long long delta)
{
	long long now, top;

	if (!atomic_load_explicit(&watching, memory_order_relaxed))
		return;
	now = atomic_fetch_add_explicit(&held, delta, memory_order_relaxed) +
	      delta;
	top = atomic_load_explicit(&peak, memory_order_relaxed);
	while (now > top && !atomic_compare_exchange_weak_explicit(
	                        &peak, &top, now, memory_order_relaxed,
	                        memory_order_relaxed))
		;
}

#ifdef FUZZ_ALLOC_HOOKS
int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void *, size_t),
    void (*free_hook)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *p);

static void
on_malloc(const volatile void *p, size_t n)
{
	(void)p;
	note((long long)n);
}

static void
on_free(const volatile void *p)
{
	if (p != NULL)
		note(-(long long)__sanitizer_get_allocated_size(p));
}

__attribute__((constructor)) static void
install_hooks(void)
{
	__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}
#else
#include <errno.h>
#include <malloc.h>

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void __libc_free(void *p);

/* Visible to the shared libraries too (the build hides symbols). */
#define FUZZ_API __attribute__((visibility("default")))

static void *
counted(void *p)
{
	if (p != NULL)
		note((long long)malloc_usable_size(p));
	return p;
}

FUZZ_API void *
malloc(size_t n)
{
	return counted(__libc_malloc(n));
}

FUZZ_API void *
calloc(size_t n, size_t size)
{
	return counted(__libc_calloc(n, size));
}

FUZZ_API void *
realloc(void *p, size_t n)
{
	size_t before = p != NULL ? malloc_usable_size(p) : 0;
	void *q = __libc_realloc(p, n);

	if (q != NULL || n == 0)
		note(-(long long)before);
	return counted(q);
}

FUZZ_API void *
memalign(size_t align, size_t n)
{
	return counted(__libc_memalign(align, n));
}

FUZZ_API void *
aligned_alloc(size_t align, size_t n)
{
	return memalign(align, n);
}

FUZZ_API int
posix_memalign(void **out, size_t align, size_t n)
{
	void *p = memalign(align, n);

	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}

FUZZ_API void
free(void *p)
{
	if (p != NULL)
		note(-(long long)malloc_usable_size(p));
	__libc_free(p);
}
#endif

void
fuzz_alloc_begin(void)
{
	atomic_store(&held, 0);
	atomic_store(&peak, 0);
	atomic_store(&watching, true);
}

size_t
fuzz_alloc_peak(void)
{
	long long top = atomic_load(&peak);

	return top > 0 ? (size_t)top : 0;
}

void
fuzz_alloc_end_within(size_t bytes, const char *what)
{
	size_t top = fuzz_alloc_peak();

	atomic_store(&watching, false);
	if (top > bytes)
		fuzz_fail("%s: the process held %zu heap bytes more, past "
		          "its bound of %zu",
		          what, top, bytes);
}

void
fuzz_alloc_end(size_t n, const char *what)
{
	fuzz_alloc_end_within(FUZZ_ALLOC_PER_BYTE * n + FUZZ_ALLOC_SLACK, what);
}

void
fuzz_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("fuzz: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}
