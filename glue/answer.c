/*
 * Answers: a result becomes tgt's status and sense data through the one
 * table (core/sense.c), and a failed command's log line, limited per LUN;
 * and the detached threads the glue starts.
 *
 * Layer: the glue's leaf: every other glue file may use it.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "glue.h"
#include "internal.h"

/* A failed command's log line is written at most LOG_BURST times per
 * LUN in a LOG_WINDOW_S-second window: a LUN with a latched error fails
 * every command that promises durability, and a 1 s run of FUA writes
 * would write 9,515 lines to tgtd.log (the journal, for a system tgtd:
 * test_faults_error_lines_limited).  Commands the initiator got wrong
 * (ILLEGAL REQUEST) count in a window of their own, so that a burst of
 * them cannot silence the line of a failed flush.  The counters
 * (syncguard-stat) count every error.
 * Returns whether this one may be logged, and in *dropped how many of
 * its class were not since the last that was.  Races between threads
 * only make the counts approximate. */
#define LOG_BURST	10
#define LOG_WINDOW_S	10
static bool log_allowed(struct syncguard_bs *bs, int cls, uint64_t *dropped)
{
	struct timespec ts;
	uint64_t now, w;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec / LOG_WINDOW_S;
	w = __atomic_load_n(&bs->log_window[cls], __ATOMIC_RELAXED);
	if (w != now && __atomic_compare_exchange_n(&bs->log_window[cls], &w,
			now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		__atomic_store_n(&bs->log_lines[cls], 0, __ATOMIC_RELAXED);
	if (__atomic_fetch_add(&bs->log_lines[cls], 1, __ATOMIC_RELAXED) >=
	    LOG_BURST) {
		__atomic_fetch_add(&bs->log_dropped[cls], 1, __ATOMIC_RELAXED);
		return false;
	}
	*dropped = __atomic_exchange_n(&bs->log_dropped[cls], 0,
				       __ATOMIC_RELAXED);
	return true;
}

void syncguard_answer(struct scsi_cmd *cmd, const struct syncguard_result *res)
{
	struct syncguard_sense s = syncguard_sense_of(res->reason);
	int cls = s.key == ILLEGAL_REQUEST;
	uint64_t dropped;
	char what[24];

	scsi_set_result(cmd, s.status);
	if (res->reason == SYNCGUARD_OK)
		return;
	if (s.status == SAM_STAT_CHECK_CONDITION) {	/* BUSY has none */
		if (res->info_valid)
			sense_data_build_with_info(cmd, s.key, s.asc, res->info);
		else
			sense_data_build(cmd, s.key, s.asc);
		if (res->deferred)	/* current 70h/72h -> deferred 71h/73h */
			cmd->sense_buffer[0] |= 0x01;
	}
	if (scsi_get_in_length(cmd))
		scsi_set_in_resid_by_actual(cmd, res->in_done);
	if (!log_allowed(SYNCGUARD_BS(cmd->dev), cls, &dropped))
		return;
	if (dropped)
		eprintf("syncguard: lun %" PRIu64 ": %" PRIu64 " more failed "
			"commands%s were not logged (at most %d lines per %d s; "
			"syncguard-stat counts them all)\n", cmd->dev->lun,
			dropped, cls ? " (ILLEGAL REQUEST)" : "", LOG_BURST,
			LOG_WINDOW_S);
	if (s.status == SAM_STAT_CHECK_CONDITION)
		snprintf(what, sizeof(what), "sense %x/%04x", s.key, s.asc);
	else
		snprintf(what, sizeof(what), "status 0x%02x", s.status);
	eprintf("syncguard: lun %" PRIu64 ": opcode 0x%02x: %s%s%s\n",
		cmd->dev->lun, cmd->scb[0], what, res->err ? ": " : "",
		res->err ? syncguard_strerror(res->err) : "");
}

int syncguard_start_detached(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	int ret;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return ret;
}

/* CHECK CONDITION for @r through the one sense table, logged as every
 * failed command is (syncguard_answer; else a latched LUN's SYNCHRONIZE
 * CACHE, answered here, would leave no line after its first:
 * test_faults_error_lines_limited). */
int syncguard_fail(struct scsi_cmd *cmd, enum syncguard_reason r)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	struct syncguard_result res = { .reason = r };
	const struct syncguard_sense sense = syncguard_sense_of(r);

	/* a medium error answered here is the latch's: say its errno */
	if (bs->open && sense.key == MEDIUM_ERROR)
		res.err = syncguard_lun_latched(&bs->lun);
	syncguard_answer(cmd, &res);
	return sense.status;
}
