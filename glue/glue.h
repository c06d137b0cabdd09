/*
 * The glue's view of a LUN: what bs_syncguard.c (the backing-store
 * hooks) and the files of glue/ share.  Everything that includes this
 * is compiled against tgt's internal headers, which carry no version;
 * the tgt-independent core is core/core.h.
 *
 * Layers, each using only those after it: bs_syncguard.c; cmdtable.c;
 * admin.c; wce.c, synccache.c, vpd.c; uring.c, watch.c; zvolwatch.c,
 * answer.c, workers.c.
 * (tests/deps.sh checks it.)
 */
#ifndef SYNCGUARD_GLUE_H
#define SYNCGUARD_GLUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "list.h"
#include "util.h"
#include "tgtd.h"
#include "scsi.h"
#include "spc.h"
#include "target.h"

#include "core.h"

#include <liburing.h>

typedef int (*syncguard_op_fn)(int host_no, struct scsi_cmd *cmd);

/* the Caching mode page (SBC-3 6.4.5) */
#define CACHING_PAGE		0x08
#define CACHING_PAGE_LEN	18	/* bytes after the page header */
#define WCE_BIT			0x04	/* byte 2 of the page: mode_data[0] */

#define SYNCGUARD_MAX_DEFERRED 16	/* nexuses remembered per LUN */

struct uring_op;
struct syncguard_bs;

/* What a completion of the shared ring is for: user_data points to one
 * (first in every struct uring_op, and the LUN's flush and batch tags). */
enum syncguard_ring_kind { SYNCGUARD_RING_IO, SYNCGUARD_RING_FLUSH,
			   SYNCGUARD_RING_BATCH };
struct syncguard_ring_tag {
	enum syncguard_ring_kind kind;
	struct syncguard_bs *bs;
};

/* A LUN's part of the io_uring engine (glue/uring.c); event thread
 * only.  The ring itself, and its submission batching, are shared by
 * every LUN of the tgtd (one io_uring_enter carries several LUNs'
 * writes); the group flush is the LUN's own. */
struct syncguard_uring {
	bool on;		/* plain reads and writes go through the ring */
	bool async;		/* no RWF_NOWAIT: reads and writes go
				 * straight to io-wq (glue/uring.c) */
	bool flush_on;		/* one of the shared ring's users:
				 * SYNCHRONIZE CACHE waits on its flush */
	struct syncguard_bs *next;	/* the ring's next user */
	unsigned int inflight;		/* commands in the engine */
	unsigned int held;		/* of the ring's held I/O, this LUN's */
	struct syncguard_bs *held_next;	/* the next LUN with I/O held */
	/* group commit: one device flush at a time */
	int flush_fd;
	bool flushing;
	struct uring_op *current;	/* answered by the running flush */
	struct uring_op *pending;	/* wait for the next one */
	uint64_t flush_covers, flush_start_us;
	bool batching;			/* a batch timer runs (next_flush) */
	struct __kernel_timespec batch_ts;
	struct syncguard_ring_tag flush_tag, batch_tag;
};

/* The LUN's worker threads (glue/workers.c). */
struct syncguard_workers {
	bool inited, watched, stop;	/* stop: under lock */
	pthread_mutex_t lock;		/* pending, stop */
	pthread_cond_t cond;
	struct list_head pending;	/* commands to run, by bs_list */
	pthread_mutex_t done_lock;	/* done */
	struct list_head done;		/* run, to be answered */
	int efd;			/* done went non-empty */
	void (*fn)(struct scsi_cmd *cmd);
	pthread_t *threads;
	unsigned int n;			/* started */
};

/* Per-LUN private data, placed after tgt's struct scsi_lu. */
struct syncguard_bs {
	struct syncguard_opts opts;
	struct syncguard_lun lun;
	bool open;
	uint64_t size_shown;		/* the capacity initiators were last
					 * told of, bytes (announce_capacity) */
	/* the command table (glue/cmdtable.c): tgt's entries, and what
	 * each opcode runs here (tgt's entry or syncguard's own) */
	syncguard_op_fn tgt_ops[NR_SCSI_OPCODES];
	syncguard_op_fn run[NR_SCSI_OPCODES];
	tgtadm_err (*tgt_lu_config)(struct scsi_lu *lu, char *params);
	/* the IMMED=1 flusher thread, and the deferred errors (SPC-4
	 * 4.5.5) a failed background flush leaves for the I_T nexuses
	 * whose SYNCHRONIZE CACHE it answered early; all under immed_lock */
	pthread_t immed_thread;
	pthread_mutex_t immed_lock;
	pthread_cond_t immed_cond;
	bool immed_pending, immed_stop, immed_running;
	uint64_t immed_itn[SYNCGUARD_MAX_DEFERRED];	/* waiting on the flush */
	unsigned int n_immed_itn;
	uint64_t deferred_itn[SYNCGUARD_MAX_DEFERRED];	/* owed an error */
	int deferred_err[SYNCGUARD_MAX_DEFERRED];
	unsigned int n_deferred;
	int any_deferred;		/* n_deferred, read without the lock */
	/* switches to WCE=0 whose flush still runs on a thread of its own
	 * (tgtadm's, the one at open: glue/wce.c); under wce_lock, and close
	 * waits for them on wce_cond */
	pthread_mutex_t wce_lock;
	pthread_cond_t wce_cond;
	unsigned int wce_switches;
	bool opening;			/* the switch to WCE=0 at open runs */
	struct syncguard_uring uring;
	struct syncguard_workers workers;
	struct syncguard_bs *next_watched;	/* the mount watch's list */
	struct syncguard_zvol *zvol;		/* the zvol watch's (NULL: none) */
	uint64_t lun_nr;			/* for its log line */
	/* failed commands' log lines (syncguard_answer), atomics, per
	 * class (0: the LUN failed, 1: ILLEGAL REQUEST, the initiator's
	 * mistake): the current window, lines in it, lines dropped since
	 * the last */
	uint64_t log_window[2];
	uint32_t log_lines[2];
	uint64_t log_dropped[2];
};

static inline struct syncguard_bs *SYNCGUARD_BS(struct scsi_lu *lu)
{
	return (struct syncguard_bs *)((char *)lu + sizeof(*lu));
}

/* ---- glue/cmdtable.c ---- */

/* Install syncguard's command table in @lu's copy of tgt's template;
 * sets the Caching page's WCE and changeable mask for the mode. */
void syncguard_cmdtable_install(struct scsi_lu *lu);

/* ---- glue/admin.c ---- */

/* tgtadm --op update --mode logicalunit: tgt's lu_config, wrapped. */
tgtadm_err syncguard_lu_config(struct scsi_lu *lu, char *params);

/* ---- glue/wce.c: the Caching page and WCE ---- */

/* MODE SENSE(6/10) and MODE SELECT(6/10) of the LUN's table (SPC-4
 * 6.11-6.14, SBC-3 6.4.5): tgt's handler's status. */
int syncguard_mode_sense(int host_no, struct scsi_cmd *cmd);
int syncguard_mode_select(int host_no, struct scsi_cmd *cmd);

/* In a worker: the flush of MODE SELECT switching WCE 1 -> 0 (SBC-3
 * 6.4.5).  Sets @cmd's status: GOOD, or CHECK CONDITION with the
 * flush's errno through the sense table (WCE then stays 1). */
void syncguard_wce_off_request(struct scsi_cmd *cmd);

/*
 * Give a LUN that opens its WCE (syncguard_policy_open_flushes): write-back
 * 1; write-through and plp 0 once a flush has made durable what the LUN
 * found, so they open at 1 and switch to 0 in the background, as
 * tgtadm's switch does (off tgtd's event thread); this waits for that
 * switch up to 1 s, so that on a device that flushes at once the LUN
 * shows 0 from the start.  A failed flush leaves WCE at 1 and latches.
 */
void syncguard_wce_open(struct scsi_lu *lu);

/* Before the backing file closes, once the ring is done: wait for the
 * flush of any switch to WCE=0 still running on a thread of its own (it
 * uses the LUN).  Blocks tgtd's event thread that long. */
void syncguard_wce_wait_switches(struct scsi_lu *lu);

/* A WCE change by tgtadm to @wce: 0 or -errno (-EPERM: the mode keeps
 * WCE=0); a switch to 0 goes on in the background. */
int syncguard_wce_admin_set(struct scsi_lu *lu, int wce);

/* After a tgtadm update: a unit attention, MODE PARAMETERS CHANGED, to
 * every I_T nexus if the WCE shown changed from @shown (@was: the WCE
 * asked for before; @set: the WCE the update set, or -1). */
void syncguard_wce_announce(struct scsi_lu *lu, int shown, bool was, int set);

/* May initiators and tgtadm change this LUN's WCE (its mode, allow_wce)? */
bool syncguard_wce_changeable(const struct syncguard_bs *bs);

/* tgt's Caching page of @lu (NULL if none), its WCE bit (-1: no page),
 * setting it, and its changeable mask for the mode. */
struct mode_pg *syncguard_caching_page(struct scsi_lu *lu);
int syncguard_page_wce(struct scsi_lu *lu);
void syncguard_page_set_wce(struct scsi_lu *lu, bool wce);
void syncguard_page_set_mask(struct scsi_lu *lu);

/* A copy of the Caching page, to undo a refused tgtadm update. */
struct syncguard_page_copy {
	bool valid;
	uint8_t data[CACHING_PAGE_LEN];
};
void syncguard_page_save(struct scsi_lu *lu, struct syncguard_page_copy *c);
void syncguard_page_restore(struct scsi_lu *lu,
			    const struct syncguard_page_copy *c);

/* ---- glue/synccache.c: SYNCHRONIZE CACHE ---- */

/* SYNCHRONIZE CACHE(10/16) of the LUN's table (SBC-3 5.22, 5.23): its
 * paths are listed above it. */
int syncguard_sync_cache(int host_no, struct scsi_cmd *cmd);

/* The deferred error owed to I_T nexus @itn (SPC-4 4.5.5), removed from
 * the table; 0 if none. */
int syncguard_take_deferred(struct syncguard_bs *bs, uint64_t itn);

/* Before the backing file closes: finish any IMMED=1 flush. */
void syncguard_synccache_close(struct scsi_lu *lu);

/* ---- glue/vpd.c ---- */

/* Once the backing file is open: VPD pages (Extended INQUIRY Data,
 * Block Limits granularity) and the thin provisioning check (refused for
 * plp on a regular file: cleared and logged).  0 or -errno. */
int syncguard_vpd_open(struct scsi_lu *lu);

/* VERIFY(10/12/16) of the LUN's table: the range and BYTCHK checks
 * SBC-3 5.33 asks before tgt's handler. */
int syncguard_verify(int host_no, struct scsi_cmd *cmd);

/* Block Limits (0xB0, SBC-3 6.5.3) corrected for the LUN (granularity,
 * unmap counts), after tgt (re)wrote it. */
void syncguard_block_limits(struct scsi_lu *lu);

/* Thin provisioning as tgt's attribute now says it, refused (cleared,
 * logged, VPD pages rewritten) for plp on a regular file or a loop
 * device: 0 or -EPERM. */
int syncguard_check_thin(struct scsi_lu *lu);

/* ---- glue/uring.c: the io_uring engine ---- */

/* open: attach @lu to the tgtd's ring (the first LUN starts it); 0 or
 * -errno (only with bsopts engine=uring; with engine=auto a missing
 * io_uring just leaves the engine off).  close: finish what @lu still
 * has on the ring, detach (the last LUN stops it).  submit: tgt's
 * bs_cmd_submit hook, 0 always.  sync_cache: false when the engine
 * cannot take the command. */
int syncguard_uring_open(struct scsi_lu *lu);
void syncguard_uring_close(struct scsi_lu *lu);
int bs_syncguard_cmd_submit(struct scsi_cmd *cmd);
bool syncguard_uring_sync_cache(struct scsi_cmd *cmd);

/* From tgtd's event thread, before it switches @lu to WCE=0 itself
 * (tgtadm): finish and answer every command of @lu on the ring (other
 * LUNs' answers wait for the event loop), since
 * syncguard_lun_set_wce waits for its cached writes, and for worker
 * writes that may wait for its O_DIRECT ones (core/mix.c), and only
 * this thread reaps them. */
void syncguard_uring_quiesce(struct scsi_lu *lu);

/* ---- glue/watch.c: the mount watch, tgtd's event thread only ---- */

/* syncguard_watch_open: start watching /proc/self/mountinfo unless it
 * is watched already; call it before a LUN's own check of the table.
 * 0, or -errno (logged; the next LUN's open tries again, and a LUN that
 * needs the watch is refused meanwhile).  syncguard_watch_add/remove: a
 * LUN (@lun_nr for the log) whose ground is to be checked on every
 * change and every 2 s; one that lost its flushes latches EIO.
 * syncguard_watch_close_unused: stop watching if no LUN is left. */
int syncguard_watch_open(void);
void syncguard_watch_close_unused(void);
void syncguard_watch_add(struct syncguard_bs *bs, uint64_t lun_nr);
void syncguard_watch_remove(struct syncguard_bs *bs);

/* syncguard_watch_recheck: check every watched LUN now (the zvol
 * watch's @changed). */
void syncguard_watch_recheck(void);

/* ---- glue/zvolwatch.c: the ZFS datasets under a LUN ---- */

/* syncguard_zvol_watch_add: read the sync property of @bs's datasets
 * (bs->lun.zfs, set at open; none: nothing to do) every 2 s on a thread
 * of the zvol watch's own, which runs @changed on tgtd's event thread
 * when one changes.  0, or -errno (no thread, eventfd or memory: the LUN
 * is not to be exported).  syncguard_zvol_watch_remove: stop (the LUN
 * closes); event thread only.  syncguard_zvol_lost: has one of them been
 * set to a sync property @bs's mode refuses (syncguard_policy_zvol)?
 * true with why in @why (@len bytes). */
int syncguard_zvol_watch_add(struct syncguard_bs *bs, void (*changed)(void));
void syncguard_zvol_watch_remove(struct syncguard_bs *bs);
bool syncguard_zvol_lost(struct syncguard_bs *bs, char *why, size_t len);

/* ---- glue/answer.c ---- */

/* Set @cmd's status from @res through the one sense table (core/sense.c):
 * on a failure, sense data (with INFORMATION when res->info_valid), the
 * Data-In residual after res->in_done bytes, and one log line naming the
 * opcode and res->err. */
void syncguard_answer(struct scsi_cmd *cmd, const struct syncguard_result *res);

/* CHECK CONDITION (or BUSY) for @r through the one sense table, logged
 * as every failed command is; returns the SAM status. */
int syncguard_fail(struct scsi_cmd *cmd, enum syncguard_reason r);

/* Run @fn(@arg) on a detached thread: 0, or pthread_create's error
 * number (the final flush, the switches to WCE=0). */
int syncguard_start_detached(void *(*fn)(void *), void *arg);

/* ---- glue/workers.c ---- */

/* Start @n (1..256) threads that run @fn on each command queued to @w
 * (tgtd's event thread answers them after); 0, or -errno with none left
 * running: -EAGAIN, a thread could not start (tgtd's task limit);
 * -EMFILE and the like, no eventfd; -ENOMEM; -EIO, tgt's epoll refused
 * the eventfd. Event thread. */
int syncguard_workers_start(struct syncguard_workers *w, unsigned int n,
			    void (*fn)(struct scsi_cmd *cmd));

/* Queue @cmd for its LUN's workers and mark it asynchronous; returns 0
 * (bs_cmd_submit's convention). Event thread. */
int syncguard_workers_submit(struct scsi_cmd *cmd);

/* Stop and join @w's threads; call only with no command of the LUN in
 * flight (tgt deletes a LUN only then: its active_cmd is 0), as one
 * run and not yet answered would be dropped. A @w never started is left
 * alone. Event thread. */
void syncguard_workers_stop(struct syncguard_workers *w);

#endif
