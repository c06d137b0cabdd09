/*
 * Per-LUN counters, shared with tools while tgtd runs.
 *
 * bs_syncguard keeps each LUN's counters in a small file it maps shared:
 * /run/syncguard/<target name>/lun<N>.stats.  Readers (tools/syncguard-stat,
 * iscsi-syncbench) map or read the same file.  Every counter is a 64-bit
 * field updated atomically, so a reader sees each one whole (they are not
 * a consistent snapshot of each other); the 32-bit fields are set once,
 * when the LUN opens.
 */
#ifndef SYNCGUARD_STATS_H
#define SYNCGUARD_STATS_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#define SYNCGUARD_STATS_MAGIC	0x53544753u	/* "SGTS" */
#define SYNCGUARD_STATS_VERSION	10	/* 2: how writes go, the trials;
					 * 3: pid_start; 4: wce;
					 * 5: ring_ios, ring_submits;
					 * 6: latched, latched_soft;
					 * 7: sync_loop_way, _rate;
					 * 8: workers, flush_batch,
					 * sync_loop; 9: engine,
					 * ring_use; 10: ring_held_submits */
#define SYNCGUARD_STATS_DIR	"/run/syncguard"
#define SYNCGUARD_FLUSH_BUCKETS	32	/* log2 microseconds */
#define SYNCGUARD_SYNC_LOOP_STREAK 2	/* sync_loop_way: a single writer */

/* magic, version and pid are where they are in every version of the
 * file; pid_start too from version 3 on. */
struct syncguard_stats {
	uint32_t magic, version;
	uint32_t pid;			/* tgtd's */
	uint32_t mode;			/* enum syncguard_mode */
	uint64_t pid_start;		/* tgtd's start time, clock ticks after
					 * boot (/proc/PID/stat field 22): a
					 * pid reused by another process after
					 * tgtd died does not own the file;
					 * 0 unknown */
	/* commands */
	uint64_t reads;
	uint64_t writes;		/* writes without FUA (durable or not,
					 * as the mode and WCE make them) */
	uint64_t fua_writes;		/* writes with FUA, and WRITE AND
					 * VERIFY */
	uint64_t sync_caches;		/* SYNCHRONIZE CACHE(10/16) */
	uint64_t errors;		/* commands answered with an error */
	/* what they cost */
	uint64_t device_flushes;	/* fdatasync calls: device cache flushes */
	uint64_t dsync_writes;		/* RWF_DSYNC writes (a flush each) */
	uint64_t writeouts;		/* sync_file_range writeouts (plp) */
	uint64_t direct_writes;		/* O_DIRECT writes (bsopts direct) */
	uint64_t flushes_coalesced;	/* durability waits answered by a flush
					 * another command started */
	uint64_t flushes_elided;	/* flushes asked for (SYNCHRONIZE
					 * CACHE, FUA reads, WCE switches,
					 * close) with nothing dirty since the
					 * last completed flush */
	/* device flush latency: bucket i counts flushes of [2^i, 2^(i+1)) us */
	uint64_t flush_us[SYNCGUARD_FLUSH_BUCKETS];
	uint64_t flush_us_total;
	/* how writes go (set at open): bsopts write_sync (enum
	 * syncguard_write_sync), and which aligned writes are O_DIRECT:
	 * 0 none, 1 all, 2 RWF_DSYNC ones (write-back, direct=auto) */
	uint32_t write_sync;
	uint32_t direct_io;
	/* the running trials (core/flush.c), as of their last scored epoch:
	 * the way they run now (0 or 1) and each way's last rate, commands
	 * answered per second (0: not scored yet).  write_sync=auto: way 0
	 * RWF_DSYNC, way 1 group commit, rated in durable writes answered;
	 * flush batching: way 0 flush at once, way 1 hold the flush back,
	 * rated in commands its flushes answered. */
	uint64_t write_sync_way;
	uint64_t write_sync_rate[2];
	uint64_t batch_way;
	uint64_t batch_rate[2];
	/* the WCE the LUN reports now (SBC-3 Caching mode page): 1 while a
	 * switch to 0 still flushes what was cached */
	uint64_t wce;
	/* io_uring submission batching (glue/uring.c): reads and
	 * writes submitted through the ring, and the io_uring_enter calls
	 * that carried them (equal when none was held back; the ring is
	 * the tgtd's, and an enter that carried several LUNs' I/O counts
	 * in each of them) */
	uint64_t ring_ios;
	uint64_t ring_submits;
	/* the errno the LUN has latched (core/lun.c, syncguard_latch), 0
	 * none: every command that promises durability fails with it.
	 * latched_soft 1: a write's ENOSPC or EDQUOT, rechecked at the next
	 * such command (the latch then clears unless the device reports a
	 * lost write); 0: until the LUN is re-created */
	uint64_t latched;
	uint64_t latched_soft;
	/* write-back's WRITE+SYNCHRONIZE CACHE loop (core/writesync.c):
	 * way 0 leaves plain writes cached for the SYNCHRONIZE CACHE's
	 * group flush; way 2 (SYNCGUARD_SYNC_LOOP_STREAK): durable at once
	 * (RWF_DSYNC), a single writer's streak.  Way 1 and the two rates
	 * are never set (no trial rates the loop); they keep the file's
	 * layout, which the tools share */
	uint64_t sync_loop_way;
	uint64_t sync_loop_rate[2];
	/* set once, as the LUN opens: its worker threads (bsopts workers,
	 * glue/workers.c), and bsopts flush_batch and sync_loop (enum
	 * syncguard_flush_batch, enum syncguard_sync_loop: 0 auto, 1 off) */
	uint64_t workers;
	uint32_t flush_batch;
	uint32_t sync_loop;
	/* set once, as the LUN opens: bsopts engine (enum
	 * syncguard_engine), and what the LUN sends through the tgtd's
	 * io_uring (SYNCGUARD_RING_*) */
	uint32_t engine;
	uint32_t ring_use;
	/* of ring_submits, those whose reads and writes had waited for
	 * empty passes of tgtd's loop or their longest wait (submission
	 * batching); not those that went at once (a full batch, QD 1 and
	 * 2) or with a flush */
	uint64_t ring_held_submits;
};

#define SYNCGUARD_RING_NONE	0u	/* nothing: the worker threads */
#define SYNCGUARD_RING_FLUSHES	1u	/* its flushes; reads and writes on
					 * the worker threads */
#define SYNCGUARD_RING_ALL	2u	/* reads, writes and flushes */

/* How a LUN with ring_use @use runs its commands: with @word false as
 * tgtd.log's line and syncguard-stat's text say it ("io_uring",
 * "threads, flushes through io_uring", "threads"), else as a word for
 * JSON and Prometheus ("all", "flushes", "none"). */
static inline const char *syncguard_ring_use_name(uint32_t use, bool word)
{
	static const char *const names[][2] = {
		[SYNCGUARD_RING_NONE] = { "threads", "none" },
		[SYNCGUARD_RING_FLUSHES] = { "threads, flushes through io_uring",
					     "flushes" },
		[SYNCGUARD_RING_ALL] = { "io_uring", "all" },
	};

	return names[use <= SYNCGUARD_RING_ALL ? use : SYNCGUARD_RING_NONE][word];
}

/* The owner's start time of a file whose first @bytes were read into
 * @st: pid_start where the file has it (version 3 on, and not cut
 * short before it), else 0 (unknown). */
static inline uint64_t
syncguard_stats_pid_start(const struct syncguard_stats *st, size_t bytes)
{
	return st->version >= 3 && bytes >= offsetof(struct syncguard_stats,
						      pid_start) +
					    sizeof(st->pid_start) ?
	       st->pid_start : 0;
}

#define SYNCGUARD_PID_MAX	4194304	/* Linux's PID_MAX_LIMIT */

/* What /proc/@pid/stat says of a process. */
struct syncguard_proc {
	uint64_t start;			/* clock ticks after boot */
	bool zombie;			/* state "Z": exited, not reaped */
	char comm[32];			/* its command name */
};

/* Read /proc/@pid/stat into @p; 0, or -ENOENT when it cannot be read. */
static inline int syncguard_proc_read(uint32_t pid, struct syncguard_proc *p)
{
	char path[64], stat[1024], *open, *close;
	unsigned long long start;
	int ret = -ENOENT;
	size_t n;
	FILE *f;

	memset(p, 0, sizeof(*p));
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	if (!(f = fopen(path, "re")))
		return -ENOENT;
	/* "PID (COMM) STATE f4 .. f21 START": COMM may hold anything, a
	 * newline too (so the whole file, not a line), and it ends at the
	 * last ')' */
	n = fread(stat, 1, sizeof(stat) - 1, f);
	stat[n] = '\0';
	if ((open = strchr(stat, '(')) &&
	    (close = strrchr(stat, ')')) && close > open && close[1] == ' ' &&
	    sscanf(close + 2, "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
		   "%*s %*s %*s %*s %*s %*s %*s %*s %llu", &start) == 1) {
		p->start = start;
		p->zombie = close[2] == 'Z';
		snprintf(p->comm, sizeof(p->comm), "%.*s",
			 (int)(close - open - 1), open + 1);
		ret = 0;
	}
	fclose(f);
	return ret;
}

/* Is the process that published a counters file (its pid and pid_start
 * fields; @start 0 when the file does not say: version 2, or cut short)
 * alive?  Not when @pid is no pid (0, or above Linux's limit: kill(-1)
 * would find every process), nor a zombie (killed, not yet reaped,
 * though kill() still finds it), nor a process that has the pid but
 * started at another time (the pid was reused after tgtd died); where
 * the file does not say when its tgtd started, only a process named
 * tgtd.  EPERM from kill(): alive, only not ours to signal (a reader
 * that is not root).  Where /proc cannot be read, kill() decides. */
static inline bool syncguard_stats_owner_alive(uint32_t pid, uint64_t start)
{
	struct syncguard_proc p;

	if (!pid || pid > SYNCGUARD_PID_MAX ||
	    (kill((pid_t)pid, 0) != 0 && errno != EPERM))
		return false;
	if (syncguard_proc_read(pid, &p))
		return true;
	if (p.zombie)
		return false;
	return start ? p.start == start : !strcmp(p.comm, "tgtd");
}

#endif
