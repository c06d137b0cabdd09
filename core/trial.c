/*
 * The running A/B trial between two ways of doing something, which flush
 * batching (core/flush.c) and write_sync=auto (core/writesync.c) run;
 * and the monotonic clock.
 *
 * Layer: a primitive of the core; it uses libc only.
 */
#include <time.h>

#include "core.h"
#include "internal.h"

uint64_t syncguard_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void syncguard_ewma(unsigned int *mean, uint64_t us)
{
	unsigned int old = __atomic_load_n(mean, __ATOMIC_RELAXED);
	unsigned int x = us < 1000000 ? (unsigned int)us : 1000000;

	__atomic_store_n(mean, old ? (old * 7 + x) / 8 : x, __ATOMIC_RELAXED);
}
#define SYNCGUARD_TRIAL_GAP_US 100000

/*
 * Start @t again at @now_us, after a pause or for the first time.  An
 * idle LUN answers nothing, whichever way: an epoch with a gap in it is
 * not scored, or the way that was running when the load paused would
 * look slow.  The load that comes back may want the other way (queue
 * depth 1 after 32, say), so both are tried again first: arm 0 now, arm
 * 1 next; unless one lost by more than 2x, when the epochs go on
 * counting across the pause, the winner runs and the loser keeps its
 * turn every 64 of them: on the 2 ms model each burst of writes after a
 * pause began with an epoch of RWF_DSYNC at a tenth of group commit's
 * rate, and 1 s bursts made 0.5-3.3k IOPS where they make 4.4-4.7k this
 * way (test_flush_trial_pause_keeps_winner).  A burst that scored no
 * epoch since the last pause passes the loser's turn when it comes back:
 * bursts shorter than an epoch score none, so the count would stand
 * still on that turn, and every burst would run the loser.  One that did
 * score keeps the turn, so bursts of an epoch or two still measure the
 * loser every 64 epochs (test_flush_trial_short_bursts).
 */
static void trial_restart(struct syncguard_trial *t, uint64_t now_us)
{
	bool won0 = t->rate[1] && t->rate[0] > 2 * t->rate[1];
	bool won1 = t->rate[0] && t->rate[1] > 2 * t->rate[0];
	unsigned int phase;

	t->t0_us = now_us;
	t->m0_us = 0;
	t->ticks = 0;
	t->answered = 0;
	if (!won0 && !won1)
		t->epoch = 0;
	else if (!t->scored && t->epoch % 64 == (won0 ? 1u : 0u))
		t->epoch++;
	t->scored = false;
	phase = t->epoch % 64;	/* one lost by 2x: the period is 64 */
	__atomic_store_n(&t->arm, (won0 || won1) && (phase == 1 ||
			 (phase > 1 && won1)), __ATOMIC_RELAXED);
}

bool syncguard_trial_note(struct syncguard_trial *t, uint64_t answered,
			  unsigned int ticks, uint64_t now_us,
			  unsigned int epoch_ticks, uint64_t epoch_us)
{
	bool restarted = false;
	unsigned int phase;

	/* no note for longer than an epoch and 100 ms: a pause */
	if (!t->t0_us || now_us > t->last_us + epoch_us + SYNCGUARD_TRIAL_GAP_US) {
		trial_restart(t, now_us);
		restarted = true;
	}
	t->last_us = now_us;
	/* The first half of an epoch is not scored: commands the other way
	 * started are still finishing (32 RWF_DSYNC writes queued behind a
	 * 2 ms flush each take 64 ms to drain), and would be counted
	 * against this way. */
	if (!t->m0_us) {
		if (now_us >= t->t0_us + epoch_us / 2)
			t->m0_us = now_us;
		return restarted;
	}
	t->answered += answered;
	t->ticks += ticks;
	/* ... and lasts half an epoch, also when the notes came late: a
	 * burst 1 us after the note that began it would score 4,000,000
	 * durable writes per second (test_flush_trial) */
	if (t->ticks < epoch_ticks || now_us < t->t0_us + epoch_us ||
	    now_us < t->m0_us + epoch_us / 2 || now_us <= t->m0_us)
		return restarted;
	t->rate[t->arm] = t->answered * 1000000u / (now_us - t->m0_us);
	t->scored = true;
	/* trying the way that lost costs throughput: where it lost by more
	 * than 2x, try it every 64 epochs instead of every 8 */
	phase = ++t->epoch % (t->rate[0] > 2 * t->rate[1] ||
			      t->rate[1] > 2 * t->rate[0] ? 64 : 8);
	__atomic_store_n(&t->arm, phase == 1 || (phase > 1 &&
			 t->rate[1] > t->rate[0]), __ATOMIC_RELAXED);
	t->ticks = 0;
	t->answered = 0;
	t->t0_us = now_us;
	t->m0_us = 0;
	return true;
}

void syncguard_trial_count(struct syncguard_trial *t, uint64_t answered,
			   uint64_t now_us, uint64_t epoch_us)
{
	if (t->m0_us && now_us >= t->m0_us &&
	    now_us <= t->last_us + epoch_us + SYNCGUARD_TRIAL_GAP_US)
		t->answered += answered;
}

void syncguard_trial_publish(const struct syncguard_trial *t, uint64_t *way,
			     uint64_t rate[2])
{
	__atomic_store_n(way, (uint64_t)t->arm, __ATOMIC_RELAXED);
	__atomic_store_n(&rate[0], t->rate[0], __ATOMIC_RELAXED);
	__atomic_store_n(&rate[1], t->rate[1], __ATOMIC_RELAXED);
}
