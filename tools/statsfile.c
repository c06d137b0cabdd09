/*
 * Reading a counters file, and the trials' state as text
 * (tools/statsfile.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "syncguard_opts.h"	/* syncguard_write_sync_name */
#include "statsfile.h"

/* The fields set once at open hold values the module writes: a file
 * with the header and garbage after it (all 0xff, say) is no counters
 * file, rather than one with counters of 2^64 - 1. */
static bool plausible(const struct syncguard_stats *st)
{
	return st->mode <= SYNCGUARD_MODE_PLP &&
	       st->write_sync <= SYNCGUARD_WRITE_SYNC_DSYNC &&
	       st->direct_io <= 2 && st->write_sync_way <= 1 &&
	       st->batch_way <= 1 && st->wce <= 1 &&
	       st->sync_loop_way <= SYNCGUARD_SYNC_LOOP_STREAK &&
	       st->flush_batch <= SYNCGUARD_FLUSH_BATCH_OFF &&
	       st->sync_loop <= SYNCGUARD_SYNCLOOP_OFF &&
	       st->workers >= 1 && st->workers <= SYNCGUARD_WORKERS_MAX &&
	       st->engine <= SYNCGUARD_ENGINE_URING &&
	       st->ring_use <= SYNCGUARD_RING_ALL;
}

int syncguard_stats_load(const char *path, struct syncguard_stats *st)
{
	/* not blocking: a FIFO of that name would hang a plain open */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat sb;
	size_t n;
	FILE *f;

	memset(st, 0, sizeof(*st));
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || !(f = fdopen(fd, "r"))) {
		close(fd);
		return -EINVAL;
	}
	/* another version's file may be shorter: read what is there, then
	 * judge by its header (magic, version and pid never move) */
	n = fread(st, 1, sizeof(*st), f);
	fclose(f);
	if (n < 2 * sizeof(uint32_t) || st->magic != SYNCGUARD_STATS_MAGIC)
		return -EINVAL;
	if (st->version != SYNCGUARD_STATS_VERSION)
		return -ESTALE;
	if (n < sizeof(*st))
		return -EIO;
	return plausible(st) ? 0 : -EINVAL;
}

/* A trial's rate: "not yet" until that way was scored (words, where a
 * bare "-" would need explaining). */
static const char *rate(uint64_t r, char *buf, size_t len)
{
	if (!r)
		return "not yet";
	snprintf(buf, len, "%" PRIu64 "/s", r);
	return buf;
}

/* ", a trial epoch" while a trial runs the way that lost last time (it
 * tries each way every few epochs) */
static const char *trying(uint64_t way, const uint64_t r[2])
{
	return r[0] && r[1] && r[way & 1] < r[!(way & 1)] ?
	       ", a trial epoch" : "";
}

void syncguard_ways_writes(const struct syncguard_stats *st, char *buf,
			   size_t len)
{
	char a[32], b[32];
	static const char *const ways[] = {
		"page cache", "O_DIRECT where aligned",
		"page cache, RWF_DSYNC writes O_DIRECT",
	};
	const char *how = ways[st->direct_io < 3 ? st->direct_io : 1];
	int n;

	/* plp writes no RWF_DSYNC and waits for no group flush: write_sync
	 * has nothing to choose, and "now RWF_DSYNC" on a plp LUN with
	 * none would read as a contradiction */
	if (st->mode == SYNCGUARD_MODE_PLP) {
		snprintf(buf, len, "%s, no flushes (plp)", how);
		return;
	}
	n = snprintf(buf, len, "%s, write_sync %s", how,
		     syncguard_write_sync_name(
			     (enum syncguard_write_sync)st->write_sync));
	if (n < 0 || (size_t)n >= len ||
	    st->write_sync != SYNCGUARD_WRITE_SYNC_AUTO)
		return;
	snprintf(buf + n, len - (size_t)n,
		 " (now %s%s; last epochs: RWF_DSYNC %s, group %s)",
		 st->write_sync_way ? "group commit where writes overlap" :
		 "RWF_DSYNC", trying(st->write_sync_way, st->write_sync_rate),
		 rate(st->write_sync_rate[0], a, sizeof(a)),
		 rate(st->write_sync_rate[1], b, sizeof(b)));
}

void syncguard_ways_batching(const struct syncguard_stats *st, char *buf,
			     size_t len)
{
	char a[32], b[32];

	if (st->mode == SYNCGUARD_MODE_PLP) {	/* as syncguard_ways_writes */
		snprintf(buf, len, "none (plp sends no flush)");
		return;
	}
	if (st->flush_batch == SYNCGUARD_FLUSH_BATCH_OFF) {
		snprintf(buf, len, "off (bsopts flush_batch=off: every flush "
			 "at once)");
		return;
	}
	snprintf(buf, len, "%s%s (last epochs: at once %s, held %s)",
		 st->batch_way ? "holds back flushes that answer more than one "
		 "command" : "flushes at once",
		 trying(st->batch_way, st->batch_rate),
		 rate(st->batch_rate[0], a, sizeof(a)),
		 rate(st->batch_rate[1], b, sizeof(b)));
}

void syncguard_ways_engine(const struct syncguard_stats *st, char *buf,
			   size_t len)
{
	snprintf(buf, len, "%s (bsopts engine=%s), %" PRIu64 " worker threads",
		 syncguard_ring_use_name(st->ring_use, false),
		 syncguard_engine_name((enum syncguard_engine)st->engine),
		 st->workers);
}

void syncguard_ways_sync_loop(const struct syncguard_stats *st, char *buf,
			      size_t len)
{
	if (st->mode != SYNCGUARD_MODE_WRITE_BACK) {
		snprintf(buf, len, "none (%s: every write is durable)",
			 st->mode == SYNCGUARD_MODE_PLP ? "plp" :
			 "write-through");
		return;
	}
	if (st->write_sync == SYNCGUARD_WRITE_SYNC_GROUP) {
		snprintf(buf, len, "none (write_sync group keeps plain writes "
			 "cached)");
		return;
	}
	if (!st->wce) {
		snprintf(buf, len, "none (WCE=0: every write is durable)");
		return;
	}
	if (st->sync_loop == SYNCGUARD_SYNCLOOP_OFF) {
		snprintf(buf, len, "off (bsopts sync_loop=off: plain writes "
			 "stay cached)");
		return;
	}
	if (st->sync_loop_way == SYNCGUARD_SYNC_LOOP_STREAK) {
		snprintf(buf, len, "plain writes durable at once (one writer, "
			 "each write followed by a SYNCHRONIZE CACHE)");
		return;
	}
	snprintf(buf, len, "plain writes cached (no single writer's "
		 "WRITE+SYNCHRONIZE CACHE loop now)");
}

/*
 * The fields of syncguard-stat --json, in order, with their meaning: the
 * counters are printed from this table, in JSON and for Prometheus, and
 * the manual page (--man) documents every field from it, so none can
 * miss one.
 */
const struct syncguard_stats_field syncguard_stats_fields[] = {
	{ "target", SYNCGUARD_OWN_CODE, "the target's name (IQN)" },
	{ "lun", SYNCGUARD_OWN_CODE, "the LUN number" },
	{ "mode", SYNCGUARD_OWN_CODE, "write-through, write-back or plp (bsopts mode)" },
	{ "wce", offsetof(struct syncguard_stats, wce),
	  "the WCE the LUN reports now: 1 while a switch to 0 still flushes" },
	{ "tgtd_pid", SYNCGUARD_OWN_CODE, "the tgtd that owns the LUN" },
	{ "tgtd_alive", SYNCGUARD_OWN_CODE, "false for a tgtd that has exited "
	  "(the text output says (gone))" },
	{ "reads", offsetof(struct syncguard_stats, reads),
	  "READ commands" },
	{ "writes", offsetof(struct syncguard_stats, writes),
	  "writes without FUA (durable or not, as the mode and WCE make "
	  "them)" },
	{ "fua_writes", offsetof(struct syncguard_stats, fua_writes),
	  "writes with FUA, WRITE AND VERIFY, and COMPARE AND WRITE with "
	  "FUA=1" },
	{ "sync_caches", offsetof(struct syncguard_stats, sync_caches),
	  "SYNCHRONIZE CACHE(10/16) commands" },
	{ "errors", offsetof(struct syncguard_stats, errors),
	  "commands answered with an error" },
	{ "device_flushes", offsetof(struct syncguard_stats, device_flushes),
	  "device cache flushes (fdatasync), including the one a LUN runs "
	  "as it opens" },
	{ "dsync_writes", offsetof(struct syncguard_stats, dsync_writes),
	  "RWF_DSYNC writes (each one a write and a flush of its own)" },
	{ "writeouts", offsetof(struct syncguard_stats, writeouts),
	  "plp's write-outs (sync_file_range) of page-cache writes" },
	{ "direct_writes", offsetof(struct syncguard_stats, direct_writes),
	  "O_DIRECT writes" },
	{ "flushes_coalesced",
	  offsetof(struct syncguard_stats, flushes_coalesced),
	  "durability waits answered by a flush another command started "
	  "(group commit)" },
	{ "flushes_elided", offsetof(struct syncguard_stats, flushes_elided),
	  "flushes asked for with nothing written since the last completed "
	  "one" },
	{ "flush_us_total", offsetof(struct syncguard_stats, flush_us_total),
	  "microseconds spent in device flushes" },
	{ "ring_ios", offsetof(struct syncguard_stats, ring_ios),
	  "reads and writes submitted through io_uring" },
	{ "ring_submits", offsetof(struct syncguard_stats, ring_submits),
	  "the io_uring_enter calls that carried them (fewer when "
	  "submissions were batched; the LUNs of a tgtd share one ring, "
	  "and an enter that carried several LUNs' counts in each)" },
	{ "ring_held_submits",
	  offsetof(struct syncguard_stats, ring_held_submits),
	  "of those, the ones whose reads and writes had waited for empty "
	  "passes of tgtd's loop (at queue depth 1, and at 2 once both "
	  "commands are in, they go at once)" },
	{ "workers", offsetof(struct syncguard_stats, workers),
	  "the LUN's worker threads (bsopts workers; a gauge)" },
	{ "engine", SYNCGUARD_OWN_CODE, "bsopts engine: auto, threads or uring" },
	{ "ring", SYNCGUARD_OWN_CODE, "what the LUN sends through the tgtd's "
	  "io_uring: all (reads, writes and flushes), flushes (reads and "
	  "writes on the worker threads) or none" },
	{ "write_sync", SYNCGUARD_OWN_CODE, "bsopts write_sync: auto, group or dsync" },
	{ "direct_io", SYNCGUARD_OWN_CODE, "true when every aligned write goes "
	  "O_DIRECT" },
	{ "dsync_direct_io", SYNCGUARD_OWN_CODE, "true when RWF_DSYNC writes at least "
	  "go O_DIRECT" },
	{ "write_sync_way", SYNCGUARD_OWN_CODE, "the way write_sync=auto's trial takes "
	  "now: dsync or group; null on plp or another write_sync" },
	{ "write_sync_rate", SYNCGUARD_OWN_CODE, "{dsync, group}: durable writes "
	  "answered per second by each way in its last epoch (0: none yet)" },
	{ "flush_batch", SYNCGUARD_OWN_CODE, "bsopts flush_batch: auto or off" },
	{ "batch_way", SYNCGUARD_OWN_CODE, "the flush batching trial's way: at_once or "
	  "hold; null on plp or with flush_batch=off" },
	{ "batch_rate", SYNCGUARD_OWN_CODE, "{at_once, hold}: commands answered per "
	  "second by each way's flushes in its last epoch" },
	{ "sync_loop", SYNCGUARD_OWN_CODE, "bsopts sync_loop: auto or off" },
	{ "sync_loop_way", SYNCGUARD_OWN_CODE, "write-back's WRITE+SYNCHRONIZE CACHE "
	  "loop: cached, or single_writer (plain writes durable at once); "
	  "null where it does not run (also with sync_loop=off)" },
	{ "sync_loop_rate", SYNCGUARD_OWN_CODE, "{cached, at_once}: always 0 (no "
	  "trial rates the loop; the field stays for the output's readers)" },
	{ "latched", SYNCGUARD_OWN_CODE, "null, or {errno, error, rechecked} for the "
	  "error the LUN has latched (rechecked: a soft latch, cleared once "
	  "the next durable command finds the device sound)" },
	{ "flush_latency_us", SYNCGUARD_OWN_CODE, "[[lower bound, count], ...]: device "
	  "flushes by latency, in buckets of [2^i, 2^(i+1)) microseconds" },
};

const size_t syncguard_stats_nfields =
	sizeof(syncguard_stats_fields) / sizeof(syncguard_stats_fields[0]);
