/*
 * Open-loop load: --rate IOPS with fixed or Poisson arrivals, and
 * --curve, which steps the rate to draw latency against load.
 *
 * A closed loop (the default) sends the next command when one is
 * answered: a slow answer delays the commands behind it, and they never
 * show the wait (coordinated omission).  Here operations arrive on a
 * schedule of their own; each one's latency counts from the time it was
 * due to arrive, so the time it waited for a free slot (the queue depth
 * is the cap on commands in flight) or for a late initiator is in it.
 * tests/syncbench.sh stalls the target under a fixed rate and counts the
 * operations that carry the stall.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "toolutil.h"
#include "syncbench.h"

#define MAX_RATE 10000000.0	/* IOPS: beyond any one initiator's reach */
/* a run kept up when it answered this share of the arrivals scheduled
 * in its window at their rate (kept_up) */
#define SUSTAINED_SHARE 0.9

/* ---- the schedule ---- */

/* An exponential gap of mean @mean_ns (inverse transform of a uniform
 * draw in (0, 1]; never 0, whose log is -inf) */
static double exp_gap(uint64_t *rng, double mean_ns)
{
	double u = (double)((xorshift64(rng) >> 11) + 1) / 9007199254740992.0;

	return -log(u) * mean_ns;
}

void syncguard_pacer_init(struct pacer *pc, const struct run_params *p,
			  unsigned int idx, unsigned int nsess, uint64_t t0_ns,
			  uint64_t measure_ns, uint64_t seed)
{
	memset(pc, 0, sizeof(*pc));
	if (p->rate <= 0)
		return;
	pc->on = true;
	pc->poisson = p->arrivals == ARRIVALS_POISSON;
	pc->gap_ns = 1e9 * nsess / p->rate;
	pc->measure_ns = measure_ns;
	pc->rng = (seed + 1) * 0x9e3779b97f4a7c15ull + idx + 1;
	if (!pc->rng)
		pc->rng = 1;	/* xorshift64's one bad state */
	/* fixed: session idx starts idx gaps of the whole rate in, so that
	 * the sessions' arrivals interleave evenly spaced at the asked
	 * rate; Poisson: independent streams, whose sum is Poisson at the
	 * asked rate */
	pc->origin_ns = t0_ns + (pc->poisson ? (uint64_t)exp_gap(&pc->rng,
				 pc->gap_ns) : (uint64_t)(idx * 1e9 / p->rate));
	pc->next_ns = pc->origin_ns;
	/* a wake-up within a microsecond of the arrival asked for, not
	 * the kernel's default 50 us slack (which every operation's
	 * latency, counted from its intended time, would carry) */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

bool syncguard_pacer_ready(const struct pacer *pc, uint64_t now)
{
	return !pc->on || pc->next_ns <= now;
}

uint64_t syncguard_pacer_take(struct pacer *pc, uint64_t now)
{
	uint64_t t = pc->next_ns, lag;

	if (!pc->on)
		return now;
	pc->taken++;
	/* fixed: from the origin, so that rounding does not drift */
	pc->next_ns = pc->poisson ? t + (uint64_t)llround(exp_gap(&pc->rng,
								  pc->gap_ns)) :
		      pc->origin_ns + (uint64_t)llround((double)pc->taken *
							pc->gap_ns);
	if (t < pc->measure_ns)
		return t;
	if (!pc->in_window++)
		pc->first_ns = t;
	pc->last_ns = t;
	lag = now > t ? now - t : 0;
	pc->lag_n++;
	pc->lag_sum_ns += lag;
	if (lag > pc->lag_max_ns)
		pc->lag_max_ns = lag;
	return t;
}

/* The arrivals of @pc due before @stop_ns that were never sent: exact
 * for fixed arrivals; for Poisson, the next one and the expected number
 * after it (the gaps have no memory) */
static uint64_t unsent(const struct pacer *pc, uint64_t stop_ns)
{
	double left;

	if (pc->next_ns >= stop_ns)
		return 0;
	left = (double)(stop_ns - pc->next_ns) / pc->gap_ns;
	return pc->poisson ? 1 + (uint64_t)left : (uint64_t)ceil(left);
}

/* Did the target keep up over the @window_s seconds measured?  Its
 * answers (those to arrivals due in the window, whenever they came)
 * over that window and the wait for the last ones, less the median
 * latency, which every answer has whether the target keeps up or not:
 * a target slower than the rate leaves a backlog whose drain outlasts
 * its median latency, where one that keeps up at a latency of a ninth
 * of -t or more, timed over the window and the whole drain, would read
 * behind.  tests/syncbench.sh: "a slow answer that keeps up", "behind
 * at the end of the window". */
static bool kept_up(const struct result *r, double window_s)
{
	double drain = r->seconds - window_s;
	double p50 = (double)syncguard_hist_percentile(&r->hist, 50) / 1e9;
	double span = window_s + (drain > p50 ? drain - p50 : 0);

	return r->ops && window_s > 0 &&
	       (double)r->ops >= SUSTAINED_SHARE * (double)r->due * span /
				 window_s;
}

void syncguard_pacer_summarize(const struct pacer *pcs, unsigned int n,
			       uint64_t stop_ns, struct result *r)
{
	bool timed = stop_ns < UINT64_MAX / 4;
	double window = 0, sched = 0;

	if (r->p.rate <= 0)
		return;
	for (unsigned int i = 0; i < n; i++) {
		const struct pacer *pc = &pcs[i];

		r->lag_n += pc->lag_n;
		r->lag_sum_ns += pc->lag_sum_ns;
		if (pc->lag_max_ns > r->lag_max_ns)
			r->lag_max_ns = pc->lag_max_ns;
		if (timed) {
			r->unsent += unsent(pc, stop_ns);
			r->due += pc->in_window + unsent(pc, stop_ns);
			window = (double)(stop_ns - pc->measure_ns) / 1e9;
		} else if (pc->in_window > 1) {
			/* --bytes: the schedule's own span */
			sched += (double)(pc->in_window - 1) * 1e9 /
				 (double)(pc->last_ns - pc->first_ns);
		}
	}
	if (timed)
		sched = window > 0 ? (double)r->due / window : 0;
	r->scheduled_iops = sched > 0 ? sched : r->p.rate;
	r->rate_sustained = timed ? kept_up(r, window) : r->ops &&
			    r->iops >= SUSTAINED_SHARE * r->scheduled_iops;
}

/* ---- options ---- */

void syncguard_set_rate(struct config *c, const char *arg)
{
	char *end;
	double v = strtod(arg, &end);

	/* written so that NaN fails too; decimal only (strtod would take
	 * 0x10); below 0.01 no operation would arrive in any run */
	if (end == arg || *end || strpbrk(arg, "xXpP") ||
	    !(v >= 0.01 && v <= MAX_RATE))
		syncguard_usage_error("--rate: '%s' is not a decimal number of "
				      "IOPS from 0.01 to 10000000", arg);
	c->rate = v;
}

void syncguard_set_arrivals(struct config *c, const char *arg)
{
	if (strcmp(arg, "fixed") && strcmp(arg, "poisson"))
		syncguard_usage_error("--arrivals: '%s' is not fixed or poisson", arg);
	c->arrivals = strcmp(arg, "fixed") ? ARRIVALS_POISSON : ARRIVALS_FIXED;
	c->arrivals_given = true;
}

/* "10,50,90": percentages of the maximum, each 1..100, rising; NULL:
 * vdbench's curve, 10,50,70,80,90,100 */
void syncguard_set_curve(struct config *c, const char *arg)
{
	static const unsigned int vdbench[] = { 10, 50, 70, 80, 90, 100 };
	char *copy, *cur, *item, *end;

	c->ncurve = 0;
	if (!arg) {
		memcpy(c->curve_pcts, vdbench, sizeof(vdbench));
		c->ncurve = sizeof(vdbench) / sizeof(vdbench[0]);
		return;
	}
	copy = cur = strdup(arg);
	while (copy && (item = strsep(&cur, ",")) != NULL) {
		unsigned long v = strtoul(item, &end, 10);

		if (end == item || *end || *item == '-' || v < 1 || v > 100 ||
		    c->ncurve == MAX_CURVE ||
		    (c->ncurve && v <= c->curve_pcts[c->ncurve - 1]))
			syncguard_usage_error("--curve: '%s' is not a rising list of "
					      "percentages 1..100 (at most 20)", arg);
		c->curve_pcts[c->ncurve++] = (unsigned int)v;
	}
	free(copy);
}

void syncguard_check_rate(const struct config *c)
{
	if (c->rate > 0 && c->ncurve)
		syncguard_usage_error("%s", "--curve sets its own rates (percentages "
				      "of a closed-loop maximum): not with --rate");
	if (c->arrivals_given && !c->rate && !c->ncurve)
		syncguard_usage_error("%s", "--arrivals goes with --rate or --curve");
	if (!c->rate && !c->ncurve)
		return;
	if (c->sync == SYNC_END)
		syncguard_usage_error("%s", "--sync end times one flush after all the "
				      "writes, which no rate paces: not with "
				      "--rate or --curve");
	if (c->preset)
		syncguard_usage_error("%s", "--preset runs a study's closed-loop "
				      "points: not with --rate or --curve");
	if (c->verify_only)
		syncguard_usage_error("%s", "--verify-only sends no load: not with "
				      "--rate or --curve");
	if (c->bytes)	/* an open loop is paced over a time: it had none */
		syncguard_usage_error("%s", "--rate and --curve pace commands over "
				      "--time: not with --bytes");
}

/* ---- results ---- */

static const char *arrivals_name(enum arrivals a)
{
	return a == ARRIVALS_POISSON ? "poisson" : "fixed";
}

static double lag_mean_us(const struct result *r)
{
	return r->lag_n ? (double)r->lag_sum_ns / (double)r->lag_n / 1e3 : 0;
}

void syncguard_rate_text(const struct result *r)
{
	if (r->p.curve_step == 1)
		printf("  curve: the closed-loop maximum, %.0f IOPS: the steps "
		       "after it run at shares of it\n", r->iops);
	if (r->p.rate <= 0)
		return;
	if (r->p.curve_step > 1)
		printf("  curve: %u%% of the maximum's %.0f IOPS\n",
		       r->p.curve_pct, r->p.curve_max_iops);
	printf("  open loop: asked %.1f IOPS (%s arrivals", r->p.rate,
	       arrivals_name(r->p.arrivals));
	if (r->p.arrivals == ARRIVALS_POISSON)	/* a count that varies */
		printf(", %.1f in this run's schedule", r->scheduled_iops);
	printf("), achieved %.1f; sent after their intended time by mean "
	       "%.1f us, max %.1f us (in the latency)\n", r->iops,
	       lag_mean_us(r), (double)r->lag_max_ns / 1e3);
	if (!r->rate_sustained)
		printf("  NOT SUSTAINED: the target answered %" PRIu64 " of the "
		       "%" PRIu64 " arrivals due in the measured window, the "
		       "last %.0f ms after it (median latency %.0f ms); %"
		       PRIu64 " were never sent\n", r->ops, r->due,
		       r->scheduled_iops > 0 ? (r->seconds - (double)r->due /
		       r->scheduled_iops) * 1e3 : 0,
		       (double)syncguard_hist_percentile(&r->hist, 50) / 1e6,
		       r->unsent);
}

void syncguard_rate_json(const struct result *r)
{
	char sp[16] = "null", mx[32] = "null", cp[16] = "null";

	if (r->p.curve_step) {
		snprintf(sp, sizeof(sp), "%u", r->p.curve_step);
		if (r->p.curve_step > 1) {
			snprintf(cp, sizeof(cp), "%u", r->p.curve_pct);
			snprintf(mx, sizeof(mx), "%.1f", r->p.curve_max_iops);
		} else {
			snprintf(mx, sizeof(mx), "%.1f", r->iops);
		}
	}
	if (r->p.rate <= 0)
		printf(",\"asked_iops\":null,\"arrivals\":null,\"scheduled_iops\":"
		       "null,\"rate_sustained\":null,\"unsent\":0,"
		       "\"send_lag_us\":null");
	else
		printf(",\"asked_iops\":%.1f,\"arrivals\":\"%s\",\"scheduled_iops\":"
		       "%.1f,\"rate_sustained\":%s,\"unsent\":%" PRIu64 ","
		       "\"send_lag_us\":{\"mean\":%.1f,\"max\":%.1f}",
		       r->p.rate, arrivals_name(r->p.arrivals),
		       r->scheduled_iops, r->rate_sustained ? "true" : "false",
		       r->unsent,
		       lag_mean_us(r), (double)r->lag_max_ns / 1e3);
	printf(",\"curve_step\":%s,\"curve_pct\":%s,\"curve_max_iops\":%s", sp,
	       cp, mx);
}

void syncguard_rate_csv(const struct result *r)
{
	if (r->p.rate > 0)
		printf(",%.1f,%s,%d,%" PRIu64, r->p.rate,
		       arrivals_name(r->p.arrivals), r->rate_sustained ? 1 : 0,
		       r->unsent);
	else
		printf(",,,,");
	if (r->p.curve_step > 1)
		printf(",%u,%u", r->p.curve_step, r->p.curve_pct);
	else if (r->p.curve_step)
		printf(",%u,", r->p.curve_step);
	else
		printf(",,");
}

/* ---- --curve ---- */

bool syncguard_curve_step(const struct config *c, const struct run_params *base,
			  unsigned int k, const struct result *prev,
			  struct run_params *q)
{
	if (!k) {
		*q = *base;
		q->rate = c->rate;
		q->arrivals = c->arrivals;
		q->curve_step = c->ncurve ? 1 : 0;
		return true;
	}
	if (!c->ncurve || k > c->ncurve)
		return false;
	if (k == 1)
		q->curve_max_iops = prev->iops;
	/* a maximum of nothing (no operation completed) has no shares */
	if (q->curve_max_iops <= 0)
		return false;
	q->curve_step = k + 1;
	q->curve_pct = c->curve_pcts[k - 1];
	q->rate = q->curve_max_iops * q->curve_pct / 100.0;
	return true;
}

static struct curve_row {
	unsigned int step, pct;
	double asked, achieved, p50, p99, max;
	bool ops, sustained;
} rows[MAX_CURVE + 1];
static unsigned int nrows;
static struct run_params curve_point;

void syncguard_curve_note(const struct config *c, const struct result *r)
{
	const struct histogram *h = &r->hist;

	if (!c->ncurve || c->format != OUT_TEXT || !r->p.curve_step ||
	    nrows == MAX_CURVE + 1)
		return;
	if (r->p.curve_step == 1)
		curve_point = r->p;
	rows[nrows++] = (struct curve_row){ r->p.curve_step, r->p.curve_pct,
		r->p.rate, r->iops,
		(double)syncguard_hist_percentile(h, 50) / 1e3,
		(double)syncguard_hist_percentile(h, 99) / 1e3,
		(double)h->max_ns / 1e3, r->ops > 0, r->rate_sustained };
}

void syncguard_curve_table(const struct config *c)
{
	char sy[24];

	if (!nrows)
		return;
	printf("curve: %s, sync=%s, %" PRIu64 " bytes, QD %u, %s arrivals\n"
	       "  %-6s %12s %14s %10s %10s %10s\n", curve_point.label,
	       syncguard_sync_name(curve_point.sync, c->every, sy, sizeof(sy)),
	       curve_point.xfer, curve_point.qd, arrivals_name(c->arrivals),
	       "load", "asked IOPS", "achieved IOPS", "p50 us", "p99 us",
	       "max us");
	for (unsigned int i = 0; i < nrows; i++) {
		const struct curve_row *w = &rows[i];
		char load[8] = "max", asked[24] = "-";

		if (w->step > 1) {
			snprintf(load, sizeof(load), "%u%%", w->pct);
			snprintf(asked, sizeof(asked), "%.1f", w->asked);
		}
		if (w->ops)
			printf("  %-6s %12s %14.1f %10.1f %10.1f %10.1f%s\n",
			       load, asked, w->achieved, w->p50, w->p99, w->max,
			       w->step > 1 && !w->sustained ?
			       "  NOT SUSTAINED" : "");
		else
			printf("  %-6s %12s %14.1f %10s %10s %10s\n", load,
			       asked, w->achieved, "-", "-", "-");
	}
	nrows = 0;
}
