/* SPDX-License-Identifier: MIT */
/*
 * alloc_count.h: counts the bytes a program asks the allocator for while
 * counting is on. Include it in exactly one file of a test program. Under
 * ASan or TSan it uses the sanitizer's malloc hook; otherwise it wraps
 * glibc's malloc, calloc and realloc.
 */
#ifndef WEFT_TESTS_CODEC_ALLOC_COUNT_H
#define WEFT_TESTS_CODEC_ALLOC_COUNT_H

#include <stdbool.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOC_COUNT_HOOKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ALLOC_COUNT_HOOKS 1
#endif
#endif

/* GLOBAL (test): the counter, touched only by the test thread while on. */
static bool alloc_counting;
static size_t alloc_bytes;
static size_t alloc_calls;

static void
alloc_note(size_t n)
{
	if (alloc_counting) {
		alloc_bytes += n;
		alloc_calls++;
	}
}

#ifdef ALLOC_COUNT_HOOKS
int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void *, size_t),
    void (*free_hook)(const volatile void *));

static void
on_malloc(const volatile void *p, size_t n)
{
	(void)p;
	alloc_note(n);
}

static void
on_free(const volatile void *p)
{
	(void)p;
}

static void
alloc_count_setup(void)
{
	__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}
#else
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);

/* Visible to the shared libraries too (the build hides symbols). */
#define ALLOC_COUNT_API __attribute__((visibility("default")))

ALLOC_COUNT_API void *
malloc(size_t n)
{
	alloc_note(n);
	return __libc_malloc(n);
}

ALLOC_COUNT_API void *
calloc(size_t n, size_t size)
{
	alloc_note(n * size);
	return __libc_calloc(n, size);
}

ALLOC_COUNT_API void *
realloc(void *p, size_t n)
{
	alloc_note(n);
	return __libc_realloc(p, n);
}

static void
alloc_count_setup(void)
{
}
#endif

static void
alloc_count_start(void)
{
	alloc_bytes = 0;
	alloc_calls = 0;
	alloc_counting = true;
}

static size_t
alloc_count_stop(void)
{
	alloc_counting = false;
	return alloc_bytes;
}

#endif
