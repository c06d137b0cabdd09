/*
 * iscsi-syncbench: the points to measure (a preset, or the size x depth
 * matrix of the options), one after the other, then the report.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "syncbench.h"
#include "verify.h"

volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	if (interrupted)	/* second Ctrl-C: give up at once */
		_exit(130);
	interrupted = 1;
}

/* a workload's name from its mix, as the presets name theirs */
static const char *workload_name(const struct config *c)
{
	if (c->read_pct == 100)
		return c->random_pct ? "rand-read" : "seq-read";
	if (c->read_pct == 0)
		return c->random_pct ? "rand-write" : "seq-write";
	return c->random_pct ? "rand-mixed" : "seq-mixed";
}

static unsigned int matrix(const struct config *c, struct run_params *pts,
			   unsigned int max)
{
	unsigned int n = 0;

	for (unsigned int s = 0; s < c->nsizes; s++)
		for (unsigned int q = 0; q < c->nqds && n < max; q++)
			pts[n++] = (struct run_params){ .label = workload_name(c),
				.xfer = c->sizes[s], .qd = c->qds[q], .sync = c->sync,
				.read_pct = c->read_pct, .random_pct = c->random_pct,
				.seconds = c->bytes ? 0 : c->seconds,
				.bytes = c->bytes };
	return n;
}

/* --cache-off: WCE=0 for the run (0), unchanged (1), refused (-1) */
static int cache_off(struct iscsi_context *iscsi, const struct target_info *ti)
{
	if (ti->wce == 0)
		return 1;
	if (ti->wce_changeable == 0) {
		fprintf(stderr, PROG ": --cache-off: the LUN does not let WCE be "
			"changed (its changeable mask says so)\n");
		return -1;
	}
	return target_set_wce(iscsi, ti->lun, 0) ? -1 : 0;
}

static int run_all(const struct config *c, const struct target_info *ti,
		   const struct run_params *pts, unsigned int n)
{
	static struct result r;
	int status = 0;

	for (unsigned int i = 0; i < n && !interrupted; i++) {
		int ret = run_point(c, ti, &pts[i], &r);

		if (ret == -2)
			return 2;
		if (ret == 0 || r.ops)
			report_result(c, ti, &r, i == 0, i + 1 == n || interrupted);
		if (ret || r.errors || r.verify_bad)
			status = 1;
		free(r.iv);
		r.iv = NULL;
	}
	return interrupted ? 130 : status;
}

static int check_only(const struct config *c, struct iscsi_context *iscsi,
		      const struct target_info *ti)
{
	static struct result r;
	uint64_t span = (c->span ? c->span : ti->blocks * ti->block_size) /
			ti->block_size;
	int ret = verify_state(iscsi, ti->lun, ti, c->state, span, &r);

	printf("verify: %" PRIu64 " blocks checked, %" PRIu64 " mismatches\n",
	       r.verify_checked, r.verify_bad);
	return ret || r.verify_bad ? 1 : 0;
}

static int measure(const struct config *c)
{
	static struct run_params pts[512];
	struct target_info ti;
	struct iscsi_context *iscsi;
	char name[256];
	unsigned int n;
	int lun, status, wce = 1;

	iscsi = target_login(c, &lun, name, sizeof(name));
	if (!iscsi)
		return 1;
	if (target_describe(iscsi, lun, &ti)) {
		iscsi_destroy_context(iscsi);
		return 1;
	}
	snprintf(ti.target, sizeof(ti.target), "%s", name);
	ti.lun = lun;
	if (c->verify_only) {
		status = check_only(c, iscsi, &ti);
		iscsi_logout_sync(iscsi);
		iscsi_destroy_context(iscsi);
		return status;
	}
	n = c->preset ? preset_points(c, pts, 512) : matrix(c, pts, 512);
	if ((c->cache_off || (c->preset && !strcmp(c->preset, "throughput"))) &&
	    (wce = cache_off(iscsi, &ti)) < 0) {
		iscsi_destroy_context(iscsi);
		return 1;
	}
	if (wce == 0) {
		ti.wce = 0;	/* what the runs see; restored at the end */
		ti.wce_forced_off = true;
	}
	report_target(c, &ti);
	status = run_all(c, &ti, pts, n > 512 ? 512 : n);
	if (wce == 0 && target_set_wce(iscsi, lun, 1))
		status = status ? status : 1;	/* could not restore */
	iscsi_logout_sync(iscsi);
	iscsi_destroy_context(iscsi);
	return status;
}

int main(int argc, char **argv)
{
	static struct config c;

	parse_args(argc, argv, &c);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if (c.compare)
		return compare_files(&c);
	if (c.plot)
		return plot_files(&c);
	return measure(&c);
}
