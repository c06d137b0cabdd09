/*
 * iscsi-syncbench: the points to measure (a preset, or the size x depth
 * matrix of the options), one after the other, then the report.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "syncbench.h"
#include "verify.h"

volatile sig_atomic_t syncguard_interrupted;
volatile sig_atomic_t syncguard_reading_back;
/* --cache-off set WCE=0 and has not restored it yet */
static volatile sig_atomic_t wce_off;

#define WCE_LEFT_OFF PROG ": the LUN's write cache may still be off " \
	"(WCE=0): --cache-off could not restore it; check with MODE SENSE and " \
	"set WCE=1 with MODE SELECT (sdparm --set WCE through a kernel " \
	"initiator, or the target's own tool: tgtadm's mode_page, see " \
	"bs_syncguard(8))\n"

bool syncguard_signal_repeat(int sig)
{
	static volatile sig_atomic_t last_sig;
	static struct timespec last;	/* CLOCK_MONOTONIC: async-signal-safe */
	struct timespec now;
	bool again;

	clock_gettime(CLOCK_MONOTONIC, &now);
	again = last_sig == sig && (now.tv_sec - last.tv_sec) * 1000000000L +
		(now.tv_nsec - last.tv_nsec) < 100000000L;
	last_sig = sig;
	last = now;
	return again;
}

static void on_signal(int sig)
{
	/* one signal sent twice (timeout(1) to this process and to its
	 * group; pkill, and the parent's forward, to a LUN's process) */
	if (syncguard_signal_repeat(sig))
		return;
	/* second Ctrl-C: give up at once, unless it stops a read-back
	 * that follows the first (_exit would lose what was measured with
	 * stdout's buffer); a third one quits */
	if (syncguard_interrupted == 1 && syncguard_reading_back) {
		syncguard_interrupted = 2;
		return;
	}
	if (syncguard_interrupted) {
		if (wce_off) {	/* write(): safe in a signal handler */
			ssize_t n = write(STDERR_FILENO, WCE_LEFT_OFF,
					  sizeof(WCE_LEFT_OFF) - 1);
			(void)n;
		}
		_exit(130);
	}
	syncguard_interrupted = 1;
}

void syncguard_signals_hold(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, old);
}

void syncguard_signals_release(const sigset_t *old)
{
	sigprocmask(SIG_SETMASK, old, NULL);
}

/* a workload's name from its mix, as the presets name theirs; a partly
 * random one says how random ("rand50-write" for -R 50) */
static const char *workload_name(const struct config *c)
{
	static const char *const kind[3][2] = {
		{ "seq-write", "rand-write" }, { "seq-mixed", "rand-mixed" },
		{ "seq-read", "rand-read" } };
	static char name[32];
	int k = c->read_pct == 0 ? 0 : c->read_pct == 100 ? 2 : 1;

	if (c->sync == SYNC_FLUSH_ONLY)	/* no writes: not rand-write */
		return "flush-only";
	if (c->random_pct == 0 || c->random_pct == 100)
		return kind[k][c->random_pct == 100];
	snprintf(name, sizeof(name), "rand%u-%s", (unsigned int)c->random_pct,
		 kind[k][0] + 4);
	return name;
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
	/* a WCE it could not read, it could not put back as it was */
	if (ti->wce < 0) {
		fprintf(stderr, PROG ": --cache-off: the LUN's Caching page "
			"could not be read (MODE SENSE failed), so the write "
			"cache it would have to restore is unknown: not "
			"changed\n");
		return -1;
	}
	if (ti->wce == 0)
		return 1;
	if (ti->wce_changeable == 0) {
		fprintf(stderr, PROG ": --cache-off: the LUN does not let WCE be "
			"changed (its changeable mask says so)\n");
		return -1;
	}
	return syncguard_target_set_wce(iscsi, ti->lun, 0) ? -1 : 0;
}

/* Every point checked against the LUN before anything runs: a preset
 * leaves out the sizes this LUN cannot take (saying so); an option
 * that asks for one, or a preset that writes to a write-protected LUN,
 * is a usage error.  The number of points left. */
static unsigned int usable_points(const struct config *c,
				  const struct target_info *ti,
				  struct run_params *pts, unsigned int n)
{
	unsigned int kept = 0;

	/* a preset cut down to its reads would be another study */
	for (unsigned int i = 0; c->preset && ti->write_protected && i < n; i++)
		if (syncguard_point_writes(c, &pts[i]))
			syncguard_usage_error("--preset %s writes, and the LUN is write "
					      "protected (WP=1 in MODE SENSE)", c->preset);
	for (unsigned int i = 0; i < n; i++) {
		const char *why = syncguard_point_problem(c, ti, &pts[i]);

		if (why && !c->preset)
			syncguard_usage_error("%s", why);
		if (why)
			fprintf(stderr, PROG ": preset %s: leaving out %s %" PRIu64
				" bytes: %s\n", c->preset, pts[i].label,
				pts[i].xfer, why);
		else
			pts[kept++] = pts[i];
	}
	if (!kept)
		syncguard_usage_error("--preset %s: none of its points can run here (the "
				      "reasons are above)", c->preset);
	return kept;
}

/* Every point in turn; *gone set when the target stopped answering
 * (the rest of a sweep is not tried, and nothing waits on a logout). */
static int run_all(const struct config *c, const struct target_info *ti,
		   const struct run_params *pts, unsigned int n, bool *gone)
{
	static struct result r;
	int status = 0;

	bool first = true;

	*gone = false;
	for (unsigned int i = 0; i < n && !syncguard_interrupted && status != 2 && !*gone;
	     i++) {
		struct run_params q;

		/* one run a point; under --curve, its steps after it */
		for (unsigned int k = 0; !syncguard_interrupted && !*gone &&
		     syncguard_curve_step(c, &pts[i], k, &r, &q); k++) {
			int ret = syncguard_run_point(c, ti, &q, &r);

			if (ret == 0 || r.ops) {
				syncguard_report_result(c, ti, &r, first);
				syncguard_curve_note(c, &r);
				first = false;
			}
			if (ret || r.errors || r.verify_bad || r.unanswered)
				status = ret == -2 ? 2 : 1;
			*gone = r.gone;
			free(r.iv);
			r.iv = NULL;
			if (ret)
				break;
		}
		syncguard_curve_table(c);
	}
	syncguard_report_end(c);
	return syncguard_interrupted ? 130 : status;
}

static int check_only(const struct config *c, struct iscsi_context *iscsi,
		      const struct target_info *ti)
{
	static struct result r;
	uint64_t span = (c->span ? c->span : ti->blocks * ti->block_size) /
			ti->block_size;
	int ret;

	if (c->span > ti->blocks * ti->block_size)
		syncguard_usage_error("--span: larger than the LUN (%s)", "see its capacity "
				      "with a plain run's first lines");
	ret = syncguard_verify_state(iscsi, ti->lun, ti, c->state, span, &r);
	if (ret == -2)
		return 2;	/* the state file does not fit: said why */
	if (c->span && !ret && r.verify_checked != span)
		fprintf(stderr, PROG ": --span ignored: the state file's span "
			"(%" PRIu64 " blocks) was checked\n", r.verify_checked);
	if (c->format == OUT_JSON)
		printf("{\"tool\":\"" PROG "\",\"version\":1,\"verify\":{"
		       "\"ran\":true,\"checked\":%" PRIu64 ",\"mismatches\":%"
		       PRIu64 ",\"complete\":%s}}\n", r.verify_checked,
		       r.verify_bad, ret ? "false" : "true");
	else if (c->format == OUT_CSV)
		printf("%s%" PRIu64 ",%" PRIu64 ",%d\n", c->csv_header ?
		       "verify_checked,verify_mismatches,verify_complete\n" : "",
		       r.verify_checked, r.verify_bad, ret ? 0 : 1);
	else
		printf("verify: %" PRIu64 " blocks checked, %" PRIu64
		       " mismatches%s\n", r.verify_checked, r.verify_bad,
		       ret ? " (incomplete)" : "");
	if (ret == -3 || syncguard_interrupted)
		return 130;
	return ret || r.verify_bad ? 1 : 0;
}

/* --state: fail before the run, not after it, when the file cannot be
 * written */
/* WCE=1 again after --cache-off, and read back: 0, or -1 after saying
 * loudly that it could not be.  The control session has been idle for
 * the whole run, and a target may have dropped it (a keepalive nobody
 * answered): then over a new one. */
static int restore_wce(const struct config *c, struct iscsi_context *iscsi,
		       int lun)
{
	struct iscsi_context *fresh = NULL;
	struct target_info now;
	int ret = syncguard_target_set_wce(iscsi, lun, 1), l;

	if (ret) {
		fprintf(stderr, PROG ": --cache-off: restoring WCE=1 over a new "
			"session\n");
		fresh = syncguard_target_login(c, &l, NULL, 0);
		iscsi = fresh;
		ret = fresh ? syncguard_target_set_wce(fresh, lun, 1) : -1;
	}
	if (!ret && (syncguard_target_describe(iscsi, lun, &now) ||
		     now.wce != 1)) {
		fprintf(stderr, PROG ": --cache-off: MODE SENSE after the "
			"restore does not show WCE=1\n");
		ret = -1;
	}
	if (fresh) {
		SYNCGUARD_HELD(iscsi_logout_sync(fresh));
		iscsi_destroy_context(fresh);
	}
	if (ret)
		fputs(WCE_LEFT_OFF, stderr);
	return ret;
}

double syncguard_run_start;

/* --start-at: wait until UNIX time @t (seconds), in slices of at most
 * 100 ms spent in @idle(@arg, ms); Ctrl-C ends the wait.  Returns how
 * late it was already (seconds; 0 on time). */
static double wait_until(double t, bool quiet, void (*idle)(void *, int),
			 void *arg)
{
	struct timespec now;
	double left;

	clock_gettime(CLOCK_REALTIME, &now);
	left = t - ((double)now.tv_sec + (double)now.tv_nsec / 1e9);
	if (!quiet && left > 0)	/* said once for the LUNs of a run */
		fprintf(stderr, PROG ": --start-at: measuring starts in "
			"%.1f s\n", left);
	for (bool first = true;; first = false) {
		clock_gettime(CLOCK_REALTIME, &now);
		left = t - ((double)now.tv_sec + (double)now.tv_nsec / 1e9);
		if (left <= 0 || syncguard_interrupted)
			return first ? -left : 0;
		idle(arg, left > 0.1 ? 100 : (int)(left * 1e3) + 1);
	}
}

/* --start-at, as the header records it: TIME, or now where the control
 * session's login already made the run late */
static void start_planned(const struct config *c)
{
	struct timespec now;
	double t;

	clock_gettime(CLOCK_REALTIME, &now);
	t = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
	syncguard_run_start = t > c->start_at + 1 ? t : c->start_at;
}

bool syncguard_start_wait(const struct config *c, void (*idle)(void *, int),
			  void *arg)
{
	static bool waited;
	double late;

	if (!c->start_at || waited)
		return false;
	waited = true;
	late = wait_until(c->start_at, c->lun_process, idle, arg);
	if (late > 1)
		fprintf(stderr, PROG ": --start-at: starting %.1f s late (the "
			"logins took longer): runs started on time measured "
			"other seconds than this one\n", late);
	return true;
}

static int state_writable(const char *path)
{
	struct stat st;
	bool existed = stat(path, &st) == 0;
	FILE *f = fopen(path, "a");

	if (!f) {
		fprintf(stderr, PROG ": --state %s: %s\n", path, strerror(errno));
		return -1;
	}
	fclose(f);
	if (!existed)
		unlink(path);
	return 0;
}

int syncguard_measure(const struct config *c)
{
	static struct run_params pts[MAX_LIST * MAX_LIST];
	struct target_info ti;
	struct iscsi_context *iscsi;
	char name[256];
	unsigned int n;
	int lun, status, wce = 1;
	bool gone;

	if (c->verify && c->state && state_writable(c->state))
		return 1;
	iscsi = syncguard_target_login(c, &lun, name, sizeof(name));
	if (!iscsi)
		return 1;
	/* the control session only asks and sets: when the target is gone,
	 * fail its commands instead of reconnecting for ever */
	iscsi_set_noautoreconnect(iscsi, 1);
	if (syncguard_target_describe(iscsi, lun, &ti)) {
		iscsi_destroy_context(iscsi);
		return 1;
	}
	snprintf(ti.target, sizeof(ti.target), "%s", name);
	ti.lun = lun;
	if (c->verify_only) {
		status = check_only(c, iscsi, &ti);
		SYNCGUARD_HELD(iscsi_logout_sync(iscsi));
		iscsi_destroy_context(iscsi);
		return status;
	}
	n = c->preset ? syncguard_preset_points(c, pts, MAX_LIST * MAX_LIST) :
			matrix(c, pts, MAX_LIST * MAX_LIST);
	n = usable_points(c, &ti, pts, n);
	for (unsigned int i = 0; i < n && ti.dpofua == 0; i++)
		if (pts[i].sync == SYNC_FUA) {
			fprintf(stderr, PROG ": note: the LUN reports DPOFUA=0 "
				"(no FUA support): its FUA writes may be cached "
				"like plain ones, and the fua discipline then "
				"measures no durability\n");
			break;
		}
	if ((c->cache_off || (c->preset && !strcmp(c->preset, "throughput"))) &&
	    (wce = cache_off(iscsi, &ti)) < 0) {
		iscsi_destroy_context(iscsi);
		return 1;
	}
	if (wce == 0) {
		ti.wce = 0;	/* what the runs see; restored at the end */
		ti.wce_forced_off = true;
		wce_off = 1;
	}
	if (c->start_at)
		start_planned(c);
	syncguard_report_target(c, &ti);
	status = run_all(c, &ti, pts, n, &gone);
	if (wce == 0 && restore_wce(c, iscsi, lun))
		status = status ? status : 1;	/* could not restore */
	wce_off = 0;
	if (!gone)
		SYNCGUARD_HELD(iscsi_logout_sync(iscsi));
	iscsi_destroy_context(iscsi);
	return status;
}

int main(int argc, char **argv)
{
	static struct config c;

	syncguard_parse_args(argc, argv, &c);
	signal(SIGPIPE, SIG_IGN);
	if (c.merge)
		return syncguard_merge_files(&c);
	if (c.compare || c.plot) {	/* both, when both are asked for; a
					 * signal kills them as it would cat */
		int status = c.compare ? syncguard_compare_files(&c) : 0;

		return status || !c.plot ? status : syncguard_plot_files(&c);
	}
	/* the end of a terminal (SIGHUP) too: a run ends, and --cache-off's
	 * WCE=0 is restored, as after Ctrl-C */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	if (c.nurls > 1)
		return syncguard_multi_run(&c);
	return syncguard_measure(&c);
}
