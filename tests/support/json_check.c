/* SPDX-License-Identifier: MIT */
/* json_check.c: a strict JSON recogniser (RFC 8259), no values built. */
#include <string.h>

#include "support/json_check.h"

#define MAX_DEPTH 64

struct cursor {
	const char *p, *end;
};

static void
skip_space(struct cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' ||
	                         *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static bool
literal(struct cursor *c, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
		return false;
	c->p += n;
	return true;
}

static bool
is_digit(struct cursor *c)
{
	return c->p < c->end && *c->p >= '0' && *c->p <= '9';
}

static bool
digits(struct cursor *c)
{
	if (!is_digit(c))
		return false;
	while (is_digit(c))
		c->p++;
	return true;
}

static bool
number(struct cursor *c)
{
	if (c->p < c->end && *c->p == '-')
		c->p++;
	if (c->p < c->end && *c->p == '0')
		c->p++;
	else if (!digits(c))
		return false;
	if (c->p < c->end && *c->p == '.' && (c->p++, !digits(c)))
		return false;
	if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
		c->p++;
		if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
			c->p++;
		return digits(c);
	}
	return true;
}

static bool
string(struct cursor *c)
{
	int i;

	if (c->p >= c->end || *c->p++ != '"')
		return false;
	while (c->p < c->end && *c->p != '"') {
		unsigned char ch = (unsigned char)*c->p++;

		if (ch < 0x20)
			return false;
		if (ch != '\\')
			continue;
		if (c->p >= c->end)
			return false;
		ch = (unsigned char)*c->p++;
		if (ch == 'u') {
			for (i = 0; i < 4; i++, c->p++)
				if (c->p >= c->end ||
				    strchr("0123456789abcdefABCDEF", *c->p) ==
				        NULL ||
				    *c->p == '\0')
					return false;
		} else if (strchr("\"\\/bfnrt", ch) == NULL || ch == '\0') {
			return false;
		}
	}
	return c->p < c->end && *c->p++ == '"';
}

static bool value(struct cursor *c, int depth);

/* The members or elements of an object or array, after its opening. */
static bool
items(struct cursor *c, int depth, char close, bool object)
{
	skip_space(c);
	if (c->p < c->end && *c->p == close) {
		c->p++;
		return true;
	}
	for (;;) {
		skip_space(c);
		if (object) {
			if (!string(c))
				return false;
			skip_space(c);
			if (c->p >= c->end || *c->p++ != ':')
				return false;
		}
		if (!value(c, depth + 1))
			return false;
		skip_space(c);
		if (c->p >= c->end)
			return false;
		if (*c->p == close) {
			c->p++;
			return true;
		}
		if (*c->p++ != ',')
			return false;
	}
}

static bool
value(struct cursor *c, int depth)
{
	if (depth > MAX_DEPTH)
		return false;
	skip_space(c);
	if (c->p >= c->end)
		return false;
	switch (*c->p) {
	case '{':
		c->p++;
		return items(c, depth, '}', true);
	case '[':
		c->p++;
		return items(c, depth, ']', false);
	case '"':
		return string(c);
	case 't':
		return literal(c, "true");
	case 'f':
		return literal(c, "false");
	case 'n':
		return literal(c, "null");
	default:
		return number(c);
	}
}

bool
json_is_valid(const char *text, size_t len)
{
	struct cursor c = {text, text + len};

	if (!value(&c, 0))
		return false;
	skip_space(&c);
	return c.p == c.end;
}
