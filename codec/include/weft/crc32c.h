/* SPDX-License-Identifier: MIT */
/* weft/crc32c.h: CRC-32C (Castagnoli), as iSCSI, ext4 and SCTP use it. */
#ifndef WEFT_CRC32C_H
#define WEFT_CRC32C_H

#include <weft/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * weft_crc32c extends crc with len bytes of data and returns the new CRC.
 * Start with crc = 0; feeding data in pieces gives the same result as in one
 * call: weft_crc32c(0, "123456789", 9) == 0xE3069283. Uses the SSE4.2
 * crc32 instruction when the CPU has it, a table otherwise. Any thread.
 */
WEFT_API uint32_t weft_crc32c(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif

#endif
