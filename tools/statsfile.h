/*
 * A syncguard LUN's counters file (include/syncguard_stats.h) for the
 * tools that read it, syncguard-stat and iscsi-syncbench: loading it,
 * and how the LUN runs as text, so both read and say it the same way.
 */
#ifndef SYNCGUARD_STATSFILE_H
#define SYNCGUARD_STATSFILE_H

#include <stddef.h>

#include "syncguard_stats.h"

/* Read the counters file @path into @st (zeroed first).  0; -ENOENT
 * when it cannot be opened; -EINVAL when it is no counters file (not a
 * regular file, no counters header, or fields set at open out of
 * range); -ESTALE when a module
 * of another version wrote it (st->version and st->pid say which);
 * -EIO when it is shorter than this version's file. */
int syncguard_stats_load(const char *path, struct syncguard_stats *st);

/* Where writes go and which way write_sync runs now, into @buf (@len
 * bytes, NUL-terminated, no newline): "O_DIRECT where aligned,
 * write_sync auto (now RWF_DSYNC; last epochs: RWF_DSYNC 5400/s, group
 * 2900/s)".  Rates are commands answered per second in each way's last
 * measured epoch, "not yet" before it has one. */
void syncguard_ways_writes(const struct syncguard_stats *st, char *buf,
			   size_t len);

/* Flush batching's way now and its last rates, the same way: "flushes
 * at once (last epochs: at once 17130/s, held 16753/s)". */
void syncguard_ways_batching(const struct syncguard_stats *st, char *buf,
			     size_t len);

/* Write-back's WRITE+SYNCHRONIZE CACHE loop with several commands in
 * flight, the same way, rated in bytes written per second (shown in
 * MB/s): "plain writes durable at once (last epochs, written: cached
 * 39.5 MB/s, at once 50.8 MB/s)"; "-" (a plain write load), a single
 * writer's streak, or why it does not apply. */
void syncguard_ways_sync_loop(const struct syncguard_stats *st, char *buf,
			      size_t len);
/* How the LUN runs its commands, into @buf (@len bytes):
 * "io_uring (bsopts engine=auto), 32 worker threads". */
void syncguard_ways_engine(const struct syncguard_stats *st, char *buf,
			   size_t len);

/* A field of syncguard-stat's output: its JSON name, where its counter
 * is (the offset of a uint64_t in struct syncguard_stats, or
 * SYNCGUARD_OWN_CODE for a value some code of its own prints), and what
 * it means */
#define SYNCGUARD_OWN_CODE ((size_t)-1)
struct syncguard_stats_field {
	const char *name;
	size_t off;
	const char *meaning;
};
extern const struct syncguard_stats_field syncguard_stats_fields[];
extern const size_t syncguard_stats_nfields;

#endif
