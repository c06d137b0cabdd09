/*
 * A run over several URLs (LUNs of one target or of several): one
 * process per LUN, forked after the options are read, each measuring
 * its LUN as a run of one URL would into a JSON file of its own; all
 * start measuring at one moment (--start-at, or a few seconds after
 * the forks, for the logins); the results are then merged point by
 * point (merge.c: histograms bin by bin) and reported in the format
 * asked for, each LUN's figures in the result's sources.  Each LUN gets
 * its own offsets' seed (the seed + its position), so that two URLs of
 * one LUN do not write the same blocks in the same order.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "syncbench.h"

static pid_t children[MAX_MERGE];
static int nchildren;
static pid_t parent;	/* the process that forked them */

/* A signal to this process goes on to each LUN's, once.  Each LUN's
 * process runs in a process group of its own, so that a signal to this
 * one's group (Ctrl-C, timeout(1), kill -- -PGID) reaches it only from
 * here: a second one would make it give up at once, with --cache-off's
 * WCE=0 left behind (tests/syncbench.sh, "timeout").  timeout(1) sends
 * its signal to this process and then to its group: the same signal
 * again within syncguard_signal_repeat's window is that one, not
 * forwarded. */
static void forward(int sig)
{
	if (syncguard_signal_repeat(sig))
		return;
	for (int i = 0; i < nchildren; i++)
		kill(children[i], sig);
}

static void forward_signals(void)
{
	struct sigaction sa = { .sa_handler = forward, .sa_flags = SA_RESTART };
	int sigs[] = { SIGINT, SIGTERM, SIGHUP };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

/* the text and JSON header: every URL (secrets masked), the first
 * LUN's report */
static void multi_header(const struct config *c, const struct target_info *ti)
{
	static char all[MAX_MERGE * 1100];
	struct config shown = *c;
	size_t n = 0;

	for (int i = 0; i < c->nurls && n < sizeof(all) - 1100; i++) {
		char url[1024];

		syncguard_shown_url(c->urls[i], url, sizeof(url));
		n += (size_t)snprintf(all + n, sizeof(all) - n, "%s%s",
				      i ? " " : "", url);
	}
	shown.url = all;
	syncguard_report_target(&shown, ti);
}

/* one LUN's process: the run of URL @k, as JSON into @file */
static void child(const struct config *c, int k, const char *file,
		  double t0, const sigset_t *held)
{
	struct config one = *c;

	setpgid(0, 0);
	/* out of this process's group: a parent killed outright (SIGKILL,
	 * the OOM killer) ends each LUN's run as SIGTERM does, restoring */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		raise(SIGTERM);
	syncguard_signals_release(held);	/* main()'s handlers */
	if (!freopen(file, "w", stdout)) {
		fprintf(stderr, PROG ": %s: %s\n", file, strerror(errno));
		_exit(1);
	}
	one.url = c->urls[k];
	one.urls = NULL;
	one.nurls = 1;
	one.format = OUT_JSON;
	one.progress = k == 0 ? c->progress : 0;	/* the first LUN's line */
	one.start_at = t0;
	one.lun_process = true;
	one.seed = c->seed + (uint64_t)k;
	fflush(stdout);
	_exit(syncguard_measure(&one));
}

/* wait for every LUN's process; the worst exit status (130 first), and
 * in @why[k] what ended process k when it was not a plain exit */
static int reap(char why[][64])
{
	int worst = 0;

	for (int i = 0; i < nchildren; i++) {
		int st, code;

		while (waitpid(children[i], &st, 0) < 0 && errno == EINTR)
			;
		code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
		why[i][0] = '\0';
		if (WIFSIGNALED(st))
			snprintf(why[i], 64, "its process died of signal %d",
				 WTERMSIG(st));
		else if (code == 130)
			snprintf(why[i], 64, "interrupted before its first "
				 "result");
		if (code == 130 || (worst != 130 && code > worst))
			worst = code;
	}
	return worst;
}

/* does @file hold a whole run with a result? */
static bool has_results(const char *file)
{
	json_object *top = json_object_from_file(file), *res;
	bool yes = top && json_object_object_get_ex(top, "results", &res) &&
		   json_object_is_type(res, json_type_array) &&
		   json_object_array_length(res) > 0;

	json_object_put(top);
	return yes;
}

/* no LUN measured anything: JSON stays JSON (an empty results array,
 * as a single run interrupted before its first result); exit status */
static int no_results(const struct config *c)
{
	if (c->format == OUT_JSON)
		printf("{\"tool\":\"" PROG "\",\"version\":1,"
		       "\"tool_version\":\"" SYNCGUARD_VERSION "\","
		       "\"results\":[]}\n");
	return 1;
}

static char files[MAX_MERGE][64];
static char dir[] = "/tmp/syncbench-luns.XXXXXX";

/* the LUNs' result files go on every way out, a usage error of --merge's
 * checks (exit) among them */
static void remove_files(void)
{
	if (getpid() != parent)	/* a LUN's process that exit()s */
		return;
	for (int k = 0; k < MAX_MERGE; k++)
		if (files[k][0])
			unlink(files[k]);
	rmdir(dir);
}

int syncguard_multi_run(const struct config *c)
{
	static char shown[MAX_MERGE][1024];
	static char why[MAX_MERGE][64];
	static char *ok_files[MAX_MERGE], *ok_names[MAX_MERGE];
	struct timespec now;
	sigset_t held;
	int status, nok = 0, merged;
	double t0;

	if (!mkdtemp(dir)) {
		fprintf(stderr, PROG ": %s: %s\n", dir, strerror(errno));
		return 1;
	}
	parent = getpid();
	atexit(remove_files);
	clock_gettime(CLOCK_REALTIME, &now);
	/* the logins of every LUN's sessions first */
	t0 = c->start_at ? c->start_at : (double)now.tv_sec + 3 +
	     0.25 * c->nurls;
	fflush(stdout);
	fflush(stderr);
	syncguard_signals_hold(&held);	/* until forward() knows them all */
	for (int k = 0; k < c->nurls; k++) {
		snprintf(files[k], sizeof(files[k]), "%s/lun%d.json", dir, k);
		children[k] = fork();
		if (children[k] == 0)
			child(c, k, files[k], t0, &held);
		if (children[k] < 0) {
			fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
			break;
		}
		setpgid(children[k], children[k]);	/* as the child does */
		nchildren++;
	}
	forward_signals();
	syncguard_signals_release(&held);
	fprintf(stderr, PROG ": %d LUNs, each in a process of its own; "
		"measuring starts in %.1f s\n", nchildren,
		t0 - ((double)now.tv_sec + (double)now.tv_nsec / 1e9));
	status = reap(why);
	for (int k = 0; k < nchildren; k++) {
		/* a CHAP secret stays out of the sources and messages */
		syncguard_shown_url(c->urls[k], shown[k], sizeof(shown[k]));
		if (has_results(files[k])) {
			ok_files[nok] = files[k];
			ok_names[nok++] = shown[k];
		} else {
			fprintf(stderr, PROG ": %s: no results (%s); left out "
				"of the merged results\n", shown[k], why[k][0] ?
				why[k] : "see above");
			status = status ? status : 1;
		}
	}
	merged = nok ? syncguard_merge_report(c, ok_files, ok_names, nok,
					      multi_header) : no_results(c);
	return status ? status : merged;
}
