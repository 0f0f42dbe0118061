/* SPDX-License-Identifier: MIT */
/*
 * kv_format.c: how weft-kv prints keys and values (weftd_int.h): escaped
 * text, one entry a line whatever the bytes, and JSON, with UTF-8 as
 * strings and other bytes in base64.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "weftd_int.h"

/* Prints the len bytes at p quoted: backslash, newline, return and tab by
 * their escapes, other control bytes as \xHH (text) or \u00HH (JSON, which
 * also escapes '"'; JSON keeps bytes past ASCII, text escapes them). */
static void
print_quoted(FILE *f, const uint8_t *p, size_t len, bool json)
{
	static const char from[] = "\\\n\r\t", to[] = "\\nrt";
	const char *e;
	size_t i;

	for (i = 0; i < len; i++) {
		if (p[i] != '\0' && (e = strchr(from, p[i])) != NULL)
			fprintf(f, "\\%c", to[e - from]);
		else if (json && p[i] == '"')
			fputs("\\\"", f);
		else if (p[i] < 0x20 || p[i] == 0x7f || (!json && p[i] > 0x7f))
			fprintf(f, json ? "\\u%04x" : "\\x%02x", p[i]);
		else
			fputc(p[i], f);
	}
}

void
weftd_print_escaped(FILE *f, const void *data, size_t len)
{
	print_quoted(f, data, len, false);
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
	fputc('"', f);
	print_quoted(f, (const uint8_t *)s, len, true);
	fputc('"', f);
}

/* Other bytes go as base64, with OpenSSL's encoder. */
static void
print_base64(FILE *f, const uint8_t *p, size_t len)
{
	unsigned char out[4 * 768 / 3 + 1];
	size_t i, n;

	fputc('"', f);
	for (i = 0; i < len; i += n) {
		n = len - i < 768 ? len - i : 768; /* a multiple of 3 */
		EVP_EncodeBlock(out, p + i, (int)n);
		fputs((const char *)out, f);
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
