/*
 * Options: one table (name, argument, help, how to set it).  --help and
 * the man page (--man) are printed from the same table, so they cannot
 * drift from what the program accepts.
 */
#include <errno.h>
#include <ctype.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "syncbench.h"

struct opt {
	const char *name;
	int shortopt;		/* 0: long only */
	const char *arg;	/* NULL: no argument */
	const char *help;
	void (*set)(struct config *c, const char *arg);
};

void syncguard_usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, PROG ": ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	syncguard_synopsis(stderr);
	fprintf(stderr, "Try '" PROG " --help' for the options.\n");
	exit(2);
}

/* "4096", "4k", "4kb", "4KiB", "1m", "2g" (powers of 1024, as fio's
 * default kb_base) -> bytes; 0 or -EINVAL */
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
	if (*end == 'i' && shift && (end[1] == 'b' || end[1] == 'B'))
		end++;
	if ((*end == 'b' || *end == 'B') && shift)
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static unsigned long parse_uint(const char *opt, const char *s,
				unsigned long lo, unsigned long hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < lo || v > hi) {
		char msg[96];

		snprintf(msg, sizeof(msg), "%s: '%%s' is not in %lu..%lu", opt, lo,
			 hi);
		syncguard_usage_error(msg, s);
	}
	return v;
}

static double parse_seconds(const char *opt, const char *s, bool zero_ok)
{
	char *end;
	double v = strtod(s, &end);

	/* written so that NaN fails too */
	if (*end || end == s || !(v >= 0 && v <= 1e6) || (!zero_ok && v == 0)) {
		char msg[96];

		snprintf(msg, sizeof(msg), "%s: '%%s' is not a number of seconds%s",
			 opt, zero_ok ? " from 0 to 1000000" :
			 " more than 0 and at most 1000000");
		syncguard_usage_error(msg, s);
	}
	return v;
}

/* "4k,8k,64k" -> sizes */
static void set_sizes(struct config *c, const char *arg)
{
	char *copy = strdup(arg), *cur = copy, *item;

	c->nsizes = 0;
	while (copy && (item = strsep(&cur, ",")) != NULL) {
		if (c->nsizes == MAX_LIST || parse_size(item, &c->sizes[c->nsizes]) ||
		    !c->sizes[c->nsizes] || c->sizes[c->nsizes] > (32u << 20))
			syncguard_usage_error("--block-size: '%s' is not a list of sizes in "
					      "1..32m", arg);
		c->nsizes++;
	}
	free(copy);
}

static void set_qds(struct config *c, const char *arg)
{
	char *copy = strdup(arg), *cur = copy, *item;

	c->nqds = 0;
	while (copy && (item = strsep(&cur, ",")) != NULL) {
		if (c->nqds == MAX_LIST)
			syncguard_usage_error("--queue-depth: '%s' has too many entries", arg);
		c->qds[c->nqds++] = (unsigned int)parse_uint("--queue-depth",
							      item, 1, MAX_QD);
	}
	free(copy);
}

static void set_sync(struct config *c, const char *arg)
{
	static const char *const names[] = { "none", "fua", "flush", NULL,
					     "end", "flush-only" };

	if (!strncmp(arg, "every:", 6)) {
		c->sync = SYNC_EVERY;
		c->every = (unsigned int)parse_uint("--sync every:N", arg + 6, 1,
						     1000000);
		return;
	}
	for (int i = 0; i < 6; i++) {
		if (names[i] && !strcmp(arg, names[i])) {
			c->sync = (enum sync_mode)i;
			return;
		}
	}
	syncguard_usage_error("--sync: '%s' is not none, fua, flush, every:N, end or "
			      "flush-only", arg);
}

const char *syncguard_sync_name(enum sync_mode s, unsigned int every, char *buf,
				size_t len)
{
	static const char *const names[] = { "none", "fua", "flush", "every",
					     "end", "flush-only" };

	if (s == SYNC_EVERY)
		snprintf(buf, len, "every:%u", every);
	else
		snprintf(buf, len, "%s", names[s]);
	return buf;
}

static void set_pattern(struct config *c, const char *arg)
{
	if (strcmp(arg, "rand") && strcmp(arg, "seq"))
		syncguard_usage_error("--pattern: '%s' is not rand or seq", arg);
	c->random_pct = !strcmp(arg, "rand") ? 100 : 0;
}

static void set_span(struct config *c, const char *arg)
{
	if (parse_size(arg, &c->span) || !c->span)
		syncguard_usage_error("--span: '%s' is not a positive size", arg);
}

static void set_bytes(struct config *c, const char *arg)
{
	if (parse_size(arg, &c->bytes) || !c->bytes)
		syncguard_usage_error("--bytes: '%s' is not a positive size", arg);
}

static void set_format(struct config *c, enum out_format f)
{
	if (c->format != OUT_TEXT && c->format != f)
		syncguard_usage_error("%s", "--json, --fio-json and --csv exclude "
				      "each other");
	c->format = f;
}

#define SETTER(fn, stmt) \
	static void fn(struct config *c, const char *arg) \
	{ (void)c; (void)arg; stmt; }

SETTER(set_sessions, c->sessions = (unsigned int)parse_uint("--sessions", arg, 1, MAX_SESSIONS); c->sessions_given = true)
SETTER(set_time, c->seconds = parse_seconds("--time", arg, false); c->seconds_given = true)
SETTER(set_warmup, c->warmup = parse_seconds("--warmup", arg, true))
static void set_interval(struct config *c, const char *arg)
{
	c->interval = parse_seconds("--interval", arg, false);
	if (c->interval < 0.1)	/* 0.0001: thousands of lines a second */
		syncguard_usage_error("--interval: '%s' is under 0.1 s", arg);
}
SETTER(set_read_pct, c->read_pct = (unsigned int)parse_uint("--read-pct", arg, 0, 100))
SETTER(set_random_pct, c->random_pct = (unsigned int)parse_uint("--random-pct", arg, 0, 100))
SETTER(set_split, c->split_span = true)
SETTER(set_cache_off, c->cache_off = true)
SETTER(set_verify, c->verify = true)
SETTER(set_verify_only, c->verify_only = true)
SETTER(set_state, c->state = arg)
static void set_preset(struct config *c, const char *arg)
{
	if (strcmp(arg, "iozone") && strcmp(arg, "vdbench") &&
	    strcmp(arg, "throughput"))
		syncguard_usage_error("--preset: '%s' is not iozone, vdbench or throughput",
				      arg);
	if (c->preset && strcmp(c->preset, arg))	/* else the last wins */
		syncguard_usage_error("--preset %s: one preset a run", arg);
	c->preset = arg;
}
SETTER(set_full, c->full = true)
/* The URL's scheme, and at most one '@' before its path: libiscsi takes
 * the first as the end of a CHAP secret, and a secret with '@' in it
 * would go to the resolver as a host name, in an error message.
 * Messages show the URL with its secret masked. */
static void check_url(const char *url)
{
	char shown[1024];
	int n = 0;

	syncguard_shown_url(url, shown, sizeof(shown));
	if (strncmp(url, "iscsi://", 8))
		syncguard_usage_error("'%s' is not an iscsi:// URL", shown);
	for (const char *at = url + 8; *at; at++)
		n += *at == '@';
	if (n > 1)	/* the secret would be shown from its '@' on */
		syncguard_usage_error("'%s': more than one '@' (a CHAP secret "
				      "cannot contain '@')", shown);
}

/* Is @s valid UTF-8 (RFC 3629: no overlong forms, no surrogates, at
 * most U+10FFFF)? */
static bool utf8_valid(const unsigned char *s)
{
	while (*s) {
		unsigned int n = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 ? 1 :
				 (*s & 0xf0) == 0xe0 ? 2 : (*s & 0xf8) == 0xf0 ? 3 : 9;
		unsigned long cp = n == 0 ? *s : n == 1 ? *s & 0x1fu :
				   n == 2 ? *s & 0x0fu : *s & 0x07u;
		static const unsigned long least[4] = { 0, 0x80, 0x800, 0x10000 };

		if (n > 3)
			return false;
		for (unsigned int i = 1; i <= n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i] & 0x3fu);
		}
		if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		s += n + 1;
	}
	return true;
}

/* a label goes into CSV, JSON and gnuplot titles unquoted */
static void set_label(struct config *c, const char *arg)
{
	for (const char *p = arg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f || strchr(",\"'\\", *p))
			syncguard_usage_error("--label: '%s': no commas, quotes, backslashes "
					      "or control characters", arg);
	if (!utf8_valid((const unsigned char *)arg))	/* JSON is UTF-8 */
		syncguard_usage_error("--label: %s", "not valid UTF-8");
	if (!*arg || strlen(arg) > 60)
		syncguard_usage_error("--label: '%s': 1 to 60 characters", arg);
	c->label = arg;
}
SETTER(set_seed, c->seed = parse_uint("--seed", arg, 0, ULONG_MAX); c->seed_given = true)
SETTER(set_timeout, c->timeout = (unsigned int)parse_uint("--timeout", arg, 0, 86400))
SETTER(set_digest, c->header_digest = true)
SETTER(set_initiator, c->initiator = arg)
SETTER(set_json, set_format(c, OUT_JSON))
SETTER(set_csv, set_format(c, OUT_CSV))
SETTER(set_fio_json, set_format(c, OUT_FIO))

static void set_version(struct config *c, const char *arg)
{
	(void)c;
	(void)arg;
	printf(PROG " " SYNCGUARD_VERSION "\n");
	exit(0);
}
SETTER(set_no_header, c->csv_header = false)
SETTER(set_progress, c->progress = 1)
SETTER(set_no_progress, c->progress = 0)
SETTER(set_compare, c->compare = true)
SETTER(set_merge, c->merge = true)

/* --start-at: UNIX time in seconds (date +%s, a fraction allowed), in
 * the future: the run starts then, after the login, so that runs on
 * several hosts measure the same seconds */
static void set_start_at(struct config *c, const char *arg)
{
	struct timespec now;
	char *end;
	double t = strtod(arg, &end);

	clock_gettime(CLOCK_REALTIME, &now);
	if (end == arg || *end || !(t > 0))
		syncguard_usage_error("--start-at: '%s' is not a UNIX time in "
				      "seconds (date +%%s)", arg);
	/* this very second ($(date +%s)) is "now", not the past */
	if (t < (double)now.tv_sec)
		syncguard_usage_error("--start-at: %s is in the past", arg);
	if (t > (double)now.tv_sec + 86400)
		syncguard_usage_error("--start-at: %s is more than a day away",
				      arg);
	c->start_at = t;
}
static void set_plot(struct config *c, const char *arg)
{
	size_t n = strlen(arg);

	if (n < 5 || (strcmp(arg + n - 4, ".png") && strcmp(arg + n - 4, ".svg")))
		syncguard_usage_error("--plot: '%s' does not end in .png or .svg", arg);
	for (const char *p = arg; *p; p++)	/* it goes into gnuplot's script */
		if (*p == '\'' || (unsigned char)*p < 0x20)
			syncguard_usage_error("--plot: '%s': no quotes or control "
					      "characters in the file name, please", arg);
	c->plot = arg;
}

static void print_man(void);

SETTER(set_help, syncguard_usage(stdout); exit(0))
SETTER(set_man, print_man(); exit(0))

static const struct opt opts[] = {
	{ "sync", 's', "MODE", "how writes are made durable: none (FUA=0), fua "
	  "(FUA=1), flush (each WRITE then SYNCHRONIZE CACHE, timed as one "
	  "operation), every:N (SYNCHRONIZE CACHE once every N writes are answered, timed with the Nth), end "
	  "(one SYNCHRONIZE CACHE at the end, inside the timing, as iozone -e), "
	  "flush-only (SYNCHRONIZE CACHE alone); default none", set_sync },
	{ "block-size", 'b', "SIZES", "bytes per command, a comma list to sweep "
	  "(4k,8k,64k; k/m/g suffixes; up to 32m), each a multiple of the "
	  "LUN's logical block; default 4k", set_sizes },
	{ "queue-depth", 'q', "DEPTHS", "commands in flight per session, a "
	  "comma list to sweep (1..1024); default 1", set_qds },
	{ "sessions", 'n', "N", "independent iSCSI sessions, as iozone -l N "
	  "(1..64); reports the aggregate and the per-session IOPS spread "
	  "(min/avg/max); default 1", set_sessions },
	{ "time", 't', "SECONDS", "duration of each run; default 10", set_time },
	{ "bytes", 0, "SIZE", "instead of --time: each session moves SIZE "
	  "bytes per run (at least one command), rounded up to whole "
	  "commands of --block-size; not with --rate or --curve, which pace "
	  "over a time",
	  set_bytes },
	{ "warmup", 0, "SECONDS", "run that long first, unmeasured (commands "
	  "answered after it count, with their whole latency, as after fio's "
	  "ramp_time); default 0",
	  set_warmup },
	{ "rate", 0, "IOPS", "open loop: operations arrive at IOPS a second "
	  "(all sessions together, each its share) whatever the answers do; "
	  "--queue-depth caps the commands in flight, an arrival that finds "
	  "them all out waits, and each latency counts from the arrival's "
	  "intended time (no coordinated omission); the result says asked "
	  "and achieved IOPS, NOT SUSTAINED when the target fell behind; "
	  "not with --sync end; default: closed loop", syncguard_set_rate },
	{ "arrivals", 0, "fixed|poisson", "with --rate or --curve: arrivals "
	  "evenly spaced, or with exponential gaps of the same mean (Poisson, "
	  "as many independent clients); default fixed",
	  syncguard_set_arrivals },
	{ "curve", 0, "[PCTS]", "latency against load, as vdbench's curve "
	  "runs: each point first runs closed loop for its maximum IOPS, then "
	  "open loop (as --rate) at each percentage of it in PCTS, a rising "
	  "comma list of 1..100, at most 20 (default 10,50,70,80,90,100): a "
	  "result per step; not with --rate; one URL", syncguard_set_curve },
	{ "interval", 0, "SECONDS", "a report line per interval, as vdbench "
	  "interval= (at least 0.1); with --preset, replaces the preset's "
	  "own; default none", set_interval },
	{ "read-pct", 'r', "P", "share of reads in percent (vdbench rdpct); "
	  "default 0", set_read_pct },
	{ "random-pct", 'R', "P", "share of random offsets in percent, the rest "
	  "sequential (vdbench seekpct); default 100", set_random_pct },
	{ "pattern", 'p', "rand|seq", "shorthand for --random-pct 100 or 0",
	  set_pattern },
	{ "span", 'S', "SIZE", "use only the first SIZE bytes of the LUN (a "
	  "whole number of its blocks); default all of it", set_span },
	{ "split-span", 0, NULL, "give each session its own part of the span",
	  set_split },
	{ "cache-off", 0, NULL, "set WCE=0 with MODE SELECT for the run and "
	  "restore the Caching page after (refused when the LUN does not allow "
	  "it)", set_cache_off },
	{ "verify", 0, NULL, "stamp every block written with its LBA, a "
	  "sequence number, the session and a checksum; read back and report "
	  "mismatches by LBA at the end", set_verify },
	{ "state", 0, "FILE", "with --verify: save what each block must hold; "
	  "with --verify-only: check against it", set_state },
	{ "verify-only", 0, NULL, "only read back and check a span stamped by "
	  "an earlier --verify --state FILE run (after a restart, say); needs "
	  "--state FILE", set_verify_only },
	{ "preset", 0, "NAME", "a classic study from the list of presets "
	  "below (short form unless --full); it sets --sync, --block-size, --queue-depth, --time "
	  "or --bytes, --read-pct and --random-pct (and so --pattern) itself "
	  "(iozone also --sessions and --span), so those cannot go with it",
	  set_preset },
	{ "full", 0, NULL, "with --preset: the full form", set_full },
	{ "label", 0, "TEXT", "name this run in JSON, CSV and comparisons "
	  "(1-60 bytes of UTF-8; no commas, quotes, backslashes or control "
	  "characters)", set_label },
	{ "seed", 0, "N", "seed of the random offsets, printed with the "
	  "text and JSON results; default: from the clock, so that a run does not re-read "
	  "exactly the blocks the run before it wrote (--seed repeats a run's "
	  "offsets)", set_seed },
	{ "timeout", 0, "SECONDS", "a command unanswered this long fails, and "
	  "a run ends at most this long after its time; 0 waits for ever; "
	  "default 30", set_timeout },
	{ "header-digest", 0, NULL, "ask for CRC32C header digests (CHAP goes "
	  "in the URL: iscsi://user%password@host/...)", set_digest },
	{ "initiator-name", 'i', "IQN", "the initiator's name; default "
	  "iqn.2026-11.org.syncguard:syncbench", set_initiator },
	{ "json", 0, NULL, "results as JSON on stdout (one result object per "
	  "line inside the results array)", set_json },
	{ "csv", 0, NULL, "results as CSV on stdout", set_csv },
	{ "fio-json", 0, NULL, "results as JSON in the layout of fio's "
	  "--output-format=json+ (a job per point; read, write and sync "
	  "sections with percentiles and bins), for tools that read fio's",
	  set_fio_json },
	{ "no-header", 0, NULL, "with --csv: rows only", set_no_header },
	{ "progress", 0, NULL, "a status line each second on stderr (default "
	  "when stderr is a terminal)", set_progress },
	{ "no-progress", 0, NULL, "no status line", set_no_progress },
	{ "compare", 0, NULL, "instead of a URL, JSON files of earlier runs: "
	  "one side-by-side table with ratios to the first", set_compare },
	{ "plot", 0, "FILE", "instead of a URL, JSON files of earlier runs: "
	  "plot them with gnuplot to FILE (.png or .svg)", set_plot },
	{ "merge", 0, NULL, "instead of a URL, JSON files of runs of the same "
	  "points made at the same time (several processes or hosts, started "
	  "together with --start-at): one result per point as JSON, latency "
	  "histograms added bin by bin (exact merged percentiles), the "
	  "operations and bytes of all of them over the longest run's time "
	  "(IOPS, MB/s), each source listed", set_merge },
	{ "start-at", 0, "TIME", "start at TIME (the warm-up, then the "
	  "measuring), UNIX seconds (date +%s; this second or later, at most "
	  "a day ahead), after every session has logged in: runs on several "
	  "hosts then cover the same seconds, for --merge; a start made late "
	  "by the logins is said",
	  set_start_at },
	{ "man", 0, NULL, "print the manual page (troff)", set_man },
	{ "version", 0, NULL, "print the version", set_version },
	{ "help", 'h', NULL, "print this help (the options and the presets)",
	  set_help },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

static void print_opt(FILE *f, const struct opt *o)
{
	char head[64];
	const char *h = o->help;

	snprintf(head, sizeof(head), "%c%c%s --%s%s%s", o->shortopt ? '-' : ' ',
		 o->shortopt ? o->shortopt : ' ', o->shortopt ? "," : " ",
		 o->name, o->arg ? " " : "", o->arg ? o->arg : "");
	fprintf(f, "  %s\n", head);
	while (*h) {		/* wrap the help at 70 columns */
		int n = (int)strlen(h), cut = n;

		if (n > 66)
			for (cut = 66; cut > 0 && h[cut] != ' '; cut--)
				;
		fprintf(f, "        %.*s\n", cut, h);
		h += cut + (h[cut] == ' ');
	}
}

#define SYNOPSIS_URL "[options] iscsi://[user%%password@]host[:port]/target-iqn/lun [URL...]"
#define SYNOPSIS_CMP "--compare FILE.json..."
#define SYNOPSIS_PLOT "--plot OUT.png|OUT.svg FILE.json..."
#define SYNOPSIS_MERGE "--merge FILE.json FILE.json..."
#define DESCRIPTION \
	"Measures what writes under a sync discipline cost on an iSCSI LUN:\n" \
	"IOPS, MB/s, latency percentiles (microseconds), per interval and\n" \
	"session; and what the LUN reports (WCE, DPOFUA, block sizes,\n" \
	"capacity, MAXIMUM TRANSFER LENGTH).  It writes to the LUN.  With\n" \
	"several URLs (at most 16), each LUN runs in a process of its own,\n" \
	"all started together, and the results are merged (per LUN in the\n" \
	"sources); --verify, --state, --interval, --rate and --curve go with\n" \
	"one URL.\n"
#define EXIT_STATUS \
	"0 success; 1 a SCSI error, a timed-out command, a failed login,\n" \
	"a verify mismatch, a LUN of several that gave no results, or a\n" \
	"--compare/--plot file that cannot be read or holds no results; 2 a\n" \
	"usage error (also one only the LUN reveals, a --state file that\n" \
	"does not fit it, and a --merge file that cannot be read or does not\n" \
	"match the first, or a fio file of another shape); 130 after\n" \
	"Ctrl-C, which prints what was measured.\n"

void syncguard_synopsis(FILE *f)
{
	fprintf(f, "usage: " PROG " " SYNOPSIS_URL "\n       " PROG " "
		SYNOPSIS_CMP "\n       " PROG " " SYNOPSIS_PLOT "\n       "
		PROG " " SYNOPSIS_MERGE "\n");
}

void syncguard_usage(FILE *f)
{
	syncguard_synopsis(f);
	fprintf(f, "\n" DESCRIPTION "\n");
	for (size_t i = 0; i < NOPTS; i++)
		print_opt(f, &opts[i]);
	fprintf(f, "\npresets (--preset NAME):\n%s\nExit status: " EXIT_STATUS,
		syncguard_preset_help());
}

/* troff: a backslash or a dash in the text would be markup */
static void man_text(const char *s)
{
	for (; *s; s++) {
		if (s[0] == '%' && s[1] == '%')	/* a printf format's "%" */
			s++;
		printf(*s == '\\' ? "\\e" : *s == '-' ? "\\-" : "%c", *s);
	}
}

static void print_man(void)
{
	printf(".TH ISCSI-SYNCBENCH 1 \"2026-12\" syncguard\n.SH NAME\n"
	       PROG " \\- what a sync write costs on an iSCSI LUN\n"
	       ".SH SYNOPSIS\n.nf\n");
	man_text(PROG " " SYNOPSIS_URL "\n" PROG " " SYNOPSIS_CMP "\n" PROG " "
		 SYNOPSIS_PLOT "\n" PROG " " SYNOPSIS_MERGE "\n");
	printf(".fi\n.SH DESCRIPTION\n");
	man_text(DESCRIPTION);
	printf(".SH OPTIONS\n");
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *o = &opts[i];

		printf(".TP\n");
		if (o->shortopt)
			printf("\\fB\\-%c\\fR, ", o->shortopt);
		printf("\\fB\\-\\-%s\\fR%s%s\n%s\n", o->name, o->arg ? " " : "",
		       o->arg ? o->arg : "", o->help);
	}
	printf(".SH PRESETS\n.nf\n%s\n.fi\n.SH EXIT STATUS\n", syncguard_preset_help());
	man_text(EXIT_STATUS);
}

/* A seed no earlier run of this host had: the clock's nanoseconds and
 * the pid, mixed (splitmix64's finaliser) */
static uint64_t clock_seed(void)
{
	struct timespec ts;
	uint64_t x;

	clock_gettime(CLOCK_REALTIME, &ts);
	x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	x ^= (uint64_t)getpid() << 32;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return (x ^ (x >> 31)) % 1000000000000ull;	/* 12 digits: typable */
}

static void defaults(struct config *c)
{
	*c = (struct config){
		.sync = SYNC_NONE, .sizes = { 4096 }, .nsizes = 1, .qds = { 1 },
		.nqds = 1, .sessions = 1, .seconds = 10, .random_pct = 100,
		.format = OUT_TEXT, .csv_header = true, .progress = -1,
		.initiator = "iqn.2026-11.org.syncguard:syncbench",
		.timeout = 30,
	};
}

/* every session keeps queue depth x transfer size bytes of buffers: 1
 * GiB at most each, 4 GiB at most in all (-q 1024 -b 1m -n 64 passes
 * the per-session check and would ask for 64 GiB) */
static void check_buffers(const struct config *c)
{
	uint64_t n = c->sessions ? c->sessions : 1;

	for (unsigned int s = 0; s < c->nsizes; s++)
		for (unsigned int q = 0; q < c->nqds; q++)
			if (c->sizes[s] * c->qds[q] > (1ull << 30) ||
			    c->sizes[s] * c->qds[q] * n > (4ull << 30))
				syncguard_usage_error("%s", "--queue-depth x --block-size "
						      "must stay within 1 GiB of buffers "
						      "per session, 4 GiB in all "
						      "(x --sessions)");
}

/* Options that go with --compare and --plot: themselves, and the
 * status-line switches, which scripts pass everywhere (a --no-progress
 * before --compare must not be refused) and which change nothing
 * there. */
static bool with_saved_runs(const char *name)
{
	static const char *const ok[] = {
		"compare", "plot", "merge", "progress", "no-progress",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(name, ok[i]))
			return true;
	return false;
}

static void check_combinations(struct config *c, int argc, char **argv)
{
	if (c->merge && (c->compare || c->plot))
		syncguard_usage_error("%s", "--merge writes JSON: run --compare or "
				      "--plot on its output");
	if (c->compare || c->plot || c->merge) {
		if (c->run_opt)		/* else silently ignored */
			syncguard_usage_error("--%s: --compare, --plot and --merge read "
					      "saved runs; no other option but "
					      "--no-progress goes with them", c->run_opt);
		if (optind >= argc)
			syncguard_usage_error("%s", "--compare, --plot and --merge need "
					      "JSON files");
		c->files = argv + optind;
		c->nfiles = argc - optind;
		return;
	}
	if (optind >= argc)
		syncguard_usage_error("%s", "missing the iscsi:// URL");
	if (argc - optind > MAX_MERGE)
		syncguard_usage_error("more than %s URLs", MAX_MERGE_TEXT);
	c->urls = argv + optind;
	c->nurls = argc - optind;
	c->url = argv[optind];
	for (int i = 0; i < c->nurls; i++)
		check_url(c->urls[i]);
	/* one process per LUN: one state file, and interval lines, would
	 * be written by several at once */
	if (c->nurls > 1 && (c->verify || c->verify_only || c->state))
		syncguard_usage_error("%s", "--verify, --verify-only and --state go "
				      "with one URL");
	if (c->nurls > 1 && (c->rate > 0 || c->ncurve))	/* merged, the asked
							 * rates would be lost */
		syncguard_usage_error("%s", "--rate and --curve go with one URL");
	if (c->nurls > 1 && c->interval > 0)
		syncguard_usage_error("%s", "--interval goes with one URL (the LUNs "
				      "of several run in processes of their own)");
	if (!c->csv_header && c->format != OUT_CSV)
		syncguard_usage_error("%s", "--no-header goes with --csv");
	if (c->state && !c->verify && !c->verify_only)
		syncguard_usage_error("%s", "--state goes with --verify or --verify-only");
	if (c->full && !c->preset)
		syncguard_usage_error("%s", "--full goes with --preset");
	if (c->preset && c->preset_conflict)	/* else silently ignored */
		syncguard_usage_error("--%s: a --preset sets the sync mode, sizes, depths, "
				      "mix and duration itself", c->preset_conflict);
	if (c->preset && !strcmp(c->preset, "iozone") && c->sessions_given)
		syncguard_usage_error("%s", "--sessions: the iozone preset runs 2 sessions "
				      "(iozone -l 2)");
	if (c->preset && !strcmp(c->preset, "iozone") && c->span)
		syncguard_usage_error("%s", "--span: the iozone preset's sessions "
				      "work in files of their own at the LUN's "
				      "start");
	if (c->verify && (c->read_pct == 100 || c->sync == SYNC_FLUSH_ONLY))
		syncguard_usage_error("%s", "--verify needs writes (--read-pct below 100, "
				      "not --sync flush-only)");
	if (c->verify_only && !c->state)	/* else only torn blocks count */
		syncguard_usage_error("%s", "--verify-only needs the --state FILE of the "
				      "--verify run that stamped the LUN");
	if (c->verify_only && (c->verify || c->preset || c->cache_off))
		syncguard_usage_error("%s", "--verify-only only reads: not with --verify, "
				      "--preset or --cache-off");
	if (c->bytes && c->seconds_given)	/* else -t silently dropped */
		syncguard_usage_error("%s", "--time and --bytes exclude each other");
	if (c->bytes && c->sync == SYNC_FLUSH_ONLY)
		syncguard_usage_error("%s", "--bytes counts data: --sync flush-only moves "
				      "none, give it --time");
	if (c->sync == SYNC_FLUSH_ONLY && c->read_pct)
		syncguard_usage_error("%s", "--sync flush-only sends no reads: "
				      "--read-pct would only mislabel it");
	if (c->sync == SYNC_FLUSH_ONLY && c->nsizes > 1)
		syncguard_usage_error("%s", "--sync flush-only moves no data: a list "
				      "of --block-size values would run one test again");
	if (c->warmup > 0 && c->bytes)
		syncguard_usage_error("%s", "--warmup goes with --time: with --bytes the "
				      "warm-up would use up the bytes");
	syncguard_check_rate(c);
	check_buffers(c);
}

/* the options whose settings a --preset makes itself */
static bool preset_sets(const char *name)
{
	static const char *const names[] = { "sync", "block-size",
		"queue-depth", "time", "bytes", "read-pct", "random-pct",
		"pattern" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

void syncguard_parse_args(int argc, char **argv, struct config *c)
{
	struct option lopts[NOPTS + 1];
	char shorts[2 * NOPTS + 2] = ":";	/* ':': a missing value is ':' */
	int opt, idx;

	defaults(c);
	c->argc = argc;
	c->argv = argv;
	for (size_t i = 0; i < NOPTS; i++) {
		int has = !opts[i].arg ? no_argument :
			  opts[i].arg[0] == '[' ? optional_argument :
			  required_argument;

		lopts[i] = (struct option){ opts[i].name, has, NULL,
					    1000 + (int)i };
		if (opts[i].shortopt) {
			size_t n = strlen(shorts);

			shorts[n] = (char)opts[i].shortopt;
			shorts[n + 1] = opts[i].arg ? ':' : '\0';
			shorts[n + 2] = '\0';
		}
	}
	lopts[NOPTS] = (struct option){ NULL, 0, NULL, 0 };
	opterr = 0;		/* syncguard_usage_error says it, in one line */
	while ((opt = getopt_long(argc, argv, shorts, lopts, &idx)) != -1) {
		size_t i = NOPTS;

		if (opt >= 1000)
			i = (size_t)(opt - 1000);
		for (size_t k = 0; i == NOPTS && k < NOPTS; k++)
			if (opts[k].shortopt == opt)
				i = k;
		if (opt == ':' || (i == NOPTS && opt == '?')) {
			char name[3] = { '-', (char)optopt, 0 };
			/* a short option names itself in optopt, a long one
			 * is the argument getopt just passed */
			const char *o = optopt > 0 && optopt < 128 &&
					isalnum(optopt) ? name : argv[optind - 1];

			syncguard_usage_error(opt == ':' ? "%s needs a value" :
					      "%s: unknown option", o);
		}
		/* an optional value (--curve [PCTS]) may also be the next
		 * word, when it is a list of numbers (a URL never is) */
		if (opts[i].arg && opts[i].arg[0] == '[' && !optarg &&
		    optind < argc && argv[optind][0] &&
		    strspn(argv[optind], "0123456789,") == strlen(argv[optind]))
			optarg = argv[optind++];
		opts[i].set(c, optarg);
		if (preset_sets(opts[i].name) && !c->preset_conflict)
			c->preset_conflict = opts[i].name;
		if (!with_saved_runs(opts[i].name) && !c->run_opt)
			c->run_opt = opts[i].name;
	}
	check_combinations(c, argc, argv);
	if (!c->seed_given)
		c->seed = clock_seed();
	if (c->progress < 0)
		c->progress = isatty(STDERR_FILENO);
}
