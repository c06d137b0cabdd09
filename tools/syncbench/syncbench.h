/*
 * iscsi-syncbench: what a sync write costs on an iSCSI LUN, studied the
 * way iozone, vdbench, fio and dd are used for it, from the initiator
 * side, with libiscsi.  Shared types of tools/syncbench/.
 *
 * Units: bytes, logical blocks, microseconds (latencies), seconds
 * (durations) -- named in every field.
 */
#ifndef SYNCBENCH_H
#define SYNCBENCH_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "histogram.h"

#define PROG "iscsi-syncbench"
#define MAX_QD 1024
#define MAX_SESSIONS 64
#define MAX_LIST 32		/* entries in a size or depth list */
#define MAX_RETRIES 5		/* BUSY, TASK SET FULL, UNIT ATTENTION */
#define MAX_MERGE 16		/* --merge's files */
#define MAX_MERGE_TEXT "16"

/* How writes are made durable (--sync). */
enum sync_mode {
	SYNC_NONE,		/* WRITE(16) FUA=0 */
	SYNC_FUA,		/* WRITE(16) FUA=1 */
	SYNC_FLUSH,		/* WRITE(16) then SYNCHRONIZE CACHE(16) */
	SYNC_EVERY,		/* SYNCHRONIZE CACHE after every N writes */
	SYNC_END,		/* one SYNCHRONIZE CACHE at the end, timed
				 * (iozone -e) */
	SYNC_FLUSH_ONLY,	/* SYNCHRONIZE CACHE alone */
};

enum out_format { OUT_TEXT, OUT_JSON, OUT_CSV, OUT_FIO };

#ifndef SYNCGUARD_VERSION
#define SYNCGUARD_VERSION "unknown"
#endif

/* When the operations of an open-loop run (--rate, --curve) arrive. */
enum arrivals {
	ARRIVALS_FIXED,		/* evenly spaced */
	ARRIVALS_POISSON,	/* exponential gaps of the same mean */
};

#define MAX_CURVE 20		/* --curve's percentages */

struct config {
	const char *url;		/* the URL (the first of several) */
	char **urls;			/* every URL given, @nurls of them */
	int nurls;
	enum sync_mode sync;
	unsigned int every;		/* SYNC_EVERY: writes per flush */
	uint64_t sizes[MAX_LIST];	/* bytes per command; runs one each */
	unsigned int nsizes;
	unsigned int qds[MAX_LIST];	/* commands in flight per session */
	unsigned int nqds;
	unsigned int sessions;
	double seconds;			/* per run; 0 with bytes */
	uint64_t bytes;			/* per session per run; 0 = time */
	double warmup;			/* seconds, not measured */
	double interval;		/* seconds between reports; 0 none */
	unsigned int read_pct;		/* share of reads (vdbench rdpct) */
	unsigned int random_pct;	/* share of random offsets (seekpct) */
	uint64_t span;			/* bytes from LBA 0; 0 = whole LUN */
	bool split_span;		/* sessions get separate regions */
	bool cache_off;			/* WCE=0 for the run, restored after */
	bool verify;			/* stamp writes, read back at the end */
	bool verify_only;		/* only check a LUN stamped earlier */
	const char *state;		/* --verify expectations file */
	enum out_format format;
	bool csv_header;
	int progress;			/* -1 auto, 0, 1 */
	const char *initiator;
	const char *label;
	const char *preset;		/* NULL, or a preset's name */
	bool full;			/* a preset's full form */
	const char *preset_conflict;	/* the first option given that a
					 * preset sets itself, or NULL */
	bool sessions_given;		/* --sessions on the command line */
	bool seconds_given;		/* --time on the command line */
	const char *run_opt;		/* the first option given other than
					 * --compare and --plot, or NULL */
	unsigned int timeout;		/* seconds per command; 0 none */
	bool header_digest;
	uint64_t seed;			/* of the random offsets: --seed,
					 * else from the clock (printed) */
	bool seed_given;
	/* --compare / --plot / --merge */
	const char *plot;
	char **files;
	int nfiles;
	bool compare, merge;
	double start_at;		/* --start-at: epoch seconds; 0 none */
	bool lun_process;		/* one LUN's process of a run over
					 * several URLs (multi.c) */
	int argc;			/* the command line, for the record */
	char **argv;
	/* open loop (rate.c) */
	double rate;			/* --rate: IOPS asked, all sessions;
					 * 0 closed loop */
	enum arrivals arrivals;
	bool arrivals_given;
	/* --curve: percentages of the closed-loop maximum, rising */
	unsigned int curve_pcts[MAX_CURVE];
	unsigned int ncurve;		/* 0: no --curve */
};

/* What the LUN says about itself (MODE SENSE, READ CAPACITY(16),
 * Block Limits VPD). */
struct target_info {
	uint32_t block_size;		/* bytes, logical */
	uint32_t phys_block_size;	/* bytes */
	uint64_t blocks;		/* capacity, logical blocks */
	int wce, dpofua;		/* -1 unknown */
	bool write_protected;		/* WP, MODE SENSE's device-specific
					 * parameter (SBC-3 6.4.2) */
	uint32_t max_transfer;		/* blocks; 0 = not reported */
	int wce_changeable;		/* -1 unknown */
	bool wce_forced_off;		/* --cache-off set WCE=0 for the run */
	char target[256];		/* the target's name (IQN) */
	int lun;
};

/* One measured run: a (size, depth) point of a workload. */
struct run_params {
	const char *label;		/* workload name, e.g. "rand-write" */
	uint64_t xfer;			/* bytes per command */
	unsigned int qd;
	enum sync_mode sync;
	unsigned int read_pct, random_pct;
	double seconds;
	uint64_t bytes;
	unsigned int sessions;		/* 0: --sessions */
	bool split;			/* sessions on separate regions */
	double interval;		/* seconds; 0: --interval */
	uint64_t span;			/* bytes from the LUN's start; 0:
					 * --span, else the whole LUN */
	/* open loop: IOPS asked of all sessions together (0: closed loop,
	 * each session keeps qd commands in flight), and how they arrive */
	double rate;
	enum arrivals arrivals;
	/* --curve: 0 none; 1 the closed-loop maximum run; 2.. the steps,
	 * at curve_pct percent of that run's curve_max_iops */
	unsigned int curve_step, curve_pct;
	double curve_max_iops;
};

struct interval {
	double t;			/* seconds since the start */
	double iops, mbps, p99_us;
};

struct session_result {
	uint64_t ops;
	double iops;
};

/* The SCSI commands a run sends, each with a latency histogram of its
 * own beside the operation's (which, under -s flush, is the WRITE and
 * its SYNCHRONIZE CACHE acknowledged as one) */
enum syncguard_cmd {
	CMD_READ,		/* READ(16) */
	CMD_WRITE,		/* WRITE(16), FUA=0 */
	CMD_WRITE_FUA,		/* WRITE(16), FUA=1 */
	CMD_SYNC_CACHE,		/* SYNCHRONIZE CACHE(16) */
	SYNCGUARD_NCMD
};

/* report.c: the command's name in text ("WRITE FUA") and as a JSON key
 * ("write_fua") */
extern const char *const syncguard_cmd_name[SYNCGUARD_NCMD];
extern const char *const syncguard_cmd_key[SYNCGUARD_NCMD];

/* One run a merged result was made of (--merge's file, or one LUN of a
 * run with several URLs) */
struct merge_source {
	char name[512];			/* file or URL */
	char label[64];
	uint64_t ops, errors;
	double iops, p99_us;		/* p99: -1 when none completed */
	int wce;			/* its LUN's, -1 unknown */
};

struct result {
	struct run_params p;
	double seconds;
	uint64_t ops, reads, writes, flushes, bytes;
	uint64_t errors, retries, unanswered;
	bool gone;	/* the target stopped answering (no logout then) */
	double iops, mbps;
	struct histogram hist;		/* per operation, ns */
	/* per command, ns: from the moment it was handed to libiscsi to
	 * its answer (the operation's latency also holds the time before:
	 * its WRITE, a parked every:N flush's wait) */
	struct histogram cmd_hist[SYNCGUARD_NCMD];
	struct interval *iv;
	unsigned int niv;
	struct session_result sess[MAX_SESSIONS];
	unsigned int nsess;
	double flushes_per_op;		/* device flushes (syncguard), -1 */
	/* time counted commands waited in libiscsi's queue before they
	 * went out on the wire, ns, and how many were timed */
	uint64_t queued_ns, queued_n;
	/* operations that needed a retry (counted in ops and in @hist as
	 * well); the unit attentions and BUSY or TASK SET FULL answers
	 * behind the retries */
	struct histogram retried_hist;
	uint64_t unit_attentions, busy_answers;
	bool mode_changed;		/* MODE PARAMETERS CHANGED came */
	/* how the syncguard LUN ran, as its counters said at the end
	 * (tools/statsfile.h); empty when it is no syncguard LUN here */
	char target_writes[256], target_batching[160], target_sync_loop[160];
	char target_engine[96];
	uint64_t verify_checked, verify_bad;
	bool verify_ran;		/* --verify: the read-back ran */
	bool verify_complete;		/* ... and read every block */
	bool interrupted;
	/* a merged result: per-session IOPS known as the spread over all
	 * sessions (their min and max), and the runs it was made of */
	bool merged;
	double sess_min, sess_max;
	const struct merge_source *src;
	unsigned int nsrc;
	/* open loop (p.rate > 0): arrivals per second the schedule held in
	 * the measured window (the asked rate for fixed arrivals; Poisson's
	 * count varies), the arrivals due in it and of them those never
	 * sent (the run ended first), how late operations were
	 * sent after their intended time (ns), and whether the target kept
	 * up */
	double scheduled_iops;
	uint64_t due, unsent;
	uint64_t lag_n, lag_sum_ns, lag_max_ns;
	bool rate_sustained;
	/* this process's own CPU over the point (warm-up included), as
	 * percent of that time, its context switches and page faults
	 * (getrusage; fio's usr_cpu, sys_cpu, ctx, majf, minf) */
	double usr_cpu, sys_cpu;
	uint64_t ctx, majf, minf;
};

extern volatile sig_atomic_t syncguard_interrupted;	/* Ctrl-Cs so far */
/* In a signal handler: is @sig the same signal as the last one, within
 * 100 ms (one signal delivered twice, where a person's second Ctrl-C
 * comes later)?  Notes @sig as the last. */
bool syncguard_signal_repeat(int sig);
/* when measuring started, UNIX seconds (--start-at's time, or later
 * when the login made it late); 0: not set, the header's own time */
extern double syncguard_run_start;
/* --start-at TIME: wait until then, once per process, after the first
 * point's sessions have logged in (the warm-up and the measuring start
 * at TIME), in slices of at most 100 ms spent in @idle(@arg, ms); more
 * than a second late is said on stderr.  Whether it waited (false: no
 * --start-at, or waited already). */
bool syncguard_start_wait(const struct config *c, void (*idle)(void *, int),
			  void *arg);
/* set while --verify reads back: a second Ctrl-C then stops the
 * read-back, and the results are printed (rather than quitting with
 * nothing) */
extern volatile sig_atomic_t syncguard_reading_back;

/*
 * libiscsi's *_sync calls return at a signal (poll's EINTR) and leave
 * their task queued with a pointer into their stack frame, which the
 * next service of the context writes through (the logout after an
 * interrupted read-back would).  So
 * each runs with SIGINT, SIGTERM and SIGHUP held: one that comes
 * meanwhile is taken when the call returns (at most --timeout later).
 * SYNCGUARD_HELD(expr) evaluates @expr so and gives its value.
 */
void syncguard_signals_hold(sigset_t *old);
void syncguard_signals_release(const sigset_t *old);
#define SYNCGUARD_HELD(expr) __extension__ ({				\
	sigset_t old_;							\
	syncguard_signals_hold(&old_);					\
	__typeof__(expr) ret_ = (expr);					\
	syncguard_signals_release(&old_);				\
	ret_;								\
})

/* options.c: fill @c from the command line; a usage error exits 2 */
void syncguard_parse_args(int argc, char **argv, struct config *c);
/* the --help text, and the synopsis lines alone, to @f */
void syncguard_usage(FILE *f);
void syncguard_synopsis(FILE *f);
/* "iscsi-syncbench: " @fmt (with @arg) and the synopsis on stderr;
 * exits 2 */
void syncguard_usage_error(const char *fmt, const char *arg);
/* the --sync name of @s ("every:@every" for SYNC_EVERY) in @buf
 * (@len bytes); returns @buf */
const char *syncguard_sync_name(enum sync_mode s, unsigned int every, char *buf,
				size_t len);

/* target.c: "sense key MEDIUM ERROR (0x3), ASC/ASCQ 0x0c00 ..." in @buf */
const char *syncguard_sense_text(const struct scsi_sense *sense, char *buf,
				 size_t len);
/* target.c: log in to the URL's LUN (its number in @lun, target IQN in
 * @target, @len bytes); the context, or NULL (failed, message printed) */
struct iscsi_context *syncguard_target_login(const struct config *c, int *lun,
					     char *target, size_t len);
/* READ CAPACITY(16), the Caching mode page (MODE SENSE) and the Block
 * Limits VPD page into @ti; 0, -1 (READ CAPACITY failed, message
 * printed; the others leave their fields unknown, -1 or 0) */
int syncguard_target_describe(struct iscsi_context *iscsi, int lun,
			      struct target_info *ti);
/* MODE SELECT(6) of the Caching page with WCE = @wce (0 or 1); 0, -1
 * (refused or failed, message printed) */
int syncguard_target_set_wce(struct iscsi_context *iscsi, int lun, int wce);
/* A syncguard LUN's counters, read from the file a live tgtd on this
 * host publishes under the URL's target name and LUN: device syncs
 * (fdatasync calls + RWF_DSYNC writes) and commands so far; both -1
 * when there is none. */
struct target_sample {
	double syncs, commands;
};
void syncguard_target_sample(const char *url_target, int lun, struct target_sample *ts);
/* How the syncguard LUN runs (tools/statsfile.h) into @r's target_*
 * strings; left empty when there are no live counters for it. */
void syncguard_target_ways(const char *url_target, int lun, struct result *r);

/* run.c: does point @p write to the LUN (or --verify stamp it)? */
bool syncguard_point_writes(const struct config *c, const struct run_params *p);
/* run.c: why @p cannot run on this LUN (a usage problem), or NULL */
const char *syncguard_point_problem(const struct config *c, const struct target_info *ti,
				    const struct run_params *p);
/* run.c: measure one point; 0, -1 (connection failure), -2 (usage) */
int syncguard_run_point(const struct config *c, const struct target_info *ti,
			const struct run_params *p, struct result *r);

/* report.c; syncguard_shown_url: @url with a CHAP secret (user%secret@)
 * masked */
void syncguard_shown_url(const char *url, char *out, size_t len);
/* the run's header (text) or opening object (JSON, CSV header) */
void syncguard_report_target(const struct config *c, const struct target_info *ti);
/* one result; JSON: the first without a leading comma.  syncguard_report_end
 * closes what syncguard_report_target opened, whatever happened in between. */
void syncguard_report_result(const struct config *c, const struct target_info *ti,
			     const struct result *r, bool first);
void syncguard_report_end(const struct config *c);
/* ,"commands":{"read":{"ops":N,"latency_us":{...},"cdf":[...],
 * "latency_hist":{...}},...} of the SYNCGUARD_NCMD histograms @cmd, to stdout */
void syncguard_print_commands_json(const struct histogram *cmd);
/* one --interval line (text only; JSON and CSV carry none) */
void syncguard_report_interval(const struct config *c, const struct interval *iv);

/* report.c: the command line as one JSON string, to stdout */
void syncguard_print_command_line(const struct config *c);

/* fiojson.c: --fio-json, fio's --output-format=json+ layout: the
 * opening (run details, the target's report), one job per result (the
 * first without a leading comma), the end */
void syncguard_fio_target(const struct config *c, const struct target_info *ti);
void syncguard_fio_result(const struct config *c, const struct target_info *ti,
			  const struct result *r, bool first);
void syncguard_fio_end(void);

/* compare.c: --compare and --plot over saved JSON runs; exit status */
int syncguard_compare_files(const struct config *c);
int syncguard_plot_files(const struct config *c);

/* merge.c: --merge of runs made at the same time, as JSON on stdout;
 * exit status (a mismatch is a usage error) */
int syncguard_merge_files(const struct config *c);
/* merge.c: the --json files @files (@n of them, named @names in the
 * result's sources: the files, or the URLs they measured) merged point
 * by point and reported in @c's format, under @header (called once,
 * with the first file's target report, before the first result); exit
 * status.  A mismatch is a usage error. */
int syncguard_merge_report(const struct config *c, char **files,
			   char **names, int n,
			   void (*header)(const struct config *c,
					  const struct target_info *ti));

/* main.c: log in to @c->url and measure each point; exit status */
int syncguard_measure(const struct config *c);

/* multi.c: a run over several URLs at once: one process per LUN,
 * started together, their results merged (per LUN in the sources);
 * exit status */
int syncguard_multi_run(const struct config *c);

/* rate.c: open-loop arrivals.  One pacer per session: its share of
 * the asked rate, its own schedule; an operation's latency counts from
 * its arrival's intended time, so an arrival that waits (the queue
 * full, the initiator late) has that wait in its latency. */
struct pacer {
	bool on;			/* false: closed loop */
	bool poisson;
	double gap_ns;			/* mean time between arrivals */
	uint64_t origin_ns;		/* fixed: the first one's */
	uint64_t next_ns;		/* intended time of the next one */
	uint64_t measure_ns;		/* start of the measured window */
	uint64_t rng;
	uint64_t taken, in_window;	/* arrivals sent; of them, intended
					 * in the measured window */
	uint64_t first_ns, last_ns;	/* intended times, first and last
					 * sent in the window */
	uint64_t lag_n, lag_sum_ns, lag_max_ns;
};
/* @pc for session @idx of @nsess of point @p: the run starts at @t0_ns,
 * is measured from @measure_ns; @seed makes Poisson gaps repeatable */
void syncguard_pacer_init(struct pacer *pc, const struct run_params *p,
			  unsigned int idx, unsigned int nsess, uint64_t t0_ns,
			  uint64_t measure_ns, uint64_t seed);
/* may the next arrival go at @now_ns (always, closed loop)? */
bool syncguard_pacer_ready(const struct pacer *pc, uint64_t now_ns);
/* the next arrival is sent at @now_ns: its intended time (@now_ns
 * closed loop), and the schedule moves on */
uint64_t syncguard_pacer_take(struct pacer *pc, uint64_t now_ns);
/* the open-loop fields of @r from the @n sessions' pacers, the run
 * having stopped sending at @stop_ns (UINT64_MAX / 2: --bytes) */
void syncguard_pacer_summarize(const struct pacer *pcs, unsigned int n,
			       uint64_t stop_ns, struct result *r);
/* the option values: --rate's IOPS, --arrivals', --curve's list; a
 * usage error exits 2 */
void syncguard_set_rate(struct config *c, const char *arg);
void syncguard_set_arrivals(struct config *c, const char *arg);
void syncguard_set_curve(struct config *c, const char *arg);
/* what --rate and --curve cannot go with: a usage error exits 2 */
void syncguard_check_rate(const struct config *c);
/* the open-loop part of a result: a text line, JSON members (after a
 * comma), CSV columns (after a comma; the header's in RATE_CSV_HEADER) */
void syncguard_rate_text(const struct result *r);
void syncguard_rate_json(const struct result *r);
void syncguard_rate_csv(const struct result *r);
#define RATE_CSV_HEADER ",asked_iops,arrivals,rate_sustained,unsent," \
	"curve_step,curve_pct"
/* --curve, in main.c's loop over the points: step @k (from 0) of
 * point @base into @q, after step k - 1 measured @prev (the closed-loop
 * maximum, when k is 1).  Step 0 is @base itself (the maximum run under
 * --curve); 1.. run at --curve's percentages of that maximum.  False
 * when there is no step @k (none past 0 without --curve). */
bool syncguard_curve_step(const struct config *c, const struct run_params *base,
			  unsigned int k, const struct result *prev,
			  struct run_params *q);
/* text output: note a curve step's result, and after the last one,
 * print the curve's table (asked and achieved IOPS, percentiles) */
void syncguard_curve_note(const struct config *c, const struct result *r);
void syncguard_curve_table(const struct config *c);

/* presets.c: the classic studies; fills @points, returns their count */
unsigned int syncguard_preset_points(const struct config *c, struct run_params *points,
				     unsigned int max);
/* the --preset part of --help: each preset and what it runs */
const char *syncguard_preset_help(void);

#endif
