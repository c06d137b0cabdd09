/*
 * The latch: what remembers that a call durability depends on failed
 * (the calls themselves are core/sys.c's).
 *
 * Layer: a primitive of the core (every core file above it may use it);
 * it uses sys.c, policy.c and poison.c (the record that outlives the
 * LUN).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "internal.h"

/*
 * The latch.  After a failed flush the kernel may already have dropped
 * the dirty pages it could not write, and Linux reports a writeback
 * error to a file description only once: a later fdatasync can succeed
 * although the data is gone.  So the first failure of a call that can
 * lose acknowledged data (syncguard_policy_latches) is remembered, and
 * every later command that would promise durability fails with it.  A
 * latch for good is also recorded outside the LUN (core/poison.c), so
 * that a re-created LUN, or the next tgtd, starts latched until the
 * administrator has checked the data and cleared it.
 *
 * One exception, a "soft" latch: a write refused for want of space
 * (ENOSPC or EDQUOT) lost nothing, and a thin LUN should work again once
 * space is freed (SBC-3 4.7.3.6); nor did one refused with EPERM, by a
 * file made immutable (chattr +i) or a block device set read-only.
 * Where that errno can only be a refusal or a writeback error of the
 * file's pages (core/policy.c, syncguard_policy_enospc_refused), a soft
 * latch (syncguard_latch_write) holds until a witness is asked: a
 * writeback error is reported once per open file description, and the
 * descriptor whose sync reported it took it from every other that had
 * seen it before (errseq), but not from lun->fd, on which nothing ever
 * syncs (writes, reads and hole punches do not report writeback errors):
 * it still sees every writeback error since the LUN opened that it has
 * not reported.  The next durable command (on a worker) runs fdatasync
 * on it (syncguard_lun_recheck): an error latches for good, success
 * clears the latch, and the command goes on.  Each soft latch bumps a
 * sequence number, so a recheck that raced with a new one does not
 * clear it.  Elsewhere ENOSPC latches for good, as any failure.
 * tests/unit check_exec.c, test_exec_enospc*, shows each case.
 */
#define LATCH_ERRNO	0xfff		/* the errno */
#define LATCH_SEQ	0x3ffff000	/* soft latches: a sequence number */
#define LATCH_SOFT	0x40000000	/* rechecked (syncguard_lun_recheck) */

/* The counters show the latch as it is now: every change publishes, and
 * a publisher that raced with a later change publishes again, so the
 * last one to finish shows the last change. */
static void publish_latch(struct syncguard_lun *lun)
{
	int latch;

	do {
		latch = __atomic_load_n(&lun->flush_error, __ATOMIC_SEQ_CST);
		lun->stats->latched_soft = !!(latch & LATCH_SOFT);
		lun->stats->latched = (uint64_t)(latch & LATCH_ERRNO);
	} while (latch != __atomic_load_n(&lun->flush_error, __ATOMIC_SEQ_CST));
}

/* An errno as the latch keeps it: never 0, never out of its field (a
 * value that is no errno, SYNCGUARD_ERESOURCE say, would read as "not
 * latched"). */
static int latch_value(int err)
{
	return err > 0 && err <= LATCH_ERRNO ? err : EIO;
}

void syncguard_latch_record(struct syncguard_lun *lun, int err)
{
	const char *dir = syncguard_state_dir(&lun->opts);
	int ret;

	if (!lun->store_id[0])
		return;
	ret = syncguard_poison_write(dir, lun->store_id, lun->path, err);
	if (!ret)
		return;
	syncguard_store_unrecorded(lun->store_id, err);
	syncguard_logf("syncguard: %s: latched (%s), but the record for its "
		"next LUN could not be written in %s: %s; a LUN re-created on "
		"it starts latched only while this tgtd runs\n", lun->path,
		strerror(err), dir, strerror(-ret));
}

void syncguard_latch_pending(struct syncguard_lun *lun)
{
	__atomic_store_n(&lun->flush_error, LATCH_SOFT | EINPROGRESS,
			 __ATOMIC_SEQ_CST);
	publish_latch(lun);
}

/* Latch @lun for good with @err, unless it is already: the errno it
 * latched (its record owed), or 0. */
static int latch_hard(struct syncguard_lun *lun, int err)
{
	int cur = __atomic_load_n(&lun->flush_error, __ATOMIC_SEQ_CST);

	err = latch_value(err);
	do {
		if (cur && !(cur & LATCH_SOFT))
			return 0;	/* the first hard one stays */
	} while (!__atomic_compare_exchange_n(&lun->flush_error, &cur, err,
					      false, __ATOMIC_SEQ_CST,
					      __ATOMIC_SEQ_CST));
	publish_latch(lun);
	return err;
}

void syncguard_latch(struct syncguard_lun *lun, int err)
{
	if ((err = latch_hard(lun, err)))
		syncguard_latch_record(lun, err);
}

void syncguard_latch_write(struct syncguard_lun *lun, int err)
{
	int cur = __atomic_load_n(&lun->flush_error, __ATOMIC_SEQ_CST), next;

	if ((err != ENOSPC && err != EDQUOT && err != EPERM) ||
	    !lun->enospc_soft) {
		syncguard_latch(lun, err);
		return;
	}
	do {
		if (cur && !(cur & LATCH_SOFT))
			return;
		next = LATCH_SOFT | ((cur + (LATCH_ERRNO + 1)) & LATCH_SEQ) | err;
	} while (!__atomic_compare_exchange_n(&lun->flush_error, &cur, next,
					      false, __ATOMIC_SEQ_CST,
					      __ATOMIC_SEQ_CST));
	publish_latch(lun);
}

int syncguard_flush_failed(struct syncguard_lun *lun, int err, int *record)
{
	*record = 0;
	if (err != SYNCGUARD_ERESOURCE &&
	    syncguard_policy_latches(SYNCGUARD_CALL_FLUSH))
		*record = latch_hard(lun, err);
	return -err;
}

int syncguard_call_failed(struct syncguard_lun *lun, enum syncguard_call call,
			  int err)
{
	int rec;

	if (call == SYNCGUARD_CALL_FLUSH) {
		err = syncguard_flush_failed(lun, err, &rec);
		if (rec)
			syncguard_latch_record(lun, rec);
		return err;
	}
	if (err != SYNCGUARD_ERESOURCE && syncguard_policy_latches(call))
		syncguard_latch_write(lun, err);
	return -err;
}

int syncguard_lun_latched(struct syncguard_lun *lun)
{
	return __atomic_load_n(&lun->flush_error, __ATOMIC_SEQ_CST) &
	       LATCH_ERRNO;
}

bool syncguard_lun_latched_soft(struct syncguard_lun *lun)
{
	return __atomic_load_n(&lun->flush_error, __ATOMIC_SEQ_CST) &
	       LATCH_SOFT;
}

int syncguard_lun_recheck(struct syncguard_lun *lun)
{
	int cur = __atomic_load_n(&lun->flush_error, __ATOMIC_SEQ_CST), err;

	if (!(cur & LATCH_SOFT))
		return cur & LATCH_ERRNO;
	pthread_mutex_lock(&lun->recheck_lock);
	cur = __atomic_load_n(&lun->flush_error, __ATOMIC_SEQ_CST);
	/* the store's last LUN's final flush still runs: its outcome first
	 * (syncguard_latch_pending) */
	if ((cur & LATCH_SOFT) && (cur & LATCH_ERRNO) == EINPROGRESS &&
	    (err = syncguard_store_outcome(lun)) != 0)
		syncguard_latch(lun, err);
	cur = __atomic_load_n(&lun->flush_error, __ATOMIC_SEQ_CST);
	while (cur & LATCH_SOFT) {
		err = syncguard_datasync(lun->fd);
		if (err) {
			syncguard_latch(lun, -err);
			break;
		}
		if (__atomic_compare_exchange_n(&lun->flush_error, &cur, 0,
						false, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST)) {
			publish_latch(lun);
			break;
		}	/* a new soft latch meanwhile (cur has it): again */
	}
	pthread_mutex_unlock(&lun->recheck_lock);
	return syncguard_lun_latched(lun);
}

int syncguard_lun_lost_meanwhile(struct syncguard_lun *lun)
{
	/* one read: a soft latch cleared between two reads looked hard */
	int cur = __atomic_load_n(&lun->flush_error, __ATOMIC_SEQ_CST);

	return (cur & LATCH_ERRNO) && !(cur & LATCH_SOFT) ?
	       -(cur & LATCH_ERRNO) : 0;
}
