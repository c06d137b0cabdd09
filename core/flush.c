/*
 * The flush engine: group commit and clean-flush elision.
 *
 * A command that needs "every write completed before me is durable"
 * (SYNCHRONIZE CACHE in write-back, a durable write under write_sync=group,
 * a FUA read, a WCE switch) calls syncguard_lun_flush().  It waits for
 * the first device flush that *starts* after the call, because only such
 * a flush is sure to cover the caller's writes; if none is running it
 * starts one itself.  Every command that arrives while a flush runs is
 * answered by the single next flush: at queue depth N, N commands share
 * one fdatasync instead of paying one each.  This is the block layer's
 * own flush merging, done one level up where the commands are.
 *
 * Elision: every write that leaves data volatile bumps a counter
 * (syncguard_mark_dirty) after the data is written (to the page cache,
 * or with O_DIRECT to the device's cache).  A flush
 * records the counter's value before it starts; once it succeeds,
 * everything counted up to that value is durable.  A SYNCHRONIZE CACHE
 * that finds the counter unchanged since has nothing to make durable and
 * costs no device flush.
 *
 * Errors: every caller a failed flush answers fails with that flush's
 * own errno, whatever it is (syncguard_lun_flush reads it from the
 * flusher, never only from the latch), and the flush latches
 * (core/policy.c, syncguard_policy_latches); callers answered by a later
 * flush then fail with the latched errno.  tests/unit check_errno.c
 * fails a flush with every errno Linux can return there.
 */
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "internal.h"

int syncguard_flusher_init(struct syncguard_flusher *f)
{
	int ret = pthread_mutex_init(&f->lock, NULL);

	if (!ret && (ret = pthread_cond_init(&f->done, NULL)) != 0)
		pthread_mutex_destroy(&f->lock);
	return -ret;
}

void syncguard_flusher_destroy(struct syncguard_flusher *f)
{
	pthread_cond_destroy(&f->done);
	pthread_mutex_destroy(&f->lock);
}

static void record_latency(struct syncguard_stats *st, uint64_t us)
{
	unsigned int b = 0;

	while (us >> (b + 1) && b + 1 < SYNCGUARD_FLUSH_BUCKETS)
		b++;
	syncguard_count(&st->flush_us[b]);
	__atomic_fetch_add(&st->flush_us_total, us, __ATOMIC_RELAXED);
}

uint64_t syncguard_lun_dirty(struct syncguard_lun *lun)
{
	return __atomic_load_n(&lun->flusher.dirty, __ATOMIC_SEQ_CST);
}

/*
 * Whether holding flushes back pays depends on the device and the load:
 * on the FUSE model, where writes stall behind a running flush, it
 * answered 2.3x the commands per second (5.5k against 2.4k, write-back
 * WRITE+SYNCHRONIZE CACHE, QD32); on this machine's disk, where commands
 * keep arriving during a flush anyway, it cost 10-20%.  So it is a
 * running trial: epochs of 16 flushes, one without and one with every 8
 * epochs, and the 6 between take whichever answered more commands per
 * second (struct syncguard_trial; note_flush scores it after each flush,
 * with f->lock held).  write_sync=auto runs the same kind of trial
 * (core/lun.c).
 */
#define SYNCGUARD_TRIAL_FLUSHES 16

/* With f->lock held: a flush of @us answered @group commands.  Whether
 * the batching trial's way or rates changed (syncguard_trial_note). */
static bool note_flush(struct syncguard_lun *lun, uint64_t us,
		       unsigned int group)
{
	struct syncguard_flusher *f = &lun->flusher;

	if (lun->opts.flush_batch == SYNCGUARD_FLUSH_BATCH_OFF)
		return false;	/* never holds back: trial.arm stays 0 */
	syncguard_ewma(&f->avg_us, us);
	__atomic_store_n(&f->last_group, group, __ATOMIC_RELAXED);
	return syncguard_trial_note(&f->trial, group, 1, syncguard_now_us(),
				    SYNCGUARD_TRIAL_FLUSHES, 0);
}

unsigned int syncguard_flush_hold_us(struct syncguard_lun *lun)
{
	struct syncguard_flusher *f = &lun->flusher;

	if (!__atomic_load_n(&f->trial.arm, __ATOMIC_RELAXED))
		return 0;
	return syncguard_flush_batch_us(
		__atomic_load_n(&f->last_group, __ATOMIC_RELAXED),
		__atomic_load_n(&f->avg_us, __ATOMIC_RELAXED));
}

/* With f->lock held: a device flush that took @us and answered @group
 * callers ended with @res (0 or -errno).  Counted and timed; a failure
 * latches, a success lets later SYNCHRONIZE CACHE commands skip what it
 * covered (everything counted dirty up to @covers).  What each of its
 * callers is answered with: @res, or the errno latched meanwhile (as
 * -errno), or 0.  A latch's record is the caller's to write once it has
 * let go of f->lock (*@record, syncguard_flush_failed): it fsyncs the
 * state directory, and tgtd's event thread takes f->lock for the ring's
 * flushes (syncguard_flush_done), so a worker's failed flush held every
 * LUN up for that long (test_flush_latch_record_unlocked). */
static int flush_finished(struct syncguard_lun *lun, uint64_t covers,
			  int res, uint64_t us, unsigned int group, int *record)
{
	struct syncguard_flusher *f = &lun->flusher;

	syncguard_count(&lun->stats->device_flushes);
	record_latency(lun->stats, us);
	if (note_flush(lun, us, group))
		syncguard_trial_publish(&f->trial, &lun->stats->batch_way,
					lun->stats->batch_rate);
	*record = 0;
	if (res)
		return syncguard_flush_failed(lun, -res, record);
	if (covers > f->clean_at)
		__atomic_store_n(&f->clean_at, covers, __ATOMIC_SEQ_CST);
	return syncguard_lun_lost_meanwhile(lun);
}

int syncguard_flush_done(struct syncguard_lun *lun, uint64_t covers, int res,
			 uint64_t us, unsigned int group)
{
	int record;

	pthread_mutex_lock(&lun->flusher.lock);
	res = flush_finished(lun, covers, res, us, group, &record);
	pthread_mutex_unlock(&lun->flusher.lock);
	if (record)	/* before the commands it answers are */
		syncguard_latch_record(lun, record);
	return res;
}

/* One device flush, on the descriptor opened with the LUN for them
 * (see "sync descriptors" in lun.c): 0 or -errno. */
static int device_flush(struct syncguard_lun *lun)
{
	return syncguard_datasync(lun->group_fd);
}

/* With f->lock held: run flush generation ++started; waiters wake. */
static void lead_flush(struct syncguard_lun *lun)
{
	struct syncguard_flusher *f = &lun->flusher;
	uint64_t gen = ++f->started;
	uint64_t covers = __atomic_load_n(&f->dirty, __ATOMIC_SEQ_CST);
	unsigned int group = f->joining;
	uint64_t t0 = syncguard_now_us();
	int err, record;

	f->joining = 0;
	f->running = true;
	pthread_mutex_unlock(&f->lock);
	err = device_flush(lun);
	pthread_mutex_lock(&f->lock);
	err = flush_finished(lun, covers, err, syncguard_now_us() - t0, group,
			     &record);
	if (record) {	/* still running: its callers wait for the record */
		pthread_mutex_unlock(&f->lock);
		syncguard_latch_record(lun, record);
		pthread_mutex_lock(&f->lock);
	}
	if (err) {		/* its callers' answer (syncguard_lun_flush) */
		f->failed = gen;
		f->failed_err = err;
	}
	f->running = false;
	f->completed = gen;
	pthread_cond_broadcast(&f->done);
}

/* With f->lock held, before leading a flush: the batching wait
 * (syncguard_flush_batch_us); callers that arrive meanwhile wait for the
 * flush this caller then starts, which is the one they need. */
static void hold_back(struct syncguard_lun *lun)
{
	struct syncguard_flusher *f = &lun->flusher;
	unsigned int us = syncguard_flush_hold_us(lun);

	if (!us)
		return;
	f->batching = true;
	pthread_mutex_unlock(&f->lock);
	usleep(us);
	pthread_mutex_lock(&f->lock);
	f->batching = false;
}

bool syncguard_lun_clean(struct syncguard_lun *lun)
{
	struct syncguard_flusher *f = &lun->flusher;
	uint64_t dirty = __atomic_load_n(&f->dirty, __ATOMIC_SEQ_CST);

	return dirty == __atomic_load_n(&f->clean_at, __ATOMIC_SEQ_CST);
}

int syncguard_lun_flush(struct syncguard_lun *lun, bool elide)
{
	struct syncguard_flusher *f = &lun->flusher;
	bool led = false;
	uint64_t need;
	int err = syncguard_lun_recheck(lun);

	if (err)
		return -err;
	pthread_mutex_lock(&f->lock);
	if (elide && __atomic_load_n(&f->dirty, __ATOMIC_SEQ_CST) == f->clean_at) {
		pthread_mutex_unlock(&f->lock);
		syncguard_count(&lun->stats->flushes_elided);
		return 0;
	}
	need = f->started + 1;		/* the first flush to start after now */
	f->joining++;
	while (f->completed < need) {
		if (f->running || f->batching) {
			pthread_cond_wait(&f->done, &f->lock);
		} else {
			hold_back(lun);
			lead_flush(lun);
			led = true;
		}
	}
	/* the flush that answers this caller is generation need, or a later
	 * one: failed covers every failure from need on (a later one only
	 * answers it with an error it did not need, and has latched) */
	err = f->failed >= need ? f->failed_err : 0;
	pthread_mutex_unlock(&f->lock);
	if (!led)
		syncguard_count(&lun->stats->flushes_coalesced);
	if (err)
		return err;
	err = syncguard_lun_recheck(lun);
	return err ? -err : 0;
}

/*
 * Batching.  Under load a device flush is the bottleneck: the device
 * flushes back to back and each flush answers the commands that arrived
 * while the previous one ran.  Holding the next flush back a little lets
 * the commands whose writes are just completing join it, so fewer flushes
 * answer the same commands (jbd2 holds a commit back for the same reason,
 * by its mean commit time, when more than one process syncs).  The wait
 * is a fraction of the mean flush time, so it can cost at most that
 * fraction of a flush in latency, and nothing at queue depth 1; and it
 * is only taken while the trial above finds that it pays.
 */
#define SYNCGUARD_BATCH_MAX_US 2000u

unsigned int syncguard_flush_batch_us(unsigned int last_group,
				      unsigned int flush_us)
{
	unsigned int us = flush_us / 2;

	if (last_group < 2)
		return 0;
	return us < SYNCGUARD_BATCH_MAX_US ? us : SYNCGUARD_BATCH_MAX_US;
}

/*
 * Submission batching, for the io_uring engine.  Each io_uring_enter
 * that carries O_DIRECT reads or writes ends the block layer's plug and
 * notifies the device once; on a virtio disk that notification is a
 * trap to the hypervisor (perf put 24% of tgtd's samples there at QD32
 * with one write per enter).  Each that carries page-cache writes on a
 * file system that takes no non-blocking buffered write (ext4 here)
 * hands them to io_uring's io-wq threads, a wake-up per enter.  tgtd
 * reads one iSCSI PDU per pass of its event loop, so commands that
 * arrive together reach the engine one pass apart.  So a read or write
 * waits for the end of tgtd's pass (tgt's scheduled events run before
 * each epoll_wait) and is submitted with the others that joined it:
 * - while commands keep arriving, or SUBMIT_BUSY O_DIRECT ones are in
 *   the kernel (the device has work meanwhile, and their completions
 *   bring the next commands; counting page-cache writes there too
 *   held them longer and cost more system calls, 10.4-11.6 per command
 *   against 10.0, as tgt's loop polls while anything is held);
 *   otherwise SUBMIT_QUIET passes in a row that brought none submit what
 *   waits (each pass an epoll_wait that does not sleep).  Why more than
 *   one: where
 *   the event thread is the bound (plp at QD32: its O_DIRECT writes are
 *   back within tens of microseconds, so fewer than SUBMIT_BUSY are
 *   ever in the kernel), a pass that only sent answers comes between
 *   nearly every two commands.  Submitting after one such pass sent
 *   1.1 writes to an enter, each enter a trap to the hypervisor; after
 *   three, 3.4-4.4, at 1.5-1.9x the IOPS (performance.md, "Submission
 *   batching");
 * - not at all where the initiators keep at most SUBMIT_ALONE commands
 *   in flight and all of them are in the engine (below);
 * - at most SUBMIT_BATCH of them: more would only add latency;
 * - for SUBMIT_HOLD_US at most: a command never waits longer on others,
 *   so nothing waits behind I/O that is stuck (on FUSE, io-wq's writes
 *   to a file wait for its running fsync: tests/stall.sh).
 * Measured at QD32 4 KiB with one empty pass: 2.8-4.1 O_DIRECT writes
 * per io_uring_enter where holding only behind SUBMIT_BUSY still
 * completing made 1.0-1.2; write-back plain writes (page cache)
 * 22.7-29.5k IOPS (median 26.7k) and a median 38.5 us of tgtd CPU per
 * command where submitting each at once made 22.5-26.3k (23.8k) and
 * 42.9 us, QD1 unchanged (5 alternating rounds, performance.md).  The
 * three passes cost write-back plain writes at QD1 about 3% (11.5-12.4k
 * against 12.2-12.6k, 4 alternating rounds), until SUBMIT_ALONE.
 */
#define SUBMIT_BATCH	8u
#define SUBMIT_BUSY	4u
#define SUBMIT_HOLD_US	100u
#define SUBMIT_QUIET	3u

/*
 * No waiting at all at the lowest depths: when the initiators have lately
 * kept at most SUBMIT_ALONE commands in flight at once (the most the
 * engine had, over one or two windows of SUBMIT_DEPTH_WINDOW commands)
 * and that many are in the engine now, no other command is expected
 * before one is answered, and each empty pass would only delay this one
 * (where the most the engine had is below what the initiators keep in
 * flight, it only makes a batch smaller).  4 KiB writes, 5 alternating
 * rounds, a private tgtd, 2 s runs, the rule's first build: plp none QD1
 * 9.4k IOPS against 7.9k (medians), QD2 15.7k against 13.6k, at 45 us of
 * tgtd CPU per command against 46-54; write-back none QD1 13.1k against
 * 12.1k; write-through none QD1 5.2k against 5.0k (performance.md,
 * "Submission batching").  Not above SUBMIT_ALONE: the most the engine
 * had at once underestimates a deeper initiator, whose answers are on
 * their way back while it sends more (write-back plain writes at QD32
 * seldom have all 32 in the engine), and submitting whenever the engine
 * had that most cut the batches: 29-31k IOPS against 32-37k in 3 rounds.
 * The depth is the engine's, over every LUN: a deeper load on one LUN
 * turns the rule off for all.  The windows count commands, not time, so
 * a deeper load is forgotten 256-512 commands after it stops, and an
 * idle tgtd keeps its last.  With nothing noted yet the rule does not
 * act.
 */
#define SUBMIT_ALONE		2u
#define SUBMIT_DEPTH_WINDOW	256u

void syncguard_depth_note(struct syncguard_depth *d, unsigned int ops)
{
	if (ops > d->peak)
		d->peak = ops;
	if (++d->seen < SUBMIT_DEPTH_WINDOW)
		return;
	d->prev = d->peak;
	d->peak = ops;
	d->seen = 0;
}

bool syncguard_submit_hold(unsigned int held, unsigned int ops,
			   const struct syncguard_depth *depth)
{
	unsigned int lately = depth->peak > depth->prev ? depth->peak :
			      depth->prev;

	if (lately && lately <= SUBMIT_ALONE && ops >= lately)
		return false;
	return held < SUBMIT_BATCH;
}

bool syncguard_submit_due(uint64_t waited_us, unsigned int quiet,
			  unsigned int in_kernel)
{
	return waited_us >= SUBMIT_HOLD_US ||
	       (quiet >= SUBMIT_QUIET && in_kernel < SUBMIT_BUSY);
}
