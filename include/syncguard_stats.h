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
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#define SYNCGUARD_STATS_MAGIC	0x53544753u	/* "SGTS" */
#define SYNCGUARD_STATS_VERSION	3	/* 2: how writes go, the trials;
					 * 3: pid_start */
#define SYNCGUARD_STATS_DIR	"/run/syncguard"
#define SYNCGUARD_FLUSH_BUCKETS	32	/* log2 microseconds */

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
	uint64_t writes;		/* writes that need no durability */
	uint64_t fua_writes;		/* writes that must be durable (FUA,
					 * WRITE AND VERIFY) */
	uint64_t sync_caches;		/* SYNCHRONIZE CACHE(10/16) */
	uint64_t errors;		/* commands answered with an error */
	/* what they cost */
	uint64_t device_flushes;	/* fdatasync calls: device cache flushes */
	uint64_t dsync_writes;		/* RWF_DSYNC writes (a flush each) */
	uint64_t writeouts;		/* sync_file_range writeouts (plp) */
	uint64_t direct_writes;		/* O_DIRECT writes (bsopts direct) */
	uint64_t flushes_coalesced;	/* durability waits answered by a flush
					 * another command started */
	uint64_t flushes_elided;	/* SYNCHRONIZE CACHE with nothing dirty
					 * since the last completed flush */
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
};

/* /proc/@pid/stat's start time (clock ticks after boot), 0 when it
 * cannot be read; *@zombie set for a zombie (state "Z") */
static inline uint64_t syncguard_proc_start(uint32_t pid, bool *zombie)
{
	char path[64], stat[1024], *p;
	unsigned long long start = 0;
	FILE *f;

	*zombie = false;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	/* after the last ')' (the command name may hold anything): state,
	 * then fields 4..21, then the start time */
	if (fgets(stat, sizeof(stat), f) && (p = strrchr(stat, ')')) &&
	    p[1] == ' ') {
		*zombie = p[2] == 'Z';
		if (sscanf(p + 2, "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
			   "%*s %*s %*s %*s %*s %*s %*s %*s %llu", &start) != 1)
			start = 0;
	}
	fclose(f);
	return start;
}

/* Is the process that published a counters file (its pid and pid_start
 * fields; @start 0 when the file does not say) alive?  EPERM: alive,
 * only not ours to signal (a reader that is not root).  A zombie
 * (killed, not yet reaped) is not, though kill() still finds it; nor is
 * a process that has the pid but started at another time (the pid was
 * reused after tgtd died). */
static inline bool syncguard_stats_owner_alive(uint32_t pid, uint64_t start)
{
	bool zombie;
	uint64_t now;

	if (kill((pid_t)pid, 0) != 0 && errno != EPERM)
		return false;
	now = syncguard_proc_start(pid, &zombie);
	return !zombie && !(start && now && now != start);
}

#endif
