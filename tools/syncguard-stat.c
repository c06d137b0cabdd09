/*
 * syncguard-stat: print the counters of syncguard LUNs while tgtd runs,
 * and the latches recorded for stores (core/poison.c).
 *
 *   syncguard-stat [--json] [TARGET-IQN [LUN]]
 *   syncguard-stat --latched [--state-dir DIR]
 *   syncguard-stat --clear-latch PATH [--state-dir DIR]
 *
 * Reads /run/syncguard/<target>/lun<N>.stats (include/syncguard_stats.h);
 * without arguments, every LUN of every target there.  Exit status 1
 * when nothing matched, 2 on a usage error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "syncguard_opts.h"	/* syncguard_mode_name */
#include "internal.h"		/* the latch records (core/poison.c) */
#include "syncguard_stats.h"
#include "statsfile.h"
#include "prometheus.h"
#include "roff.h"

/* Why files were skipped, said on stderr: then the closing "no
 * counters" line would contradict it. */
static int reasons_said;

/* @path's counters, or false after saying why not where it matters: a
 * live tgtd's file of another version or cut short, or no counters file
 * at all (a dead tgtd's leftover of another version, or cut short, is
 * skipped: it is no LUN's now). */
static bool load(const char *path, struct syncguard_stats *st)
{
	int ret = syncguard_stats_load(path, st);
	/* loaded zeroed: a file cut short has no start time */
	uint64_t start = syncguard_stats_pid_start(st, sizeof(*st));

	if (ret == 0)
		return true;
	if (ret == -ENOENT)		/* gone since the directory was read */
		return false;
	if ((ret == -ESTALE || ret == -EIO) &&
	    !syncguard_stats_owner_alive(st->pid, start))
		return false;
	reasons_said++;
	if (ret == -ESTALE)
		fprintf(stderr, "syncguard-stat: %s: counters version %u, this "
			"tool reads %u (a tgtd with another bs_syncguard.so)\n",
			path, st->version, SYNCGUARD_STATS_VERSION);
	else if (ret == -EIO)
		fprintf(stderr, "syncguard-stat: %s: truncated (shorter than "
			"%zu bytes)\n", path, sizeof(*st));
	else
		fprintf(stderr, "syncguard-stat: %s: not a counters file (no "
			"syncguard header, not a regular file, or garbage after "
			"the header)\n", path);
	return false;
}

/* How writes go and what the running trials chose (stats version 2 on). */
static void print_ways(const struct syncguard_stats *st)
{
	char w[256], f[160], l[160], e[96];

	syncguard_ways_writes(st, w, sizeof(w));
	syncguard_ways_batching(st, f, sizeof(f));
	syncguard_ways_sync_loop(st, l, sizeof(l));
	syncguard_ways_engine(st, e, sizeof(e));
	printf("  writes: %s\n  flush batching: %s\n  sync loop: %s\n"
	       "  engine: %s\n", w, f, l, e);
}

static void print_ways_json(const struct syncguard_stats *st)
{
	/* plp has no trials: null ways, not dsync and at_once */
	bool plp = st->mode == SYNCGUARD_MODE_PLP;

	printf(",\"engine\":\"%s\",\"ring\":\"%s\"",
	       syncguard_engine_name((enum syncguard_engine)st->engine),
	       syncguard_ring_use_name(st->ring_use, true));
	printf(",\"write_sync\":\"%s\",\"direct_io\":%s,\"dsync_direct_io\":%s,"
	       "\"write_sync_way\":%s,\"write_sync_rate\":{\"dsync\":%"
	       PRIu64 ",\"group\":%" PRIu64 "},\"flush_batch\":\"%s\","
	       "\"batch_way\":%s,"
	       "\"batch_rate\":{\"at_once\":%" PRIu64 ",\"hold\":%" PRIu64 "}",
	       syncguard_write_sync_name((enum syncguard_write_sync)st->write_sync),
	       st->direct_io == 1 ? "true" : "false",
	       st->direct_io && !plp ? "true" : "false",
	       plp || st->write_sync != SYNCGUARD_WRITE_SYNC_AUTO ? "null" :
	       st->write_sync_way ? "\"group\"" : "\"dsync\"",
	       st->write_sync_rate[0], st->write_sync_rate[1],
	       syncguard_flush_batch_name(
		       (enum syncguard_flush_batch)st->flush_batch),
	       plp || st->flush_batch == SYNCGUARD_FLUSH_BATCH_OFF ? "null" :
	       st->batch_way ? "\"hold\"" : "\"at_once\"",
	       st->batch_rate[0], st->batch_rate[1]);
	/* write-back runs the sync loop, but not with write_sync=group or
	 * sync_loop=off */
	printf(",\"sync_loop\":\"%s\",\"sync_loop_way\":%s,"
	       "\"sync_loop_rate\":{\"cached\":%" PRIu64 ",\"at_once\":%"
	       PRIu64 "}",
	       syncguard_sync_loop_name((enum syncguard_sync_loop)st->sync_loop),
	       st->mode != SYNCGUARD_MODE_WRITE_BACK || !st->wce ||
	       st->sync_loop == SYNCGUARD_SYNCLOOP_OFF ||
	       st->write_sync == SYNCGUARD_WRITE_SYNC_GROUP ? "null" :
	       st->sync_loop_way == SYNCGUARD_SYNC_LOOP_STREAK ?
	       "\"single_writer\"" :
	       st->sync_loop_way ? "\"at_once\"" : "\"cached\"",
	       st->sync_loop_rate[0], st->sync_loop_rate[1]);
}

/* Median device flush latency in microseconds (bucket lower bound). */
static uint64_t flush_p50(const struct syncguard_stats *st)
{
	uint64_t n = 0, seen = 0;

	for (int i = 0; i < SYNCGUARD_FLUSH_BUCKETS; i++)
		n += st->flush_us[i];
	for (int i = 0; i < SYNCGUARD_FLUSH_BUCKETS; i++) {
		seen += st->flush_us[i];
		if (n && seen * 2 >= n)
			return 1ull << i;
	}
	return 0;
}

/* "flush_latency_us": [[lower bound us, count], ...], non-empty buckets
 * of [2^i, 2^(i+1)) microseconds */
static void print_histogram(const struct syncguard_stats *st)
{
	bool first = true;

	printf(",\"flush_latency_us\":[");
	for (int i = 0; i < SYNCGUARD_FLUSH_BUCKETS; i++) {
		if (!st->flush_us[i])
			continue;
		printf("%s[%" PRIu64 ",%" PRIu64 "]", first ? "" : ",",
		       (uint64_t)1 << i, st->flush_us[i]);
		first = false;
	}
	printf("]}");
}

/* @s as the body of a JSON string (quotes, backslashes and control
 * characters escaped) */
static void print_json_string(const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
}

/* The latched error (stats version 6 on), if any: what fails, and until
 * when (core/latch.c, syncguard_latch). */
static void print_latch(const struct syncguard_stats *st)
{
	const char *until = "until its record is cleared (syncguard-stat "
			    "--clear-latch PATH) and the LUN re-created";

	if (!st->latched)
		return;
	if (st->latched_soft && st->latched == EINPROGRESS)
		until = "until the store's last LUN's final flush has ended "
			"(they wait for it), and for good if it failed";
	else if (st->latched_soft && st->latched == EPERM)
		until = "until the next one finds the device sound (a write "
			"refused by an immutable file or a read-only device)";
	else if (st->latched_soft)
		until = "until the next one finds the device sound (a write "
			"refused for want of space)";
	printf("  latched: %s: durable commands fail %s\n",
	       strerror((int)st->latched), until);
}

static void print_latch_json(const struct syncguard_stats *st)
{
	if (!st->latched) {
		printf(",\"latched\":null");
		return;
	}
	printf(",\"latched\":{\"errno\":%" PRIu64 ",\"error\":\"", st->latched);
	print_json_string(strerror((int)st->latched));
	printf("\",\"rechecked\":%s}", st->latched_soft ? "true" : "false");
}


/* The counters of @st that the table prints, as ",\"name\":value" */
static void print_counters_json(const struct syncguard_stats *st)
{
	for (size_t i = 0; i < syncguard_stats_nfields; i++) {
		uint64_t v;

		if (syncguard_stats_fields[i].off == SYNCGUARD_OWN_CODE || !strcmp(syncguard_stats_fields[i].name, "wce"))
			continue;
		memcpy(&v, (const char *)st + syncguard_stats_fields[i].off, sizeof(v));
		printf(",\"%s\":%" PRIu64, syncguard_stats_fields[i].name, v);
	}
}

/* --prometheus FILE: the LUNs found, kept for one write at the end */
static const char *prom_path;
static struct syncguard_prom_lun *prom;
static size_t nprom;

static void keep_for_prometheus(const char *target, unsigned long lun,
				const struct syncguard_stats *st, bool alive)
{
	struct syncguard_prom_lun *more = realloc(prom, (nprom + 1) *
						  sizeof(*prom));

	if (!more) {
		fprintf(stderr, "syncguard-stat: out of memory: %s lun %lu "
			"left out\n", target, lun);
		return;
	}
	prom = more;
	snprintf(prom[nprom].target, sizeof(prom[0].target), "%s", target);
	prom[nprom].lun = lun;
	prom[nprom].alive = alive;
	prom[nprom++].st = *st;
}

static void print(const char *target, unsigned long lun,
		  const struct syncguard_stats *st, bool json, bool *first)
{
	const char *mode = syncguard_mode_name((enum syncguard_mode)st->mode);
	bool alive = syncguard_stats_owner_alive(st->pid, st->pid_start);

	if (prom_path) {
		keep_for_prometheus(target, lun, st, alive);
		return;
	}
	if (json) {
		printf("%s{\"target\":\"", *first ? "" : ",");
		print_json_string(target);
		printf("\",\"lun\":%lu,\"mode\":\"%s\",\"wce\":%" PRIu64 ","
		       "\"tgtd_pid\":%u,\"tgtd_alive\":%s", lun, mode, st->wce,
		       st->pid, alive ? "true" : "false");
		print_counters_json(st);
		print_ways_json(st);
		print_latch_json(st);
		print_histogram(st);
	} else {
		char median[48] = "-";	/* none measured: no 0 us */
		uint64_t p50 = flush_p50(st);

		/* the median's bucket, [2^i, 2^(i+1)) us */
		if (p50 == 1)
			snprintf(median, sizeof(median), "1");
		else if (p50)
			snprintf(median, sizeof(median), "%" PRIu64 "-%" PRIu64,
				 p50, 2 * p50 - 1);
		printf("%s lun %lu: %s, WCE=%" PRIu64 ", tgtd %u%s\n"
		       "  commands: %" PRIu64 " reads, %" PRIu64 " writes, %" PRIu64
		       " FUA writes, %" PRIu64 " SYNCHRONIZE CACHE, %" PRIu64
		       " errors\n"
		       "  device flushes %" PRIu64 " (median %s us), "
		       "RWF_DSYNC writes %" PRIu64 ", writeouts %" PRIu64
		       ", O_DIRECT writes %" PRIu64 "\n"
		       "  saved: %" PRIu64 " by coalescing, %" PRIu64
		       " by elision\n"
		       "  io_uring: %" PRIu64 " reads and writes in %" PRIu64
		       " submissions (%" PRIu64 " after a wait)\n", target,
		       lun, mode, st->wce, st->pid, alive ? "" : " (gone)",
		       st->reads, st->writes,
		       st->fua_writes, st->sync_caches, st->errors,
		       st->device_flushes, median, st->dsync_writes,
		       st->writeouts, st->direct_writes, st->flushes_coalesced,
		       st->flushes_elided, st->ring_ios, st->ring_submits,
		       st->ring_held_submits);
		print_ways(st);
		print_latch(st);
	}
	*first = false;
}

/* A LUN number in [s, end): decimal digits only, at most 9 of them.
 * -1 if it is not one. */
static long lun_number(const char *s, const char *end)
{
	long v = 0;

	if (s == end || end - s > 9)
		return -1;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v;
}

/* The LUN of a counters file name "lun<N>.stats", or -1 (a temporary
 * file being published, anything else). */
static long lun_of(const char *name)
{
	size_t len = strlen(name);

	if (len < 10 || strncmp(name, "lun", 3) ||
	    strcmp(name + len - 6, ".stats"))
		return -1;
	return lun_number(name + 3, name + len - 6);
}

static int walk_target(const char *target, long want_lun, bool json,
		       bool *first)
{
	char dir[512], path[1024];
	struct dirent **e;
	int n = 0, count;

	snprintf(dir, sizeof(dir), SYNCGUARD_STATS_DIR "/%s", target);
	count = scandir(dir, &e, NULL, versionsort);	/* lun2 before lun10 */
	for (int i = 0; i < count; i++) {
		struct syncguard_stats st;
		long lun = lun_of(e[i]->d_name);

		snprintf(path, sizeof(path), "%s/%s", dir, e[i]->d_name);
		if (lun >= 0 && (want_lun < 0 || lun == want_lun) &&
		    load(path, &st)) {
			print(target, (unsigned long)lun, &st, json, first);
			n++;
		}
		free(e[i]);
	}
	if (count >= 0)
		free(e);
	return n;
}

#define SYNOPSIS							\
	"usage: syncguard-stat [--json | --prometheus FILE] [TARGET-IQN [LUN]]\n" \
	"       syncguard-stat --latched [--state-dir DIR]\n"		\
	"       syncguard-stat --clear-latch PATH [--state-dir DIR]\n"

/* The reason, the synopsis; exit status 2 */
static int usage_error(const char *why, const char *arg)
{
	fprintf(stderr, "syncguard-stat: %s '%s'\n" SYNOPSIS, why, arg);
	return 2;
}

static const char help_text[] =
	SYNOPSIS "\n"
	"Counters of syncguard LUNs from " SYNCGUARD_STATS_DIR
	"/<target>/lun<N>.stats:\ncommands by kind, device "
	"flushes (fdatasync) and their latency, RWF_DSYNC\n"
	"writes, plp writeouts and O_DIRECT writes, flushes "
	"saved by coalescing and\nelision; whether writes go "
	"O_DIRECT, and which way each running trial\n"
	"(write_sync, flush batching, write-back's sync loop) takes now, "
	"with each\nway's rate in its last measured epoch; its worker "
	"threads; an error\nthe LUN has latched.\n"
	"Without arguments, every LUN's, by target and "
	"LUN.\nCounters of a tgtd "
	"that has exited are marked (gone).\n--json: one array "
	"of objects, with the flush latency histogram.\n"
	"\n--latched: the stores whose LUN latched an error that may "
	"have lost\nacknowledged writes (a failed flush); a LUN created on "
	"one starts\nlatched (its SYNCHRONIZE CACHE and durable writes "
	"fail).\n"
	"--clear-latch PATH: once the data on PATH (the LUN's file or "
	"block\ndevice) has been checked, remove its record; then "
	"re-create the LUN.\n"
	"--state-dir DIR: where the records are (bsopts state_dir; "
	"default\n$SYNCGUARD_STATE_DIR, else " SYNCGUARD_STATE_DIR_DEFAULT
	").\n"
	"--prometheus FILE: the counters in Prometheus's text format, "
	"written whole\n(a temporary file renamed over FILE; - for "
	"standard output), for\nnode_exporter's textfile collector; "
	"exit status 0 once written.\n"
	"--man: the manual page, syncguard-stat(1).\n"
	"-h, --help: this text.\n"
	"Exit status: 0 counters printed (a record listed or cleared), 1 "
	"none\nmatched, 2 a usage error.\n";

/* The manual page, syncguard-stat(1): the fields from the table */
static void print_man(void)
{
	printf(".TH SYNCGUARD-STAT 1 \"2026-12\" syncguard\n.SH NAME\n"
	       "syncguard\\-stat \\- counters and latch records of syncguard "
	       "LUNs\n.SH SYNOPSIS\n.nf\n");
	roff_print("syncguard-stat [--json | --prometheus FILE] [TARGET-IQN [LUN]]\n"
	     "syncguard-stat --latched [--state-dir DIR]\n"
	     "syncguard-stat --clear-latch PATH [--state-dir DIR]\n");
	printf(".fi\n.SH DESCRIPTION\n");
	roff_print("Prints the counters a running tgtd's syncguard LUNs publish in "
	     SYNCGUARD_STATS_DIR "/TARGET/lunN.stats (bs_syncguard(8)): "
	     "commands by kind, device flushes and their latency, RWF_DSYNC "
	     "writes, plp write-outs and O_DIRECT writes, flushes saved by "
	     "coalescing and elision; whether writes go O_DIRECT, which way "
	     "each running trial (write_sync, flush batching, write-back's "
	     "sync loop) takes now, with each way's rate in its last "
	     "measured epoch; its engine and worker threads; and an error "
	     "the LUN has "
	     "latched.  Without "
	     "arguments, every LUN's, by target and LUN; a LUN of a tgtd that "
	     "has exited is marked (gone).\n");
	printf(".SH OPTIONS\n.TP\n\\fB\\-\\-json\\fR\n");
	roff_print("one JSON array of objects, one per LUN, with the fields below.\n");
	printf(".TP\n\\fB\\-\\-prometheus\\fR \\fIFILE\\fR\n");
	roff_print("the same counters in Prometheus's text exposition format "
		   "(syncguard_<field>_total counters, syncguard_wce, "
		   "syncguard_workers, syncguard_latched, syncguard_latched_soft, "
		   "syncguard_tgtd_up, syncguard_info, and "
		   "the syncguard_device_flush_seconds histogram, labelled by "
		   "target and LUN), written whole: a temporary file is renamed "
		   "over FILE, so node_exporter's textfile collector never "
		   "reads half of it; - writes to standard output.  With no "
		   "LUN found, an empty set.\n");
	printf(".TP\n\\fB\\-\\-latched\\fR\n");
	roff_print("the stores whose LUN latched an error that may have lost "
	     "acknowledged writes (a failed flush, or a failed final flush; "
	     "a record left unfinished, or the final flush of a tgtd that "
	     "stopped during it, whose outcome is unknown); a LUN created on "
	     "one starts latched: its SYNCHRONIZE CACHE and durable writes "
	     "fail.  A final flush still running is listed too, and counts "
	     "for no latch.\n");
	printf(".TP\n\\fB\\-\\-clear\\-latch\\fR \\fIPATH\\fR\n");
	roff_print("once the data on PATH (the LUN's file or block device) has been "
	     "checked, remove its record; then delete and re-create the "
	     "LUN.\n");
	printf(".TP\n\\fB\\-\\-state\\-dir\\fR \\fIDIR\\fR\n");
	roff_print("where the records are (bsopts state_dir); default "
	     "$SYNCGUARD_STATE_DIR, else " SYNCGUARD_STATE_DIR_DEFAULT ".\n");
	printf(".TP\n\\fB\\-\\-man\\fR\nthis manual page.\n"
	       ".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nthe options.\n"
	       ".SH JSON FIELDS\n");
	for (size_t i = 0; i < syncguard_stats_nfields; i++) {
		printf(".TP\n.B ");
		roff_print(syncguard_stats_fields[i].name);
		putchar('\n');
		roff_print(syncguard_stats_fields[i].meaning);
		putchar('\n');
	}
	printf(".SH FILES\n.TP\n.I " SYNCGUARD_STATS_DIR "/\n");
	roff_print("counters files, one per LUN, named by target and LUN\n");
	printf(".TP\n.I ");
	roff_print(SYNCGUARD_STATE_DIR_DEFAULT "/latched/\n");
	roff_print("latch records, one per store\n");
	printf(".SH EXIT STATUS\n");
	roff_print("0 counters printed (a record listed or cleared); 1 none matched, "
	     "with the reason; 2 a usage error.\n");
	printf(".SH SEE ALSO\n.BR bs_syncguard (8),\n.BR tgtadm (8),\n"
	       ".BR iscsi\\-syncbench (1)\n");
}

/* The ids a listing has shown */
struct shown {
	char (*ids)[256];
	size_t n, cap;
};

/* Has @s shown @id?  If not, it has now (as far as memory goes). */
static bool listed(struct shown *s, const char *id)
{
	void *grown;

	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->ids[i], id))
			return true;
	if (s->n == s->cap) {
		if (!(grown = realloc(s->ids, (s->cap + 16) * sizeof(*s->ids))))
			return false;
		s->ids = grown;
		s->cap += 16;
	}
	snprintf(s->ids[s->n++], sizeof(s->ids[0]), "%s", id);
	return false;
}

/* The records in @dir/latched, one per store: path, errno, time. */
static int list_latched(const char *dir)
{
	struct shown seen = { 0 };
	char p[4096], text[512];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(p, sizeof(p), "%s/latched", dir);
	if (!(d = opendir(p))) {
		fprintf(stderr, "syncguard-stat: no latch recorded in %s\n", dir);
		return 1;
	}
	while ((e = readdir(d))) {
		char id[256];
		int ret;

		/* a record; or, by its store's id where the record itself is
		 * not there, one being written or a final flush's marker;
		 * each store once */
		if (syncguard_record_store(e->d_name, id, sizeof(id)) ||
		    (e->d_name[0] == '.' &&
		     (!faccessat(dirfd(d), id, F_OK, AT_SYMLINK_NOFOLLOW) ||
		      listed(&seen, id))))
			continue;
		ret = syncguard_store_record(dir, id, text, sizeof(text), NULL,
					     0);
		if (!ret)
			continue;
		if (ret == EINPROGRESS) {	/* no latch (yet) */
			printf("%s: %s", id, text);
			continue;
		}
		if (ret < 0)	/* it latches every LUN on its store */
			snprintf(text, sizeof(text), "unreadable: %s (a LUN on "
				 "this store starts latched)\n", strerror(-ret));
		for (char *c = text; *c; c++)
			if (*c == '\n' && c[1])
				*c = ';';
		printf("%s: %s", id, text);
		n++;
	}
	closedir(d);
	free(seen.ids);
	if (!n)
		fprintf(stderr, "syncguard-stat: no latch recorded in %s\n", dir);
	return n ? 0 : 1;
}

/* Remove the record of the store @path in @dir. */
static int clear_latch(const char *path, const char *dir)
{
	char id[256], former[SYNCGUARD_FORMER_LEN], text[512];
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0 || (ret = syncguard_store_ids(fd, id, sizeof(id), former,
						 sizeof(former)))) {
		fprintf(stderr, "syncguard-stat: %s: %s\n", path,
			strerror(fd < 0 ? errno : -ret));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	close(fd);
	/* one recorded under a former identity of the store is its own */
	if (former[0] && (ret = syncguard_poison_adopt(dir, former, id,
							 true))) {
		for (char *c = former; *c; c++)
			*c = *c == '\n' ? ' ' : *c;
		fprintf(stderr, "syncguard-stat: %s: what %s/latched holds "
			"under its store's former identity (%s) could not be "
			"taken over (%s): move it to %s by hand\n", path, dir,
			former, strerror(-ret), id);
		return 1;
	}
	ret = syncguard_store_record(dir, id, text, sizeof(text), NULL, 0);
	if (ret == EINPROGRESS) {
		fprintf(stderr, "syncguard-stat: %s: %s", path, text);
		return 1;
	}
	if (ret < 0) {
		fprintf(stderr, "syncguard-stat: %s/latched/%s: %s (a LUN on %s "
			"starts latched while it cannot be read)\n", dir, id,
			strerror(-ret), path);
		return 1;
	}
	if (!ret) {
		fprintf(stderr, "syncguard-stat: %s: no latch recorded for it "
			"in %s (store %s)\n", path, dir, id);
		return 1;
	}
	ret = syncguard_poison_clear(dir, id);
	if (ret) {	/* a record that is no file, or a state directory that is
			 * none, is the administrator's to mend by hand */
		fprintf(stderr, "syncguard-stat: %s/latched/%s: %s\n", dir, id,
			strerror(-ret));
		return 1;
	}
	printf("cleared %s (store %s), which had: %s", path, id, text);
	return 0;
}

/* Options anywhere among the arguments (`IQN 1 --json` as well as
 * `--json IQN 1`), up to two operands into @pos;
 * -1 to go on, else the exit status. */
/* --latched, --clear-latch PATH and --state-dir DIR */
struct latch_args {
	bool list;
	const char *clear, *dir;
};

static int parse_args(int argc, char **argv, bool *json, char **pos,
		      int *npos, struct latch_args *la)
{
	bool operands_only = false;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!operands_only && !strcmp(a, "--prometheus")) {
			if (i + 1 == argc)
				return usage_error("a value is missing for", a);
			prom_path = argv[++i];
		} else if (!operands_only && (!strcmp(a, "--clear-latch") ||
				       !strcmp(a, "--state-dir"))) {
			if (i + 1 == argc)
				return usage_error("a value is missing for", a);
			*(a[2] == 'c' ? &la->clear : &la->dir) = argv[++i];
		} else if (!operands_only && !strcmp(a, "--latched")) {
			la->list = true;
		} else if (!operands_only && !strcmp(a, "--")) {
			operands_only = true;
		} else if (!operands_only && (!strcmp(a, "--help") ||
					      !strcmp(a, "-h"))) {
			fputs(help_text, stdout);
			return 0;
		} else if (!operands_only && !strcmp(a, "--man")) {
			print_man();
			return 0;
		} else if (!operands_only && !strcmp(a, "--json")) {
			*json = true;
		} else if (!operands_only && a[0] == '-' && a[1]) {
			return usage_error("unknown option", a);
		} else if (*npos == 2) {
			return usage_error("one argument too many:", a);
		} else {
			pos[(*npos)++] = argv[i];
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	bool json = false, first = true;
	int n = 0, count, npos = 0, ret;
	long want_lun = -1;
	struct dirent **e;
	char *pos[2] = { NULL, NULL };
	struct latch_args la = { false, NULL, NULL };

	ret = parse_args(argc, argv, &json, pos, &npos, &la);
	if (ret >= 0)
		return ret;
	if (prom_path && json)
		return usage_error("--json and --prometheus exclude each other:",
				   prom_path);
	if ((la.list || la.clear) &&
	    (npos || json || prom_path || (la.list && la.clear)))
		return usage_error("--latched and --clear-latch take no other "
				   "arguments but --state-dir:", argv[1]);
	if (la.dir && la.dir[0] != '/')
		return usage_error("--state-dir needs an absolute path:", la.dir);
	if (la.list)
		return list_latched(la.dir ? la.dir : syncguard_state_dir(NULL));
	if (la.clear)
		return clear_latch(la.clear, la.dir ? la.dir :
				   syncguard_state_dir(NULL));
	if (la.dir)
		return usage_error("--state-dir goes with --latched or "
				   "--clear-latch:", la.dir);
	if (npos == 2)
		want_lun = lun_number(pos[1], pos[1] + strlen(pos[1]));
	if (npos == 2 && want_lun < 0)
		return usage_error("not a LUN number:", pos[1]);
	if (json)
		printf("[");
	if (npos) {
		n = walk_target(pos[0], want_lun, json, &first);
	} else if ((count = scandir(SYNCGUARD_STATS_DIR, &e, NULL,
				    versionsort)) >= 0) {
		for (int t = 0; t < count; t++) {
			if (e[t]->d_name[0] != '.')
				n += walk_target(e[t]->d_name, -1, json, &first);
			free(e[t]);
		}
		free(e);
	}
	if (json)
		printf("]\n");
	if (prom_path) {	/* none found: an empty file, no stale LUNs */
		ret = syncguard_prometheus_write(prom_path, prom, nprom);
		free(prom);
		if (ret)
			fprintf(stderr, "syncguard-stat: --prometheus %s: %s\n",
				prom_path, strerror(-ret));
		return ret ? 1 : 0;
	}
	if (!n && reasons_said)
		;				/* said why above */
	else if (!n && npos == 2)
		fprintf(stderr, "syncguard-stat: no counters for LUN %ld of %s "
			"in " SYNCGUARD_STATS_DIR " (is it a syncguard LUN of a "
			"running tgtd, with a store? a LUN a refused path= left "
			"without one has none)\n", want_lun, pos[0]);
	else if (!n && npos == 1)
		fprintf(stderr, "syncguard-stat: no counters for target %s in "
			SYNCGUARD_STATS_DIR "\n", pos[0]);
	else if (!n)
		fprintf(stderr, "syncguard-stat: no syncguard LUN counters found "
			"in " SYNCGUARD_STATS_DIR "\n");
	return n ? 0 : 1;
}
