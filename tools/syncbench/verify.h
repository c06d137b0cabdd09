/*
 * --verify: every block written carries its LBA, the write's sequence
 * number, the session, the run and a checksum; the map remembers what
 * each block must hold, and the read-back compares.
 */
#ifndef SYNCBENCH_VERIFY_H
#define SYNCBENCH_VERIFY_H

#include <stdint.h>

#include "syncbench.h"

struct verify_map;

/* A map of @span_blocks blocks, and a busy byte per block in *@busy
 * (writes in flight); NULL with a message when too large. */
struct verify_map *syncguard_verify_map_new(uint64_t span_blocks, uint8_t **busy);
/* Free both; @m may be NULL. */
void syncguard_verify_map_free(struct verify_map *m, uint8_t *busy);

/* Stamp @blocks blocks of @bs bytes at @buf for a write at @lba. */
void syncguard_verify_stamp(unsigned char *buf, uint64_t lba, uint32_t blocks,
			    uint32_t bs, uint64_t seq, unsigned int session);

/* The stamp of the next write: run id and sequence number. */
uint64_t syncguard_verify_next_seq(struct verify_map *m);

/* A write of @blocks blocks at @lba (logical blocks, within the span)
 * stamped @seq was sent, or answered GOOD: the read-back accepts the
 * last issued or the last acknowledged stamp of each block. */
void syncguard_verify_note_issued(struct verify_map *m, uint64_t lba, uint32_t blocks,
				  uint64_t seq);
void syncguard_verify_note_acked(struct verify_map *m, uint64_t lba, uint32_t blocks,
				 uint64_t seq);

/* Read the span back and compare; counts into @r, prints the first
 * mismatches by LBA, saves the expectations to @state if given.
 * 0, or -1 when the read-back itself failed. */
int syncguard_verify_readback(struct verify_map *m, struct iscsi_context *iscsi,
			      int lun, const struct target_info *ti, const char *state,
			      struct result *r);

/* --verify-only: check the LUN against @state (or only that every
 * stamped block is whole and in its place).  0; -1 when the read-back
 * failed; -2 when @state cannot be used (missing, unreadable, not a state
 * file, or saved for another LUN: its header names the target and LUN),
 * with the reason on stderr. */
int syncguard_verify_state(struct iscsi_context *iscsi, int lun,
			   const struct target_info *ti, const char *state,
			   uint64_t span_blocks, struct result *r);

#endif
