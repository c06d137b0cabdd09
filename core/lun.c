/*
 * A LUN's backing file or block device: open-time checks, and the few
 * I/O primitives the executor builds on.  Every system call goes through
 * syncguard_sys so tests can inject faults and count syncs.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

#include "syncguard.h"
#include "internal.h"

/* ---- open-time checks ---- */

/* File systems on which plp cannot hold for a regular file: copy-on-write
 * or log-structured ones allocate new blocks (metadata) on overwrite, and
 * RAM-backed ones are never durable. */
static const struct {
	unsigned long magic;
	const char *name;
} plp_unsafe_fs[] = {
	{ 0x9123683e, "btrfs (copy-on-write)" },
	{ 0x2fc12fc1, "zfs (copy-on-write; export a zvol instead)" },
	{ 0xca451a4e, "bcachefs (copy-on-write)" },
	{ 0xf2f52010, "f2fs (log-structured)" },
	{ 0x3434, "nilfs2 (log-structured)" },
};

/* RAM-backed: nothing written there survives a power cut. */
static const unsigned long ram_fs[] = { 0x01021994 /* tmpfs */,
					0x858458f6 /* ramfs */ };

int syncguard_dev_name(dev_t dev, char *name, size_t namelen)
{
	char sys[96], real[PATH_MAX];

	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(dev),
		 minor(dev));
	if (!realpath(sys, real))
		return -errno;
	snprintf(name, namelen, "%s", strrchr(real, '/') + 1);
	return 0;
}

int syncguard_dev_write_cache(dev_t dev, char *name, size_t namelen)
{
	const char *const under[] = { "queue", "../queue" };
	char sys[96], val[32] = "";
	FILE *f = NULL;
	int ret;

	if ((ret = syncguard_dev_name(dev, name, namelen)))
		return ret;
	for (size_t i = 0; !f && i < 2; i++) {	/* a disk, a partition */
		snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/%s/write_cache",
			 major(dev), minor(dev), under[i]);
		f = fopen(sys, "re");
	}
	if (!f)
		return -ENOENT;
	if (!fgets(val, sizeof(val), f))
		val[0] = '\0';
	fclose(f);
	if (!strncmp(val, "write back", 10))
		return 1;
	return strncmp(val, "write through", 13) ? -EINVAL : 0;
}

static int check_fs_at(int fd, const char *table, const char *path,
		       bool plp, char *err, size_t errlen, int depth);

/* A file on an overlay lives in its upper layer once opened for
 * writing (copied up): check the upper layer's file system as the
 * file's own (a tmpfs upper layer survives nothing).  One that cannot
 * be found (a relative upperdir, resolved against the mounter's
 * directory) is refused: it cannot be told what it survives; so is a
 * volatile overlay in every mode (its fsync does nothing, and plp's
 * allocation check stands on one). */
static int check_overlay(int fd, const char *table, const char *path,
			 bool plp, char *err, size_t errlen, int depth)
{
	char upper[PATH_MAX], label[2 * PATH_MAX + 64];
	int dfd, ret;

	if (depth >= 4 || !table)
		return 0;	/* the kernel nests no upper layers anyway;
				 * without a mount table nothing is known */
	if (syncguard_fs_volatile(fd, table) == 1) {
		/* helper-75: 48 WRITE + SYNCHRONIZE CACHE of 1 MiB on
		 * write-back answered GOOD, 48 MiB left dirty */
		syncguard_seterr(err, errlen, "%s: on an overlay mounted "
			"volatile, which ignores fsync and drops O_DSYNC, so no "
			"write on it can be made durable: mount it without "
			"volatile", path);
		return -EINVAL;
	}
	ret = dfd = syncguard_overlay_upper_open(fd, table, upper,
						sizeof(upper));
	if (ret < 0) {
		syncguard_seterr(err, errlen, "%s: on an overlay whose upper "
			"layer cannot be found (%s): what it survives cannot be "
			"told; mount the overlay with an absolute upperdir",
			path, ret == -EINVAL ? "relative or unreadable upperdir"
			: strerror(-ret));
		return -EINVAL;
	}
	snprintf(label, sizeof(label), "%s (an overlay's upper layer %s)",
		 path, upper);
	ret = check_fs_at(dfd, table, label, plp, err, errlen, depth + 1);
	close(dfd);
	return ret;
}

/*
 * Does ext4 journal the data of the file @fd (its statfs @sfs): mounted
 * data=journal, or the file flagged so (chattr +j, which ext4 honours
 * with nodelalloc)?  Then its writes, O_DIRECT ones too, are copied into
 * the journal and kept in memory until a commit (5 s by default, or an
 * fsync): measured on a data=journal ext4 here, 48 O_DIRECT writes of
 * 1 MiB left 48 MiB dirty, and a loop device with direct I/O on over
 * such a file buffers the same way (helper-71).  plp never forces that
 * commit, so it may not stand on such a file.
 */
static bool journals_data(int fd, const struct statfs *sfs, const char *table)
{
	char name[64], opts[96], line[128];
	struct stat st;
	int flags = 0, found = -1;
	FILE *f;

	if ((unsigned long)sfs->f_type != 0xef53)	/* ext2/3/4 */
		return false;
	if (!ioctl(fd, FS_IOC_GETFLAGS, &flags) && (flags & FS_JOURNAL_DATA_FL))
		return true;
	/* ext4's own list of the options in force: data=journal set as a
	 * default in the superblock (tune2fs -o journal_data) is not in
	 * mountinfo (helper-73) */
	if (!fstat(fd, &st) && !syncguard_dev_name(st.st_dev, name,
						   sizeof(name))) {
		snprintf(opts, sizeof(opts), "/proc/fs/ext4/%s/options", name);
		if ((f = fopen(opts, "re"))) {
			found = 0;
			while (!found && fgets(line, sizeof(line), f))
				found = !strcmp(line, "data=journal\n");
			fclose(f);
		}
	}
	if (found >= 0)
		return found;
	return table && syncguard_fs_journals_data(fd, table) == 1;
}

int syncguard_check_fs(int fd, const char *path, bool plp, char *err,
		       size_t errlen)
{
	char *table = syncguard_mounts_read("/proc/self/mountinfo");
	int ret = check_fs_at(fd, table, path, plp, err, errlen, 0);

	free(table);
	return ret;
}

static int check_fs_at(int fd, const char *table, const char *path,
		       bool plp, char *err, size_t errlen, int depth)
{
	struct statfs sfs;
	int barriers;

	if (fstatfs(fd, &sfs))
		return 0;	/* cannot tell: do not refuse */
	for (size_t i = 0; i < sizeof(ram_fs) / sizeof(ram_fs[0]); i++) {
		if ((unsigned long)sfs.f_type == ram_fs[i]) {
			syncguard_seterr(err, errlen,
				"%s: file is on a RAM file system (tmpfs/ramfs): "
				"nothing on it survives a power cut; put the "
				"LUN on a disk-backed file system", path);
			return -EINVAL;
		}
	}
	/* write-through and write-back stand on fdatasync flushing the
	 * device's cache (core/policy.c); plp's writes need no flush, and
	 * its cache is protected for the UNMAP that has one */
	barriers = plp || !table ? 1 : syncguard_fs_barriers(fd, table);
	if (barriers == 0) {
		syncguard_seterr(err, errlen,
			"%s: the file system is mounted nobarrier (or f2fs "
			"fsync_mode=nobarrier, cifs nostrictsync): its fdatasync "
			"does not flush the device's write cache, so no write "
			"could be made durable; use mode=plp if that cache is "
			"power-loss protected, or remount with barriers", path);
		return -EINVAL;
	}
	if (barriers == -ENOENT) {	/* reached through another name space */
		syncguard_seterr(err, errlen,
			"%s: its mount is not in tgtd's /proc/self/mountinfo, so "
			"whether its file system sends flushes cannot be told; "
			"use a path in tgtd's own mount name space", path);
		return -EINVAL;
	}
	for (size_t i = 0; plp && i < sizeof(plp_unsafe_fs) /
					sizeof(plp_unsafe_fs[0]); i++) {
		if ((unsigned long)sfs.f_type == plp_unsafe_fs[i].magic) {
			syncguard_seterr(err, errlen,
				"%s: mode=plp needs overwrite-in-place, but the "
				"file is on %s; use write-back or write-through",
				path, plp_unsafe_fs[i].name);
			return -EINVAL;
		}
	}
	if (plp && journals_data(fd, &sfs, table)) {
		syncguard_seterr(err, errlen,
			"%s: mode=plp, but the file's data goes through the "
			"ext4 journal (mounted data=journal, or chattr +j): a "
			"write, O_DIRECT included, is kept in memory until "
			"the journal commits, and plp sends no flush; use "
			"write-through or write-back", path);
		return -EINVAL;
	}
	if ((unsigned long)sfs.f_type == OVERLAYFS_MAGIC)
		return check_overlay(fd, table, path, plp, err, errlen, depth);
	return 0;
}

#define FIEMAP_BAD_FLAGS (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | \
			  FIEMAP_EXTENT_UNWRITTEN | FIEMAP_EXTENT_SHARED | \
			  FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_DATA_INLINE | \
			  FIEMAP_EXTENT_NOT_ALIGNED)
#define FIEMAP_BATCH 64

/*
 * plp on a regular file: every byte in [0, size) must sit in an
 * allocated, written, unshared extent, so that overwriting it changes no
 * metadata.  Returns 0, -EINVAL (not so, reason in @err), or -EOPNOTSUPP.
 */
static int check_allocated(int fd, uint64_t size, const char *path,
			   char *err, size_t errlen)
{
	size_t sz = sizeof(struct fiemap) +
		    FIEMAP_BATCH * sizeof(struct fiemap_extent);
	struct fiemap *fm = calloc(1, sz);
	uint64_t covered = 0;
	int ret = 0;

	if (!fm)
		return -ENOMEM;
	while (!ret && covered < size) {
		memset(fm, 0, sz);
		fm->fm_start = covered;
		fm->fm_length = size - covered;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = FIEMAP_BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, fm)) {
			ret = -errno == -ENOTTY ? -EOPNOTSUPP : -errno;
			break;
		}
		if (!fm->fm_mapped_extents)
			break;
		for (unsigned int i = 0; !ret && i < fm->fm_mapped_extents; i++) {
			struct fiemap_extent *e = &fm->fm_extents[i];

			if (e->fe_logical > covered || (e->fe_flags & FIEMAP_BAD_FLAGS))
				ret = -EINVAL;
			else if (e->fe_logical + e->fe_length > covered)
				covered = e->fe_logical + e->fe_length;
		}
	}
	free(fm);
	if (ret == -EINVAL || (!ret && covered < size))
		syncguard_seterr(err, errlen,
			"%s: mode=plp needs every block allocated and written, "
			"but the file has a hole, unwritten or shared extent "
			"near byte %llu; write the whole file once (dd "
			"if=/dev/zero of=FILE bs=1M count=N conv=fsync), or use "
			"write-back", path,
			(unsigned long long)covered);
	if (ret == -EOPNOTSUPP)
		syncguard_seterr(err, errlen,
			"%s: mode=plp cannot check the file's allocation (no "
			"FIEMAP on this file system); write the whole file "
			"once, sync, and set alloc_check=no", path);
	return ret ? ret : covered < size ? -EINVAL : 0;
}

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
 * Another descriptor of the file or device lun->fd has open, never of
 * whatever its path names now: a rename or a new file under the old name
 * after the LUN was created must not move its writes and flushes to
 * another file (a helper's test did that, and a second LUN could then be
 * created on the path).  Opening /proc/self/fd/N opens the same inode
 * again with @flags (a new open file description, which sees every
 * writeback error from now on); the device and inode are checked all
 * the same.  Returns the descriptor, or -errno (-ESTALE: not the same).
 */
int syncguard_reopen(const struct syncguard_lun *lun, int flags)
{
	char self[32];
	struct stat a, b;
	unsigned int tries = 0;
	int fd;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", lun->fd);
	while ((fd = syncguard_sys.open(self, flags | O_CLOEXEC)) < 0)
		if (!syncguard_retry(errno, &tries))
			return -errno;
	if (fstat(fd, &a) || fstat(lun->fd, &b) || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino || a.st_rdev != b.st_rdev) {
		close(fd);
		return -ESTALE;
	}
	return fd;
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
 * (measured in the README), so the page cache, and O_DIRECT only for its
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
 * Can the inode @fd do direct I/O, and with what alignment?  statx says
 * (STATX_DIOALIGN, Linux 6.1): an offset alignment of 0 means "no direct
 * I/O" (statx(2)), and O_DIRECT opens still succeed: ext4 then turns
 * each O_DIRECT write into a buffered one, silently, for a file that is
 * encrypted without inline crypto (fscrypt), verity-protected, journals
 * its data or keeps it inline.  Without STATX_DIOALIGN, the same inode
 * flags say it (STATX_ATTR_ENCRYPTED / _VERITY, FS_IOC_GETFLAGS); a
 * block device's alignment is its logical sector, anything else's is
 * taken as 4096.  Returns 1 with the offset and memory alignments in
 * *@align and *@mem_align (bytes), or 0: no direct I/O.
 * tests/unit check_exec.c, test_open_plp_without_direct_io; and on a
 * real fscrypt ext4, tests/proto check_blockdev.c, test_blockdev_fscrypt.
 */
int syncguard_dio_align(int fd, unsigned int *align, unsigned int *mem_align)
{
	const unsigned int none = FS_ENCRYPT_FL | FS_VERITY_FL |
				  FS_INLINE_DATA_FL | FS_JOURNAL_DATA_FL;
	unsigned int sector = 0;
	struct statx stx;
	struct stat st;
	int flags = 0;

	*align = *mem_align = 4096;
	if (syncguard_sys.statx(fd, STATX_DIOALIGN, &stx) == 0) {
		if (stx.stx_mask & STATX_DIOALIGN) {
			if (!stx.stx_dio_offset_align)
				return 0;
			*align = stx.stx_dio_offset_align;
			*mem_align = stx.stx_dio_mem_align ?
				     stx.stx_dio_mem_align : *align;
			return 1;
		}
		if (stx.stx_attributes & stx.stx_attributes_mask &
		    (STATX_ATTR_ENCRYPTED | STATX_ATTR_VERITY))
			return 0;
	}
	if (!fstat(fd, &st) && S_ISBLK(st.st_mode)) {
		if (!ioctl(fd, BLKSSZGET, &sector) && sector)
			*align = *mem_align = sector;
		return 1;
	}
	return ioctl(fd, FS_IOC_GETFLAGS, &flags) ||
	       !((unsigned int)flags & none);
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
	 * (block/fops.c skips that for -EIOCBQUEUED), so a page-cache read
	 * there can keep the old data cached after the write is answered,
	 * and every later read returns it (tests/proto check_blockdev.c:
	 * 9-164 stale reads in 3,000 writes with two other sessions reading
	 * the block, before this).  Reading O_DIRECT too
	 * leaves nothing of ours in the page cache.  File systems (iomap)
	 * drop such pages when the write completes, so files keep their
	 * page-cache reads. */
	lun->direct_reads = lun->direct_io && lun->blockdev;
	/* not a block device: its asynchronous O_DIRECT writes do not drop
	 * the cached pages a read brought in meanwhile (core/mix.c) */
	lun->mix.on = lun->dfd >= 0 && !lun->direct_io && !lun->blockdev;
	if (mix_wanted(&lun->opts) && !lun->mix.on && lun->dfd >= 0) {
		close(lun->dfd);	/* nothing uses it */
		lun->dfd = -1;
	}
	lun->async_dsync_ok = lun->dfd >= 0 &&
		syncguard_policy_async_dsync_honoured(lun->blockdev,
						      fs_magic(lun));
	return 0;
}

int syncguard_check_plp_file(struct syncguard_lun *lun, int fd,
			     const char *path, bool alloc_check, char *err,
			     size_t errlen)
{
	struct stat st;
	int ret = syncguard_fsync(fd);

	/* a failed fsync of the store: what an earlier LUN left may be
	 * lost, and the kernel now takes the error as seen (core/poison.c) */
	if (ret && lun->store_id[0])
		syncguard_final_flush_end(syncguard_state_dir(&lun->opts),
					  lun->store_id, lun->path, -ret);
	if (!ret && fstat(fd, &st))
		ret = -errno;
	if (ret) {
		syncguard_seterr(err, errlen, "%s: fsync: %s", path,
				 strerror(-ret));
		return ret;
	}
	if (!alloc_check)
		return 0;
	return check_allocated(fd, (uint64_t)st.st_size, path, err, errlen);
}

int syncguard_check_ram_device(const char *n, const char *path, char *err,
			       size_t errlen)
{
	size_t skip = !strncmp(n, "zram", 4) ? 4 : !strncmp(n, "ram", 3) ? 3 : 0;

	if (!skip || n[skip] < '0' || n[skip] > '9')
		return 0;
	syncguard_seterr(err, errlen, "%s: on a RAM block device (%s): nothing "
			 "on it survives a power cut; put the LUN on a disk",
			 path, n);
	return -EINVAL;
}

/* The LUN's own descriptors (not the pools'): the file or device, the
 * O_DIRECT one, a loop device's backing file (and with them the O_EXCL
 * claim and the flocks), the backing files of the loops under the
 * file system of either. */
static void close_fds(struct syncguard_lun *lun)
{
	int *fds[] = { &lun->fd, &lun->dfd, &lun->loop_fd, &lun->group_fd };

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
 * writer waited for as long as the load lasted (helper-77: WCE=1 shown
 * for the 20 s of a QD16 run on a 200 ms-flush model, a MODE SELECT
 * WCE=0 unanswered as long, COMPARE AND WRITE 24-25 s, where a Linux
 * initiator gives up at 30 s).  Writers first, then: no reader takes
 * the lock twice (core/exec.c), which that kind requires.  0 or -errno.
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
	int err;

	if (!lun->store_id[0])
		return;
	err = syncguard_poison_read(syncguard_state_dir(&lun->opts),
				    lun->store_id, lun->poison,
				    sizeof(lun->poison));
	if (err < 0) {
		snprintf(lun->poison, sizeof(lun->poison), "unreadable: %s",
			 strerror(-err));
		err = EIO;
	}
	if (!err && (err = syncguard_store_marked(lun->store_id, false)) ==
	    EINPROGRESS) {
		syncguard_latch_pending(lun);	/* the last LUN's final flush */
		return;
	}
	if (err && !lun->poison[0])
		snprintf(lun->poison, sizeof(lun->poison), "errno %d (%s), in "
			 "this tgtd: its record could not be written", err,
			 strerror(err));
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

int syncguard_lun_open(struct syncguard_lun *lun, const char *path,
		       unsigned int block_shift,
		       const struct syncguard_opts *opts,
		       char *err, size_t errlen)
{
	bool plp = opts->mode == SYNCGUARD_MODE_PLP;
	struct stat st;
	int ret;

	memset(lun, 0, sizeof(*lun));
	snprintf(lun->path, sizeof(lun->path), "%s", path);
	lun->fd = -1;
	lun->dfd = -1;
	lun->loop_fd = -1;
	for (int i = 0; i < SYNCGUARD_LOOP_DEPTH; i++)
		lun->under_fd[i] = -1;
	lun->group_fd = -1;
	lun->block_shift = block_shift;
	lun->opts = *opts;
	lun->stats = &lun->local_stats;
	lun->local_stats.magic = SYNCGUARD_STATS_MAGIC;
	lun->local_stats.version = SYNCGUARD_STATS_VERSION;
	lun->local_stats.mode = (uint32_t)opts->mode;
	ret = open_path(lun, path, &st, err, errlen);
	if (ret)
		return ret;
	if (syncguard_store_id(lun->fd, lun->store_id, sizeof(lun->store_id)))
		lun->store_id[0] = '\0';	/* nothing to record it by */
	ret = get_size(lun, &st, path, err, errlen);
	lun->dev_write_cache = syncguard_dev_write_cache(lun->blockdev ?
		st.st_rdev : st.st_dev, lun->dev_name, sizeof(lun->dev_name));
	if (!ret)
		ret = syncguard_check_ram_device(lun->dev_name, path, err,
						 errlen);
	if (!ret && !lun->blockdev)
		ret = syncguard_check_fs(lun->fd, path, plp, err, errlen);
	if (!ret && !lun->blockdev)
		ret = syncguard_loop_users(lun->fd, path, err, errlen);
	if (!ret && !lun->blockdev)
		ret = syncguard_loop_under(lun, path, plp, err, errlen);
	if (!ret && lun->blockdev)
		ret = syncguard_loop_backing(lun, path, st.st_rdev, plp, err,
					     errlen);
	if (!ret)
		ret = syncguard_check_beneath(lun, path, &st, err, errlen);
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
		lun->direct_io = lun->mix.on = false;
	}
	return ret;
}

int syncguard_lun_close_deferred(struct syncguard_lun *lun)
{
	int fd = -1;

	if (lun->fd < 0)
		return -1;
	/* the final flush vouches for every write, as a group flush: on
	 * the group flushes' descriptor (see "sync descriptors"), which
	 * also reports a writeback error a soft latch may stand for (so
	 * that one still flushes; helper-50 found it skipped) */
	if ((!syncguard_lun_latched(lun) || syncguard_lun_latched_soft(lun)) &&
	    syncguard_policy_close_flushes(lun->opts.mode,
					   syncguard_lun_clean(lun))) {
		fd = lun->group_fd;
		lun->group_fd = -1;
		/* the store is marked before this LUN lets go of it */
		syncguard_final_flush_begin(lun->store_id);
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

	if (fd < 0)
		return fd == -1 ? (latched ? -latched : 0) : fd;
	ret = syncguard_datasync(fd);
	close(fd);
	syncguard_final_flush_end(syncguard_state_dir(&lun->opts),
				  lun->store_id, lun->path, -ret);
	return ret;
}

bool syncguard_lun_wce(struct syncguard_lun *lun)
{
	return __atomic_load_n(&lun->wce, __ATOMIC_SEQ_CST);
}

bool syncguard_lun_reported_wce(struct syncguard_lun *lun)
{
	return __atomic_load_n(&lun->wce_switching, __ATOMIC_SEQ_CST) != 0 ||
	       syncguard_lun_wce(lun);
}

bool syncguard_lun_switch_pending(struct syncguard_lun *lun)
{
	return __atomic_load_n(&lun->wce_switching, __ATOMIC_SEQ_CST) != 0 ||
	       (syncguard_lun_wce(lun) && !syncguard_lun_wanted_wce(lun));
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

bool syncguard_lun_wanted_wce(struct syncguard_lun *lun)
{
	return __atomic_load_n(&lun->wce_wanted, __ATOMIC_SEQ_CST);
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
	 * stored wce=1 before this stored 0, and would be lost (helper-56,
	 * by reading); it wins, and this switch flushes nothing */
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
	 * on switch_lock must still switch (setting it to 1 here read as a
	 * later WCE=1, and that request was answered GOOD with WCE at 1);
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
	 * makes it 0 itself).  It was answered GOOD at once, and when the
	 * first one's flush failed, WCE went back to 1 under an initiator
	 * told 0 (helper-56: its plain writes lost on a power cut, 7/7). */
	pthread_mutex_lock(&lun->switch_lock);
	/* one that queued behind another while the LUN is closing flushes
	 * nothing: the close's final flush does that, and the delete waited
	 * for every queued flush in turn, with tgtd's event thread
	 * (helper-57: 8 s of nothing answered on another LUN) */
	ret = __atomic_load_n(&lun->closing, __ATOMIC_SEQ_CST) ? 0 :
	      switch_off(lun);
	pthread_mutex_unlock(&lun->switch_lock);
	return ret;
}

/* ---- durability primitives ---- */

/*
 * Sync descriptors.  Linux reports a writeback error once per open file
 * description (errseq): when two threads flush through one descriptor
 * and both flushes covered pages that failed, one sees EIO and the other
 * gets 0, and would answer GOOD for data that never reached the device.
 * So every call that makes data durable (RWF_DSYNC write, fdatasync,
 * sync_file_range) runs on a descriptor that no other call uses at the
 * same time, opened separately (dup() would share the description).
 * Each descriptor then sees every error since it last reported one; a
 * new one also sees errors nobody has seen yet, but not one another has
 * reported.  That is enough for an RWF_DSYNC write, which vouches for
 * its own pages only, whose errors come after its descriptor was
 * opened.  A group flush vouches for every write before it, so it runs
 * on lun->group_fd, opened with the LUN: group flushes run one at a time
 * (core/flush.c), and a descriptor the pool opened while another call
 * had just taken an error, not yet latched, would have missed it
 * (helper-49, by reading).  The power-cut test (scripts/crashtest.sh)
 * loses acknowledged plp writes without separate descriptors.
 */
static int pool_get(struct syncguard_lun *lun, bool direct)
{
	struct syncguard_fd_pool *p = &lun->pool[direct];
	int fd = -1;

	pthread_mutex_lock(&lun->pool_lock);
	if (p->n)
		fd = p->fds[--p->n];
	pthread_mutex_unlock(&lun->pool_lock);
	if (fd < 0)
		fd = syncguard_reopen(lun, O_RDWR | (direct ? O_DIRECT : 0));
	/* out of descriptors or memory: nothing written yet, BUSY */
	return fd < 0 ? -syncguard_resource_errno(-fd) : fd;
}

/* Idle descriptors a pool keeps, per kind: a queue depth of 32 or so
 * reuses them; the rest of a burst's are closed again.  Kept without a
 * bound, 260 stayed open after one run at QD128 x 2 sessions (helper-62),
 * out of tgtd's RLIMIT_NOFILE for every LUN. */
#define POOL_IDLE_MAX	64u

static void pool_put(struct syncguard_lun *lun, bool direct, int fd)
{
	struct syncguard_fd_pool *p = &lun->pool[direct];

	pthread_mutex_lock(&lun->pool_lock);
	if (p->n == p->cap && p->cap < POOL_IDLE_MAX) {
		unsigned int cap = p->cap ? p->cap * 2 : 16;
		int *fds = realloc(p->fds, cap * sizeof(*fds));

		if (fds) {
			p->fds = fds;
			p->cap = cap;
		}
	}
	if (p->n < p->cap) {
		p->fds[p->n++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&lun->pool_lock);
	if (fd >= 0)
		close(fd);
}

int syncguard_sync_fd_get(struct syncguard_lun *lun)
{
	return pool_get(lun, false);
}

void syncguard_sync_fd_put(struct syncguard_lun *lun, int fd)
{
	pool_put(lun, false, fd);
}

int syncguard_direct_fd_get(struct syncguard_lun *lun)
{
	return pool_get(lun, true);
}

void syncguard_direct_fd_put(struct syncguard_lun *lun, int fd)
{
	pool_put(lun, true, fd);
}

/* Write all of @len bytes at @off through @fd, retrying short writes,
 * and EINTR and EAGAIN of a plain write (syncguard_retry; an RWF_DSYNC
 * write's are its sync's, a failure).  @flags: pwritev2 flags (RWF_DSYNC
 * or 0).  0 or -errno. */
static int write_all(int fd, const uint8_t *buf, size_t len, uint64_t off,
		     int flags)
{
	unsigned int tries = 0;

	while (len) {
		struct iovec iov = { (void *)buf, len };
		ssize_t n = syncguard_sys.pwritev2(fd, &iov, 1, (off_t)off,
						   flags);

		if (n < 0 && !(flags & RWF_DSYNC) &&
		    syncguard_retry(errno, &tries))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;	/* no progress: never loop forever */
		buf += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* Write out [off, off+len) to the device through @fd and wait, no cache
 * flush; a failure latches (SYNCGUARD_CALL_WRITEOUT).  @fd is a sync
 * descriptor taken before the data was written: one opened after could
 * miss a writeback error of that data that another descriptor had
 * already reported (errseq samples at open; see "sync descriptors").
 * Nothing for @len 0, which sync_file_range reads as "to the end of the
 * file" (a FUA write of no blocks on plp wrote out the whole file).
 * 0 or -errno. */
static int writeout(struct syncguard_lun *lun, int fd, uint64_t off,
		    uint64_t len)
{
	unsigned int how = SYNC_FILE_RANGE_WAIT_BEFORE |
			   SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;

	if (!len)
		return 0;
	syncguard_count(&lun->stats->writeouts);
	if (syncguard_sys.sync_file_range(fd, (off_t)off, (off_t)len, how))
		return syncguard_call_failed(lun, SYNCGUARD_CALL_WRITEOUT, errno);
	return 0;
}

/* How one write goes (route) and what it holds until unroute. */
struct route {
	bool direct;			/* O_DIRECT, else the page cache */
	enum syncguard_mix_kind held;	/* its claim in lun->mix */
	uint8_t *bounce;		/* aligned copy, or NULL */
};

/*
 * Where a write (@dsync: an RWF_DSYNC one) goes: O_DIRECT where
 * syncguard_direct_ok says so and, on a LUN that writes both ways, its
 * granules are free of page-cache writes; through an aligned copy if
 * *@buf is not aligned (then *@buf points to the copy).  Else the page
 * cache, after any O_DIRECT write in its granules (core/mix.c).  0, or
 * -SYNCGUARD_ERESOURCE when the copy found no memory (the page cache is
 * no way out: see open_direct); unroute() in every case.
 */
static int route(struct syncguard_lun *lun, const uint8_t **buf, size_t len,
		 uint64_t off, bool dsync, struct route *r)
{
	r->bounce = NULL;
	r->held = SYNCGUARD_MIX_NONE;
	r->direct = syncguard_direct_ok(lun, off, len, dsync);
	if (r->direct && lun->mix.on) {
		r->direct = syncguard_mix_try(&lun->mix, SYNCGUARD_MIX_DIRECT,
					      off, len);
		r->held = r->direct ? SYNCGUARD_MIX_DIRECT : SYNCGUARD_MIX_NONE;
	}
	if (!r->direct) {
		if (lun->mix.on) {
			syncguard_mix_wait(&lun->mix, off, len);
			r->held = SYNCGUARD_MIX_CACHED;
		}
		return 0;
	}
	*buf = syncguard_direct_buf(lun, *buf, len, &r->bounce);
	if (!*buf)
		return -SYNCGUARD_ERESOURCE;
	syncguard_count(&lun->stats->direct_writes);
	return 0;
}

/* The write routed by @r to @len bytes at @off is over. */
static void unroute(struct syncguard_lun *lun, struct route *r,
		    size_t len, uint64_t off)
{
	syncguard_mix_end(&lun->mix, r->held, off, len);
	r->held = SYNCGUARD_MIX_NONE;
	free(r->bounce);
	r->bounce = NULL;
}

/*
 * This write's data, its metadata and the device cache, before return:
 * RWF_DSYNC, or where the file system refuses it (FUSE does), the same
 * write followed by fdatasync on the same descriptor.  O_DIRECT where
 * the LUN's writes go so.  A failure latches as the policy says
 * (SYNCGUARD_CALL_DSYNC_WRITE, or the fallback's FLUSH; its plain write
 * alone does not).  0 or -errno.
 */
static int write_durable(struct syncguard_lun *lun, const uint8_t *buf,
			 size_t len, uint64_t off)
{
	struct route r;
	int fd, err;

	err = route(lun, &buf, len, off, true, &r);
	fd = err ? err : r.direct ? syncguard_direct_fd_get(lun) :
			 syncguard_sync_fd_get(lun);
	if (fd < 0) {
		unroute(lun, &r, len, off);
		return fd;
	}
	err = -EOPNOTSUPP;
	syncguard_count(&lun->stats->dsync_writes);
	if (!__atomic_load_n(&lun->no_rwf_dsync, __ATOMIC_RELAXED))
		err = write_all(fd, buf, len, off, RWF_DSYNC);
	if (err == -EOPNOTSUPP) {
		__atomic_store_n(&lun->no_rwf_dsync, true, __ATOMIC_RELAXED);
		err = write_all(fd, buf, len, off, 0);
		if (!err && (err = syncguard_datasync(fd)))
			syncguard_call_failed(lun, SYNCGUARD_CALL_FLUSH, -err);
	} else if (err) {
		syncguard_call_failed(lun, SYNCGUARD_CALL_DSYNC_WRITE, -err);
	}
	if (r.direct)
		syncguard_direct_fd_put(lun, fd);
	else
		syncguard_sync_fd_put(lun, fd);
	unroute(lun, &r, len, off);
	return err;
}

/* One plain write through the LUN's descriptor for it (see route); whether
 * it went O_DIRECT in *@direct.  0 or -errno. */
static int write_plain(struct syncguard_lun *lun, const uint8_t *buf,
		       size_t len, uint64_t off, bool *direct)
{
	struct route r;
	int err;

	err = route(lun, &buf, len, off, false, &r);
	*direct = r.direct;
	if (!err)
		err = write_all(r.direct ? lun->dfd : lun->fd, buf, len, off, 0);
	unroute(lun, &r, len, off);
	return err;
}

/* A write into the page cache, or with O_DIRECT into the device's cache:
 * volatile until the next device flush.  Counted dirty even when it
 * failed: part of it may have reached the cache (a flush too many is
 * the only cost). */
static int write_cached(struct syncguard_lun *lun, const uint8_t *buf,
			size_t len, uint64_t off)
{
	bool direct;
	int err = write_plain(lun, buf, len, off, &direct);

	syncguard_mark_dirty(lun);
	return err;
}

/* plp: written to the device and waited for, no flush: O_DIRECT, or a
 * buffered write and its writeout, on a sync descriptor taken before the
 * write (see writeout).  0 or -errno. */
static int write_written(struct syncguard_lun *lun, const uint8_t *buf,
			 size_t len, uint64_t off)
{
	/* route() sends it O_DIRECT exactly so (plp writes one way) */
	bool direct = syncguard_direct_ok(lun, off, len, false) && !lun->mix.on;
	int fd = direct ? -1 : syncguard_sync_fd_get(lun), err;

	if (!direct && fd < 0)
		return fd;
	err = write_plain(lun, buf, len, off, &direct);
	if (!err && !direct)	/* fd < 0 cannot be: then direct was */
		err = fd >= 0 ? writeout(lun, fd, off, len) : -EIO;
	if (fd >= 0)
		syncguard_sync_fd_put(lun, fd);
	return err;
}

/*
 * The two ways a write becomes durable (bsopts write_sync): RWF_DSYNC on
 * that write alone, or a cached write plus a device flush shared with
 * every concurrent command (group commit).  The file system may refuse
 * RWF_DSYNC; then the group path serves.
 *
 * write_sync=auto, by a running trial.  Both ways make the write durable
 * before it is answered; they differ only in how many durable writes per
 * second the LUN answers, and which wins depends on the device, the
 * file system and the load: on this disk RWF_DSYNC on O_DIRECT won at
 * QD1 (5.2-6.2k IOPS against 2.8-3.0k, write-through) and group commit
 * at QD32 (19-22k against 17-18k); on the 2 ms-flush FUSE model, where
 * every RWF_DSYNC write is a flush of its own, group commit won 8x at
 * QD32.  Models of the cost did not predict it: comparing k x t_dsync
 * with t_flush chose group commit at QD1 (it leaves out the group way's
 * extra write and hand-offs), and comparing mean command times, sampled
 * one choice in 64, chose RWF_DSYNC at QD32 (a probe's time depends on
 * what the other 63 do).  So the LUN measures what it cares about: in
 * epochs of 200 ms (scored in their second half, on at least 16 durable
 * writes), one each way every 8 epochs, the rest the way whose last
 * epoch answered more of them per second (struct syncguard_trial,
 * core/flush.c, which also says how pauses and a 2x loser are handled).
 * RWF_DSYNC until measured otherwise.
 *
 * The sync loop's trial (note_loop_trial) overrides it: while it makes
 * plain writes durable it does so by RWF_DSYNC, the way it measured
 * against the cached writes' group flush, which is what the other way
 * here would be.
 *
 * Either way, a durable write with no other durable write in flight
 * takes RWF_DSYNC: a group flush it cannot share answers it alone,
 * with the cached write, the flush and their hand-offs that RWF_DSYNC
 * does in one call (on O_DIRECT, often one FUA write).  At QD1 that
 * saves the trial's group epochs (measured before this rule: auto
 * 4.5-5.1k against RWF_DSYNC 4.9-5.7k, write-through QD1 4 KiB).
 */
#define SYNC_TRIAL_WRITES 16
#define SYNC_TRIAL_US 200000

bool syncguard_use_dsync(struct syncguard_lun *lun)
{
	bool group = false;

	switch (lun->opts.write_sync) {
	case SYNCGUARD_WRITE_SYNC_DSYNC:
		break;
	case SYNCGUARD_WRITE_SYNC_GROUP:
		return false;
	case SYNCGUARD_WRITE_SYNC_AUTO:
		/* the loop's trial chose RWF_DSYNC over a group flush */
		group = __atomic_load_n(&lun->sync_trial.arm, __ATOMIC_RELAXED) &&
			__atomic_load_n(&lun->durable_inflight,
					__ATOMIC_RELAXED) > 1 &&
			!__atomic_load_n(&lun->sync_loop_on, __ATOMIC_RELAXED);
		break;
	}
	return !group && !__atomic_load_n(&lun->no_rwf_dsync, __ATOMIC_RELAXED);
}

void syncguard_durable_begin(struct syncguard_lun *lun)
{
	__atomic_fetch_add(&lun->durable_inflight, 1, __ATOMIC_RELAXED);
}

void syncguard_durable_end(struct syncguard_lun *lun)
{
	__atomic_fetch_sub(&lun->durable_inflight, 1, __ATOMIC_RELAXED);
}

void syncguard_durable_answered(struct syncguard_lun *lun, unsigned int n)
{
	if (lun->opts.write_sync != SYNCGUARD_WRITE_SYNC_AUTO || !n)
		return;
	pthread_mutex_lock(&lun->sync_trial_lock);
	if (syncguard_trial_note(&lun->sync_trial, n, n, syncguard_now_us(),
				 SYNC_TRIAL_WRITES, SYNC_TRIAL_US))
		syncguard_trial_publish(&lun->sync_trial,
					&lun->stats->write_sync_way,
					lun->stats->write_sync_rate);
	pthread_mutex_unlock(&lun->sync_trial_lock);
}

/*
 * The WRITE+SYNCHRONIZE CACHE loop.  With WCE=1 a plain write may stay
 * volatile until the next SYNCHRONIZE CACHE; a sync writer that sends
 * one after every write (dd oflag=sync, iozone -o, a database's log on
 * an initiator that sees WCE=1) then waits, for each write, for a cached
 * write plus a group flush: the page cache's writeout and a device flush
 * behind the flush already running.  Made durable at once instead
 * (RWF_DSYNC, on O_DIRECT where aligned: one FUA write, or a write and
 * its flush, in one call), the write leaves nothing dirty, and the
 * SYNCHRONIZE CACHE after it is answered at once on tgtd's event thread
 * (core/exec.c, sync_cache_quick).  Measured on this disk, QD1 4 KiB:
 * WRITE+SYNCHRONIZE CACHE on write-back ran 2.08k IOPS where
 * write-through, whose writes are made durable so, ran 4.21k (5.0k and
 * 4.5k in an earlier run).  Durable is more than WCE=1 asks, so either
 * way keeps the contract (core/policy.c); this only picks the cheaper.
 * Where other writes come between the SYNCHRONIZE CACHEs (every:N, a
 * plain write load) a shared flush for many writes is cheaper than one
 * sync each, so here only a strict alternation counts: SYNC_STREAK
 * SYNCHRONIZE CACHEs in a row that each followed a plain write, reset by
 * two writes in a row.  Several writers at once interleave their
 * commands: a running trial decides for them (note_loop_trial, below).
 * write_sync=group (the administrator's choice of shared flushes) keeps
 * writes cached.  SYNC_STREAK: core/internal.h.
 */
static void loop_note_write(struct syncguard_lun *lun);

void syncguard_lun_note_cdb(struct syncguard_lun *lun, const uint8_t *cdb,
			    size_t len)
{
	struct syncguard_cdb c;

	/* every command passes here, on tgtd's event thread: the rest (a
	 * READ's, say) are passed over before a full decode */
	if (!len || (cdb[0] != 0x0a && cdb[0] != 0x2a && cdb[0] != 0xaa &&
		     cdb[0] != 0x8a))	/* WRITE(6/10/12/16) */
		return;
	if (syncguard_cdb_decode(cdb, len, &c) || c.op != SYNCGUARD_OP_WRITE)
		return;
	lun->loop_bytes += (uint64_t)c.nblocks << lun->block_shift;
	if (c.fua)
		return;
	loop_note_write(lun);
	if (__atomic_exchange_n(&lun->last_was_write, true, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&lun->sync_streak, 0, __ATOMIC_RELAXED) >=
	    SYNC_STREAK)	/* the streak ended: the trial's way again */
		__atomic_store_n(&lun->stats->sync_loop_way,
				 (uint64_t)__atomic_load_n(&lun->sync_loop_on,
							   __ATOMIC_RELAXED),
				 __ATOMIC_RELAXED);
}

/*
 * With several commands in flight the loop's writes and SYNCHRONIZE
 * CACHEs interleave (32 writers: W W S W S S ...), so the streak above
 * never forms, and which way answers more is not a fact but depends on
 * the device and the write size: 4 KiB QD32 WRITE+SYNCHRONIZE CACHE, a
 * page-cache write and a shared group flush (write-back) ran 30.2k IOPS
 * against RWF_DSYNC on O_DIRECT's 20.6k (write-through) in one `make
 * bench` run, 18.7k against 23.5k in another, and at 64 KiB 1.8k
 * against 3.6k.  So a running trial (struct syncguard_trial) decides:
 * epochs of LOOP_TRIAL_US, each way once every 8, the rest the faster.
 * It is scored in bytes written per second, by every initiator of the
 * LUN: its way applies to all their plain writes, and scored in
 * SYNCHRONIZE CACHEs per second it made another initiator's plain
 * writes RWF_DSYNC and slow (helper-2: 113 MB/s against 161 with
 * write_sync=group, beside 4 sync writers), or a poller that sends
 * SYNCHRONIZE CACHE alone, whose commands are answered at once once
 * nothing is dirty, locked it there.  At a fixed queue depth what
 * arrives is what was answered, so it counts commands as they come.
 * It makes plain writes durable only while the load is a sync loop,
 * at least one SYNCHRONIZE CACHE for every LOOP_WRITES_PER_SYNC plain
 * writes in the epoch before: for a plain write load with a
 * SYNCHRONIZE CACHE now and then, a sync per write costs far more than
 * the one shared flush it saves.  While the streak holds (one writer,
 * or several that alternate) it makes the writes durable either way:
 * the trial is not fed then (its two ways would be the same, and a way
 * that lost 2x by noise is tried again only every 64 epochs), and after
 * 300 ms of it starts over, as after any pause.  Write-back runs it
 * while WCE=1 (at WCE=0 every write is durable) and write_sync is not
 * group (which keeps writes cached).
 */
#define LOOP_TRIAL_SYNCS 16
#define LOOP_TRIAL_US 200000
#define LOOP_WRITES_PER_SYNC 2
#define LOOP_WRITES_RUN 256	/* plain writes in a row that end it: more
				 * than one per writer whose SYNCHRONIZE
				 * CACHE is still to come */

/* The epoch's counts start again, and plain writes go the trial's way;
 * the counters show it (way 0 cached, 1 durable at once). */
static void loop_epoch_start(struct syncguard_lun *lun)
{
	lun->loop_syncs = lun->loop_writes = 0;
	__atomic_store_n(&lun->sync_loop_on, lun->loop_trial.arm,
			 __ATOMIC_RELAXED);
	syncguard_trial_publish(&lun->loop_trial, &lun->stats->sync_loop_way,
				lun->stats->sync_loop_rate);
}

/* The trial starts over at the next SYNCHRONIZE CACHE: writes cached,
 * neither way's rate kept. */
static void loop_restart(struct syncguard_lun *lun)
{
	memset(&lun->loop_trial, 0, sizeof(lun->loop_trial));
	loop_epoch_start(lun);
}

static void note_loop_trial(struct syncguard_lun *lun)
{
	struct syncguard_trial *t = &lun->loop_trial;
	uint64_t bytes = lun->loop_bytes;

	lun->loop_bytes = 0;
	if (__atomic_load_n(&lun->sync_streak, __ATOMIC_RELAXED) >=
	    SYNC_STREAK) {
		__atomic_store_n(&lun->stats->sync_loop_way,
				 SYNCGUARD_SYNC_LOOP_STREAK, __ATOMIC_RELAXED);
		return;
	}
	lun->loop_syncs++;
	if (!syncguard_trial_note(t, bytes, 1, syncguard_now_us(),
				  LOOP_TRIAL_SYNCS, LOOP_TRIAL_US))
		return;
	/* an epoch ended (not a start after a pause, epoch 0) that was no
	 * sync loop: the trial starts over */
	if (t->epoch &&
	    lun->loop_syncs * LOOP_WRITES_PER_SYNC < lun->loop_writes)
		loop_restart(lun);
	else
		loop_epoch_start(lun);
}

/* A plain write.  Epochs end only at a SYNCHRONIZE CACHE: a write load
 * that follows a sync loop would have kept its writes durable for as
 * long as it sent none (a test found 32,768 writes made RWF_DSYNC after
 * the loop had ended), so LOOP_WRITES_RUN of them with no SYNCHRONIZE
 * CACHE between stop the trial at once (counted against the epoch's
 * SYNCHRONIZE CACHEs instead, 1,783 were RWF_DSYNC first). */
static void loop_note_write(struct syncguard_lun *lun)
{
	lun->loop_writes++;
	if (++lun->loop_run > LOOP_WRITES_RUN && lun->loop_trial.t0_us)
		loop_restart(lun);
}

/*
 * The streak counts only while the several writers' trial has not run
 * an epoch (epoch 0: a single writer from the start, or a LUN where the
 * trial does not run).  Once it has, the trial decides: its way 1 made
 * the writes of 32 writers on the FUSE model slow enough to arrive in
 * strict alternation, the streak then made them durable whatever the
 * trial measured, and write-back WRITE+SYNCHRONIZE CACHE at QD32 ran
 * 373 IOPS at 0.98 flushes per operation against 3,182 and 0.034 the
 * day before (make bench, 2 ms flushes).  The trial itself runs only
 * where RWF_DSYNC writes run concurrently (asynchronous O_DIRECT
 * RWF_DSYNC honoured): on FUSE they went one at a time.
 */
void syncguard_lun_note_sync_cache(struct syncguard_lun *lun)
{
	unsigned int n = __atomic_load_n(&lun->sync_streak, __ATOMIC_RELAXED);
	bool counts = !lun->loop_trial.epoch;

	if (__atomic_exchange_n(&lun->last_was_write, false, __ATOMIC_RELAXED) &&
	    n < SYNC_STREAK && counts)
		__atomic_store_n(&lun->sync_streak, n + 1, __ATOMIC_RELAXED);
	else if (!counts && n)
		__atomic_store_n(&lun->sync_streak, 0, __ATOMIC_RELAXED);
	lun->loop_run = 0;
	if (lun->opts.mode == SYNCGUARD_MODE_WRITE_BACK &&
	    lun->opts.write_sync != SYNCGUARD_WRITE_SYNC_GROUP &&
	    lun->async_dsync_ok && syncguard_lun_wce(lun))
		note_loop_trial(lun);
}

enum syncguard_persist syncguard_write_persist(struct syncguard_lun *lun,
					       enum syncguard_persist persist)
{
	if (persist != SYNCGUARD_PERSIST_CACHED ||
	    lun->opts.write_sync == SYNCGUARD_WRITE_SYNC_GROUP ||
	    __atomic_load_n(&lun->no_rwf_dsync, __ATOMIC_RELAXED) ||
	    (__atomic_load_n(&lun->sync_streak, __ATOMIC_RELAXED) < SYNC_STREAK &&
	     !__atomic_load_n(&lun->sync_loop_on, __ATOMIC_RELAXED)) ||
	    syncguard_lun_latched(lun))	/* plain writes go on, cached */
		return persist;
	return SYNCGUARD_PERSIST_DURABLE;
}

static int write_persist_durable(struct syncguard_lun *lun, const uint8_t *buf,
				 size_t len, uint64_t off)
{
	int err;

	syncguard_durable_begin(lun);
	if (syncguard_use_dsync(lun)) {
		err = write_durable(lun, buf, len, off);
	} else {
		err = write_cached(lun, buf, len, off);
		if (!err)
			err = syncguard_lun_flush(lun, false);
	}
	syncguard_durable_end(lun);
	if (!err)
		syncguard_durable_answered(lun, 1);
	return err;
}

bool syncguard_direct_ok(struct syncguard_lun *lun, uint64_t off, size_t len,
			 bool dsync)
{
	return (lun->direct_io || (lun->mix.on && dsync)) && len &&
	       !(off % lun->dio_align) && !(len % lun->dio_align);
}

const uint8_t *syncguard_direct_buf(struct syncguard_lun *lun,
				    const uint8_t *buf, size_t len,
				    uint8_t **bounce)
{
	*bounce = NULL;
	if (!((uintptr_t)buf % lun->dio_mem_align))
		return buf;
	if (posix_memalign((void **)bounce, 4096, len))
		return NULL;
	memcpy(*bounce, buf, len);
	return *bounce;
}

int syncguard_lun_write(struct syncguard_lun *lun, const uint8_t *buf,
			size_t len, uint64_t off, enum syncguard_persist persist)
{
	int err = 0;

	if (persist != SYNCGUARD_PERSIST_CACHED && syncguard_lun_recheck(lun))
		return -syncguard_lun_latched(lun);
	switch (persist) {
	case SYNCGUARD_PERSIST_CACHED:
		return write_cached(lun, buf, len, off);
	case SYNCGUARD_PERSIST_DURABLE:
		err = write_persist_durable(lun, buf, len, off);
		break;
	case SYNCGUARD_PERSIST_WRITTEN:
		err = write_written(lun, buf, len, off);
		break;
	}
	/* a failure has latched where the policy says (the call that
	 * failed knows: write_durable, writeout, the group flush) */
	if (!err && persist != SYNCGUARD_PERSIST_CACHED)
		err = syncguard_lun_lost_meanwhile(lun);
	return err;
}

int syncguard_lun_persist(struct syncguard_lun *lun,
			  enum syncguard_persist persist)
{
	/* WRITTEN asks for the data in the device: a flush gives that and
	 * more (plp writes its data WRITTEN as it goes, so none comes here) */
	if (persist == SYNCGUARD_PERSIST_CACHED)
		return 0;
	return syncguard_lun_flush(lun, false);
}

/* Exactly @len bytes at @off from @fd: 0 or -errno (-EIO at EOF). */
static int read_all(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	unsigned int tries = 0;

	while (len) {
		ssize_t n = syncguard_sys.pread(fd, buf, len, (off_t)off);

		if (n < 0 && syncguard_retry(errno, &tries))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;	/* the file shrank under us */
		buf += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int syncguard_lun_read(struct syncguard_lun *lun, uint8_t *buf, size_t len,
		       uint64_t off)
{
	size_t whole;
	uint8_t *bounce;
	int err;

	if (!lun->direct_reads)
		return read_all(lun->fd, buf, len, off);
	whole = (len + lun->dio_align - 1) / lun->dio_align * lun->dio_align;
	if (whole == len && !((uintptr_t)buf % lun->dio_mem_align))
		return read_all(lun->dfd, buf, len, off);
	/* a short Data-In ends inside a block, or an unaligned buffer: the
	 * whole sectors into an aligned copy (@off starts a block, a block
	 * is whole sectors, so they are within the LUN) */
	if (posix_memalign((void **)&bounce, 4096, whole))
		return -SYNCGUARD_ERESOURCE;
	err = read_all(lun->dfd, bounce, whole, off);
	if (!err)
		memcpy(buf, bounce, len);
	free(bounce);
	return err;
}

static int punch_aligned(struct syncguard_lun *lun, uint64_t off,
			 uint64_t len)
{
	unsigned int tries = 0;
	int err = 0;

	/* it changes the page cache (zeroes a partial page): core/mix.c */
	if (lun->mix.on)
		syncguard_mix_wait(&lun->mix, off, len);
	/* On a block device this is blkdev_fallocate: zeroes the range and
	 * discards where the device can, so reads return zeroes (LBPRZ). */
	while (syncguard_sys.fallocate(lun->fd, FALLOC_FL_PUNCH_HOLE |
				       FALLOC_FL_KEEP_SIZE, (off_t)off,
				       (off_t)len)) {
		if (!syncguard_retry(errno, &tries)) {
			err = -errno;
			break;
		}
	}
	if (lun->mix.on)
		syncguard_mix_end(&lun->mix, SYNCGUARD_MIX_CACHED, off, len);
	/* new metadata, volatile; after a failure too (part of the range
	 * may be punched) */
	syncguard_mark_dirty(lun);
	return err;
}

/* zeroes written over @len bytes at @off (less than one sector) */
static int zero_bytes(struct syncguard_lun *lun, uint64_t off, uint64_t len)
{
	uint8_t *zero;
	int err;

	if (!len)
		return 0;
	zero = calloc(1, len);
	if (!zero)
		return -SYNCGUARD_ERESOURCE;
	err = syncguard_lun_write(lun, zero, len, off, SYNCGUARD_PERSIST_CACHED);
	free(zero);
	return err;
}

/*
 * A block device deallocates whole logical sectors of its own
 * (blkdev_fallocate refuses anything else with EINVAL), which a LUN with
 * smaller blocks (512 on a 4 KiB-sector device) need not give: the
 * whole sectors inside the range are deallocated, and the blocks at
 * either end that share a sector with blocks outside it are written
 * with zeroes, so the range reads back as zeroes as LBPRZ=1 says (its
 * UNMAP had failed as a MEDIUM ERROR: helper-53).
 */
int syncguard_lun_punch(struct syncguard_lun *lun, uint64_t off, uint64_t len)
{
	uint64_t g = lun->punch_align ? lun->punch_align : 1;
	uint64_t head = (off + g - 1) / g * g, tail = (off + len) / g * g;
	int err;

	if (head >= tail)
		return zero_bytes(lun, off, len);
	err = zero_bytes(lun, off, head - off);
	if (!err)
		err = punch_aligned(lun, head, tail - head);
	if (!err)
		err = zero_bytes(lun, tail, off + len - tail);
	return err;
}
