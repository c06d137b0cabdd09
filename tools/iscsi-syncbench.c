/*
 * iscsi-syncbench: what does a sync write cost on this iSCSI LUN?
 *
 * A libiscsi initiator that keeps QUEUE DEPTH writes in flight for a
 * fixed time under one sync discipline and reports IOPS, MB/s and
 * latency percentiles, plus the WCE and DPOFUA bits the LUN reports.
 *
 *   none   WRITE(16), FUA=0
 *   fua    WRITE(16), FUA=1
 *   flush  WRITE(16) then SYNCHRONIZE CACHE(16), acknowledged (and
 *          timed) as one operation
 *   flush-only  SYNCHRONIZE CACHE(16) alone: what a flush costs when
 *          nothing is dirty
 *
 * Exit status: 0 success, 1 connection failure or any SCSI error,
 * 2 usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "histogram.h"
#include "syncguard_stats.h"

#define PROG "iscsi-syncbench"
#define MAX_QD 1024
#define MAX_ERRORS_SHOWN 5

enum sync_mode { SYNC_NONE, SYNC_FUA, SYNC_FLUSH, SYNC_FLUSH_ONLY };
static const char *const sync_names[] = { "none", "fua", "flush",
					  "flush-only" };

enum out_format { OUT_TEXT, OUT_JSON, OUT_CSV };

struct config {
	const char *url;
	enum sync_mode sync;
	uint64_t xfer;		/* bytes per write */
	unsigned int qd;	/* writes in flight */
	double seconds;
	bool random;
	uint64_t span;		/* bytes from LBA 0; 0 = whole LUN */
	enum out_format format;
	bool csv_header;
	int progress;		/* -1 auto (stderr is a terminal), 0, 1 */
	const char *initiator;
	uint64_t seed;
	unsigned int timeout;	/* seconds a command may take; 0 = none */
};

struct target_info {
	uint32_t block_size;	/* bytes */
	uint64_t blocks;	/* capacity in logical blocks */
	int wce;		/* Caching page WCE, -1 unknown */
	int dpofua;		/* MODE SENSE device-specific DPOFUA, -1 */
};

/* A syncguard LUN's counters (include/syncguard_stats.h), when the
 * target runs on this machine. */
struct lun_counters {
	bool ok;
	uint64_t flushes;	/* device_flushes + dsync_writes */
	uint64_t elided, coalesced;
};

struct bench;

struct op {
	struct bench *b;
	uint64_t lba;
	uint64_t start_ns;
};

struct bench {
	struct config cfg;
	struct iscsi_context *iscsi;
	struct iscsi_url *url;
	struct target_info ti;
	unsigned char *buf;
	struct op *slots;
	struct op **free_slots;
	unsigned int nfree;
	unsigned int inflight;
	uint64_t span_blocks, xfer_blocks, next_lba, rng;
	uint64_t t0, t_end;
	uint64_t ops, errors;
	struct histogram hist;
	uint64_t last_tick, ops_at_tick;
	bool connection_lost;
	uint64_t unanswered;	/* still in flight when we gave up */
	struct lun_counters before, after;
};

static volatile sig_atomic_t interrupted;

static void usage(FILE *f)
{
	fprintf(f,
"usage: " PROG " [options] iscsi://[user%%password@]host[:port]/target-iqn/lun\n"
"\n"
"Keeps QD writes in flight against the LUN for a fixed time and reports\n"
"IOPS, MB/s and latency (microseconds), and the WCE/DPOFUA bits it reports.\n"
"\n"
"  -s, --sync DISCIPLINE       none, fua, flush or flush-only (default none):\n"
"                              none  WRITE(16) FUA=0\n"
"                              fua   WRITE(16) FUA=1\n"
"                              flush WRITE(16) + SYNCHRONIZE CACHE(16),\n"
"                                    timed as one operation\n"
"                              flush-only  SYNCHRONIZE CACHE(16) alone\n"
"  -b, --block-size BYTES      bytes per write, a multiple of the LUN's\n"
"                              logical block size (default 4k; k/m/g suffixes)\n"
"  -q, --queue-depth N         writes in flight, 1..%d (default 1)\n"
"  -t, --time SECONDS          duration (default 10)\n"
"  -p, --pattern rand|seq      random or sequential offsets (default rand)\n"
"  -S, --span BYTES            use only the first BYTES of the LUN\n"
"                              (default: all of it)\n"
"      --seed N                random-offset seed (default 1)\n"
"      --timeout SECONDS       a command unanswered this long fails, and\n"
"                              the run ends at most this long after -t\n"
"                              (default 30; 0 = wait for ever)\n"
"  -i, --initiator-name IQN    (default iqn.2026-11.org.syncguard:syncbench)\n"
"      --json                  results as one JSON object on stdout\n"
"      --csv                   results as a CSV header and row on stdout\n"
"      --no-header             with --csv: the row only\n"
"      --progress, --no-progress\n"
"                              a status line each second on stderr\n"
"                              (default: when stderr is a terminal)\n"
"  -h, --help                  this text\n"
"\n"
"Ctrl-C stops the run and prints what was measured (exit 130).\n"
"Exit status: 0 success; 1 a SCSI error, a command timed out or the\n"
"connection failed; 2 a usage error (also one the LUN reveals, such as a\n"
"block size that is not a multiple of its logical block).\n", MAX_QD);
}

static void usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, PROG ": ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	usage(stderr);
	exit(2);
}

/* "4096", "4k", "1m", "2g" (powers of 1024) -> bytes; 0 or -EINVAL */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if ((*end == 'b' || *end == 'B') && shift)
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	return (errno || end == s || *end || *s == '-' || *out > max) ?
	       -EINVAL : 0;
}

static enum sync_mode parse_sync(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, sync_names[i]))
			return (enum sync_mode)i;
	usage_error("--sync: '%s' is not none, fua, flush or flush-only", s);
	return SYNC_NONE;
}

enum { OPT_JSON = 256, OPT_CSV, OPT_NO_HEADER, OPT_PROGRESS,
       OPT_NO_PROGRESS, OPT_SEED, OPT_TIMEOUT };

static const struct option long_opts[] = {
	{ "sync", required_argument, NULL, 's' },
	{ "block-size", required_argument, NULL, 'b' },
	{ "queue-depth", required_argument, NULL, 'q' },
	{ "time", required_argument, NULL, 't' },
	{ "pattern", required_argument, NULL, 'p' },
	{ "span", required_argument, NULL, 'S' },
	{ "initiator-name", required_argument, NULL, 'i' },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "csv", no_argument, NULL, OPT_CSV },
	{ "no-header", no_argument, NULL, OPT_NO_HEADER },
	{ "progress", no_argument, NULL, OPT_PROGRESS },
	{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void parse_one(struct config *c, int opt, const char *arg)
{
	unsigned long u;
	char *end;

	switch (opt) {
	case 's': c->sync = parse_sync(arg); break;
	case 'b':
		if (parse_size(arg, &c->xfer) || !c->xfer || c->xfer > (1u << 24))
			usage_error("--block-size: '%s' is not a size in 1..16m", arg);
		break;
	case 'q':
		if (parse_uint(arg, MAX_QD, &u) || !u)
			usage_error("--queue-depth: '%s' is not in 1..1024", arg);
		c->qd = (unsigned int)u;
		break;
	case 't':
		c->seconds = strtod(arg, &end);
		if (*end || end == arg || !(c->seconds > 0) || c->seconds > 1e6)
			usage_error("--time: '%s' is not a positive number of seconds", arg);
		break;
	case 'p':
		if (strcmp(arg, "rand") && strcmp(arg, "seq"))
			usage_error("--pattern: '%s' is not rand or seq", arg);
		c->random = !strcmp(arg, "rand");
		break;
	case 'S':
		if (parse_size(arg, &c->span) || !c->span)
			usage_error("--span: '%s' is not a positive size", arg);
		break;
	case 'i': c->initiator = arg; break;
	case OPT_SEED:
		if (parse_uint(arg, ULONG_MAX, &u))
			usage_error("--seed: '%s' is not a number", arg);
		c->seed = u;
		break;
	case OPT_TIMEOUT:
		if (parse_uint(arg, 86400, &u))
			usage_error("--timeout: '%s' is not in 0..86400 seconds", arg);
		c->timeout = (unsigned int)u;
		break;
	case OPT_JSON:
	case OPT_CSV:
		if (c->format != OUT_TEXT)
			usage_error("%s", "--json and --csv exclude each other");
		c->format = opt == OPT_JSON ? OUT_JSON : OUT_CSV;
		break;
	case OPT_NO_HEADER: c->csv_header = false; break;
	case OPT_PROGRESS: c->progress = 1; break;
	case OPT_NO_PROGRESS: c->progress = 0; break;
	case 'h': usage(stdout); exit(0);
	default: usage(stderr); exit(2);
	}
}

static void parse_args(int argc, char **argv, struct config *c)
{
	int opt;

	*c = (struct config){
		.sync = SYNC_NONE, .xfer = 4096, .qd = 1, .seconds = 10,
		.random = true, .csv_header = true, .progress = -1,
		.initiator = "iqn.2026-11.org.syncguard:syncbench", .seed = 1,
		.timeout = 30,
	};
	while ((opt = getopt_long(argc, argv, "s:b:q:t:p:S:i:h", long_opts,
				  NULL)) != -1)
		parse_one(c, opt, optarg);
	if (optind != argc - 1)
		usage_error("%s", optind >= argc ? "missing the iscsi:// URL" :
			    "more than one URL given");
	c->url = argv[optind];
	if (strncmp(c->url, "iscsi://", 8))
		usage_error("'%s' is not an iscsi:// URL", c->url);
	if (!c->csv_header && c->format != OUT_CSV)
		usage_error("%s", "--no-header goes with --csv");
	if (c->progress < 0)
		c->progress = isatty(STDERR_FILENO);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- target set-up ---- */

static int connect_lun(struct bench *b)
{
	b->iscsi = iscsi_create_context(b->cfg.initiator);
	if (!b->iscsi) {
		fprintf(stderr, PROG ": cannot create an iSCSI context\n");
		return -1;
	}
	b->url = iscsi_parse_full_url(b->iscsi, b->cfg.url);
	if (!b->url) {
		fprintf(stderr, PROG ": bad URL %s: %s\n", b->cfg.url,
			iscsi_get_error(b->iscsi));
		return -1;
	}
	iscsi_set_targetname(b->iscsi, b->url->target);
	iscsi_set_session_type(b->iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(b->iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
	iscsi_set_timeout(b->iscsi, (int)b->cfg.timeout);
	if (iscsi_full_connect_sync(b->iscsi, b->url->portal, b->url->lun)) {
		fprintf(stderr, PROG ": cannot log in to %s: %s\n", b->cfg.url,
			iscsi_get_error(b->iscsi));
		return -1;
	}
	return 0;
}

static int read_capacity(struct bench *b)
{
	struct scsi_task *t = iscsi_readcapacity16_sync(b->iscsi, b->url->lun);
	struct scsi_readcapacity16 *rc;
	int ret = -1;

	if (t && t->status == SCSI_STATUS_GOOD &&
	    (rc = scsi_datain_unmarshall(t)) != NULL) {
		b->ti.block_size = rc->block_length;
		b->ti.blocks = rc->returned_lba + 1;
		ret = 0;
	} else {
		fprintf(stderr, PROG ": READ CAPACITY(16) failed: %s\n",
			iscsi_get_error(b->iscsi));
	}
	if (t)
		scsi_free_scsi_task(t);
	return ret;
}

/* WCE from the Caching mode page, DPOFUA from the device-specific
 * parameter (SBC-3 6.4.1); -1 when the LUN does not say. */
static void read_caching(struct bench *b)
{
	struct scsi_task *t;
	struct scsi_mode_sense *ms;
	struct scsi_mode_page *pg;

	b->ti.wce = b->ti.dpofua = -1;
	t = iscsi_modesense10_sync(b->iscsi, b->url->lun, 0, 1,
				   SCSI_MODESENSE_PC_CURRENT,
				   SCSI_MODEPAGE_CACHING, 0, 255);
	if (t && t->status == SCSI_STATUS_GOOD &&
	    (ms = scsi_datain_unmarshall(t)) != NULL) {
		b->ti.dpofua = !!(ms->device_specific_parameter & 0x10);
		pg = scsi_modesense_get_page(ms, SCSI_MODEPAGE_CACHING, 0);
		if (pg)
			b->ti.wce = pg->caching.wce;
	}
	if (t)
		scsi_free_scsi_task(t);
}

/* 0, -1 (the target failed us) or -2 (a usage error the LUN reveals) */
static int setup(struct bench *b)
{
	uint64_t span;

	if (connect_lun(b) || read_capacity(b))
		return -1;
	read_caching(b);
	if (b->cfg.xfer % b->ti.block_size) {
		fprintf(stderr, PROG ": --block-size %" PRIu64 " is not a "
			"multiple of the LUN's %u-byte logical block\n",
			b->cfg.xfer, b->ti.block_size);
		return -2;
	}
	span = b->cfg.span ? b->cfg.span : b->ti.blocks * b->ti.block_size;
	b->xfer_blocks = b->cfg.xfer / b->ti.block_size;
	b->span_blocks = span / b->ti.block_size;
	if (b->span_blocks > b->ti.blocks || b->span_blocks < b->xfer_blocks) {
		fprintf(stderr, PROG ": --span must hold one write and fit the "
			"LUN (%" PRIu64 " bytes)\n",
			b->ti.blocks * b->ti.block_size);
		return -2;
	}
	return 0;
}

/* The LUN's counters, if it is a syncguard LUN of a tgtd on this host. */
static void read_counters(const struct bench *b, struct lun_counters *c)
{
	char path[512];
	struct syncguard_stats st;
	FILE *f;

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), SYNCGUARD_STATS_DIR "/%s/lun%d.stats",
		 b->url->target, b->url->lun);
	f = fopen(path, "r");
	if (!f)
		return;
	c->ok = fread(&st, sizeof(st), 1, f) == 1 &&
		st.magic == SYNCGUARD_STATS_MAGIC &&
		st.version == SYNCGUARD_STATS_VERSION &&
		kill((pid_t)st.pid, 0) == 0;
	fclose(f);
	c->flushes = st.device_flushes + st.dsync_writes;
	c->elided = st.flushes_elided;
	c->coalesced = st.flushes_coalesced;
}

/* ---- the I/O loop ---- */

static uint64_t next_lba(struct bench *b)
{
	uint64_t slots = b->span_blocks / b->xfer_blocks, lba;

	if (!b->cfg.random) {
		lba = b->next_lba;
		b->next_lba = (lba + b->xfer_blocks) % (slots * b->xfer_blocks);
		return lba;
	}
	b->rng ^= b->rng << 13;	/* xorshift64 */
	b->rng ^= b->rng >> 7;
	b->rng ^= b->rng << 17;
	return (b->rng % slots) * b->xfer_blocks;
}

static void report_error(struct bench *b, const char *what, uint64_t lba,
			 int status, struct scsi_task *t)
{
	b->errors++;
	if (b->errors > MAX_ERRORS_SHOWN)
		return;
	if (status == SCSI_STATUS_CHECK_CONDITION && t)
		fprintf(stderr, PROG ": %s lba %" PRIu64 ": CHECK CONDITION, "
			"sense key %s (0x%x), ASC/ASCQ 0x%04x %s\n", what, lba,
			scsi_sense_key_str(t->sense.key), t->sense.key,
			t->sense.ascq, scsi_sense_ascq_str(t->sense.ascq));
	else
		fprintf(stderr, PROG ": %s lba %" PRIu64 ": status 0x%x: %s\n",
			what, lba, status, iscsi_get_error(b->iscsi));
	if (b->errors == MAX_ERRORS_SHOWN)
		fprintf(stderr, PROG ": (further errors counted, not shown)\n");
}

static void op_done(struct op *op)
{
	struct bench *b = op->b;

	hist_add(&b->hist, now_ns() - op->start_ns);
	b->ops++;
	b->inflight--;
	b->free_slots[b->nfree++] = op;
}

static void flush_cb(struct iscsi_context *iscsi, int status, void *data,
		     void *priv)
{
	struct op *op = priv;

	(void)iscsi;
	if (status != SCSI_STATUS_GOOD)
		report_error(op->b, "SYNCHRONIZE CACHE(16)", 0, status, data);
	scsi_free_scsi_task(data);
	op_done(op);
}

static void write_cb(struct iscsi_context *iscsi, int status, void *data,
		     void *priv)
{
	struct op *op = priv;
	struct bench *b = op->b;

	if (status != SCSI_STATUS_GOOD)
		report_error(b, "WRITE(16)", op->lba, status, data);
	scsi_free_scsi_task(data);
	if (status == SCSI_STATUS_GOOD && b->cfg.sync == SYNC_FLUSH) {
		if (iscsi_synchronizecache16_task(iscsi, b->url->lun, 0, 0, 0, 0,
						  flush_cb, op))
			return;
		report_error(b, "SYNCHRONIZE CACHE(16) submit", 0, -1, NULL);
	}
	op_done(op);
}

/* Start @op: a write, or for flush-only a SYNCHRONIZE CACHE; 0 or -1 */
static int start_op(struct bench *b, struct op *op)
{
	op->lba = next_lba(b);
	op->start_ns = now_ns();
	if (b->cfg.sync == SYNC_FLUSH_ONLY)
		return iscsi_synchronizecache16_task(b->iscsi, b->url->lun, 0, 0,
						     0, 0, flush_cb, op) ? 0 : -1;
	return iscsi_write16_task(b->iscsi, b->url->lun, op->lba, b->buf,
				  (uint32_t)b->cfg.xfer, (int)b->ti.block_size,
				  0, 0, b->cfg.sync == SYNC_FUA, 0, 0, write_cb,
				  op) ? 0 : -1;
}

/* Fill the queue up to QD while the run lasts. */
static void submit(struct bench *b)
{
	while (!interrupted && b->nfree && now_ns() < b->t_end) {
		struct op *op = b->free_slots[--b->nfree];

		if (start_op(b, op)) {
			report_error(b, "submit", op->lba, -1, NULL);
			b->free_slots[b->nfree++] = op;
			interrupted = 1;
			return;
		}
		b->inflight++;
	}
}

static void progress(struct bench *b, uint64_t now)
{
	double dt = (double)(now - b->last_tick) / 1e9;
	double iops = (double)(b->ops - b->ops_at_tick) / dt;

	fprintf(stderr, "\r%6.1fs %10.0f IOPS %9.1f MB/s  p99 %8.0f us  "
		"errors %" PRIu64 "  ", (double)(now - b->t0) / 1e9, iops,
		iops * (double)b->cfg.xfer / 1e6,
		(double)hist_percentile(&b->hist, 99) / 1e3, b->errors);
	b->last_tick = now;
	b->ops_at_tick = b->ops;
}

/* Stop waiting for the last commands: @limit ns after the run's end (or
 * 2 s after Ctrl-C).  0 = never. */
static bool give_up(const struct bench *b, uint64_t now)
{
	uint64_t limit = interrupted ? 2000000000ull :
			 b->cfg.timeout * 1000000000ull;

	return limit && now > b->t_end && now - b->t_end > limit;
}

static int run(struct bench *b)
{
	b->t0 = b->last_tick = now_ns();
	b->t_end = b->t0 + (uint64_t)(b->cfg.seconds * 1e9);
	submit(b);
	while (b->inflight) {
		struct pollfd pfd = { .fd = iscsi_get_fd(b->iscsi),
				      .events = (short)iscsi_which_events(b->iscsi) };
		uint64_t now;

		if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
			return -1;
		if (iscsi_service(b->iscsi, pfd.revents) < 0) {
			fprintf(stderr, PROG ": connection failed: %s\n",
				iscsi_get_error(b->iscsi));
			b->connection_lost = true;
			return -1;
		}
		submit(b);
		now = now_ns();
		if (interrupted && now < b->t_end)
			b->t_end = now;		/* the run ends here */
		if (b->cfg.progress && now - b->last_tick >= 1000000000ull)
			progress(b, now);
		if (give_up(b, now)) {
			fprintf(stderr, PROG ": %u command(s) still unanswered; "
				"giving up\n", b->inflight);
			b->unanswered = b->inflight;
			b->errors += b->inflight;
			break;
		}
	}
	if (b->cfg.progress)
		fputc('\n', stderr);
	if (!b->unanswered)
		b->t_end = now_ns();
	return 0;
}

/* ---- results ---- */

struct results {
	double seconds, iops, mbps;
	double mean_us, p50_us, p99_us, p999_us, max_us;
	double flushes_per_op;	/* device flushes per operation, -1 unknown */
};

static struct results summarize(const struct bench *b)
{
	struct results r;

	r.seconds = (double)(b->t_end - b->t0) / 1e9;
	r.iops = r.seconds > 0 ? (double)b->ops / r.seconds : 0;
	r.mbps = r.iops * (double)b->cfg.xfer / 1e6;
	r.mean_us = hist_mean(&b->hist) / 1e3;
	r.p50_us = (double)hist_percentile(&b->hist, 50) / 1e3;
	r.p99_us = (double)hist_percentile(&b->hist, 99) / 1e3;
	r.p999_us = (double)hist_percentile(&b->hist, 99.9) / 1e3;
	r.max_us = (double)b->hist.max_ns / 1e3;
	r.flushes_per_op = -1;
	if (b->before.ok && b->after.ok && b->ops)
		r.flushes_per_op = (double)(b->after.flushes - b->before.flushes) /
				   (double)b->ops;
	return r;
}

static const char *bit_str(int v)
{
	return v < 0 ? "unknown" : v ? "1" : "0";
}

static void print_text(const struct bench *b, const struct results *r)
{
	printf("target:     %s\n", b->cfg.url);
	printf("lun:        %" PRIu64 " blocks of %u bytes, WCE=%s, "
	       "DPOFUA=%s\n", b->ti.blocks, b->ti.block_size,
	       bit_str(b->ti.wce), bit_str(b->ti.dpofua));
	printf("workload:   %s writes of %" PRIu64 " bytes, sync=%s, "
	       "queue depth %u, %.1f s\n", b->cfg.random ? "random" :
	       "sequential", b->cfg.xfer, sync_names[b->cfg.sync], b->cfg.qd,
	       r->seconds);
	printf("operations: %" PRIu64 " (%.0f IOPS, %.2f MB/s), errors %"
	       PRIu64 "\n", b->ops, r->iops, r->mbps, b->errors);
	printf("latency us: mean %.1f  p50 %.1f  p99 %.1f  p99.9 %.1f  "
	       "max %.1f\n", r->mean_us, r->p50_us, r->p99_us, r->p999_us,
	       r->max_us);
	if (r->flushes_per_op >= 0)
		printf("target:     %.3f device flushes per operation "
		       "(syncguard counters)\n", r->flushes_per_op);
}

static void print_json(const struct bench *b, const struct results *r)
{
	printf("{\"url\":\"%s\",\"sync\":\"%s\",\"block_size\":%" PRIu64
	       ",\"queue_depth\":%u,\"pattern\":\"%s\",\"span_bytes\":%" PRIu64
	       ",\"lun_block_size\":%u,\"lun_blocks\":%" PRIu64
	       ",\"wce\":%d,\"dpofua\":%d,\"seconds\":%.3f,\"ops\":%" PRIu64
	       ",\"errors\":%" PRIu64 ",\"unanswered\":%" PRIu64
	       ",\"interrupted\":%s,\"iops\":%.1f,\"mb_per_s\":%.3f,"
	       "\"device_flushes_per_op\":%.4f,"
	       "\"latency_us\":{\"mean\":%.1f,\"p50\":%.1f,\"p99\":%.1f,"
	       "\"p99_9\":%.1f,\"max\":%.1f}}\n", b->cfg.url,
	       sync_names[b->cfg.sync], b->cfg.xfer, b->cfg.qd,
	       b->cfg.random ? "rand" : "seq",
	       b->span_blocks * b->ti.block_size, b->ti.block_size,
	       b->ti.blocks, b->ti.wce, b->ti.dpofua, r->seconds, b->ops,
	       b->errors, b->unanswered, interrupted ? "true" : "false",
	       r->iops, r->mbps, r->flushes_per_op, r->mean_us, r->p50_us,
	       r->p99_us, r->p999_us, r->max_us);
}

static void print_csv(const struct bench *b, const struct results *r)
{
	if (b->cfg.csv_header)
		printf("sync,block_size,queue_depth,pattern,wce,dpofua,seconds,"
		       "ops,errors,iops,mb_per_s,lat_mean_us,lat_p50_us,"
		       "lat_p99_us,lat_p99_9_us,lat_max_us,"
		       "device_flushes_per_op\n");
	printf("%s,%" PRIu64 ",%u,%s,%d,%d,%.3f,%" PRIu64 ",%" PRIu64
	       ",%.1f,%.3f,%.1f,%.1f,%.1f,%.1f,%.1f,%.4f\n",
	       sync_names[b->cfg.sync], b->cfg.xfer, b->cfg.qd,
	       b->cfg.random ? "rand" : "seq", b->ti.wce, b->ti.dpofua,
	       r->seconds, b->ops, b->errors, r->iops, r->mbps, r->mean_us,
	       r->p50_us, r->p99_us, r->p999_us, r->max_us, r->flushes_per_op);
}

static void on_signal(int sig)
{
	(void)sig;
	if (interrupted)	/* second Ctrl-C: give up at once */
		_exit(130);
	interrupted = 1;
}

static int alloc_slots(struct bench *b)
{
	b->slots = calloc(b->cfg.qd, sizeof(*b->slots));
	b->free_slots = calloc(b->cfg.qd, sizeof(*b->free_slots));
	if (posix_memalign((void **)&b->buf, 4096, b->cfg.xfer) ||
	    !b->slots || !b->free_slots) {
		fprintf(stderr, PROG ": out of memory\n");
		return -1;
	}
	for (unsigned int i = 0; i < b->cfg.qd; i++) {
		b->slots[i].b = b;
		b->free_slots[b->nfree++] = &b->slots[i];
	}
	for (uint64_t i = 0; i < b->cfg.xfer; i++)	/* not all zeroes */
		b->buf[i] = (unsigned char)(i * 131 + 7);
	return 0;
}

static void teardown(struct bench *b)
{
	if (b->iscsi) {
		if (!b->connection_lost && !b->unanswered)
			iscsi_logout_sync(b->iscsi);
		iscsi_destroy_context(b->iscsi);
	}
	if (b->url)
		iscsi_destroy_url(b->url);
	free(b->slots);
	free(b->free_slots);
	free(b->buf);
}

int main(int argc, char **argv)
{
	static struct bench b;	/* the histogram is large */
	struct results r;
	int ret;

	parse_args(argc, argv, &b.cfg);
	hist_init(&b.hist);
	b.rng = b.cfg.seed * 0x9e3779b97f4a7c15ull + 1;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	ret = alloc_slots(&b) ? -1 : setup(&b);
	if (ret == -2) {
		usage(stderr);
		teardown(&b);
		return 2;
	}
	if (ret == 0)
		read_counters(&b, &b.before);
	if (ret == 0 && run(&b) == 0) {
		read_counters(&b, &b.after);
		r = summarize(&b);
		if (b.cfg.format == OUT_JSON)
			print_json(&b, &r);
		else if (b.cfg.format == OUT_CSV)
			print_csv(&b, &r);
		else
			print_text(&b, &r);
		ret = interrupted ? 130 : b.errors ? 1 : 0;
	} else {
		ret = 1;
	}
	teardown(&b);
	return ret;
}
