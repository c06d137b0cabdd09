/*
 * bs_syncguard: a tgt backing store that honours SYNCHRONIZE CACHE and
 * FUA according to a per-LUN write-cache mode (write-through,
 * write-back, plp).
 *
 * This file is only glue between tgt's internal API (struct scsi_lu,
 * struct scsi_cmd, the worker threads) and the tgt-independent core in
 * core/; the LUN's command table is glue/cmdtable.c.  The durability
 * policy is in core/policy.c, the error-to-sense table in core/sense.c.
 *
 * Load: tgtd dlopen()s every .so in its backing-store directory
 * (/usr/lib/tgt/backing-store on Debian) and calls register_bs_module().
 * Use: tgtadm --op new --mode logicalunit ... --bstype syncguard
 *      --bsopts "mode=write-back"
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "glue.h"
#include "internal.h"

/* ---- commands ---- */

static void bs_syncguard_request(struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	struct syncguard_req req = {
		.cdb = cmd->scb,
		.cdb_len = (size_t)cmd->scb_len,
		.out = scsi_get_out_buffer(cmd),
		.out_len = scsi_get_out_length(cmd),
		.in = scsi_get_in_buffer(cmd),
		.in_len = scsi_get_in_length(cmd),
	};
	struct syncguard_result res = { .reason = SYNCGUARD_ERR_NO_MEDIUM };

	/* no store (a refused path=): tgt hands an offline disk's commands
	 * other than READ and WRITE to the store all the same */
	if (!__atomic_load_n(&bs->open, __ATOMIC_ACQUIRE)) {
		syncguard_answer(cmd, &res);
		return;
	}
	if (cmd->scb[0] == MODE_SELECT || cmd->scb[0] == MODE_SELECT_10) {
		syncguard_wce_off_request(cmd);
		return;
	}
	syncguard_execute(&bs->lun, &req, &res);
	syncguard_answer(cmd, &res);
}

/* ---- backing-store hooks ---- */

/* Counters in /run/syncguard/<target>/lun<N>.stats (syncguard_stats.h);
 * without them the LUN works the same, so a failure is only logged. */
static void publish_stats(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	char path[512];
	int ret;

	snprintf(path, sizeof(path), SYNCGUARD_STATS_DIR "/%s/lun%" PRIu64
		 ".stats", lu->tgt && lu->tgt->name ? lu->tgt->name : "unknown",
		 lu->lun);
	ret = syncguard_stats_publish(&bs->lun, path);
	if (ret == -EEXIST)
		eprintf("syncguard: lun %" PRIu64 ": no counters in %s: another "
			"running tgtd publishes a target of this name and LUN "
			"there\n", lu->lun, path);
	else if (ret)
		eprintf("syncguard: lun %" PRIu64 ": no counters in %s: %s\n",
			lu->lun, path, strerror(-ret));
}

/* How the LUN's writes go, for its tgtd.log line: plp never writes
 * RWF_DSYNC (its writes need no flush, and "RWF_DSYNC ones" on a plp
 * LUN would read as a contradiction: tests/syncbench.sh, "tgtd.log's
 * plp line says no RWF_DSYNC"). */
static const char *writes_how(const struct syncguard_bs *bs)
{
	bool dsync_uring = bs->lun.async_dsync_ok && bs->uring.on;

	if (bs->lun.mix.on)
		return dsync_uring ? "through the page cache, RWF_DSYNC ones "
				     "O_DIRECT through io_uring" :
				     "through the page cache, RWF_DSYNC ones O_DIRECT";
	if (bs->lun.no_dio)	/* syncguard_dio_align */
		return bs->opts.mode == SYNCGUARD_MODE_PLP ?
		       "through the page cache and written out (the file "
		       "cannot do direct I/O)" : "through the page cache (the "
		       "file cannot do direct I/O)";
	if (!bs->lun.direct_io)
		return "through the page cache";
	if (bs->opts.mode == SYNCGUARD_MODE_PLP)
		return "O_DIRECT";
	return dsync_uring ? "O_DIRECT, RWF_DSYNC ones through io_uring too" :
			     "O_DIRECT";
}

/*
 * Say what the kernel believes of the device cache under the LUN: the
 * modes' promises stand on it (core/policy.c), and only the
 * administrator can know whether it is true.  A "write through" set by
 * hand over a volatile cache makes Linux drop every flush.  And a loop
 * device that can lose durable writes under it (core/loopdev.c).
 */
static void log_device_cache(struct scsi_lu *lu)
{
	static const char *const says[2][2] = {	/* [volatile][plp] */
		{ "reports no volatile write cache, so Linux sends it no "
		  "flushes: if it has one (write_cache set by hand), writes "
		  "are not durable",
		  "reports no volatile write cache" },
		{ "has a volatile write cache: flushes are sent to it",
		  "has a volatile write cache, which plp never flushes: it "
		  "must be power-loss protected" },
	};
	struct syncguard_lun *lun = &SYNCGUARD_BS(lu)->lun;

	if (lun->loop_holes_buffered)	/* see core/loopdev.c, holes_buffered */
		eprintf("syncguard: lun %" PRIu64 ": this loop device has direct "
			"I/O off and its backing file has holes: if that file's "
			"file system fills up, Linux's loop driver can lose "
			"writes it reported durable; use losetup --direct-io=on, "
			"or allocate the file in full\n", lu->lun);
	for (int i = 0; i < SYNCGUARD_ZFS_DEPTH && lun->zfs[i][0]; i++)
		eprintf("syncguard: lun %" PRIu64 ": on ZFS dataset %s: sync=%s, "
			"logbias=%s%s\n", lu->lun, lun->zfs[i], lun->zfs_sync[i],
			lun->zfs_logbias[i], i || !lun->blockdev ? "" :
			" (a zvol: its volblocksize is the physical block "
			"initiators are told to align to)");
	if (lun->dev_write_cache < 0)
		return;		/* no block device under it (FUSE, NFS) */
	eprintf("syncguard: lun %" PRIu64 ": device %s %s\n", lu->lun,
		lun->dev_name, says[lun->dev_write_cache > 0]
		[lun->opts.mode == SYNCGUARD_MODE_PLP]);
}

/* A write-through LUN on a file with holes works, slowly: each durable
 * O_DIRECT write into a hole allocates and commits the file system's
 * journal (295 IOPS at QD1 against 12k on an allocated file).  Said
 * once, at open, so the log says it where the README may go unread
 * (tests/syncbench.sh, "the write-through LUN on a sparse file says it
 * is slow"). */
static void log_holes(struct scsi_lu *lu)
{
	struct syncguard_lun *lun = &SYNCGUARD_BS(lu)->lun;
	struct stat st;

	if (lun->opts.mode != SYNCGUARD_MODE_WRITE_THROUGH || lun->blockdev ||
	    fstat(lun->fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_blocks * 512 >= lun->size)
		return;
	eprintf("syncguard: lun %" PRIu64 ": the file has holes (%" PRIu64
		" of %" PRIu64 " bytes allocated): each write-through write "
		"into one allocates, at a journal commit's cost; for speed, "
		"delete the LUN, write every block of the file once in place, "
		"which keeps its data (dd if=FILE of=FILE bs=1M "
		"conv=notrunc,fsync), and create the LUN again\n", lu->lun,
		(uint64_t)st.st_blocks * 512, lun->size);
}

/* A LUN on a store whose earlier LUN latched an error (core/poison.c)
 * starts latched: say so, with the record and how to clear it. */
static void log_poisoned(struct scsi_lu *lu, const char *path)
{
	struct syncguard_lun *lun = &SYNCGUARD_BS(lu)->lun;
	char text[sizeof(lun->poison)];

	if (syncguard_lun_latched_soft(lun) &&
	    syncguard_lun_latched(lun) == EINPROGRESS)	/* core/poison.c */
		eprintf("syncguard: lun %" PRIu64 ": the final flush of the last "
			"LUN on this store still runs: durable commands wait for "
			"its outcome, and fail if it failed\n", lu->lun);
	if (!lun->poison[0])
		return;
	snprintf(text, sizeof(text), "%s", lun->poison);
	for (char *c = text; *c; c++)	/* one log line */
		if (*c == '\n')
			*c = c[1] ? ';' : '\0';
	if (!strncmp(text, "unreadable", 10))	/* core/lun.c, open_poisoned */
		eprintf("syncguard: lun %" PRIu64 ": starts latched: its latch "
			"record %s/latched/%s cannot be read (%s), so whether an "
			"earlier LUN on this store lost writes cannot be told; "
			"mend the state directory (bsopts state_dir), then "
			"re-create the LUN\n", lu->lun, lun->poison_dir,
			lun->store_id, text + 12);
	else if (strstr(text, "final flush of this store"))	/* a marker */
		eprintf("syncguard: lun %" PRIu64 ": starts latched: %s; "
			"acknowledged writes may be lost: check the data, then "
			"clear it with 'syncguard-stat --clear-latch %s "
			"--state-dir %s' and re-create the LUN\n", lu->lun, text,
			path, lun->poison_dir);
	else if (!strncmp(text, "under the device number", 23))
		eprintf("syncguard: lun %" PRIu64 ": starts latched: a latch "
			"record in %s/latched %s, which this store or another "
			"had when it was recorded, and acknowledged writes may "
			"be lost: check the data of each, then clear it with "
			"'syncguard-stat --clear-latch %s --state-dir %s' and "
			"re-create the LUN\n", lu->lun, lun->poison_dir, text,
			path, lun->poison_dir);
	else if (!strncmp(text, "unrecorded", 10))	/* the same */
		eprintf("syncguard: lun %" PRIu64 ": starts latched: an earlier "
			"LUN on this store latched an error in this tgtd (%s), "
			"and acknowledged writes may be lost; its record could "
			"not be written in %s, so syncguard-stat has none to "
			"clear: check the data; the latch holds until tgtd "
			"restarts\n", lu->lun, text + 12, lun->poison_dir);
	else
		eprintf("syncguard: lun %" PRIu64 ": starts latched: an earlier "
			"LUN on this store latched an error, and acknowledged "
			"writes may be lost (%s/latched/%s: %s); check the data, "
			"then clear it with 'syncguard-stat --clear-latch %s "
			"--state-dir %s' and re-create the LUN\n", lu->lun,
			lun->poison_dir, lun->store_id, text, path,
			lun->poison_dir);
}

/*
 * A syncguard LUN is a fixed disk.  tgt makes a LUN created without a
 * store removable media, and a media changer's MOVE MEDIUM (SMC-3) may
 * then unload it: tgt's dtd_load_unload closes the store at once, with
 * commands still running on it, and opens another in its place.  Cleared
 * when a store opens, that changer gets CHECK CONDITION instead, and
 * removable=1 is refused (syncguard_lu_config; test_modes_fixed_media).
 */
static void fixed_disk(struct scsi_lu *lu)
{
	if (!lu->attrs.removable)
		return;
	lu->attrs.removable = 0;
	eprintf("syncguard: lun %" PRIu64 ": a fixed disk from now on, not "
		"removable media (tgt's default for a LUN created without a "
		"store)\n", lu->lun);
}

static int bs_syncguard_open(struct scsi_lu *lu, char *path, int *fd,
			     uint64_t *size)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	char err[512];
	int ret, unwatched;

	unwatched = syncguard_watch_open();
	ret = syncguard_lun_open(&bs->lun, path, lu->blk_shift, &bs->opts,
				 err, sizeof(err));
	if (!ret && unwatched && syncguard_lun_needs_watch(&bs->lun)) {
		syncguard_lun_close(&bs->lun);
		snprintf(err, sizeof(err), "%s: the mount table cannot be "
			 "watched, so a remount nobarrier or a change of what "
			 "lies beneath it would go unnoticed: not exported",
			 path);
		ret = unwatched;
	}
	if (!ret && (ret = syncguard_zvol_watch_add(bs,
						    syncguard_watch_recheck))) {
		syncguard_lun_close(&bs->lun);
		snprintf(err, sizeof(err), "%s: its ZFS datasets cannot be "
			 "watched (%s), so a change of their sync property "
			 "would go unnoticed: not exported", path,
			 strerror(-ret));
	}
	if (ret) {
		eprintf("syncguard: lun %" PRIu64 ": %s\n", lu->lun, err);
		syncguard_watch_close_unused();
		return ret;
	}
	__atomic_store_n(&bs->open, true, __ATOMIC_RELEASE);
	if (!bs->size_shown)	/* a LUN's first store: what it starts with */
		bs->size_shown = bs->lun.size;
	ret = syncguard_vpd_open(lu);
	if (!ret && (ret = syncguard_uring_open(lu)) != 0)
		eprintf("syncguard: lun %" PRIu64 ": engine=uring: io_uring "
			"unavailable: %s\n", lu->lun, strerror(-ret));
	if (ret) {
		syncguard_zvol_watch_remove(bs);
		syncguard_lun_close(&bs->lun);
		__atomic_store_n(&bs->open, false, __ATOMIC_RELEASE);
		syncguard_watch_close_unused();
		return ret;
	}
	/* the workers started by bs_init, the engine as it opened: set
	 * before the file is published, which a reader may open at once */
	bs->lun.stats->workers = bs->workers.n;
	bs->lun.stats->engine = bs->opts.engine;
	bs->lun.stats->ring_use = bs->uring.on ? SYNCGUARD_RING_ALL :
				  bs->uring.flush_on ? SYNCGUARD_RING_FLUSHES :
				  SYNCGUARD_RING_NONE;
	publish_stats(lu);
	syncguard_wce_open(lu);
	if (!lu->attrs.no_auto_lbppbe && bs->lun.phys_block_size)
		update_lbppbe(lu, (int)bs->lun.phys_block_size);
	*fd = bs->lun.fd;
	*size = bs->lun.size;
	eprintf("syncguard: lun %" PRIu64 ": %s, mode=%s, %" PRIu64
		" bytes, %u-byte blocks, engine %s, %u workers, writes %s%s\n",
		lu->lun, path, syncguard_mode_name(bs->opts.mode), bs->lun.size,
		1u << lu->blk_shift,
		syncguard_ring_use_name(bs->lun.stats->ring_use, false),
		bs->workers.n, writes_how(bs),
		bs->lun.direct_reads ? ", reads O_DIRECT" : "");
	log_device_cache(lu);
	log_holes(lu);
	fixed_disk(lu);
	log_poisoned(lu, path);
	syncguard_watch_add(bs, lu->lun);
	return 0;
}

/*
 * The final flush of a closed LUN (LUN delete, a path= move, tgtd's
 * shutdown) runs on a thread of its own.  tgt closes a backing store
 * from tgtadm's handler on its event thread, which runs every session
 * of every target: a flush there (seconds for a write-back LUN with
 * much in the page cache, for ever on a device that stopped answering)
 * would stop every other LUN of the tgtd for as long (15 s of 0 IOPS
 * on an unrelated LUN while a 15 s flush ran: tests/stall.sh).
 * Nothing waits for the flush but tgtd's exit (atexit: a shutdown still
 * leaves nothing volatile); a LUN re-created on the same store
 * meanwhile is another LUN with its own flushes.
 */
struct final_flush {
	int fd;
	unsigned int seq;	/* syncguard_final_flush_begin's */
	uint64_t lun;
	/* where a failure is recorded for the store's next LUN */
	char state_dir[PATH_MAX], store_id[256], path[PATH_MAX];
};

static pthread_mutex_t final_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t final_done = PTHREAD_COND_INITIALIZER;
static unsigned int final_running;

/* fdatasync and close @ff's descriptor, say how it went if it failed
 * or took long, and count it done.  A failure is recorded (core/poison.c):
 * the kernel now takes the error as seen, and the store's next LUN would
 * vouch for writes it lost. */
static void final_flush_run(const struct final_flush *ff)
{
	uint64_t t0 = syncguard_now_us(), us, lun = ff->lun;
	int err = syncguard_datasync(ff->fd), rec;

	close(ff->fd);
	us = syncguard_now_us() - t0;
	if (err)	/* said before the record is written, which may stall */
		eprintf("syncguard: lun %" PRIu64 ": final flush failed: %s\n",
			lun, strerror(-err));
	rec = syncguard_final_flush_end(ff->state_dir, ff->store_id, ff->seq,
					ff->path, -err);
	if (err)
		eprintf("syncguard: lun %" PRIu64 ": %s %s/latched/%s\n", lun,
			rec ? "could not record the failed final flush (its "
			"next LUN in this tgtd starts latched all the same) in" :
			"its next LUN starts latched, by", ff->state_dir,
			ff->store_id);
	else if (us >= 1000000)
		eprintf("syncguard: lun %" PRIu64 ": final flush done in "
			"%.1f s\n", lun, (double)us / 1e6);
	pthread_mutex_lock(&final_lock);
	final_running--;
	pthread_cond_broadcast(&final_done);
	pthread_mutex_unlock(&final_lock);
}

static void *final_flusher(void *arg)
{
	struct final_flush *ff = arg;

	final_flush_run(ff);
	free(ff);
	return NULL;
}

/* final_flush_run for descriptor @fd of LUN @lu on a thread of its own,
 * or in this one when none can be started. */
static void final_flush_start(int fd, struct scsi_lu *lu)
{
	const struct syncguard_lun *l = &SYNCGUARD_BS(lu)->lun;
	struct final_flush local = { .fd = fd, .seq = l->final_seq,
				     .lun = lu->lun }, *ff;
	int ret = -1;

	snprintf(local.state_dir, sizeof(local.state_dir), "%s",
		 syncguard_state_dir(&l->opts));
	snprintf(local.store_id, sizeof(local.store_id), "%s", l->store_id);
	snprintf(local.path, sizeof(local.path), "%s", l->path);
	pthread_mutex_lock(&final_lock);
	final_running++;
	pthread_mutex_unlock(&final_lock);
	if ((ff = malloc(sizeof(*ff)))) {
		*ff = local;
		if ((ret = syncguard_start_detached(final_flusher, ff)))
			free(ff);
	}
	if (ret)
		final_flush_run(&local);
}

/* atexit: tgtd's shutdown closed its LUNs; their final flushes finish
 * before the process ends. */
static void final_flush_wait(void)
{
	pthread_mutex_lock(&final_lock);
	while (final_running)
		pthread_cond_wait(&final_done, &final_lock);
	pthread_mutex_unlock(&final_lock);
}

static void bs_syncguard_close(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	int fd, latched;

	if (!bs->open)
		return;
	syncguard_watch_remove(bs);
	syncguard_zvol_watch_remove(bs);
	syncguard_synccache_close(lu);
	syncguard_uring_close(lu);
	__atomic_store_n(&bs->lun.closing, true, __ATOMIC_SEQ_CST);
	syncguard_wce_wait_switches(lu);
	latched = syncguard_lun_latched_soft(&bs->lun) ? 0 :
		  syncguard_lun_latched(&bs->lun);
	fd = syncguard_lun_close_deferred(&bs->lun);
	__atomic_store_n(&bs->open, false, __ATOMIC_RELEASE);
	if (latched)
		eprintf("syncguard: lun %" PRIu64 ": closed with the error "
			"latched earlier (%s): no final flush\n", lu->lun,
			strerror(latched));
	else if (fd >= 0)
		final_flush_start(fd, lu);
	else if (fd != SYNCGUARD_NO_FINAL_FLUSH)
		eprintf("syncguard: lun %" PRIu64 ": final flush failed: %s\n",
			lu->lun, strerror(-fd));
}

static tgtadm_err bs_syncguard_init(struct scsi_lu *lu, char *bsopts)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	unsigned int workers;
	char err[256];
	int ret;

	memset(bs, 0, sizeof(*bs));
	bs->lun.fd = -1;
	pthread_mutex_init(&bs->immed_lock, NULL);
	pthread_cond_init(&bs->immed_cond, NULL);
	pthread_mutex_init(&bs->wce_lock, NULL);
	pthread_cond_init(&bs->wce_cond, NULL);
	if (syncguard_opts_parse(bsopts, &bs->opts, err, sizeof(err))) {
		eprintf("syncguard: lun %" PRIu64 ": %s\n", lu->lun, err);
		return TGTADM_INVALID_REQUEST;
	}
	/* tgt splits --bsopts on commas and drops what follows without a
	 * word: the log shows what arrived (docs/usage.md, bsopts) */
	eprintf("syncguard: lun %" PRIu64 ": bsopts \"%s\" (as tgt passed "
		"them: it drops anything after a ',')\n", lu->lun,
		bsopts ? bsopts : "");
	syncguard_cmdtable_install(lu);
	workers = syncguard_workers(&bs->opts, nr_iothreads);
	ret = syncguard_workers_start(&bs->workers, workers,
				      bs_syncguard_request);
	if (ret == -EAGAIN)
		eprintf("syncguard: lun %" PRIu64 ": cannot start %u worker "
			"threads: refused (bsopts workers=, tgtd's "
			"--nr_iothreads or its task limit)\n", lu->lun, workers);
	else if (ret)
		eprintf("syncguard: lun %" PRIu64 ": cannot start its worker "
			"threads: refused (%s)\n", lu->lun, strerror(-ret));
	if (ret)
		return TGTADM_NOMEM;	/* what tgt's own workers answer */
	return TGTADM_SUCCESS;
}

/* tgt closes a LUN's store before this, except on its own failure path
 * after the store opened (tgt_device_create's fail_bs_init), where the
 * mount watch and the ring would go on pointing at the freed LUN: close
 * it here then (a no-op when closed). */
static void bs_syncguard_exit(struct scsi_lu *lu)
{
	bs_syncguard_close(lu);
	syncguard_workers_stop(&SYNCGUARD_BS(lu)->workers);
}

static struct backingstore_template syncguard_bst = {
	.bs_name = "syncguard",
	.bs_datasize = sizeof(struct syncguard_bs),
	.bs_open = bs_syncguard_open,
	.bs_close = bs_syncguard_close,
	.bs_init = bs_syncguard_init,
	.bs_exit = bs_syncguard_exit,
	.bs_cmd_submit = bs_syncguard_cmd_submit,	/* or a worker */
	.bs_oflags_supported = 0,	/* the mode replaces O_SYNC/O_DIRECT */
};

/* The SBC-3 and SPC-4 commands tgt may hand to this store (others stay
 * in tgt's core). */
static unsigned char syncguard_opcodes[] = {
	ALLOW_MEDIUM_REMOVAL, COMPARE_AND_WRITE, FORMAT_UNIT, INQUIRY,
	MAINT_PROTOCOL_IN, MODE_SELECT, MODE_SELECT_10, MODE_SENSE,
	MODE_SENSE_10, PERSISTENT_RESERVE_IN, PERSISTENT_RESERVE_OUT,
	PRE_FETCH_10, PRE_FETCH_16, READ_10, READ_12, READ_16, READ_6,
	ORWRITE_16, READ_CAPACITY, RELEASE, REPORT_LUNS, REQUEST_SENSE,
	RESERVE,
	SEND_DIAGNOSTIC, SERVICE_ACTION_IN, START_STOP, SYNCHRONIZE_CACHE,
	SYNCHRONIZE_CACHE_16, TEST_UNIT_READY, UNMAP, VERIFY_10, VERIFY_12,
	VERIFY_16, WRITE_10, WRITE_12, WRITE_16, WRITE_6, WRITE_SAME,
	WRITE_SAME_16, WRITE_VERIFY, WRITE_VERIFY_12, WRITE_VERIFY_16,
};

/* ---- which tgtd ---- */

/* The build ID (hex) of the running program's NT_GNU_BUILD_ID note, from
 * the main program's PT_NOTE segments (the first dl_iterate_phdr entry). */
static int main_build_id(struct dl_phdr_info *info, size_t size, void *out)
{
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		const char *end = p + ph->p_memsz;

		while (ph->p_type == PT_NOTE && p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			const unsigned char *desc = (const unsigned char *)
				(p + sizeof(*n) + ((n->n_namesz + 3) & ~3u));

			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    !memcmp(p + sizeof(*n), "GNU", 4) && n->n_descsz <= 64)
				for (unsigned int k = 0; k < n->n_descsz; k++)
					sprintf((char *)out + 2 * k, "%02x", desc[k]);
			p = (const char *)desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 1;	/* the main program only */
}

/* The module is compiled against tgt's internal structs, which carry no
 * version: loaded into a tgtd other than the one it was built for, it
 * would misread them.  The Makefile records the installed tgtd's build
 * ID; a different tgtd (an upgraded package) gets no syncguard bstype
 * and a log line that says to rebuild.  true when it is safe to load. */
static bool built_for_this_tgtd(void)
{
#ifdef SYNCGUARD_TGTD_BUILD_ID
	char id[129] = "";

	dl_iterate_phdr(main_build_id, id);
	if (SYNCGUARD_TGTD_BUILD_ID[0] && id[0] &&
	    strcmp(id, SYNCGUARD_TGTD_BUILD_ID)) {
		eprintf("bs_syncguard was built for tgtd build ID %s, this tgtd "
			"is %s (tgt upgraded?): not registering the syncguard "
			"backing store; rebuild and reinstall it (make && make "
			"install)\n", SYNCGUARD_TGTD_BUILD_ID, id);
		return false;
	}
#endif
	return true;
}

/* Called by tgtd after dlopen(): register the "syncguard" bstype.  The
 * only symbol the module exports (built with -fvisibility=hidden). */
__attribute__((visibility("default"))) void register_bs_module(void);

/* What the core says that only a log can tell, in tgtd's log */
static void log_core(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_error("%s", line);
}

void register_bs_module(void)
{
	if (!built_for_this_tgtd())
		return;
	syncguard_logf = log_core;
	bs_create_opcode_map(&syncguard_bst, syncguard_opcodes,
			     sizeof(syncguard_opcodes));
	register_backingstore_template(&syncguard_bst);
	atexit(final_flush_wait);
}
