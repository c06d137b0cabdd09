/*
 * How a syncguard LUN runs, as text, from its counters file
 * (include/syncguard_stats.h, version 2): shared by syncguard-stat and
 * iscsi-syncbench so both say it the same way.
 */
#ifndef SYNCGUARD_STATS_WAYS_H
#define SYNCGUARD_STATS_WAYS_H

#include <stddef.h>

#include "syncguard_stats.h"

/* Where writes go and which way write_sync runs now, into @buf (@len
 * bytes, NUL-terminated, no newline): "O_DIRECT where aligned,
 * write_sync auto (now RWF_DSYNC; last epochs: RWF_DSYNC 5400/s, group
 * 2900/s)".  Rates are commands answered per second in each way's last
 * measured epoch, "-" before it has one. */
void syncguard_ways_writes(const struct syncguard_stats *st, char *buf,
			   size_t len);

/* Flush batching's way now and its last rates, the same way: "flushes
 * at once (last epochs: at once 17130/s, held 16753/s)". */
void syncguard_ways_batching(const struct syncguard_stats *st, char *buf,
			     size_t len);

#endif
