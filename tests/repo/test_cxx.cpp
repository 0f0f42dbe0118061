// SPDX-License-Identifier: MIT
// test_cxx.cpp: a C++ program that includes every public header and calls
// into the library, so that a missing extern "C" fails to link.
#include <cstdio>
#include <cstring>

#include <weft/channel.h>
#include <weft/codec.h>
#include <weft/core.h>
#include <weft/crc32c.h>
#include <weft/frame.h>
#include <weft/histogram.h>
#include <weft/kv.h>
#include <weft/line.h>
#include <weft/loop.h>
#include <weft/messaging.h>
#include <weft/metrics.h>
#include <weft/msgpack_codec.h>
#include <weft/tls.h>
#include <weft/transport.h>

int
main()
{
	weft_loop *loop = nullptr;
	weft_task task = {};
	int rv;

	(void)task;
	if (std::strcmp(weft_version(), WEFT_VERSION_STRING) != 0) {
		std::fprintf(stderr, "version %s, headers %s\n", weft_version(),
		             WEFT_VERSION_STRING);
		return 1;
	}
	if ((rv = weft_loop_new(&loop)) != 0) {
		std::fprintf(stderr, "weft_loop_new: %s\n", weft_strerror(rv));
		return 1;
	}
	weft_loop_free(loop);
	std::printf("%s\n", weft_strerror(WEFT_EPROTO));
	return 0;
}
