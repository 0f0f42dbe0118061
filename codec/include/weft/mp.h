/* SPDX-License-Identifier: MIT */
/*
 * weft/mp.h: a bounded msgpack cursor, for records of a fixed layout
 * (protocol headers, small payloads) read and written without msgpack-c's
 * object tree or allocation.
 *
 * The reader takes every valid encoding of what it is asked for (an
 * integer in any of msgpack's integer forms that holds a non-negative
 * value, a string as fixstr or str 8/16/32, ...) and checks each length
 * against the bytes that are left before it reads them. The writer writes
 * the smallest encoding of each value. Both keep the first error: after
 * it every call fails at once, so a caller may make a run of calls and
 * look once, at the end (weft_mp_reader_end, weft_mp_writer_status).
 *
 * The structs are visible so that they can live on the stack; their
 * fields are the functions' to change. Neither owns its bytes.
 *
 * Threads: any thread, one at a time per cursor.
 */
#ifndef WEFT_MP_H
#define WEFT_MP_H

#include <weft/core.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_mp_reader {
	const unsigned char *p;   /* the next byte to read */
	const unsigned char *end; /* one past the last */
	int status;               /* 0, or the first error */
} weft_mp_reader;

typedef struct weft_mp_writer {
	unsigned char *start, *p, *end;
	int status; /* 0, or the first error */
} weft_mp_writer;

/* weft_mp_reader_init starts a reader on the len bytes at data (data may
 * be NULL when len is 0). */
WEFT_API void weft_mp_reader_init(weft_mp_reader *r, const void *data,
                                  size_t len);

/*
 * The reads. Each returns 0 and moves past what it read, or WEFT_EPROTO
 * (the bytes are missing, of another type, or out of range) and keeps it
 * as the reader's status. weft_mp_read_uint takes any integer form
 * holding a value from 0 to max. weft_mp_read_array takes an array header
 * (fixarray, array 16 or 32) and gives its element count;
 * weft_mp_read_map a map header (fixmap, map 16 or 32) and its number of
 * key-value pairs.
 * weft_mp_read_str and weft_mp_read_bin point *data into the input, at
 * *len bytes that are there. weft_mp_read_bin_header reads only the header
 * of a bin (8, 16 or 32) and gives the length that follows, which need
 * not be in the input yet.
 */
WEFT_API int weft_mp_read_uint(weft_mp_reader *r, uint64_t max, uint64_t *out);
WEFT_API int weft_mp_read_array(weft_mp_reader *r, uint32_t *count);
WEFT_API int weft_mp_read_map(weft_mp_reader *r, uint32_t *count);
WEFT_API int weft_mp_read_str(weft_mp_reader *r, const char **data,
                              size_t *len);
WEFT_API int weft_mp_read_bin(weft_mp_reader *r, const void **data,
                              size_t *len);
WEFT_API int weft_mp_read_bin_header(weft_mp_reader *r, uint32_t *len);
WEFT_API int weft_mp_read_nil(weft_mp_reader *r);
WEFT_API int weft_mp_read_bool(weft_mp_reader *r, bool *out);

/*
 * weft_mp_skip moves past one whole object of any type, containers with
 * everything in them, opening at most max_containers containers in all
 * (0: a container is refused), so that its work is bounded by the bytes
 * there are. Returns 0, or WEFT_EPROTO (bytes missing, the never-used
 * type 0xc1, too many containers), kept as the reader's status.
 */
WEFT_API int weft_mp_skip(weft_mp_reader *r, unsigned max_containers);

/* weft_mp_reader_left is the number of bytes not read yet. */
WEFT_API size_t weft_mp_reader_left(const weft_mp_reader *r);
/* weft_mp_reader_end returns the reader's status, or WEFT_EPROTO when it
 * is 0 but bytes are left: 0 says the input was read whole and valid. */
WEFT_API int weft_mp_reader_end(const weft_mp_reader *r);

/* weft_mp_writer_init starts a writer on the cap bytes at buf. */
WEFT_API void weft_mp_writer_init(weft_mp_writer *w, void *buf, size_t cap);

/*
 * The writes, each in its smallest encoding. Each returns 0, or
 * WEFT_ETOOBIG when the value does not fit in what is left of the buffer
 * (nothing is written then) and keeps it as the writer's status.
 * weft_mp_write_str_header and weft_mp_write_bin_header write only the
 * header of len bytes that the caller then writes (weft_mp_write_raw, or
 * in place); weft_mp_write_raw copies bytes as they are.
 */
WEFT_API int weft_mp_write_uint(weft_mp_writer *w, uint64_t v);
WEFT_API int weft_mp_write_array(weft_mp_writer *w, uint32_t count);
WEFT_API int weft_mp_write_map(weft_mp_writer *w, uint32_t count);
WEFT_API int weft_mp_write_str(weft_mp_writer *w, const char *data, size_t len);
WEFT_API int weft_mp_write_bin(weft_mp_writer *w, const void *data, size_t len);
WEFT_API int weft_mp_write_str_header(weft_mp_writer *w, uint32_t len);
WEFT_API int weft_mp_write_bin_header(weft_mp_writer *w, uint32_t len);
WEFT_API int weft_mp_write_nil(weft_mp_writer *w);
WEFT_API int weft_mp_write_bool(weft_mp_writer *w, bool v);
WEFT_API int weft_mp_write_raw(weft_mp_writer *w, const void *data, size_t len);

/* weft_mp_writer_length is the number of bytes written so far. */
WEFT_API size_t weft_mp_writer_length(const weft_mp_writer *w);
/* weft_mp_writer_status is 0, or the first error of a write
 * (WEFT_ETOOBIG). */
WEFT_API int weft_mp_writer_status(const weft_mp_writer *w);

#ifdef __cplusplus
}
#endif

#endif
