/*
 * How a write that must be durable is made durable (bsopts write_sync:
 * RWF_DSYNC, or a cached write and a shared group flush, by a running
 * trial), and write-back's WRITE+SYNCHRONIZE CACHE loop, whose plain
 * writes are made durable at once (syncguard_write_persist: never less
 * than the policy asks).
 *
 * Layer: below io.c and exec.c; it uses trial.c, cdb.c and latch.c.
 */
#include <stdint.h>

#include "core.h"
#include "internal.h"

/*
 * The two ways a write becomes durable (bsopts write_sync): RWF_DSYNC on
 * that write alone, or a cached write plus a device flush shared with
 * every concurrent command (group commit).  The file system may refuse
 * RWF_DSYNC; then the group path serves.
 *
 * write_sync=auto, by a running trial.  Both ways make the write durable
 * before it is answered; they differ only in how many durable writes per
 * second the LUN answers, and which wins depends on the device, the
 * file system and the load: on this disk RWF_DSYNC on O_DIRECT won at
 * QD1 (5.2-6.2k IOPS against 2.8-3.0k, write-through) and group commit
 * at QD32 (19-22k against 17-18k); on the 2 ms-flush FUSE model, where
 * every RWF_DSYNC write is a flush of its own, group commit won 8x at
 * QD32.  Models of the cost did not predict it: comparing k x t_dsync
 * with t_flush chose group commit at QD1 (it leaves out the group way's
 * extra write and hand-offs), and comparing mean command times, sampled
 * one choice in 64, chose RWF_DSYNC at QD32 (a probe's time depends on
 * what the other 63 do).  So the LUN measures what it cares about: in
 * epochs of 200 ms (scored in their second half, on at least 16 durable
 * writes that had company), one each way every 8 epochs, the rest the
 * way whose last epoch answered more of them per second (struct
 * syncguard_trial, core/trial.c, which also says how pauses and a 2x
 * loser are handled).
 * RWF_DSYNC until measured otherwise.
 *
 * Either way, a durable write with no other durable write in flight
 * takes RWF_DSYNC: a group flush it cannot share answers it alone,
 * with the cached write, the flush and their hand-offs that RWF_DSYNC
 * does in one call (on O_DIRECT, often one FUA write).  At QD1 that
 * saves the trial's group epochs (measured without this rule: auto
 * 4.5-5.1k against RWF_DSYNC 4.9-5.7k, write-through QD1 4 KiB).
 * Such a write says nothing of either way, so it neither starts nor
 * keeps up the trial: a load at QD1 leaves it no note, and a deeper load
 * after it finds the trial restarted, as after a pause, where rates
 * taken at QD1 (both ways RWF_DSYNC) could keep RWF_DSYNC for up to 8
 * epochs on the 2 ms model at QD32, at a tenth of group commit's IOPS
 * (bench-history.md; test_exec_auto_write_sync).  It still counts in
 * the rate of an epoch under way (test_flush_trial_count): at QD2 a
 * group flush answers both writes at once, and the next one the
 * initiator sends often finds the other not yet sent, so leaving lone
 * writes out of the rate undercounted group commit (write-through at
 * QD2 on the disk 0.66-0.96x, below 0.8x in most rounds).
 */
#define SYNC_TRIAL_WRITES 16
#define SYNC_TRIAL_US 200000

bool syncguard_use_dsync(struct syncguard_lun *lun, bool *scored)
{
	bool group = false;

	*scored = true;
	switch (lun->opts.write_sync) {
	case SYNCGUARD_WRITE_SYNC_DSYNC:
		break;
	case SYNCGUARD_WRITE_SYNC_GROUP:
		return false;
	case SYNCGUARD_WRITE_SYNC_AUTO:
		*scored = __atomic_load_n(&lun->durable_inflight,
					  __ATOMIC_RELAXED) > 1;
		group = *scored &&
			__atomic_load_n(&lun->sync_trial.arm, __ATOMIC_RELAXED);
		break;
	}
	return !group;
}

void syncguard_durable_begin(struct syncguard_lun *lun)
{
	__atomic_fetch_add(&lun->durable_inflight, 1, __ATOMIC_RELAXED);
}

void syncguard_durable_end(struct syncguard_lun *lun)
{
	__atomic_fetch_sub(&lun->durable_inflight, 1, __ATOMIC_RELAXED);
}

void syncguard_durable_answered(struct syncguard_lun *lun,
				unsigned int scored, unsigned int lone)
{
	uint64_t now;

	if (lun->opts.write_sync != SYNCGUARD_WRITE_SYNC_AUTO ||
	    !(scored + lone))
		return;
	now = syncguard_now_us();
	pthread_mutex_lock(&lun->sync_trial_lock);
	if (lone)
		syncguard_trial_count(&lun->sync_trial, lone, now,
				      SYNC_TRIAL_US);
	if (scored && syncguard_trial_note(&lun->sync_trial, scored, scored,
					   now, SYNC_TRIAL_WRITES,
					   SYNC_TRIAL_US))
		syncguard_trial_publish(&lun->sync_trial,
					&lun->stats->write_sync_way,
					lun->stats->write_sync_rate);
	pthread_mutex_unlock(&lun->sync_trial_lock);
}

/*
 * The WRITE+SYNCHRONIZE CACHE loop.  With WCE=1 a plain write may stay
 * volatile until the next SYNCHRONIZE CACHE; a sync writer that sends
 * one after every write (dd oflag=sync, iozone -o, a database's log on
 * an initiator that sees WCE=1) then waits, for each write, for a cached
 * write plus a group flush: the page cache's writeout and a device flush
 * behind the flush already running.  Made durable at once instead
 * (RWF_DSYNC, on O_DIRECT where aligned: one FUA write, or a write and
 * its flush, in one call), the write leaves nothing dirty, and the
 * SYNCHRONIZE CACHE after it is answered at once on tgtd's event thread
 * (core/exec.c, sync_cache_quick).  Durable is more than WCE=1 asks, so
 * either way keeps the contract (core/policy.c); this only picks the
 * cheaper.  Where other writes come between the SYNCHRONIZE CACHEs
 * (every:N, a plain write load, several writers whose commands
 * interleave) a shared flush for many writes is cheaper than one sync
 * each, so only a strict alternation counts: SYNC_STREAK SYNCHRONIZE
 * CACHEs in a row that each followed a plain write, reset by two writes
 * in a row.  (A running trial that made several writers' interleaved
 * writes durable at once did not pay: `scripts/bench.sh --mechanisms`
 * measured it at par or behind on the disk, and on FUSE it could not
 * run.)  sync_loop=off and write_sync=group (the administrator's choice
 * of shared flushes) keep writes cached.  SYNC_STREAK: core/internal.h.
 */
void syncguard_lun_note_cdb(struct syncguard_lun *lun, const uint8_t *cdb,
			    size_t len)
{
	struct syncguard_cdb c;

	/* every command passes here, on tgtd's event thread: the rest (a
	 * READ's, say) are passed over before a full decode */
	if (!len || (cdb[0] != 0x0a && cdb[0] != 0x2a && cdb[0] != 0xaa &&
		     cdb[0] != 0x8a))	/* WRITE(6/10/12/16) */
		return;
	if (syncguard_cdb_decode(cdb, len, &c) || c.op != SYNCGUARD_OP_WRITE ||
	    c.fua)
		return;
	if (__atomic_exchange_n(&lun->last_was_write, true, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&lun->sync_streak, 0, __ATOMIC_RELAXED) >=
	    SYNC_STREAK)	/* the streak ended: writes cached again */
		__atomic_store_n(&lun->stats->sync_loop_way, 0,
				 __ATOMIC_RELAXED);
}

void syncguard_lun_note_sync_cache(struct syncguard_lun *lun)
{
	unsigned int n = __atomic_load_n(&lun->sync_streak, __ATOMIC_RELAXED);

	if (lun->opts.sync_loop == SYNCGUARD_SYNCLOOP_OFF ||
	    !__atomic_exchange_n(&lun->last_was_write, false, __ATOMIC_RELAXED) ||
	    n >= SYNC_STREAK)
		return;
	__atomic_store_n(&lun->sync_streak, n + 1, __ATOMIC_RELAXED);
	if (n + 1 == SYNC_STREAK &&
	    lun->opts.mode == SYNCGUARD_MODE_WRITE_BACK &&
	    lun->opts.write_sync != SYNCGUARD_WRITE_SYNC_GROUP &&
	    syncguard_lun_wce(lun))	/* the counters: its writes durable */
		__atomic_store_n(&lun->stats->sync_loop_way,
				 SYNCGUARD_SYNC_LOOP_STREAK, __ATOMIC_RELAXED);
}

enum syncguard_persist syncguard_write_persist(struct syncguard_lun *lun,
					       enum syncguard_persist persist)
{
	if (persist != SYNCGUARD_PERSIST_CACHED ||
	    lun->opts.write_sync == SYNCGUARD_WRITE_SYNC_GROUP ||
	    lun->opts.sync_loop == SYNCGUARD_SYNCLOOP_OFF ||
	    __atomic_load_n(&lun->sync_streak, __ATOMIC_RELAXED) < SYNC_STREAK ||
	    syncguard_lun_latched(lun))	/* plain writes go on, cached */
		return persist;
	return SYNCGUARD_PERSIST_DURABLE;
}
