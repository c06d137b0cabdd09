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
#include <string.h>

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
 * writes), one each way every 8 epochs, the rest the way whose last
 * epoch answered more of them per second (struct syncguard_trial,
 * core/flush.c, which also says how pauses and a 2x loser are handled).
 * RWF_DSYNC until measured otherwise.
 *
 * The sync loop's trial (note_syncloop_trial) overrides it: while it makes
 * plain writes durable it does so by RWF_DSYNC, the way it measured
 * against the cached writes' group flush, which is what the other way
 * here would be.
 *
 * Either way, a durable write with no other durable write in flight
 * takes RWF_DSYNC: a group flush it cannot share answers it alone,
 * with the cached write, the flush and their hand-offs that RWF_DSYNC
 * does in one call (on O_DIRECT, often one FUA write).  At QD1 that
 * saves the trial's group epochs (measured without this rule: auto
 * 4.5-5.1k against RWF_DSYNC 4.9-5.7k, write-through QD1 4 KiB).
 */
#define SYNC_TRIAL_WRITES 16
#define SYNC_TRIAL_US 200000

bool syncguard_use_dsync(struct syncguard_lun *lun)
{
	bool group = false;

	switch (lun->opts.write_sync) {
	case SYNCGUARD_WRITE_SYNC_DSYNC:
		break;
	case SYNCGUARD_WRITE_SYNC_GROUP:
		return false;
	case SYNCGUARD_WRITE_SYNC_AUTO:
		/* the loop's trial chose RWF_DSYNC over a group flush */
		group = __atomic_load_n(&lun->sync_trial.arm, __ATOMIC_RELAXED) &&
			__atomic_load_n(&lun->durable_inflight,
					__ATOMIC_RELAXED) > 1 &&
			!__atomic_load_n(&lun->sync_loop_on, __ATOMIC_RELAXED);
		break;
	}
	return !group && !__atomic_load_n(&lun->no_rwf_dsync, __ATOMIC_RELAXED);
}

void syncguard_durable_begin(struct syncguard_lun *lun)
{
	__atomic_fetch_add(&lun->durable_inflight, 1, __ATOMIC_RELAXED);
}

void syncguard_durable_end(struct syncguard_lun *lun)
{
	__atomic_fetch_sub(&lun->durable_inflight, 1, __ATOMIC_RELAXED);
}

void syncguard_durable_answered(struct syncguard_lun *lun, unsigned int n)
{
	if (lun->opts.write_sync != SYNCGUARD_WRITE_SYNC_AUTO || !n)
		return;
	pthread_mutex_lock(&lun->sync_trial_lock);
	if (syncguard_trial_note(&lun->sync_trial, n, n, syncguard_now_us(),
				 SYNC_TRIAL_WRITES, SYNC_TRIAL_US))
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
 * (core/exec.c, sync_cache_quick).  Measured on this disk, QD1 4 KiB:
 * WRITE+SYNCHRONIZE CACHE on write-back ran 2.08k IOPS where
 * write-through, whose writes are made durable so, ran 4.21k (5.0k and
 * 4.5k in another run).  Durable is more than WCE=1 asks, so either
 * way keeps the contract (core/policy.c); this only picks the cheaper.
 * Where other writes come between the SYNCHRONIZE CACHEs (every:N, a
 * plain write load) a shared flush for many writes is cheaper than one
 * sync each, so here only a strict alternation counts: SYNC_STREAK
 * SYNCHRONIZE CACHEs in a row that each followed a plain write, reset by
 * two writes in a row.  Several writers at once interleave their
 * commands: a running trial decides for them (note_syncloop_trial, below).
 * write_sync=group (the administrator's choice of shared flushes) keeps
 * writes cached.  SYNC_STREAK: core/internal.h.
 */
static void syncloop_note_write(struct syncguard_lun *lun);

void syncguard_lun_note_cdb(struct syncguard_lun *lun, const uint8_t *cdb,
			    size_t len)
{
	struct syncguard_cdb c;

	/* every command passes here, on tgtd's event thread: the rest (a
	 * READ's, say) are passed over before a full decode */
	if (!len || (cdb[0] != 0x0a && cdb[0] != 0x2a && cdb[0] != 0xaa &&
		     cdb[0] != 0x8a))	/* WRITE(6/10/12/16) */
		return;
	if (syncguard_cdb_decode(cdb, len, &c) || c.op != SYNCGUARD_OP_WRITE)
		return;
	lun->syncloop_bytes += (uint64_t)c.nblocks << lun->block_shift;
	if (c.fua)
		return;
	syncloop_note_write(lun);
	if (__atomic_exchange_n(&lun->last_was_write, true, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&lun->sync_streak, 0, __ATOMIC_RELAXED) >=
	    SYNC_STREAK)	/* the streak ended: the trial's way again */
		__atomic_store_n(&lun->stats->sync_loop_way,
				 (uint64_t)__atomic_load_n(&lun->sync_loop_on,
							   __ATOMIC_RELAXED),
				 __ATOMIC_RELAXED);
}

/*
 * With several commands in flight the loop's writes and SYNCHRONIZE
 * CACHEs interleave (32 writers: W W S W S S ...), so the streak above
 * never forms, and which way answers more is not a fact but depends on
 * the device and the write size: 4 KiB QD32 WRITE+SYNCHRONIZE CACHE, a
 * page-cache write and a shared group flush (write-back) ran 30.2k IOPS
 * against RWF_DSYNC on O_DIRECT's 20.6k (write-through) in one `make
 * bench` run, 18.7k against 23.5k in another, and at 64 KiB 1.8k
 * against 3.6k.  So a running trial (struct syncguard_trial) decides:
 * epochs of SYNCLOOP_TRIAL_US, each way once every 8, the rest the faster.
 * It is scored in bytes written per second, by every initiator of the
 * LUN: its way applies to all their plain writes, and scored in
 * SYNCHRONIZE CACHEs per second it would make another initiator's plain
 * writes RWF_DSYNC and slow (113 MB/s against 161 with
 * write_sync=group, beside 4 sync writers), or a poller that sends
 * SYNCHRONIZE CACHE alone, whose commands are answered at once once
 * nothing is dirty, would lock it there.  At a fixed queue depth what
 * arrives is what was answered, so it counts commands as they come.
 * It makes plain writes durable only while the load is a sync loop,
 * at least one SYNCHRONIZE CACHE for every SYNCLOOP_WRITES_PER_SYNC plain
 * writes in the epoch before: for a plain write load with a
 * SYNCHRONIZE CACHE now and then, a sync per write costs far more than
 * the one shared flush it saves.  While the streak holds (one writer,
 * or several that alternate) it makes the writes durable either way:
 * the trial is not fed then (its two ways would be the same, and a way
 * that lost 2x by noise is tried again only every 64 epochs), and after
 * 300 ms of it starts over, as after any pause.  Write-back runs it
 * while WCE=1 (at WCE=0 every write is durable) and write_sync is not
 * group (which keeps writes cached).
 */
#define SYNCLOOP_TRIAL_SYNCS 16
#define SYNCLOOP_TRIAL_US 200000
#define SYNCLOOP_WRITES_PER_SYNC 2
#define SYNCLOOP_WRITES_RUN 256	/* plain writes in a row that end it: more
				 * than one per writer whose SYNCHRONIZE
				 * CACHE is still to come */

/* The epoch's counts start again, and plain writes go the trial's way;
 * the counters show it (way 0 cached, 1 durable at once). */
static void syncloop_epoch_start(struct syncguard_lun *lun)
{
	lun->syncloop_syncs = lun->syncloop_writes = 0;
	__atomic_store_n(&lun->sync_loop_on, lun->syncloop_trial.arm,
			 __ATOMIC_RELAXED);
	syncguard_trial_publish(&lun->syncloop_trial, &lun->stats->sync_loop_way,
				lun->stats->sync_loop_rate);
}

/* The trial starts over at the next SYNCHRONIZE CACHE: writes cached,
 * neither way's rate kept. */
static void syncloop_restart(struct syncguard_lun *lun)
{
	memset(&lun->syncloop_trial, 0, sizeof(lun->syncloop_trial));
	syncloop_epoch_start(lun);
}

static void note_syncloop_trial(struct syncguard_lun *lun)
{
	struct syncguard_trial *t = &lun->syncloop_trial;
	uint64_t bytes = lun->syncloop_bytes;

	lun->syncloop_bytes = 0;
	if (__atomic_load_n(&lun->sync_streak, __ATOMIC_RELAXED) >=
	    SYNC_STREAK) {
		__atomic_store_n(&lun->stats->sync_loop_way,
				 SYNCGUARD_SYNC_LOOP_STREAK, __ATOMIC_RELAXED);
		return;
	}
	lun->syncloop_syncs++;
	if (!syncguard_trial_note(t, bytes, 1, syncguard_now_us(),
				  SYNCLOOP_TRIAL_SYNCS, SYNCLOOP_TRIAL_US))
		return;
	/* an epoch ended (not a start after a pause, epoch 0) that was no
	 * sync loop: the trial starts over */
	if (t->epoch &&
	    lun->syncloop_syncs * SYNCLOOP_WRITES_PER_SYNC < lun->syncloop_writes)
		syncloop_restart(lun);
	else
		syncloop_epoch_start(lun);
}

/* A plain write.  Epochs end only at a SYNCHRONIZE CACHE: a write load
 * that follows a sync loop would keep its writes durable for as long
 * as it sends none (32,768 writes made RWF_DSYNC after the loop had
 * ended, in one measurement), so SYNCLOOP_WRITES_RUN of them with no
 * SYNCHRONIZE CACHE between stop the trial at once (counted against the
 * epoch's SYNCHRONIZE CACHEs instead, 1,783 would be RWF_DSYNC first). */
static void syncloop_note_write(struct syncguard_lun *lun)
{
	lun->syncloop_writes++;
	if (++lun->syncloop_run > SYNCLOOP_WRITES_RUN && lun->syncloop_trial.t0_us)
		syncloop_restart(lun);
}

/*
 * The streak counts only while the several writers' trial has not run
 * an epoch (epoch 0: a single writer from the start, or a LUN where the
 * trial does not run).  Once it has, the trial decides: its way 1 can
 * make the writes of 32 writers on the FUSE model slow enough to arrive
 * in strict alternation, a streak counted then would make them durable
 * whatever the trial measured, and write-back WRITE+SYNCHRONIZE CACHE
 * at QD32 would run 373 IOPS at 0.98 flushes per operation against
 * 3,182 and 0.034 with the trial deciding (make bench, 2 ms flushes).
 * The trial itself runs only where RWF_DSYNC writes run concurrently
 * (asynchronous O_DIRECT RWF_DSYNC honoured): on FUSE they go one at a
 * time.
 */
void syncguard_lun_note_sync_cache(struct syncguard_lun *lun)
{
	unsigned int n = __atomic_load_n(&lun->sync_streak, __ATOMIC_RELAXED);
	bool counts = !lun->syncloop_trial.epoch;

	if (__atomic_exchange_n(&lun->last_was_write, false, __ATOMIC_RELAXED) &&
	    n < SYNC_STREAK && counts)
		__atomic_store_n(&lun->sync_streak, n + 1, __ATOMIC_RELAXED);
	else if (!counts && n)
		__atomic_store_n(&lun->sync_streak, 0, __ATOMIC_RELAXED);
	lun->syncloop_run = 0;
	if (lun->opts.mode == SYNCGUARD_MODE_WRITE_BACK &&
	    lun->opts.write_sync != SYNCGUARD_WRITE_SYNC_GROUP &&
	    lun->async_dsync_ok && syncguard_lun_wce(lun))
		note_syncloop_trial(lun);
}

enum syncguard_persist syncguard_write_persist(struct syncguard_lun *lun,
					       enum syncguard_persist persist)
{
	if (persist != SYNCGUARD_PERSIST_CACHED ||
	    lun->opts.write_sync == SYNCGUARD_WRITE_SYNC_GROUP ||
	    __atomic_load_n(&lun->no_rwf_dsync, __ATOMIC_RELAXED) ||
	    (__atomic_load_n(&lun->sync_streak, __ATOMIC_RELAXED) < SYNC_STREAK &&
	     !__atomic_load_n(&lun->sync_loop_on, __ATOMIC_RELAXED)) ||
	    syncguard_lun_latched(lun))	/* plain writes go on, cached */
		return persist;
	return SYNCGUARD_PERSIST_DURABLE;
}
