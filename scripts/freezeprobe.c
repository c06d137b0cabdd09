/*
 * freezeprobe: how long the CPU it runs on stood still during the next
 * SECONDS (on a virtual machine, the host stopping it), for
 * scripts/bench.sh.
 *
 * The probe runs at SCHED_FIFO priority 1, above every ordinary task,
 * with its memory locked, so only interrupts and real-time kernel
 * threads can keep it off a CPU. It sleeps 2 ms at a time and measures
 * how late each wake-up comes; one more than FREEZE_MS late means that
 * its CPU did not run it for that long.  On a virtual machine that is
 * the host stopping the vCPU; the timing of the freezes this one sees
 * says the host stops every vCPU at once, when a CPU quota that also
 * pays for the VM's disk emulation runs out (docs/performance.md, "What
 * the host takes").  One probe watches the CPU it wakes on: a host that
 * stops a single vCPU shows only while the probe is on it.
 *
 * usage: freezeprobe SECONDS
 * Prints one line when done: "FROZEN_MS COUNT LONGEST_MS", the lateness
 * of those wake-ups summed, how many there were, the longest; or "- - -"
 * where SCHED_FIFO is refused (not root): ordinary scheduling delays
 * would then count as freezes.  Exit 0, or 2 on a bad argument (SECONDS
 * must be a number in (0, 86400]).
 * Tested by scripts/bench.sh --self-check (a SIGSTOPped probe).
 */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>

#define PERIOD_NS	2000000L	/* the sleep: 2 ms */
#define FREEZE_MS	4.0		/* later than this: a freeze */
#define MAX_SECS	86400.0

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	struct sched_param sp = { .sched_priority = 1 };
	struct timespec period = { 0, PERIOD_NS };
	double secs, end, frozen = 0, longest = 0;
	unsigned long count = 0;
	char *rest;

	if (argc != 2 || !isfinite(secs = strtod(argv[1], &rest)) ||
	    secs <= 0 || secs > MAX_SECS || *rest) {
		fprintf(stderr, "usage: freezeprobe SECONDS (0 < SECONDS <= %.0f)\n",
			MAX_SECS);
		return 2;
	}
	/* a page fault would read as a freeze; not fatal if refused */
	(void)mlockall(MCL_CURRENT | MCL_FUTURE);
	if (sched_setscheduler(0, SCHED_FIFO, &sp)) {
		printf("- - -\n");
		return 0;
	}
	end = now_ms() + secs * 1e3;
	for (double t0 = now_ms(), t1; t0 < end; t0 = t1) {
		double late;

		while (nanosleep(&period, NULL) && errno == EINTR)
			;
		t1 = now_ms();
		late = t1 - t0 - PERIOD_NS / 1e6;
		if (late > FREEZE_MS) {
			frozen += late;
			count++;
			if (late > longest)
				longest = late;
		}
	}
	printf("%.1f %lu %.1f\n", frozen, count, longest);
	return 0;
}
