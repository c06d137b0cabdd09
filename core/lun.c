/*
 * A LUN's life: opening its store (the checks of what lies beneath it,
 * core/fscheck.c, core/loopdev.c, core/stack.c; its descriptors; whether
 * writes go O_DIRECT), closing it (what its final flush must cover), and
 * the WCE it honours and reports, with the switch to WCE=0 that flushes
 * first.
 *
 * Layer: above io.c, flush.c, fscheck.c, loopdev.c and stack.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/fs.h>

#include "core.h"
#include "internal.h"

static int get_size(struct syncguard_lun *lun, const struct stat *st,
		    const char *path, char *err, size_t errlen)
{
	uint64_t bs = 1ULL << lun->block_shift;

	if (lun->blockdev) {
		unsigned int pbs = 0;

		if (ioctl(lun->fd, BLKGETSIZE64, &lun->size)) {
			syncguard_seterr(err, errlen, "%s: BLKGETSIZE64: %s",
					 path, strerror(errno));
			return -errno;
		}
		if (!ioctl(lun->fd, BLKPBSZGET, &pbs))
			lun->phys_block_size = pbs;
		pbs = 0;	/* fallocate takes whole logical sectors */
		if (!ioctl(lun->fd, BLKSSZGET, &pbs) && pbs > bs)
			lun->punch_align = pbs;
	} else {
		lun->size = (uint64_t)st->st_size;
		lun->phys_block_size = (unsigned int)st->st_blksize;
	}
	if (lun->size == 0 || lun->size % bs) {
		syncguard_seterr(err, errlen,
			"%s: size %llu bytes is not a positive multiple of the "
			"%llu-byte logical block size", path,
			(unsigned long long)lun->size, (unsigned long long)bs);
		return -EINVAL;
	}
	return 0;
}

static int open_path(struct syncguard_lun *lun, const char *path,
		     struct stat *st, char *err, size_t errlen)
{
	if (stat(path, st)) {
		syncguard_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (S_ISDIR(st->st_mode)) {
		syncguard_seterr(err, errlen, "%s: is a directory", path);
		return -EISDIR;
	}
	if (!S_ISREG(st->st_mode) && !S_ISBLK(st->st_mode)) {
		syncguard_seterr(err, errlen,
			"%s: not a regular file or block device", path);
		return -EINVAL;
	}
	lun->blockdev = S_ISBLK(st->st_mode);
	/* A block device is claimed exclusively (O_EXCL, as LIO's iblock
	 * claims its device): one that is mounted, swap, or held by md,
	 * device-mapper or another claimant would be written under its
	 * owner's feet, and one exported again under another device node
	 * would escape the flock below.  The claim lasts while lun->fd is
	 * open; the other descriptors are plain opens, which it allows. */
	lun->fd = open(path, O_RDWR | O_CLOEXEC |
		       (lun->blockdev ? O_EXCL : 0));
	if (lun->fd < 0 && lun->blockdev && errno == EBUSY) {
		syncguard_seterr(err, errlen, "%s: in use (mounted, swap, held "
			"by md or device-mapper, or exported by another "
			"syncguard LUN): not exported", path);
		return -EBUSY;
	}
	if (lun->fd < 0) {
		syncguard_seterr(err, errlen, "%s: cannot open read-write: %s",
				 path, strerror(errno));
		return -errno;
	}
	/* from here on, what was opened (the path may name another file
	 * by now); its type must still be the one the checks above saw */
	if (fstat(lun->fd, st) || S_ISBLK(st->st_mode) != lun->blockdev ||
	    (!lun->blockdev && !S_ISREG(st->st_mode))) {
		syncguard_seterr(err, errlen, "%s: changed while being opened",
				 path);
		close(lun->fd);
		lun->fd = -1;
		return -EAGAIN;
	}
	/* Two LUNs on one file would keep two caches and two policies
	 * for the same blocks: the second is refused. */
	if (flock(lun->fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK) {
		syncguard_seterr(err, errlen, "%s: already exported by another "
				 "syncguard LUN%s", path, lun->blockdev ? "" :
				 " (the file itself, or a loop device over it)");
		close(lun->fd);
		lun->fd = -1;
		return -EBUSY;
	}
	return 0;
}

/*
 * bsopts direct=auto, by mode.  Writes that bypass the page cache cost
 * no copy and no writeback, and a durable one needs no fdatasync walk of
 * the page cache: RWF_DSYNC on O_DIRECT is the write and a FUA (or the
 * block layer's post-flush, which it merges across concurrent writes).
 * plp: every write must reach the device anyway.  write-through: every
 * write must be durable (measured, 4 KiB QD32 on this disk: 17.2-22.7k
 * IOPS against 13.9-16.3k buffered with group flushes).  write-back: a
 * plain write into the page cache is cheaper than one into the device
 * (docs/performance.md), so the page cache, and O_DIRECT only for its
 * RWF_DSYNC writes (mix_wanted; core/mix.c keeps the two apart).
 */
static bool want_direct(const struct syncguard_opts *opts)
{
	switch (opts->direct) {
	case SYNCGUARD_DIRECT_YES:
		return true;
	case SYNCGUARD_DIRECT_NO:
		return false;
	case SYNCGUARD_DIRECT_AUTO:
		break;
	}
	return opts->mode != SYNCGUARD_MODE_WRITE_BACK;
}

/* write-back with direct=auto: an O_DIRECT descriptor for RWF_DSYNC
 * writes only, on a regular file (core/mix.c) */
static bool mix_wanted(const struct syncguard_opts *opts)
{
	return opts->direct == SYNCGUARD_DIRECT_AUTO &&
	       opts->mode == SYNCGUARD_MODE_WRITE_BACK;
}

/* The statfs f_type of a file LUN's file system; 0 for a block device,
 * or where it cannot be read (then no policy takes it for a known one) */
static unsigned long fs_magic(struct syncguard_lun *lun)
{
	struct statfs sfs;

	if (lun->blockdev || fstatfs(lun->fd, &sfs))
		return 0;
	return (unsigned long)sfs.f_type;
}

/*
 * The O_DIRECT descriptor, if the LUN's writes (or its RWF_DSYNC writes,
 * mix_wanted) use it, with the alignment syncguard_dio_align gives.
 * The LUN's logical block must be a multiple of it, or a write of one
 * block would take the page cache while its neighbours in the same page
 * went O_DIRECT: writeback of that page could then put old data over an
 * O_DIRECT write already acknowledged as durable.  So with 512-byte
 * blocks on a 4 KiB-sector device, or an inode that cannot do direct
 * I/O at all, every write takes the page cache (plp's are then written
 * out with sync_file_range, write-through's made durable by RWF_DSYNC);
 * that is an error only for direct=yes.  Returns 0 or -errno with the
 * reason in @err.
 */
static int open_direct(struct syncguard_lun *lun, const char *path,
		       char *err, size_t errlen)
{
	bool asked = lun->opts.direct == SYNCGUARD_DIRECT_YES;

	if (!want_direct(&lun->opts) && !mix_wanted(&lun->opts))
		return 0;
	if (!syncguard_dio_align(lun->fd, &lun->dio_align,
				 &lun->dio_mem_align)) {
		lun->no_dio = true;
		if (!asked)
			return 0;
		syncguard_seterr(err, errlen, "%s: direct=yes, but this file "
			"cannot do direct I/O (statx says none: fscrypt without "
			"inline encryption, fs-verity, data journalling or inline "
			"data), and O_DIRECT writes would be buffered silently: "
			"use direct=auto", path);
		return -EINVAL;
	}
	if ((1u << lun->block_shift) % lun->dio_align) {
		if (!asked)
			return 0;
		syncguard_seterr(err, errlen, "%s: direct=yes, but %u-byte "
			"logical blocks are not aligned for O_DIRECT here (%u "
			"bytes): use --blocksize %u or direct=auto", path,
			1u << lun->block_shift, lun->dio_align, lun->dio_align);
		return -EINVAL;
	}
	lun->dfd = syncguard_reopen(lun, O_RDWR | O_DIRECT);
	if (lun->dfd < 0 && asked) {
		syncguard_seterr(err, errlen, "%s: direct=yes, but O_DIRECT "
				 "fails here: %s", path, strerror(-lun->dfd));
		return lun->dfd;
	}
	lun->direct_io = lun->dfd >= 0 && want_direct(&lun->opts);
	/* A block device's asynchronous O_DIRECT writes (io_uring) do not
	 * drop the cached pages a read brought in while they were in flight
	 * (syncguard_policy_async_direct_drops_cache), so its reads go
	 * O_DIRECT too; a file's, once the engine says its writes go so
	 * (syncguard_lun_writes_async). */
	lun->direct_reads = lun->direct_io && lun->blockdev;
	/* not a block device: its asynchronous O_DIRECT writes do not drop
	 * the cached pages a read brought in meanwhile (core/mix.c) */
	lun->mix.on = lun->dfd >= 0 && !lun->direct_io && !lun->blockdev;
	if (mix_wanted(&lun->opts) && !lun->mix.on && lun->dfd >= 0) {
		close(lun->dfd);	/* nothing uses it */
		lun->dfd = -1;
	}
	/* the mix's RWF_DSYNC writes go O_DIRECT beside page-cache reads:
	 * asynchronously only where that drops what those reads cached */
	lun->async_dsync_ok = lun->dfd >= 0 &&
		syncguard_policy_async_dsync_honoured(lun->blockdev,
						      fs_magic(lun)) &&
		(!lun->mix.on || syncguard_policy_async_direct_drops_cache(
					lun->blockdev, fs_magic(lun)));
	return 0;
}

void syncguard_lun_writes_async(struct syncguard_lun *lun)
{
	/* A page-cache read there could keep the old data cached after the
	 * write is answered, and every later read would return it
	 * (test_faults_fuse_uring_read_after_write).  Reading O_DIRECT,
	 * no read of ours uses the page cache (the engine's 1-byte probe
	 * at open may start readahead there, which nothing then reads). */
	if (lun->direct_io &&
	    !syncguard_policy_async_direct_drops_cache(lun->blockdev,
						       fs_magic(lun)))
		lun->direct_reads = true;
}

/* The LUN's own descriptors (not the pools'): the file or device, the
 * O_DIRECT one, a loop device's backing file, an overlay file's upper
 * one (and with them the O_EXCL claim and the flocks), the backing files
 * of the loops under the file system of either. */
static void close_fds(struct syncguard_lun *lun)
{
	int *fds[] = { &lun->fd, &lun->dfd, &lun->loop_fd, &lun->real_fd,
		       &lun->group_fd };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	for (int i = 0; i < SYNCGUARD_LOOP_DEPTH; i++) {
		if (lun->under_fd[i] >= 0)
			close(lun->under_fd[i]);
		lun->under_fd[i] = -1;
	}
}

/*
 * The workers' writes hold write_lock shared; a switch to WCE=0 and a
 * COMPARE AND WRITE take it exclusive.  glibc's default lets a new
 * reader in while a writer waits, so under a steady write load the
 * writer would wait for as long as the load lasts (WCE=1 shown for the
 * 20 s of a QD16 run on a 200 ms-flush model, a MODE SELECT WCE=0
 * unanswered as long, COMPARE AND WRITE 24-25 s, where a Linux
 * initiator gives up at 30 s: test_exec_write_lock_lets_writer_in).
 * Writers first, then: no reader takes the lock twice (core/exec.c),
 * which that kind requires.  0 or -errno.
 */
static int init_write_lock(pthread_rwlock_t *lock)
{
	pthread_rwlockattr_t attr;
	int ret = pthread_rwlockattr_init(&attr);

	if (ret)
		return -ret;
	ret = pthread_rwlockattr_setkind_np(&attr,
		PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	if (!ret)
		ret = pthread_rwlock_init(lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	return -ret;
}

/* A record of a latch on this store (core/poison.c): the LUN starts
 * latched with its errno, and keeps the record's text for tgtd's log.
 * One that cannot be read latches too (EIO): what it says is unknown. */
static void open_poisoned(struct syncguard_lun *lun)
{
	int err, marked;

	if (!lun->store_id[0])
		return;
	if (lun->poison[0]) {	/* adopt_former failed */
		__atomic_store_n(&lun->flush_error, EIO, __ATOMIC_SEQ_CST);
		lun->stats->latched = EIO;
		return;
	}
	/* the mark before the record: a final flush that failed, recorded
	 * and unmarked between the two looks is seen in one of them */
	marked = syncguard_store_marked(lun->store_id, false);
	err = syncguard_store_record(syncguard_state_dir(&lun->opts),
				     lun->store_id, lun->poison,
				     sizeof(lun->poison), lun->poison_dir,
				     sizeof(lun->poison_dir));
	if (err < 0) {
		snprintf(lun->poison, sizeof(lun->poison), "unreadable: %s",
			 strerror(-err));
		err = EIO;
	}
	if (!err)
		err = marked;
	if (err == EINPROGRESS) {
		/* the last LUN's final flush, here or in another tgtd */
		lun->poison[0] = '\0';
		syncguard_latch_pending(lun);
		return;
	}
	if (err && !lun->poison[0])
		snprintf(lun->poison, sizeof(lun->poison), "unrecorded: errno "
			 "%d (%s)", err, strerror(err));
	if (err)	/* already recorded: straight into the latch */
		__atomic_store_n(&lun->flush_error, err, __ATOMIC_SEQ_CST);
	lun->stats->latched = (uint64_t)syncguard_lun_latched(lun);
}

/* What an earlier tgtd or another program may have left volatile: the
 * LUN starts dirty, so that the first flush is not elided.  Write-through
 * and plp make it durable before they report WCE=0
 * (syncguard_policy_open_flushes, carried out by syncguard_ops_open_wce). */
static void open_dirty(struct syncguard_lun *lun)
{
	__atomic_store_n(&lun->flusher.dirty, 1, __ATOMIC_SEQ_CST);
}

/* What was recorded under the store's former identities
 * (syncguard_store_ids: a record, a final flush's marker) is its own:
 * taken over under the identity it has now.  Where that fails, part of
 * it may have moved and part not, so the LUN starts latched (EIO), as
 * for a record it cannot read.  A record under a device number
 * (blk-M.m) is left where it is, and latches the LUN all the same: the
 * number may have been another store's when it was recorded (a loop
 * partition's, an md array's, a zvol's, handed out anew), and taken
 * over here that store's latch would be lost
 * (test_poison_device_number_held). */
static void adopt_former(struct syncguard_lun *lun, const char *former)
{
	const char *dir = syncguard_state_dir(&lun->opts);
	int ret = syncguard_poison_adopt(dir, former, lun->store_id, false);
	char names[SYNCGUARD_FORMER_LEN], held[NAME_MAX + 1] = "";
	char text[300];

	if (!ret && !(ret = syncguard_poison_held(dir, former, held,
						  sizeof(held), text,
						  sizeof(text))))
		return;
	/* tgtd.log names the record under this directory
	 * (bs_syncguard.c, log_poisoned) */
	snprintf(lun->poison_dir, sizeof(lun->poison_dir), "%s", dir);
	if (held[0] && ret > 0) {
		snprintf(lun->poison, sizeof(lun->poison), "under the device "
			 "number %.60s (%s)", held, text);
		return;
	}
	if (held[0]) {
		snprintf(lun->poison, sizeof(lun->poison), "under the device "
			 "number %.60s (unreadable: %s)", held, strerror(-ret));
		return;
	}
	snprintf(names, sizeof(names), "%s", former);	/* one line */
	for (char *c = names; *c; c++)
		*c = *c == '\n' ? ' ' : *c;
	snprintf(lun->poison, sizeof(lun->poison), "unreadable: what was "
		 "recorded under the store's former identity (%.300s) could not "
		 "be taken over: %s", names, strerror(-ret));
}

/* bsopts state_dir must name a directory that exists: a misspelt one
 * would be made, and the records kept in it missed by the LUNs given the
 * right one and by syncguard-stat --latched.  The default, and tgtd's
 * $SYNCGUARD_STATE_DIR, are made on the first record, also when bsopts
 * names them (test_state_dir_refused).  0, or -ENOENT, -ENOTDIR and the
 * like with @err saying why. */
static int check_state_dir(const struct syncguard_opts *opts, char *err,
			   size_t errlen)
{
	struct stat st;

	if (!opts->state_dir[0] ||
	    !strcmp(opts->state_dir, SYNCGUARD_STATE_DIR_DEFAULT) ||
	    !strcmp(opts->state_dir, syncguard_state_dir(NULL)))
		return 0;
	if (stat(opts->state_dir, &st)) {
		int ret = -errno;

		syncguard_seterr(err, errlen, "state_dir %s: %s: create it, or "
			"leave state_dir out for the default", opts->state_dir,
			strerror(-ret));
		return ret;
	}
	if (!S_ISDIR(st.st_mode)) {
		syncguard_seterr(err, errlen, "state_dir %s is not a directory",
				 opts->state_dir);
		return -ENOTDIR;
	}
	return 0;
}

int syncguard_lun_open(struct syncguard_lun *lun, const char *path,
		       unsigned int block_shift,
		       const struct syncguard_opts *opts,
		       char *err, size_t errlen)
{
	bool plp = opts->mode == SYNCGUARD_MODE_PLP;
	char former[SYNCGUARD_FORMER_LEN];
	struct stat st;
	int ret;

	memset(lun, 0, sizeof(*lun));
	snprintf(lun->path, sizeof(lun->path), "%s", path);
	lun->fd = -1;
	lun->dfd = -1;
	lun->loop_fd = -1;
	lun->real_fd = -1;
	for (int i = 0; i < SYNCGUARD_LOOP_DEPTH; i++)
		lun->under_fd[i] = -1;
	lun->group_fd = -1;
	lun->block_shift = block_shift;
	lun->opts = *opts;
	lun->stats = &lun->local_stats;
	lun->local_stats.magic = SYNCGUARD_STATS_MAGIC;
	lun->local_stats.version = SYNCGUARD_STATS_VERSION;
	lun->local_stats.mode = (uint32_t)opts->mode;
	ret = check_state_dir(opts, err, errlen);
	if (!ret)
		ret = open_path(lun, path, &st, err, errlen);
	if (ret)
		return ret;
	if ((ret = syncguard_store_ids(lun->fd, lun->store_id,
				       sizeof(lun->store_id), former,
				       sizeof(former)))) {
		lun->store_id[0] = '\0';	/* nothing to record it by */
		syncguard_logf("syncguard: %s: no identity for this store "
			"(%s): a latch of it lasts as long as its LUN\n", path,
			strerror(-ret));
	} else if (former[0]) {
		adopt_former(lun, former);
	}
	ret = get_size(lun, &st, path, err, errlen);
	lun->dev_write_cache = syncguard_dev_write_cache(lun->blockdev ?
		st.st_rdev : st.st_dev, lun->dev_name, sizeof(lun->dev_name));
	if (!ret)
		ret = syncguard_check_ram_device(lun->dev_name, path, err,
						 errlen);
	if (!ret && !lun->blockdev)
		ret = syncguard_check_fs(lun->fd, path, plp, err, errlen);
	if (!ret && !lun->blockdev)
		ret = syncguard_overlay_hold(lun, lun->fd, LOCK_EX, path, err,
					     errlen);
	if (!ret && !lun->blockdev)
		ret = syncguard_loop_users(lun->fd, path, err, errlen);
	if (!ret && !lun->blockdev)
		ret = syncguard_loop_under(lun, path, plp, err, errlen);
	if (!ret && lun->blockdev)
		ret = syncguard_loop_backing(lun, path, st.st_rdev, plp, err,
					     errlen);
	if (!ret)
		ret = syncguard_check_beneath(lun, path, err, errlen);
	if (!ret && plp && !lun->blockdev) {
		ret = syncguard_check_plp_file(lun, lun->fd, path,
					       lun->opts.alloc_check, err, errlen);
		lun->synced_at_open = !ret;	/* it fsyncs the file */
	}
	if (!ret)
		ret = open_direct(lun, path, err, errlen);
	lun->enospc_soft = syncguard_policy_enospc_refused(lun->blockdev,
							   fs_magic(lun));
	if (!ret && (lun->group_fd = syncguard_reopen(lun, O_RDWR)) < 0)
		ret = lun->group_fd;
	lun->local_stats.write_sync = (uint32_t)opts->write_sync;
	lun->local_stats.flush_batch = (uint32_t)opts->flush_batch;
	lun->local_stats.sync_loop = (uint32_t)opts->sync_loop;
	lun->local_stats.direct_io = lun->direct_io ? 1 : lun->mix.on ? 2 : 0;
	if (!ret)
		ret = init_write_lock(&lun->write_lock);
	if (!ret)
		ret = -pthread_mutex_init(&lun->pool_lock, NULL);
	if (!ret)
		ret = -pthread_mutex_init(&lun->sync_trial_lock, NULL);
	if (!ret)
		ret = -pthread_mutex_init(&lun->recheck_lock, NULL);
	if (!ret)
		ret = -pthread_mutex_init(&lun->switch_lock, NULL);
	if (!ret)
		ret = syncguard_flusher_init(&lun->flusher);
	if (!ret)
		ret = syncguard_mix_init(&lun->mix, lun->mix.on);
	if (!ret) {
		open_dirty(lun);
		open_poisoned(lun);
	}
	if (ret) {
		close_fds(lun);
		lun->direct_io = lun->direct_reads = lun->mix.on = false;
	}
	return ret;
}

/* The final flush on @fd, now, for a store that could not be marked:
 * closes @fd; SYNCGUARD_NO_FINAL_FLUSH (nothing left to flush) or the
 * flush's -errno, recorded as a final flush's failure is. */
static int final_flush_unmarked(struct syncguard_lun *lun, int fd)
{
	int ret = syncguard_datasync(fd);

	close(fd);
	if (ret)
		syncguard_store_failed(syncguard_state_dir(&lun->opts),
				       lun->store_id, lun->path, -ret);
	return ret ? ret : SYNCGUARD_NO_FINAL_FLUSH;
}

int syncguard_lun_close_deferred(struct syncguard_lun *lun)
{
	int fd = SYNCGUARD_NO_FINAL_FLUSH;

	if (lun->fd < 0)
		return SYNCGUARD_NO_FINAL_FLUSH;
	/* the final flush vouches for every write, as a group flush: on
	 * the group flushes' descriptor (see "sync descriptors"), which
	 * also reports a writeback error a soft latch may stand for (so
	 * that one still flushes: test_exec_close_flushes_with_soft_latch) */
	if ((!syncguard_lun_latched(lun) || syncguard_lun_latched_soft(lun)) &&
	    syncguard_policy_close_flushes(lun->opts.mode,
					   syncguard_lun_clean(lun))) {
		fd = lun->group_fd;
		lun->group_fd = -1;
		/* the store is marked before this LUN lets go of it; where no
		 * mark can be had, the flush runs here, before it does */
		if (syncguard_final_flush_begin(syncguard_state_dir(&lun->opts),
						lun->store_id, &lun->final_seq))
			fd = final_flush_unmarked(lun, fd);
	}
	syncguard_stats_unpublish(lun);
	close_fds(lun);
	for (int i = 0; i < 2; i++) {
		while (lun->pool[i].n)
			close(lun->pool[i].fds[--lun->pool[i].n]);
		free(lun->pool[i].fds);
		lun->pool[i].fds = NULL;
		lun->pool[i].cap = 0;
	}
	pthread_rwlock_destroy(&lun->write_lock);
	pthread_mutex_destroy(&lun->pool_lock);
	pthread_mutex_destroy(&lun->sync_trial_lock);
	pthread_mutex_destroy(&lun->recheck_lock);
	pthread_mutex_destroy(&lun->switch_lock);
	syncguard_flusher_destroy(&lun->flusher);
	syncguard_mix_destroy(&lun->mix);
	return fd;
}

int syncguard_lun_close(struct syncguard_lun *lun)
{
	int latched = syncguard_lun_latched(lun);
	int fd = syncguard_lun_close_deferred(lun), ret;

	if (fd == SYNCGUARD_NO_FINAL_FLUSH)
		return latched ? -latched : 0;
	if (fd < 0)
		return fd;
	ret = syncguard_datasync(fd);
	close(fd);
	syncguard_final_flush_end(syncguard_state_dir(&lun->opts),
				  lun->store_id, lun->final_seq, lun->path,
				  -ret);
	return ret;
}

static void publish_wce(struct syncguard_lun *lun)
{
	__atomic_store_n(&lun->stats->wce,
			 (uint64_t)syncguard_lun_reported_wce(lun),
			 __ATOMIC_RELAXED);
}

void syncguard_lun_want_wce(struct syncguard_lun *lun, bool wce)
{
	__atomic_store_n(&lun->wce_wanted, wce, __ATOMIC_SEQ_CST);
}

int syncguard_lun_set_wce(struct syncguard_lun *lun, bool wce)
{
	syncguard_lun_want_wce(lun, wce);
	return syncguard_lun_apply_wce(lun);
}

/*
 * 1 -> 0 (syncguard_policy_switch_flushes): new writes are durable from
 * the moment wce is 0; what was written before must be made durable
 * before anyone is told WCE=0, so until the flush below succeeds the LUN
 * keeps reporting WCE=1 and SYNCHRONIZE CACHE keeps flushing
 * (wce_switching, which counts the switches whose flush still runs).
 * With switch_lock held.
 */
static int switch_off(struct syncguard_lun *lun)
{
	bool flush;
	int ret;

	pthread_rwlock_wrlock(&lun->write_lock);
	/* WCE=1 asked for while this waited for the lock: the last request
	 * wins (it has already turned WCE on) */
	if (syncguard_lun_wanted_wce(lun)) {
		pthread_rwlock_unlock(&lun->write_lock);
		return 0;
	}
	flush = syncguard_policy_switch_flushes(lun->wce, false);
	if (flush)
		__atomic_fetch_add(&lun->wce_switching, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&lun->wce, false, __ATOMIC_SEQ_CST);
	/* a WCE=1 that came between the check above and the store: it
	 * stored wce=1 before this stored 0, and would be lost; it wins,
	 * and this switch flushes nothing */
	if (syncguard_lun_wanted_wce(lun)) {
		__atomic_store_n(&lun->wce, true, __ATOMIC_SEQ_CST);
		if (flush)
			__atomic_fetch_sub(&lun->wce_switching, 1, __ATOMIC_SEQ_CST);
		flush = false;
	}
	pthread_rwlock_unlock(&lun->write_lock);
	if (!flush) {
		publish_wce(lun);
		return 0;
	}
	/* cached writes an asynchronous engine planned under WCE=1 must be
	 * in the page cache before the flush below (see syncguard_plan) */
	while (__atomic_load_n(&lun->async_cached, __ATOMIC_SEQ_CST))
		usleep(100);
	ret = syncguard_lun_flush(lun, true);
	/* WCE stays 1.  What was asked for stays 0: a request for 0 waiting
	 * on switch_lock must still switch (set to 1 here, it would read as
	 * a later WCE=1, and that request would be answered GOOD with WCE at
	 * 1: test_faults_second_wce_off_shares_failure);
	 * a new one sees 1 shown and switches (syncguard_mode_select). */
	if (ret)
		__atomic_store_n(&lun->wce, true, __ATOMIC_SEQ_CST);
	/* a count, not a flag: a switch that began while this one flushed
	 * (WCE set to 1 and written meanwhile) still owes its flush */
	__atomic_fetch_sub(&lun->wce_switching, 1, __ATOMIC_SEQ_CST);
	publish_wce(lun);
	return ret;
}

int syncguard_lun_apply_wce(struct syncguard_lun *lun)
{
	int ret;

	/* 0 -> 1 promises less: a write decided durable under WCE=0 may
	 * finish after it, so no lock (and tgtd's event thread, which runs
	 * this for MODE SELECT, must not wait for workers: core/mix.c) */
	if (syncguard_lun_wanted_wce(lun)) {
		__atomic_store_n(&lun->wce, true, __ATOMIC_SEQ_CST);
		publish_wce(lun);
		return 0;
	}
	/* One switch to 0 at a time: a second request for 0 while one
	 * still flushes is answered after that flush, with the WCE it left
	 * (0, or 1 when it failed: then this one flushes, and fails or
	 * makes it 0 itself).  Answered GOOD at once, it would leave WCE
	 * back at 1, when the first one's flush failed, under an initiator
	 * told 0 (its plain writes lost on a power cut:
	 * test_faults_second_wce_off_shares_failure). */
	pthread_mutex_lock(&lun->switch_lock);
	/* one that queued behind another while the LUN is closing flushes
	 * nothing: the close's final flush does that, and the delete would
	 * wait for every queued flush in turn, with tgtd's event thread
	 * (seconds in which no other LUN is answered) */
	ret = __atomic_load_n(&lun->closing, __ATOMIC_SEQ_CST) ? 0 :
	      switch_off(lun);
	pthread_mutex_unlock(&lun->switch_lock);
	return ret;
}
