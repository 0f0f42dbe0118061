/* SPDX-License-Identifier: MIT */
/* error.c: the version, error codes, their names and messages. */
#include <errno.h>

#include <weft/core.h>

const char *
weft_version(void)
{
	return WEFT_VERSION_STRING;
}

unsigned
weft_version_number(void)
{
	return WEFT_VERSION_NUMBER;
}

const char *
weft_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
#define WEFT__STRERROR_CASE(name, value, msg)                                  \
	case WEFT_##name:                                                      \
		return msg;
		WEFT_ERRNO_MAP(WEFT__STRERROR_CASE)
#undef WEFT__STRERROR_CASE
	default:
		return "unknown error";
	}
}

const char *
weft_errname(int err)
{
	switch (err) {
	case 0:
		return "OK";
#define WEFT__ERRNAME_CASE(name, value, msg)                                   \
	case WEFT_##name:                                                      \
		return #name;
		WEFT_ERRNO_MAP(WEFT__ERRNAME_CASE)
#undef WEFT__ERRNAME_CASE
	default:
		return "EUNKNOWN";
	}
}

int
weft_from_errno(int errnum)
{
	switch (errnum) {
	case 0:
		return 0;
	case ENOMEM:
	case ENOBUFS:
		return WEFT_ENOMEM;
	case EINVAL:
		return WEFT_EINVAL;
	case ETIMEDOUT:
		return WEFT_ETIMEDOUT;
	case ECONNREFUSED:
		return WEFT_ECONNREFUSED;
	case EADDRINUSE:
		return WEFT_EADDRINUSE;
	case EADDRNOTAVAIL:
	case EAFNOSUPPORT:
	case ENETUNREACH:
	case EHOSTUNREACH:
		return WEFT_EADDR;
	case EPIPE:
	case ECONNRESET:
	case ECONNABORTED:
	case ENOTCONN:
		return WEFT_ECLOSED;
	case ECANCELED:
		return WEFT_ECANCELED;
	case EEXIST:
		return WEFT_EEXIST;
	case ENOENT:
		return WEFT_ENOTFOUND;
	case EBUSY:
		return WEFT_EBUSY;
	case ENOTSUP:
		return WEFT_ENOTSUP;
	default:
		return WEFT_EIO;
	}
}
