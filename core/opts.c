/*
 * bsopts parsing: "mode=write-back;alloc_check=no" (or ":" between).
 *
 * Options live in one table (name, parser, help), as fio's engines keep
 * theirs; an unknown key is an error that lists the known ones, never
 * silently ignored.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "internal.h"

static const char *const mode_names[] = {
	[SYNCGUARD_MODE_WRITE_THROUGH] = "write-through",
	[SYNCGUARD_MODE_WRITE_BACK] = "write-back",
	[SYNCGUARD_MODE_PLP] = "plp",
};

static const char *const write_sync_names[] = {
	[SYNCGUARD_WRITE_SYNC_AUTO] = "auto",
	[SYNCGUARD_WRITE_SYNC_GROUP] = "group",
	[SYNCGUARD_WRITE_SYNC_DSYNC] = "dsync",
};

static const char *const engine_names[] = {
	[SYNCGUARD_ENGINE_AUTO] = "auto",
	[SYNCGUARD_ENGINE_THREADS] = "threads",
	[SYNCGUARD_ENGINE_URING] = "uring",
};

static const char *const direct_names[] = {
	[SYNCGUARD_DIRECT_AUTO] = "auto",
	[SYNCGUARD_DIRECT_YES] = "yes",
	[SYNCGUARD_DIRECT_NO] = "no",
};

static const char *const flush_batch_names[] = {
	[SYNCGUARD_FLUSH_BATCH_AUTO] = "auto",
	[SYNCGUARD_FLUSH_BATCH_OFF] = "off",
};

static const char *const sync_loop_names[] = {
	[SYNCGUARD_SYNCLOOP_AUTO] = "auto",
	[SYNCGUARD_SYNCLOOP_OFF] = "off",
};

#define NAME_OF(i, names) \
	((unsigned int)(i) < sizeof(names) / sizeof(names[0]) ? names[i] : "?")

const char *syncguard_mode_name(enum syncguard_mode mode)
{
	return NAME_OF(mode, mode_names);
}

const char *syncguard_write_sync_name(enum syncguard_write_sync ws)
{
	return NAME_OF(ws, write_sync_names);
}

const char *syncguard_engine_name(enum syncguard_engine e)
{
	return NAME_OF(e, engine_names);
}

const char *syncguard_flush_batch_name(enum syncguard_flush_batch fb)
{
	return NAME_OF(fb, flush_batch_names);
}

const char *syncguard_sync_loop_name(enum syncguard_sync_loop sl)
{
	return NAME_OF(sl, sync_loop_names);
}

void syncguard_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The index of @val in @names (@n of them), or -EINVAL. */
static int name_index(const char *val, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(val, names[i]))
			return (int)i;
	return -EINVAL;
}

#define NAME_INDEX(val, names) \
	name_index(val, names, sizeof(names) / sizeof(names[0]))

/* The body of a parser for an enum option: @field of opts gets the index
 * of val in @names (a table indexed by the enum), or -EINVAL. */
#define PARSE_ENUM(field, names) do {					\
	int i = NAME_INDEX(val, names);					\
									\
	if (i >= 0)							\
		opts->field = i;					\
	return i < 0 ? i : 0;						\
} while (0)

static int parse_mode(const char *val, struct syncguard_opts *opts)
{
	PARSE_ENUM(mode, mode_names);
}

static int parse_bool(const char *val, bool *out)
{
	static const char *const yes[] = { "1", "yes", "on", "true" };
	static const char *const no[] = { "0", "no", "off", "false" };

	for (size_t i = 0; i < 4; i++) {
		if (!strcmp(val, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcmp(val, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_alloc_check(const char *val, struct syncguard_opts *opts)
{
	return parse_bool(val, &opts->alloc_check);
}

static int parse_allow_wce(const char *val, struct syncguard_opts *opts)
{
	return parse_bool(val, &opts->allow_wce);
}

static int parse_engine(const char *val, struct syncguard_opts *opts)
{
	PARSE_ENUM(engine, engine_names);
}

static int parse_write_sync(const char *val, struct syncguard_opts *opts)
{
	PARSE_ENUM(write_sync, write_sync_names);
}

static int parse_direct(const char *val, struct syncguard_opts *opts)
{
	PARSE_ENUM(direct, direct_names);
}

static int parse_flush_batch(const char *val, struct syncguard_opts *opts)
{
	PARSE_ENUM(flush_batch, flush_batch_names);
}

static int parse_sync_loop(const char *val, struct syncguard_opts *opts)
{
	PARSE_ENUM(sync_loop, sync_loop_names);
}

static int parse_state_dir(const char *val, struct syncguard_opts *opts)
{
	size_t n = strlen(val);

	if (val[0] != '/' || n >= sizeof(opts->state_dir))
		return -EINVAL;
	memcpy(opts->state_dir, val, n + 1);
	return 0;
}

/* "auto" or 1..SYNCGUARD_WORKERS_MAX, decimal */
static int parse_workers(const char *val, struct syncguard_opts *opts)
{
	char *end;
	unsigned long n;

	if (!strcmp(val, "auto")) {
		opts->workers = 0;
		return 0;
	}
	if (val[0] < '1' || val[0] > '9')	/* no sign, space or 0 */
		return -EINVAL;
	errno = 0;
	n = strtoul(val, &end, 10);
	if (errno || *end || n > SYNCGUARD_WORKERS_MAX)
		return -EINVAL;
	opts->workers = (unsigned int)n;
	return 0;
}

unsigned int syncguard_workers(const struct syncguard_opts *opts,
			       int tgt_threads)
{
	unsigned int t = tgt_threads > 0 ? (unsigned int)tgt_threads : 0;

	if (opts->workers)
		return opts->workers;
	if (t > SYNCGUARD_WORKERS_MAX)
		return SYNCGUARD_WORKERS_MAX;
	return t > SYNCGUARD_WORKERS_AUTO_MIN ? t : SYNCGUARD_WORKERS_AUTO_MIN;
}

struct opt_def {
	const char *name;
	int (*parse)(const char *val, struct syncguard_opts *opts);
	const char *values;	/* accepted values, shown when one is bad */
	const char *help;
};

static const struct opt_def opt_table[] = {
	{ "mode", parse_mode, "write-through, write-back or plp",
	  "the write-cache mode (default write-back): what WRITE, FUA and "
	  "SYNCHRONIZE CACHE promise" },
	{ "alloc_check", parse_alloc_check, "yes or no",
	  "plp on a regular file: check at open that every block is "
	  "allocated and written (default yes)" },
	{ "allow_wce", parse_allow_wce, "yes or no",
	  "write-through or plp: let an initiator (MODE SELECT) or tgtadm set "
	  "WCE=1 (default no); write-through then behaves as write-back" },
	{ "engine", parse_engine, "auto, threads or uring",
	  "how plain reads and writes reach the file or device: uring = "
	  "io_uring from tgtd's event thread (one ring for all of tgtd's "
	  "LUNs, at most 254 commands on it, the rest on the worker "
	  "threads; the LUN is refused where io_uring cannot be set up); "
	  "threads = the LUN's worker threads; auto (default) = uring where "
	  "the file system supports non-blocking I/O (RWF_NOWAIT), else "
	  "threads, and even then SYNCHRONIZE CACHE waits for its device "
	  "flush on the ring" },
	{ "write_sync", parse_write_sync, "auto, group or dsync",
	  "how a write that must be durable becomes durable: group = cached "
	  "write, then a device flush shared with concurrent commands; "
	  "dsync = RWF_DSYNC on that write alone; auto (default) = a running "
	  "trial of the two, taking the one that answers more durable "
	  "writes per second" },
	{ "direct", parse_direct, "auto, yes or no",
	  "writes bypass the host page cache with O_DIRECT where aligned: "
	  "they land in the device (its cache, in write-back), and a "
	  "durable one is RWF_DSYNC on O_DIRECT or a group flush; auto "
	  "(default) = yes for write-through and plp; for write-back, the page "
	  "cache, with O_DIRECT only for a write that RWF_DSYNC makes durable "
	  "by itself (on a regular file)" },
	{ "flush_batch", parse_flush_batch, "auto or off",
	  "group commit: auto (default) = hold the next device flush back "
	  "by half the mean flush time (2 ms at most) while a running trial "
	  "finds that more commands share it; off = start every flush at "
	  "once" },
	{ "sync_loop", parse_sync_loop, "auto or off",
	  "write-back, WCE=1: auto (default) = a single writer that sends a "
	  "SYNCHRONIZE CACHE after every plain write (eight in a row) gets "
	  "its writes made durable as they are written (as write_sync says), "
	  "so its SYNCHRONIZE CACHEs find nothing to flush; off = plain "
	  "writes stay cached" },
	{ "state_dir", parse_state_dir, "an existing directory: an absolute "
	  "path of at most 255 characters (':' and ';' separate bsopts)",
	  "where a latch that may stand for lost data is recorded, so that "
	  "the store's next LUN starts latched until it is cleared "
	  "(syncguard-stat --clear-latch PATH); a new LUN looks here, and "
	  "where this tgtd last recorded the store's latch, so every tgtd "
	  "that exports a store needs the same one; default "
	  "$SYNCGUARD_STATE_DIR of tgtd, else " SYNCGUARD_STATE_DIR_DEFAULT },
	{ "workers", parse_workers, "auto or 1 to 256",
	  "worker threads for this LUN: they run every read and write "
	  "where io_uring does not (engine=threads), and a write that must "
	  "be durable holds its worker until its group flush, so fewer "
	  "workers than the commands the initiators keep in flight cap the "
	  "writes a flush answers; auto (default) = tgtd's --nr_iothreads "
	  "within 32..256.  Fixed when the LUN is created" },
};

#define NR_OPTS (sizeof(opt_table) / sizeof(opt_table[0]))

size_t syncguard_opts_help(char *buf, size_t len)
{
	size_t used = 0;

	for (size_t i = 0; i < NR_OPTS; i++) {
		int n = snprintf(buf + used, used < len ? len - used : 0,
				 "  %s=<%s>: %s\n", opt_table[i].name,
				 opt_table[i].values, opt_table[i].help);
		if (n > 0)
			used += (size_t)n;
	}
	return used;
}

const char *syncguard_opts_doc(size_t i, const char **values,
			       const char **help)
{
	if (i >= NR_OPTS)
		return NULL;
	*values = opt_table[i].values;
	*help = opt_table[i].help;
	return opt_table[i].name;
}

static const struct opt_def *find_opt(const char *name)
{
	for (size_t i = 0; i < NR_OPTS; i++)
		if (!strcmp(opt_table[i].name, name))
			return &opt_table[i];
	return NULL;
}

/* Copy @s for a log message: control characters (a newline would split
 * tgtd's log line) become '?', and long input is cut. */
static const char *printable(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len; i++)
		buf[i] = (s[i] > 0 && s[i] < 0x20) || s[i] == 0x7f ? '?' : s[i];
	buf[i] = '\0';
	return buf;
}

static void unknown_key(const char *key, char *err, size_t errlen)
{
	char known[192] = "";

	for (size_t i = 0; i < NR_OPTS; i++) {
		strncat(known, i ? ", " : "", sizeof(known) - strlen(known) - 1);
		strncat(known, opt_table[i].name,
			sizeof(known) - strlen(known) - 1);
	}
	char k[64];

	syncguard_seterr(err, errlen, "bsopts: unknown key '%s' (known: %s)",
	       printable(key, k, sizeof(k)), known);
}

/* Apply one "key=value" item; @item is modified in place.  @seen: a
 * bit per table entry, so a key given twice is an error, not a silent
 * "last one wins". */
static int parse_item(char *item, struct syncguard_opts *opts,
		      unsigned int *seen, char *err, size_t errlen)
{
	char *eq = strchr(item, '=');
	const struct opt_def *def;
	char v[64];

	if (!eq) {
		syncguard_seterr(err, errlen, "bsopts: '%s' is not key=value",
		       printable(item, v, sizeof(v)));
		return -EINVAL;
	}
	*eq = '\0';
	def = find_opt(item);
	if (!def) {
		unknown_key(item, err, errlen);
		return -EINVAL;
	}
	if (*seen & (1u << (def - opt_table))) {
		syncguard_seterr(err, errlen, "bsopts: %s given twice", def->name);
		return -EINVAL;
	}
	*seen |= 1u << (def - opt_table);
	if (def->parse(eq + 1, opts)) {
		syncguard_seterr(err, errlen, "bsopts: bad value '%s' for %s (use %s)",
		       printable(eq + 1, v, sizeof(v)), def->name, def->values);
		return -EINVAL;
	}
	return 0;
}

int syncguard_opts_parse(const char *bsopts, struct syncguard_opts *opts,
			 char *err, size_t errlen)
{
	char *copy, *cur, *item;
	unsigned int seen = 0;
	int ret = 0;

	*opts = (struct syncguard_opts){
		.mode = SYNCGUARD_MODE_WRITE_BACK,
		.engine = SYNCGUARD_ENGINE_AUTO,
		.write_sync = SYNCGUARD_WRITE_SYNC_AUTO,
		.direct = SYNCGUARD_DIRECT_AUTO,
		.alloc_check = true,
		.allow_wce = false,
	};
	if (err && errlen)
		err[0] = '\0';
	if (!bsopts || !*bsopts)
		return 0;

	copy = strdup(bsopts);
	if (!copy) {
		syncguard_seterr(err, errlen, "bsopts: out of memory");
		return -ENOMEM;
	}
	cur = copy;
	/* ";" as in tgt's other stores' bsopts; ":" too, which a shell
	 * leaves alone: tgt-admin hands bsopts to one unquoted, where
	 * "mode=plp;alloc_check=no" silently loses its second key (and
	 * "engine=threads;mode=write-through" its mode) */
	while (!ret && (item = strsep(&cur, ";:")) != NULL) {
		if (!*item)
			continue;	/* "a=b;" and ";;" are harmless */
		ret = parse_item(item, opts, &seen, err, errlen);
	}
	free(copy);
	return ret;
}
