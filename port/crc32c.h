/* SPDX-License-Identifier: MIT */
/*
 * port/crc32c.h — CRC-32C (Castagnoli), as iSCSI/ext4/btrfs use it.
 * Hardware instructions where the CPU has them (SSE4.2, ARMv8 CRC), slicing-by-8 otherwise.
 */
#ifndef EDGEPROF_PORT_CRC32C_H
#define EDGEPROF_PORT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc32c(0, data, len) is the standard CRC-32C; pass a previous result to continue it. */
uint32_t crc32c(uint32_t crc, const void *data, size_t len);

#endif /* EDGEPROF_PORT_CRC32C_H */
