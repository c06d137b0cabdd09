/*
 * The flush engine under concurrency: group commit must never answer a
 * caller with a flush that started before the call (it would not cover
 * the caller's writes), must share flushes when callers overlap, and
 * clean-flush elision must cost nothing only when nothing is dirty.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "internal.h"
#include "unit.h"

#define THREADS 16
#define ROUNDS 20
#define MAX_FLUSHES (THREADS * ROUNDS)

static struct syncguard_lun lun;
static char dir[] = "build/unit.XXXXXX";
static char path[64];

/* a logical clock, and the [start, end] ticks of every fdatasync */
static uint64_t ticks;
static uint64_t flush_start[MAX_FLUSHES], flush_end[MAX_FLUSHES];
static unsigned int nflushes;

static uint64_t tick(void)
{
	return __atomic_add_fetch(&ticks, 1, __ATOMIC_SEQ_CST);
}

static long flush_ns = 2000000;		/* a 2 ms device flush */

static int slow_fdatasync(int fd)
{
	unsigned int i = __atomic_fetch_add(&nflushes, 1, __ATOMIC_SEQ_CST);
	struct timespec ts = { flush_ns / 1000000000, flush_ns % 1000000000 };

	(void)fd;
	if (i < MAX_FLUSHES)
		flush_start[i] = tick();
	nanosleep(&ts, NULL);
	if (i < MAX_FLUSHES)
		flush_end[i] = tick();
	return 0;
}

static void setup(void)
{
	struct syncguard_opts o = { .mode = SYNCGUARD_MODE_WRITE_BACK };
	char err[256];
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/lun.img", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
	close(fd);
	ck_assert_int_eq(syncguard_lun_open(&lun, path, 9, &o, err,
					    sizeof(err)), 0);
	syncguard_sys.fdatasync = slow_fdatasync;
	ticks = nflushes = 0;
	flush_ns = 2000000;
}

static void teardown(void)
{
	syncguard_lun_close(&lun);
	unlink(path);
	rmdir(dir);
}

static pthread_barrier_t go;
static int violations;

/* Each round: mark data dirty, call, and check a flush started after
 * the call and ended before the return. */
static void *flusher(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&go);
	for (int r = 0; r < ROUNDS; r++) {
		uint64_t call, ret;
		bool covered = false;

		syncguard_mark_dirty(&lun);
		call = tick();
		ck_assert_int_eq(syncguard_lun_flush(&lun, false), 0);
		ret = tick();
		for (unsigned int i = 0; i < nflushes && i < MAX_FLUSHES; i++)
			covered |= flush_start[i] > call && flush_end[i] &&
				   flush_end[i] < ret;
		if (!covered)
			__atomic_fetch_add(&violations, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

START_TEST(test_flush_group_commit)
{
	pthread_t t[THREADS];
	uint64_t calls = THREADS * ROUNDS;

	pthread_barrier_init(&go, NULL, THREADS);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, flusher, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	ck_assert_int_eq(violations, 0);	/* never an earlier flush */
	/* callers overlap (2 ms flushes, 16 threads): they share flushes */
	ck_assert_uint_lt(lun.stats->device_flushes, calls / 2);
	ck_assert_uint_eq(lun.stats->device_flushes +
			  lun.stats->flushes_coalesced, calls);
	ck_assert_uint_eq(lun.stats->device_flushes, nflushes);
}
END_TEST

/* Batching holds a flush back only under a concurrent load, by half the
 * mean flush time, at most 2 ms; a lone caller (queue depth 1) never. */
START_TEST(test_flush_batch_policy)
{
	ck_assert_uint_eq(syncguard_flush_batch_us(0, 1000), 0);
	ck_assert_uint_eq(syncguard_flush_batch_us(1, 1000), 0);
	ck_assert_uint_eq(syncguard_flush_batch_us(2, 1000), 500);
	ck_assert_uint_eq(syncguard_flush_batch_us(32, 1000), 500);
	ck_assert_uint_eq(syncguard_flush_batch_us(32, 100000), 2000);
	ck_assert_uint_eq(syncguard_flush_batch_us(32, 0), 0);
	/* one caller after another: each flush answered one, none held */
	for (int i = 0; i < 3; i++) {
		syncguard_mark_dirty(&lun);
		ck_assert_int_eq(syncguard_lun_flush(&lun, false), 0);
	}
	ck_assert_uint_eq(lun.flusher.last_group, 1);
	ck_assert_uint_gt(lun.flusher.avg_us, 0);
	ck_assert_uint_eq(syncguard_flush_batch_us(lun.flusher.last_group,
						   lun.flusher.avg_us), 0);
	/* the trial: the first epoch (16 flushes scored after the first,
	 * which starts it) does not hold back, the second does, for a
	 * concurrent load */
	lun.flusher.last_group = 8;
	ck_assert_uint_eq(syncguard_flush_hold_us(&lun), 0);
	for (int i = 3; i < 17; i++) {
		syncguard_mark_dirty(&lun);
		ck_assert_int_eq(syncguard_lun_flush(&lun, false), 0);
	}
	lun.flusher.last_group = 8;
	ck_assert_uint_eq(syncguard_flush_hold_us(&lun),
			  syncguard_flush_batch_us(8, lun.flusher.avg_us));
	ck_assert_uint_gt(syncguard_flush_hold_us(&lun), 0);
}
END_TEST

/* flush_batch=off: the same 17 flushes under the same concurrent load
 * never arm the trial, so no flush is ever held back. */
START_TEST(test_flush_batch_off)
{
	struct syncguard_opts o = { .mode = SYNCGUARD_MODE_WRITE_BACK,
				    .flush_batch = SYNCGUARD_FLUSH_BATCH_OFF };
	char err[256];

	syncguard_lun_close(&lun);
	ck_assert_int_eq(syncguard_lun_open(&lun, path, 9, &o, err,
					    sizeof(err)), 0);
	for (int i = 0; i < 17; i++) {
		syncguard_mark_dirty(&lun);
		ck_assert_int_eq(syncguard_lun_flush(&lun, false), 0);
		lun.flusher.last_group = 8;
	}
	ck_assert_uint_eq(lun.flusher.trial.t0_us, 0);	/* never fed */
	ck_assert_uint_eq(syncguard_flush_hold_us(&lun), 0);
	ck_assert_uint_eq(lun.stats->batch_way, 0);
}
END_TEST

/* Submission batching: a read or write (O_DIRECT or page cache) waits
 * for the end of tgtd's event-loop pass, at most 8 of them; it is
 * submitted after 3 passes in a row that brought no other while fewer
 * than 4 are in the kernel, and after 100 us whatever else happens. */
START_TEST(test_flush_submit_batching)
{
	const struct syncguard_depth deep = { .peak = 32, .prev = 32 };

	ck_assert(syncguard_submit_hold(1, 1, &deep));
	ck_assert(syncguard_submit_hold(7, 32, &deep));	/* all 32 in: the
							 * peak may be short */
	ck_assert(!syncguard_submit_hold(8, 9, &deep));	/* a full batch */
	ck_assert(!syncguard_submit_due(0, 0, 0));	/* still arriving */
	ck_assert(!syncguard_submit_due(99, 0, 0));
	ck_assert(!syncguard_submit_due(10, 1, 0));	/* one quiet pass */
	ck_assert(!syncguard_submit_due(20, 2, 3));	/* two */
	ck_assert(!syncguard_submit_due(99, 2, 0));
	ck_assert(!syncguard_submit_due(50, 9, 4));	/* the device busy */
	ck_assert(!syncguard_submit_due(0, 3, 4));
	ck_assert(syncguard_submit_due(0, 3, 0));	/* QD1: three passes */
	ck_assert(syncguard_submit_due(0, 3, 3));
	ck_assert(syncguard_submit_due(0, 4, 0));
	ck_assert(syncguard_submit_due(100, 0, 31));	/* its longest */
	ck_assert(syncguard_submit_due(UINT64_MAX, 1, 16));	/* stuck */
}
END_TEST

/* An initiator at QD1 or QD2 whose commands are all in the engine: no
 * other can come, so nothing waits for empty passes.  The depth is the
 * most commands at once over the current window of 256 and the one
 * before, so a deeper load holds for 256-512 commands after it ends. */
START_TEST(test_flush_submit_low_depth)
{
	struct syncguard_depth d = { 0 };
	int i;

	ck_assert(syncguard_submit_hold(1, 1, &d));	/* nothing noted */
	syncguard_depth_note(&d, 1);		/* QD1 */
	ck_assert(!syncguard_submit_hold(1, 1, &d));
	syncguard_depth_note(&d, 2);		/* QD2, both in */
	ck_assert(!syncguard_submit_hold(1, 2, &d));
	ck_assert(syncguard_submit_hold(1, 1, &d));	/* one still to come */
	syncguard_depth_note(&d, 3);		/* QD3: the passes again */
	ck_assert(syncguard_submit_hold(2, 3, &d));
	for (i = 0; i < 256 - 3; i++)		/* the window ends at QD1 */
		syncguard_depth_note(&d, 1);
	ck_assert_uint_eq(d.prev, 3);
	ck_assert(syncguard_submit_hold(1, 1, &d));	/* remembered */
	for (i = 0; i < 255; i++)
		syncguard_depth_note(&d, 1);
	ck_assert(syncguard_submit_hold(1, 1, &d));
	syncguard_depth_note(&d, 1);		/* a whole window at QD1 */
	ck_assert_uint_eq(d.prev, 1);
	ck_assert(!syncguard_submit_hold(1, 1, &d));
}
END_TEST

/* The running trial: epochs of at least @us, scored in their second half
 * (at least @ticks notes there); epoch 0
 * runs arm 0, epoch 1 arm 1, then the faster of the two; both are
 * measured again every 8 epochs, or every 64 when one is more than twice
 * as fast. */
static void trial_epoch(struct syncguard_trial *t, uint64_t *now,
			unsigned int per_us)
{
	for (int i = 0; i < 4; i++) {	/* 1 ms per note: the first */
		*now += 1000;		/* two settle, the last two score */
		syncguard_trial_note(t, per_us, 1, *now, 2, 4000);
	}
}

START_TEST(test_flush_trial)
{
	uint64_t now = 1000000;
	struct syncguard_trial t = { .t0_us = now, .last_us = now };

	ck_assert(!t.arm);			/* nothing measured: arm 0 */
	trial_epoch(&t, &now, 10);		/* arm 0: 10 per ms */
	ck_assert(t.arm);			/* epoch 1 always tries arm 1 */
	trial_epoch(&t, &now, 15);		/* arm 1: 15 per ms */
	ck_assert_uint_eq(t.rate[0], 10000);
	ck_assert_uint_eq(t.rate[1], 15000);
	ck_assert(t.arm);			/* arm 1 won */
	for (int e = 2; e < 8; e++)
		trial_epoch(&t, &now, 15);
	ck_assert(!t.arm);			/* epoch 8: arm 0 again */
	trial_epoch(&t, &now, 20);		/* arm 0 got faster */
	ck_assert(t.arm);			/* epoch 9: arm 1 again */
	trial_epoch(&t, &now, 5);		/* and arm 1 4x slower */
	for (int e = 10; e < 64; e++) {		/* so arm 0 until epoch 64 */
		ck_assert(!t.arm);
		trial_epoch(&t, &now, 20);
	}
	ck_assert(!t.arm);			/* epoch 64: arm 0 */
	trial_epoch(&t, &now, 20);
	ck_assert(t.arm);			/* epoch 65: arm 1 tried again */
	/* an epoch lasts at least its time, whatever the notes */
	for (int i = 0; i < 10; i++)
		syncguard_trial_note(&t, 1, 1, now + 1 + (uint64_t)i, 2, 4000);
	ck_assert_uint_eq(t.epoch, 65);
	/* a pause (1 s without a note) restarts the trial: the epoch is not
	 * scored, and where neither arm lost by more than 2x both are
	 * tried again, arm 0 first */
	ck_assert(t.arm);
	t.rate[1] = 15000;			/* within 2x of arm 0's 20000 */
	now += 1000000;
	syncguard_trial_note(&t, 1, 1, now, 2, 4000);
	ck_assert_uint_eq(t.t0_us, now);
	ck_assert_uint_eq(t.m0_us, 0);
	ck_assert(!t.arm);
	ck_assert_uint_eq(t.rate[1], 15000);	/* arm 1's last score stands */
	trial_epoch(&t, &now, 20);
	ck_assert(t.arm);			/* then arm 1 */
	/* the scored half lasts at least half an epoch: notes that come
	 * late (the scored half begins 5 ms in) and then in a burst do not
	 * end the epoch 1 us later (a rate of 4,000,000/s) */
	syncguard_trial_note(&t, 1, 1, now + 5000, 2, 4000);
	ck_assert_uint_eq(t.m0_us, now + 5000);
	syncguard_trial_note(&t, 16, 2, now + 5001, 2, 4000);
	ck_assert_uint_eq(t.epoch, 1);		/* not over */
	syncguard_trial_note(&t, 4, 1, now + 7000, 2, 4000);
	ck_assert_uint_eq(t.epoch, 2);
	ck_assert_uint_eq(t.rate[1], 20 * 1000000 / 2000);
}
END_TEST

/* Commands answered the same way whichever arm runs (write_sync's lone
 * durable writes) count in the rate of an epoch under way, in its scored
 * half and before a pause, and neither lengthen it nor keep the trial
 * up (core/writesync.c) */
START_TEST(test_flush_trial_count)
{
	uint64_t now = 1000000;
	struct syncguard_trial t = { 0 }, c;

	syncguard_trial_count(&t, 5, now, 4000);
	ck_assert_uint_eq(t.answered, 0);	/* no trial under way */
	syncguard_trial_note(&t, 1, 1, now, 2, 4000);	/* starts it */
	syncguard_trial_count(&t, 5, now + 1000, 4000);
	ck_assert_uint_eq(t.answered, 0);	/* not in the scored half */
	syncguard_trial_note(&t, 1, 1, now + 2000, 2, 4000);
	ck_assert_uint_eq(t.m0_us, now + 2000);	/* the scored half */
	syncguard_trial_count(&t, 5, now + 2500, 4000);
	ck_assert_uint_eq(t.answered, 5);
	ck_assert_uint_eq(t.ticks, 0);		/* no longer for it */
	ck_assert_uint_eq(t.last_us, now + 2000);	/* nor kept up */
	syncguard_trial_note(&t, 1, 1, now + 3000, 4, 4000);	/* a note */
	ck_assert_uint_eq(t.answered, 6);
	/* a pause is counted from the last note, not from the scored
	 * half's start, and lasts an epoch and 100 ms (on copies) */
	c = t;
	syncguard_trial_count(&c, 5, now + 3000 + 4000 + 100000, 4000);
	ck_assert_uint_eq(c.answered, 11);
	c = t;
	syncguard_trial_count(&c, 5, now + 3000 + 4000 + 100001, 4000);
	ck_assert_uint_eq(c.answered, 6);	/* after a pause: not */
	/* the epoch ends on its notes, its rate with the lone answers */
	syncguard_trial_note(&t, 3, 3, now + 4000, 4, 4000);
	ck_assert_uint_eq(t.epoch, 1);
	ck_assert_uint_eq(t.rate[0], 9 * 1000000 / 2000);
}
END_TEST

/* After a pause, an arm that lost by more than 2x is not tried again
 * first: the epochs go on counting, the winner runs, and the loser keeps
 * its turn every 64 epochs however often the load pauses (a burst on
 * the 2 ms model began with an epoch of RWF_DSYNC at a tenth of group
 * commit's rate: core/trial.c) */
static void trial_pause(struct syncguard_trial *t, uint64_t *now)
{
	*now += 1000000;
	syncguard_trial_note(t, 1, 1, *now, 2, 4000);
}

START_TEST(test_flush_trial_pause_keeps_winner)
{
	uint64_t now = 1000000;
	struct syncguard_trial t = { .t0_us = now, .last_us = now,
				     .epoch = 10, .rate = { 1000, 5000 } };

	trial_pause(&t, &now);
	ck_assert_msg(t.arm, "after a pause the trial tried arm 0 again, "
		      "which had lost by 5x");
	ck_assert_uint_eq(t.epoch, 10);
	for (unsigned int e = 11; e <= 65; e++) {
		trial_epoch(&t, &now, t.arm ? 50 : 1);
		ck_assert_uint_eq(t.epoch, e);
		if (e % 5 == 0)		/* a pause every 5 epochs */
			trial_pause(&t, &now);
		ck_assert_msg(t.arm == (e != 64), "epoch %u ran arm %d", e,
			      t.arm);	/* arm 0's turn at 64 */
	}
	/* arm 0 won by 5x: it goes on */
	t = (struct syncguard_trial){ .t0_us = now, .last_us = now,
				      .epoch = 10, .rate = { 5000, 1000 } };
	trial_pause(&t, &now);
	ck_assert(!t.arm);
	ck_assert_uint_eq(t.epoch, 10);
	trial_epoch(&t, &now, 5);
	ck_assert(!t.arm);
	/* exactly 2x, or one never measured: both tried, arm 0 first */
	t = (struct syncguard_trial){ .t0_us = now, .last_us = now,
				      .epoch = 10, .rate = { 1000, 2000 } };
	trial_pause(&t, &now);
	ck_assert(!t.arm);
	ck_assert_uint_eq(t.epoch, 0);
	t = (struct syncguard_trial){ .t0_us = now, .last_us = now,
				      .epoch = 10, .rate = { 1000, 0 } };
	trial_pause(&t, &now);
	ck_assert(!t.arm);
	ck_assert_uint_eq(t.epoch, 0);
}
END_TEST

/* Bursts shorter than an epoch, with pauses between them, score no
 * epoch: the count stands still, and if it stood on the loser's turn,
 * every burst ran the loser.  Each burst begins with the winner.  Bursts
 * of 300 ms score one epoch each: the count moves on, and the loser
 * still gets its turn (its rate is measured again). */
START_TEST(test_flush_trial_short_bursts)
{
	uint64_t now = 1000000;
	struct syncguard_trial t = { .t0_us = now, .last_us = now,
				     .epoch = 127, .rate = { 1000, 5000 } };

	for (int burst = 0; burst < 200 && t.rate[0] == 1000; burst++) {
		now += 400000;			/* a pause */
		for (int i = 0; i < 60; i++) {	/* 300 ms of notes */
			syncguard_trial_note(&t, t.arm ? 50 : 10, 1, now, 16,
					     200000);
			now += 5000;
		}
	}
	ck_assert_msg(t.rate[0] != 1000, "bursts of 300 ms never ran the "
		      "loser's turn (epoch %u)", t.epoch);

	for (unsigned int loser = 0; loser < 2; loser++) {
		t = (struct syncguard_trial){
			.t0_us = now, .last_us = now, .epoch = 64 + loser,
			.rate = { loser ? 5000 : 1000, loser ? 1000 : 5000 } };
		for (int burst = 0; burst < 10; burst++) {
			now += 400000;		/* a pause */
			for (int i = 0; i < 30; i++) {	/* 150 ms of notes */
				syncguard_trial_note(&t, 1, 1, now, 16,
						     200000);
				ck_assert_msg(t.arm != loser, "burst %d began "
					      "on arm %u, which lost by 5x",
					      burst, loser);
				now += 5000;
			}
		}
	}
}
END_TEST

START_TEST(test_flush_elision)
{
	/* a fresh write-back LUN starts dirty: an earlier tgtd (or another
	 * program) may have left the file's data volatile */
	ck_assert_int_eq(syncguard_lun_flush(&lun, true), 0);
	ck_assert_uint_eq(nflushes, 1);
	ck_assert_int_eq(syncguard_lun_flush(&lun, true), 0);
	ck_assert_uint_eq(nflushes, 1);		/* clean now: elided */
	syncguard_mark_dirty(&lun);
	ck_assert_int_eq(syncguard_lun_flush(&lun, true), 0);
	ck_assert_uint_eq(nflushes, 2);
	ck_assert_int_eq(syncguard_lun_flush(&lun, true), 0);
	ck_assert_uint_eq(nflushes, 2);
	ck_assert_int_eq(syncguard_lun_flush(&lun, false), 0);	/* forced */
	ck_assert_uint_eq(nflushes, 3);
	ck_assert_uint_eq(lun.stats->flushes_elided, 2);
	ck_assert_uint_eq(lun.stats->flush_us_total > 0, 1);
}
END_TEST

/* A worker's group flush that fails latches the LUN for good and writes
 * its record, which fsyncs the state directory; that happens outside
 * the flusher's lock, which tgtd's event thread takes when the ring's
 * own flush ends (syncguard_flush_done): with the record written under
 * it, a slow state directory held every LUN up.  Here the record's
 * fsync waits until the test lets it go, and the event thread's part
 * must finish meanwhile; the failed flush's own caller is answered only
 * once the record is written. */
static sem_t record_go;
static int record_waiting;
static int record_released;	/* the fsyncs after the first run free */

static int failing_fdatasync(int fd)
{
	(void)fd;
	errno = EIO;
	return -1;
}

static int held_fsync(int fd)
{
	if (!__atomic_load_n(&record_released, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&record_waiting, 1, __ATOMIC_SEQ_CST);
		sem_wait(&record_go);
	}
	return fsync(fd);
}

static int worker_done;

static void *failing_flusher(void *arg)
{
	(void)arg;
	ck_assert_int_eq(syncguard_lun_flush(&lun, false), -EIO);
	__atomic_store_n(&worker_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static int ring_done;

static void *ring_flush_done(void *arg)
{
	(void)arg;
	syncguard_flush_done(&lun, syncguard_lun_dirty(&lun), 0, 10, 1);
	__atomic_store_n(&ring_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Wait up to 5 s for *@flag. */
static bool wait_flag(const int *flag)
{
	for (int i = 0; i < 500; i++) {
		if (__atomic_load_n(flag, __ATOMIC_SEQ_CST))
			return true;
		usleep(10000);
	}
	return false;
}

START_TEST(test_flush_latch_record_unlocked)
{
	pthread_t worker, event;
	bool done, answered_early;

	ck_assert_int_eq(sem_init(&record_go, 0, 0), 0);
	syncguard_sys.fdatasync = failing_fdatasync;
	syncguard_sys.fsync = held_fsync;
	syncguard_mark_dirty(&lun);
	ck_assert_int_eq(pthread_create(&worker, NULL, failing_flusher, NULL),
			 0);
	ck_assert_msg(wait_flag(&record_waiting),
		      "the failed flush wrote no latch record");
	ck_assert_int_eq(pthread_create(&event, NULL, ring_flush_done, NULL),
			 0);
	done = wait_flag(&ring_done);
	answered_early = __atomic_load_n(&worker_done, __ATOMIC_SEQ_CST);
	__atomic_store_n(&record_released, 1, __ATOMIC_SEQ_CST);
	sem_post(&record_go);	/* the one fsync held */
	pthread_join(worker, NULL);
	pthread_join(event, NULL);
	syncguard_sys.fsync = fsync;
	ck_assert_msg(done, "syncguard_flush_done waited 5 s for a worker's "
		      "latch record to be synced");
	ck_assert_msg(!answered_early, "the failed flush's caller was answered "
		      "before its latch record was synced");
	ck_assert_int_eq(syncguard_lun_latched(&lun), EIO);
	ck_assert_int_eq(syncguard_poison_clear(syncguard_state_dir(NULL),
						lun.store_id), 0);
}
END_TEST

START_TEST(test_flush_stats_published)
{
	char sp[128];
	struct syncguard_stats seen;
	int fd;

	snprintf(sp, sizeof(sp), "%s/run/t:x/lun1.stats", dir);
	ck_assert_int_eq(syncguard_stats_publish(&lun, sp), 0);
	syncguard_mark_dirty(&lun);
	ck_assert_int_eq(syncguard_lun_flush(&lun, true), 0);
	fd = open(sp, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &seen, sizeof(seen), 0), sizeof(seen));
	close(fd);
	ck_assert_uint_eq(seen.magic, SYNCGUARD_STATS_MAGIC);
	ck_assert_uint_eq(seen.pid, (uint32_t)getpid());
	ck_assert_uint_eq(seen.device_flushes, 1);
	/* how writes go, as the LUN opened them */
	ck_assert_uint_eq(seen.write_sync, lun.opts.write_sync);
	ck_assert_uint_eq(seen.direct_io, lun.direct_io ? 1 : lun.mix.on ? 2 : 0);
	/* a trial's way and rates reach the counters as they are */
	lun.sync_trial.arm = 1;
	lun.sync_trial.rate[0] = 5400;
	lun.sync_trial.rate[1] = 2900;
	syncguard_trial_publish(&lun.sync_trial, &lun.stats->write_sync_way,
				lun.stats->write_sync_rate);
	fd = open(sp, O_RDONLY);
	ck_assert_int_eq(pread(fd, &seen, sizeof(seen), 0), sizeof(seen));
	close(fd);
	ck_assert_uint_eq(seen.write_sync_way, 1);
	ck_assert_uint_eq(seen.write_sync_rate[0], 5400);
	ck_assert_uint_eq(seen.write_sync_rate[1], 2900);
	lun.sync_trial.arm = 0;
	/* and the WCE it reports, as MODE SELECT changes it */
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, false), 0);
	ck_assert_uint_eq(lun.stats->wce, 0);
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, true), 0);
	ck_assert_uint_eq(lun.stats->wce, 1);
	/* a second LUN of this (live) process may publish over it; a live
	 * other process's file would be left alone (-EEXIST) */
	syncguard_stats_unpublish(&lun);
	ck_assert_int_ne(access(sp, F_OK), 0);	/* removed with the LUN */
	ck_assert_uint_eq(lun.stats->device_flushes, 1);	/* kept */
	snprintf(sp, sizeof(sp), "%s/run/t:x", dir);
	rmdir(sp);
	snprintf(sp, sizeof(sp), "%s/run", dir);
	rmdir(sp);
}
END_TEST

static void *wce_off(void *arg)
{
	(void)arg;
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, false), 0);
	return NULL;
}

/* While a switch to WCE=0 still flushes what was written under WCE=1,
 * the LUN reports WCE=1 and SYNCHRONIZE CACHE does not answer "nothing
 * volatile". */
START_TEST(test_flush_wce_switch_window)
{
	uint8_t sc[10] = { 0x35 };
	enum syncguard_reason r;
	pthread_t t;

	syncguard_lun_set_wce(&lun, true);
	syncguard_mark_dirty(&lun);
	flush_ns = 300000000;			/* a 300 ms flush */
	pthread_create(&t, NULL, wce_off, NULL);
	usleep(100000);				/* inside the flush */
	ck_assert(!syncguard_lun_wce(&lun));	/* new writes: durable */
	ck_assert(syncguard_lun_reported_wce(&lun));
	ck_assert_uint_eq(lun.stats->wce, 1);	/* what it reports */
	ck_assert(!syncguard_sync_cache_now(&lun, sc, 10, &r));	/* flush */
	pthread_join(t, NULL);
	ck_assert(!syncguard_lun_reported_wce(&lun));
	ck_assert(syncguard_sync_cache_now(&lun, sc, 10, &r));
	ck_assert_int_eq(r, SYNCGUARD_OK);
}
END_TEST

/* Two switches to WCE=0 overlap (WCE=1 set and written between them):
 * the first one's end must not clear the second one's window, whose
 * flush of the writes made under WCE=1 still runs (one flag for the
 * window would let it). */
START_TEST(test_flush_wce_switches_overlap)
{
	pthread_t t1, t2;

	syncguard_lun_set_wce(&lun, true);
	syncguard_mark_dirty(&lun);
	flush_ns = 300000000;			/* 300 ms flushes */
	pthread_create(&t1, NULL, wce_off, NULL);
	usleep(100000);				/* inside its flush */
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, true), 0);
	syncguard_mark_dirty(&lun);		/* written under WCE=1 */
	pthread_create(&t2, NULL, wce_off, NULL);	/* flushes next */
	pthread_join(t1, NULL);
	usleep(50000);				/* inside t2's flush */
	ck_assert(syncguard_lun_reported_wce(&lun));
	ck_assert_uint_eq(lun.stats->wce, 1);
	pthread_join(t2, NULL);
	ck_assert(!syncguard_lun_reported_wce(&lun));
	ck_assert_uint_eq(lun.stats->wce, 0);
}
END_TEST

static void *wce_off_later(void *arg)
{
	(void)arg;
	ck_assert_int_eq(syncguard_lun_apply_wce(&lun), 0);
	return NULL;
}

/* A switch to WCE=0 asked for (syncguard_lun_want_wce) that has not yet
 * taken the write lock, because a write holds it, and WCE=1 asked for
 * meanwhile: the last request wins, and the switch stands down
 * (not the LUN ending at WCE=0 after tgtadm's WCE=1). */
START_TEST(test_flush_wce_request_supersedes_switch)
{
	pthread_t t;

	syncguard_lun_set_wce(&lun, true);
	syncguard_mark_dirty(&lun);
	pthread_rwlock_rdlock(&lun.write_lock);	/* a write in flight */
	syncguard_lun_want_wce(&lun, false);
	ck_assert(!syncguard_lun_wanted_wce(&lun));
	pthread_create(&t, NULL, wce_off_later, NULL);
	usleep(50000);				/* it waits for the lock */
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, true), 0);
	pthread_rwlock_unlock(&lun.write_lock);
	pthread_join(t, NULL);
	ck_assert(syncguard_lun_wce(&lun));
	ck_assert(syncguard_lun_reported_wce(&lun));
	ck_assert(syncguard_lun_wanted_wce(&lun));
}
END_TEST

/* Another live process's counters file is left alone. */
START_TEST(test_flush_stats_not_stolen)
{
	struct syncguard_stats other = { .magic = SYNCGUARD_STATS_MAGIC,
		.version = SYNCGUARD_STATS_VERSION, .pid = (uint32_t)getppid() };
	struct syncguard_proc parent;
	char sp[128];
	int fd;

	ck_assert_int_eq(syncguard_proc_read(other.pid, &parent), 0);
	other.pid_start = parent.start;
	snprintf(sp, sizeof(sp), "%s/lun9.stats", dir);
	fd = open(sp, O_RDWR | O_CREAT, 0644);
	ck_assert_int_eq(write(fd, &other, sizeof(other)), sizeof(other));
	close(fd);
	ck_assert_int_eq(syncguard_stats_publish(&lun, sp), -EEXIST);
	ck_assert_ptr_eq(lun.stats, &lun.local_stats);
	other.pid = 0x7ffffff0;			/* a dead one's: replaced */
	fd = open(sp, O_RDWR);
	ck_assert_int_eq(pwrite(fd, &other, sizeof(other), 0), sizeof(other));
	close(fd);
	ck_assert_int_eq(syncguard_stats_publish(&lun, sp), 0);
	ck_assert_uint_eq(lun.stats->pid, (uint32_t)getpid());
	syncguard_stats_unpublish(&lun);
	unlink(sp);
}
END_TEST

/* A FIFO where the counters file goes is replaced, not opened for good
 * (an open without O_NONBLOCK would wait for a writer, in tgtd's event
 * loop). */
START_TEST(test_flush_stats_over_fifo)
{
	char sp[128];
	struct stat st;

	snprintf(sp, sizeof(sp), "%s/lun8.stats", dir);
	ck_assert_int_eq(mkfifo(sp, 0600), 0);
	ck_assert_int_eq(syncguard_stats_publish(&lun, sp), 0);
	ck_assert_int_eq(stat(sp, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	syncguard_stats_unpublish(&lun);
	unlink(sp);
}
END_TEST

/* A publisher killed but not yet reaped (a zombie) is not alive: its
 * counters are "(gone)" and a new tgtd may take its file (else
 * tgtd_alive is true for the second before a killed tgtd is reaped). */
START_TEST(test_flush_stats_zombie_owner)
{
	pid_t child = fork();
	siginfo_t info;

	ck_assert_int_ge(child, 0);
	if (child == 0)
		_exit(0);
	/* wait until it has exited, without reaping it */
	ck_assert_int_eq(waitid(P_PID, (id_t)child, &info, WEXITED | WNOWAIT),
			 0);
	struct syncguard_proc self;

	ck_assert_int_eq(syncguard_proc_read((uint32_t)getpid(), &self), 0);
	ck_assert(!syncguard_stats_owner_alive((uint32_t)child, 0));
	ck_assert(syncguard_stats_owner_alive((uint32_t)getpid(), self.start));
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	ck_assert(!syncguard_stats_owner_alive((uint32_t)child, 0));
}
END_TEST

/* A pid that another process took after tgtd died does not make the
 * counters file live: its start time differs from the one the file
 * records.  (Else a new tgtd would refuse to publish over such a file.) */
START_TEST(test_flush_stats_pid_reused)
{
	struct syncguard_proc self, parent;
	struct syncguard_stats other = { .magic = SYNCGUARD_STATS_MAGIC,
		.version = SYNCGUARD_STATS_VERSION, .pid = (uint32_t)getppid() };
	char sp[128];
	int fd;

	ck_assert_int_eq(syncguard_proc_read((uint32_t)getpid(), &self), 0);
	ck_assert_int_eq(syncguard_proc_read(other.pid, &parent), 0);
	ck_assert(!self.zombie);
	ck_assert_uint_gt(self.start, 0);
	ck_assert(syncguard_stats_owner_alive((uint32_t)getpid(), self.start));
	ck_assert(!syncguard_stats_owner_alive((uint32_t)getpid(),
					       self.start + 1));
	/* a file that does not say when its tgtd started (version 2): only
	 * a process named tgtd owns it; no pid at all (0, or kill(-1)'s
	 * 0xffffffff) never */
	ck_assert(!syncguard_stats_owner_alive((uint32_t)getpid(), 0));
	ck_assert(!syncguard_stats_owner_alive(0xffffffffu, 0));
	ck_assert(!syncguard_stats_owner_alive(0, self.start));
	other.pid_start = parent.start;
	snprintf(sp, sizeof(sp), "%s/lun10.stats", dir);
	fd = open(sp, O_RDWR | O_CREAT, 0644);
	ck_assert_int_eq(write(fd, &other, sizeof(other)), sizeof(other));
	ck_assert_int_eq(syncguard_stats_publish(&lun, sp), -EEXIST);
	other.pid_start++;		/* the parent's pid, someone else's start */
	ck_assert_int_eq(pwrite(fd, &other, sizeof(other), 0), sizeof(other));
	ck_assert_int_eq(syncguard_stats_publish(&lun, sp), 0);
	ck_assert_uint_eq(lun.stats->pid_start, self.start);
	close(fd);
	/* an old module's file, no start time, with a live pid that is not
	 * tgtd's (the test's parent) */
	ck_assert(!syncguard_stats_owner_alive(other.pid, 0));
}
END_TEST

/* A process name may hold a newline: /proc/PID/stat is then two lines,
 * and a reader of its first line would find no start time and take the
 * process for the owner of any file with its pid. */
START_TEST(test_flush_stats_owner_newline_name)
{
	struct syncguard_proc p = { 0 };
	pid_t child = fork();

	ck_assert_int_ge(child, 0);
	if (child == 0) {
		prctl(PR_SET_NAME, "tg\ntd)", 0, 0, 0);
		pause();
		_exit(0);
	}
	for (int i = 0; i < 1000 && strcmp(p.comm, "tg\ntd)"); i++) {
		usleep(1000);
		syncguard_proc_read((uint32_t)child, &p);
	}
	ck_assert_str_eq(p.comm, "tg\ntd)");
	ck_assert_uint_gt(p.start, 0);
	ck_assert(syncguard_stats_owner_alive((uint32_t)child, p.start));
	ck_assert(!syncguard_stats_owner_alive((uint32_t)child, p.start + 1));
	kill(child, SIGKILL);
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
}
END_TEST

Suite *flush_suite(void)
{
	Suite *s = suite_create("flush");
	TCase *tc = tcase_create("engine");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_flush_group_commit);
	tcase_add_test(tc, test_flush_batch_policy);
	tcase_add_test(tc, test_flush_batch_off);
	tcase_add_test(tc, test_flush_trial);
	tcase_add_test(tc, test_flush_trial_count);
	tcase_add_test(tc, test_flush_trial_pause_keeps_winner);
	tcase_add_test(tc, test_flush_trial_short_bursts);
	tcase_add_test(tc, test_flush_elision);
	tcase_add_test(tc, test_flush_latch_record_unlocked);
	tcase_add_test(tc, test_flush_stats_published);
	tcase_add_test(tc, test_flush_wce_switch_window);
	tcase_add_test(tc, test_flush_wce_switches_overlap);
	tcase_add_test(tc, test_flush_wce_request_supersedes_switch);
	tcase_add_test(tc, test_flush_stats_not_stolen);
	tcase_add_test(tc, test_flush_stats_zombie_owner);
	tcase_add_test(tc, test_flush_submit_batching);
	tcase_add_test(tc, test_flush_submit_low_depth);
	tcase_add_test(tc, test_flush_stats_pid_reused);
	tcase_add_test(tc, test_flush_stats_owner_newline_name);
	tcase_add_test(tc, test_flush_stats_over_fifo);
	suite_add_tcase(s, tc);
	return s;
}
