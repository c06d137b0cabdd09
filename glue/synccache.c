/*
 * SYNCHRONIZE CACHE(10/16) end to end (syncguard_sync_cache lists its
 * paths), the IMMED=1 background flush and the deferred errors it owes.
 *
 * Layer: used by cmdtable.c and bs_syncguard.c; it uses uring.c and
 * answer.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "glue.h"
#include "internal.h"

/* With immed_lock held: the @n nexuses in @itn waited on a failed flush;
 * each is owed one deferred error (a full table forgets the oldest; the
 * latch still fails their next SYNCHRONIZE CACHE). */
static void owe_deferred(struct syncguard_bs *bs, const uint64_t *itn,
			 unsigned int n, int err)
{
	for (unsigned int i = 0; i < n; i++) {
		if (bs->n_deferred == SYNCGUARD_MAX_DEFERRED) {
			memmove(bs->deferred_itn, bs->deferred_itn + 1,
				sizeof(bs->deferred_itn) - sizeof(uint64_t));
			memmove(bs->deferred_err, bs->deferred_err + 1,
				sizeof(bs->deferred_err) - sizeof(int));
			bs->n_deferred--;
		}
		bs->deferred_itn[bs->n_deferred] = itn[i];
		bs->deferred_err[bs->n_deferred++] = err;
	}
	__atomic_store_n(&bs->any_deferred, (int)bs->n_deferred, __ATOMIC_SEQ_CST);
}

/* The IMMED=1 flusher: one thread per LUN, started on demand. */
static void *immed_flusher(void *arg)
{
	struct syncguard_bs *bs = arg;

	pthread_mutex_lock(&bs->immed_lock);
	for (;;) {
		uint64_t itn[SYNCGUARD_MAX_DEFERRED];
		unsigned int n;
		int err;

		while (!bs->immed_pending && !bs->immed_stop)
			pthread_cond_wait(&bs->immed_cond, &bs->immed_lock);
		if (!bs->immed_pending)
			break;		/* stopped, nothing left to do */
		bs->immed_pending = false;
		n = bs->n_immed_itn;
		memcpy(itn, bs->immed_itn, sizeof(itn));
		bs->n_immed_itn = 0;
		pthread_mutex_unlock(&bs->immed_lock);
		err = syncguard_lun_flush(&bs->lun, true);
		pthread_mutex_lock(&bs->immed_lock);
		if (err)	/* the latch holds it too; each nexus hears once */
			owe_deferred(bs, itn, n, -err);
	}
	pthread_mutex_unlock(&bs->immed_lock);
	return NULL;
}

/* Queue a background flush for @itn's SYNCHRONIZE CACHE; false if no
 * flusher thread could start. */
static bool immed_flush(struct syncguard_bs *bs, uint64_t itn)
{
	bool ok = true, known = false;

	pthread_mutex_lock(&bs->immed_lock);
	if (!bs->immed_running)
		bs->immed_running = !pthread_create(&bs->immed_thread, NULL,
						    immed_flusher, bs);
	ok = bs->immed_running;
	for (unsigned int i = 0; ok && i < bs->n_immed_itn; i++)
		known |= bs->immed_itn[i] == itn;
	if (ok && !known && bs->n_immed_itn < SYNCGUARD_MAX_DEFERRED)
		bs->immed_itn[bs->n_immed_itn++] = itn;
	if (ok) {
		bs->immed_pending = true;
		pthread_cond_signal(&bs->immed_cond);
	}
	pthread_mutex_unlock(&bs->immed_lock);
	return ok;
}

/* The deferred error owed to @itn, removed from the table; 0 if none. */
int syncguard_take_deferred(struct syncguard_bs *bs, uint64_t itn)
{
	int err = 0;

	if (!__atomic_load_n(&bs->any_deferred, __ATOMIC_SEQ_CST))
		return 0;
	pthread_mutex_lock(&bs->immed_lock);
	for (unsigned int i = 0; !err && i < bs->n_deferred; i++) {
		if (bs->deferred_itn[i] != itn)
			continue;
		err = bs->deferred_err[i];
		bs->n_deferred--;
		memmove(bs->deferred_itn + i, bs->deferred_itn + i + 1,
			(bs->n_deferred - i) * sizeof(uint64_t));
		memmove(bs->deferred_err + i, bs->deferred_err + i + 1,
			(bs->n_deferred - i) * sizeof(int));
	}
	__atomic_store_n(&bs->any_deferred, (int)bs->n_deferred, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&bs->immed_lock);
	return err;
}

/* The CDB's IMMED bit (SBC-3 5.22), as the core decodes it */
static bool immed(const struct scsi_cmd *cmd)
{
	struct syncguard_cdb c;

	return syncguard_cdb_decode(cmd->scb, (size_t)cmd->scb_len, &c) == 0 &&
	       c.immed;
}

/*
 * SYNCHRONIZE CACHE(10/16) (SBC-3 5.22, 5.23): the one entry for the
 * family.  It takes one of four paths:
 *
 *  1. no I/O, on tgtd's event thread (syncguard_sync_cache_now,
 *     core/exec.c): a range beyond the capacity, an error latched for
 *     good (a soft latch goes on, to be rechecked on a worker), nothing
 *     volatile in this mode, or nothing written since the last completed
 *     flush (elision);
 *  2. IMMED=1, where the LUN's flusher thread runs or can start: GOOD
 *     once the CDB is valid; the flush runs on that thread (immed_flush,
 *     above), and its failure comes back as a deferred error (SPC-4
 *     4.5.5) on that nexus's next command but INQUIRY, REPORT LUNS and
 *     REQUEST SENSE (for 16 nexuses at a time; the latch fails the
 *     rest's durable commands); else path 3 or 4;
 *  3. the io_uring engine's group flush (syncguard_uring_sync_cache,
 *     glue/uring.c), answered when a flush that started after every
 *     write completed before this command completes;
 *  4. otherwise tgt's handler (reservations), then a worker thread:
 *     exec_sync_cache (core/exec.c), which joins the core's group flush
 *     (syncguard_lun_flush, core/flush.c).
 *
 * A reservation conflict goes straight to tgt's handler; a LUN without a
 * store (a refused path=) gets NOT READY, MEDIUM NOT PRESENT, as tgt
 * answers a READ or WRITE of an offline LUN: tgt would hand the command
 * to the closed store (test_modes_path_refusals).  What "volatile" means per mode is core/policy.c's.
 * Tests: test_modes_sync_cache_ranges (path 1), test_cmd_sync_cache_immed
 * and test_faults_immed_deferred_error (2), test_flush_* in tests/unit
 * and the power-cut test's configurations (3 and 4).
 */
int syncguard_sync_cache(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	enum syncguard_reason r;

	if (device_reserved(cmd))
		return bs->tgt_ops[cmd->scb[0]](host_no, cmd);
	if (!bs->open)		/* no store: nothing to vouch for */
		return syncguard_fail(cmd, SYNCGUARD_ERR_NO_MEDIUM);
	syncguard_lun_note_sync_cache(&bs->lun);
	if (syncguard_sync_cache_now(&bs->lun, cmd->scb, (size_t)cmd->scb_len,
				     &r))
		return r == SYNCGUARD_OK ? SAM_STAT_GOOD : syncguard_fail(cmd, r);
	if (immed(cmd) && immed_flush(bs, cmd->cmd_itn_id)) {
		syncguard_count(&bs->lun.stats->sync_caches);
		scsi_set_in_resid_by_actual(cmd, 0);
		return SAM_STAT_GOOD;
	}
	if (syncguard_uring_sync_cache(cmd))
		return SAM_STAT_GOOD;	/* answered after the group flush */
	return bs->tgt_ops[cmd->scb[0]](host_no, cmd);
}

void syncguard_synccache_close(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	bool running;

	pthread_mutex_lock(&bs->immed_lock);
	bs->immed_stop = true;
	running = bs->immed_running;
	pthread_cond_signal(&bs->immed_cond);
	pthread_mutex_unlock(&bs->immed_lock);
	if (running)
		pthread_join(bs->immed_thread, NULL);	/* a queued flush runs */
	bs->immed_running = bs->immed_stop = false;
}
