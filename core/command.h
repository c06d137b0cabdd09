/*
 * Small helpers the command executor (core/exec.c) and the planner for
 * the io_uring engine (core/plan.c) share.
 */
#ifndef SYNCGUARD_COMMAND_H
#define SYNCGUARD_COMMAND_H

#include "core.h"
#include "internal.h"

static inline uint64_t capacity(const struct syncguard_lun *lun)
{
	return lun->size >> lun->block_shift;
}

static inline uint64_t to_bytes(const struct syncguard_lun *lun,
				uint64_t blocks)
{
	return blocks << lun->block_shift;
}

/* The policy for @class under the WCE the LUN honours now.  The
 * workers' writers call it holding write_lock, so a WCE change cannot
 * slip between the decision and the write (syncguard_lun_set_wce takes
 * it exclusively); an asynchronous engine's plan_write calls it without,
 * and the async_cached handshake closes the same gap (see plan_write). */
static inline struct syncguard_action policy(struct syncguard_lun *lun,
				      enum syncguard_class class)
{
	return syncguard_policy(lun->opts.mode, syncguard_lun_wce(lun), class);
}

/* For what flushes (SYNCHRONIZE CACHE, a FUA read): the WCE the LUN
 * reports, which stays 1 while a switch to WCE=0 still flushes data
 * written under WCE=1 (syncguard_lun_reported_wce). */
static inline struct syncguard_action policy_reported(struct syncguard_lun *lun,
					       enum syncguard_class class)
{
	return syncguard_policy(lun->opts.mode,
				syncguard_lun_reported_wce(lun), class);
}

/*
 * True (refuse it) for a write whose Data-Out ends inside a logical
 * block: the initiator's expected data transfer length (iSCSI EDTL,
 * @sent bytes) is shorter than the CDB's transfer length (@len bytes)
 * and not a whole number of blocks.  Writing the part that came would
 * leave a torn block and, on an O_DIRECT LUN, put it through the page
 * cache beside O_DIRECT writes of the same page (see
 * syncguard_direct_ok).  It is refused before anything is written, with
 * CHECK CONDITION, ILLEGAL REQUEST, INVALID FIELD IN COMMAND INFORMATION
 * UNIT: for a command that asks for more data than the expected length,
 * FCP-4 lets a device server either refuse it so or process it up to
 * the expected length, and libiscsi's residual tests accept both.
 */
static inline bool torn_write(const struct syncguard_lun *lun, uint64_t len,
		       uint64_t sent)
{
	return sent < len && sent % to_bytes(lun, 1) != 0;
}

#endif
