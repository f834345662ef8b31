/* SPDX-License-Identifier: MIT */
/*
 * pprof/snapshot.h — a copy of a sample's registers and the top of its user stack, carried from
 * the device to the collector in the pprof sample's label "snapshot", so that the collector can
 * unwind it with the debug files it holds (the way perf --call-graph dwarf unwinds on a desktop).
 *
 * The blob: version (1 byte), register count n (1 byte), ELF e_machine (2 bytes, little-endian),
 * n registers of 4 bytes (little-endian, DWARF numbering: on ARM r0..r15, r13 the stack pointer
 * and r15 the interrupted pc with the Thumb bit in bit 0), then the stack bytes that were at
 * [r13, r13 + len). In the label it is base64 (RFC 4648, padded): a label's value is a string,
 * which go tool pprof keeps and shows without reading it; the collector takes it out before it
 * stores the profile. Only 32-bit ARM is written today (the board no unwinder serves).
 */
#ifndef EDGEPROF_PPROF_SNAPSHOT_H
#define EDGEPROF_PPROF_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#define SNAPSHOT_LABEL	   "snapshot"
#define SNAPSHOT_VERSION   1
#define SNAPSHOT_EM_ARM	   40 /* ELF e_machine */
#define SNAPSHOT_ARM_REGS  16
#define SNAPSHOT_ARM_HDR   (4 + 4 * SNAPSHOT_ARM_REGS) /* bytes before the stack */
#define SNAPSHOT_MAX_STACK 8192

struct snapshot {
	uint16_t machine;
	uint8_t n_regs;
	uint32_t regs[SNAPSHOT_ARM_REGS];
	const uint8_t *stack; /* the bytes at [regs[13], regs[13] + stack_len) */
	uint32_t stack_len;
};

/* Writes the header of an ARM blob for regs into out (SNAPSHOT_ARM_HDR bytes). */
void snapshot__arm_header(const uint32_t regs[SNAPSHOT_ARM_REGS], uint8_t *out);
/* Bytes of the base64 text of a blob of len bytes, without the NUL. */
size_t snapshot__text_len(size_t len);
/* The base64 text of blob into out (snapshot__text_len(len) + 1 bytes, NUL-terminated). */
void snapshot__to_text(const uint8_t *blob, size_t len, char *out);
/*
 * Decodes a label's text into buf (max bytes) and parses it into *s (s->stack points into buf).
 * 0, or -EINVAL (not base64, unknown version or machine, too short, a stack beyond
 * SNAPSHOT_MAX_STACK) or -ENOSPC (buf too small).
 */
int snapshot__from_text(const char *text, size_t len, uint8_t *buf, size_t max,
			struct snapshot *s);

#endif /* EDGEPROF_PPROF_SNAPSHOT_H */
