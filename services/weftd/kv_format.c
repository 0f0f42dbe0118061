/* SPDX-License-Identifier: MIT */
/*
 * kv_format.c: how weft-kv prints keys and values (weftd_int.h): escaped
 * text, one entry a line whatever the bytes, and JSON, with UTF-8 as
 * strings and other bytes in base64.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "weftd_int.h"

void
weftd_print_escaped(FILE *f, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t i;

	for (i = 0; i < len; i++) {
		if (p[i] == '\\')
			fputs("\\\\", f);
		else if (p[i] == '\n')
			fputs("\\n", f);
		else if (p[i] == '\r')
			fputs("\\r", f);
		else if (p[i] == '\t')
			fputs("\\t", f);
		else if (p[i] >= 0x20 && p[i] < 0x7f)
			fputc(p[i], f);
		else
			fprintf(f, "\\x%02x", p[i]);
	}
}

/* The length of the UTF-8 sequence at p (at most n bytes), or 0 if it is
 * not one: overlong forms, surrogates and code points past U+10FFFF are
 * not. */
static size_t
utf8_sequence(const uint8_t *p, size_t n)
{
	uint32_t cp;
	size_t len, i;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4;
	else
		return 0;
	cp = p[0] & (0x7fu >> len);
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

static bool
is_utf8(const uint8_t *p, size_t len)
{
	size_t i = 0, n;

	while (i < len) {
		if ((n = utf8_sequence(p + i, len - i)) == 0)
			return false;
		i += n;
	}
	return true;
}

void
weftd_print_json_string(FILE *f, const char *s, size_t len)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t i;

	fputc('"', f);
	for (i = 0; i < len; i++) {
		if (p[i] == '"' || p[i] == '\\')
			fprintf(f, "\\%c", p[i]);
		else if (p[i] == '\n')
			fputs("\\n", f);
		else if (p[i] == '\r')
			fputs("\\r", f);
		else if (p[i] == '\t')
			fputs("\\t", f);
		else if (p[i] < 0x20 || p[i] == 0x7f)
			fprintf(f, "\\u%04x", p[i]);
		else
			fputc(p[i], f);
	}
	fputc('"', f);
}

static void
print_base64(FILE *f, const uint8_t *p, size_t len)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                          "abcdefghijklmnopqrstuvwxyz0123456789+/";
	uint32_t v;
	size_t i;

	fputc('"', f);
	for (i = 0; i + 2 < len; i += 3) {
		v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		fprintf(f, "%c%c%c%c", abc[v >> 18], abc[(v >> 12) & 63],
		        abc[(v >> 6) & 63], abc[v & 63]);
	}
	if (len - i == 1) {
		v = (uint32_t)p[i] << 16;
		fprintf(f, "%c%c==", abc[v >> 18], abc[(v >> 12) & 63]);
	} else if (len - i == 2) {
		v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
		fprintf(f, "%c%c%c=", abc[v >> 18], abc[(v >> 12) & 63],
		        abc[(v >> 6) & 63]);
	}
	fputc('"', f);
}

void
weftd_print_json_bytes(FILE *f, const char *name, const void *data, size_t len)
{
	if (is_utf8(data, len)) {
		fprintf(f, "\"%s\":", name);
		weftd_print_json_string(f, data, len);
	} else {
		fprintf(f, "\"%s_base64\":", name);
		print_base64(f, data, len);
	}
}
