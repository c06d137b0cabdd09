/*
 * Loop devices and their backing files: one store under two names.
 *
 * A LUN on /dev/loopN writes, in the end, into the loop's backing file,
 * and the loop's flush is an fsync of that file.  So the file's own file
 * system decides durability (a file on a "nobarrier" or RAM file system
 * under a loop device is as unsafe as the file exported directly), and
 * the file and every loop device over it are one store for the rule of
 * one LUN per store.  Conversely, a file that backs a loop device which
 * is mounted (or otherwise claimed) is that file system's medium, and
 * exporting it would write under the file system's feet, as exporting
 * the loop device would (which the O_EXCL claim refuses).
 *
 * Without these checks, a loop device over a file on a nobarrier ext4
 * takes acknowledged write-through writes (11,413 in one run) with 0
 * flushes reaching the disk; two loop devices over one file and the
 * file itself are accepted as three LUNs; and the backing file of a
 * mounted loop device is accepted as a file LUN
 * (test_blockdev_loop_and_its_file).
 *
 * A file LUN on a file system that sits on a loop device is checked
 * at that loop's backing file's file system too (a tmpfs file under an
 * ext4 survives nothing), and so is it by the mount watch; and so on
 * down, as loop devices stack (a loop over a file in an ext4 on another
 * loop over a file ...), SYNCGUARD_LOOP_DEPTH levels under the store at
 * most: a plp loop with direct I/O on, over a file on a loop with
 * direct I/O off, would be taken if only one level were followed, and
 * its FUA writes would leave 48 MiB dirty in the lower loop's page cache
 * (test_blockdev_plp_stacked_loops_need_direct_io).  A deeper stack is
 * refused, not taken unchecked.  A partition of a loop
 * device is checked at the loop's file and takes a shared lock on it:
 * two partitions are two stores, but neither goes with the file itself
 * or the whole loop device exported.  A loop whose backing file
 * is gone from the name space (deleted) cannot be checked and is
 * refused, and a loop over a block device is checked at that device.
 * A file on an overlay is followed down from its upper layer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/loop.h>

#include "internal.h"

/* The backing file's path of the loop device (or of a partition of one,
 * @part set then) with sysfs directory @sys into @buf: 0, or -errno
 * (-ENOENT: not a loop device, or detached). */
static int backing_path(const char *sys, char *buf, size_t len, bool *part)
{
	char p[PATH_MAX];
	FILE *f;
	bool ok;

	snprintf(p, sizeof(p), "%s/loop/backing_file", sys);
	*part = false;
	if (!(f = fopen(p, "re"))) {
		snprintf(p, sizeof(p), "%s/../loop/backing_file", sys);
		*part = true;
		f = fopen(p, "re");
	}
	if (!f)
		return -errno;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (!ok)
		return -ENOENT;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* An open descriptor of the file behind loop device @lfd whose backing
 * path sysfs gives as @path, checked to be that very inode; or -errno. */
static int open_backing(int lfd, const char *path)
{
	struct loop_info64 info;
	struct stat st;
	int fd;

	if (ioctl(lfd, LOOP_GET_STATUS64, &info))
		return -errno;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_ino != info.lo_inode ||
	    st.st_dev != (dev_t)info.lo_device) {
		close(fd);
		return -ESTALE;		/* renamed or deleted since */
	}
	return fd;
}

/* The sysfs direct-I/O attribute of the loop device with sysfs
 * directory @sys (a partition's: @part) into @buf. */
static void dio_attr(char *buf, size_t len, const char *sys, bool part)
{
	snprintf(buf, len, "%s/%sloop/dio", sys, part ? "../" : "");
}

/* The direct-I/O setting in sysfs attribute @attr: 1 on, 0 off (loop's
 * default: it writes into its backing file's page cache and completes
 * there), -1 unknown (no such attribute: detached, or no loop). */
static int dio_at(const char *attr)
{
	FILE *f = fopen(attr, "re");
	int c;

	if (!f)
		return -1;
	c = fgetc(f);
	fclose(f);
	return c == '0' ? 0 : c == '1' ? 1 : -1;
}

/*
 * Does the loop device with sysfs directory @sys (a partition's: @part)
 * write through the page cache (direct I/O off, loop's default) into a
 * file @fd with holes?  Then Linux's loop driver can lose writes it
 * reported durable once the file's file system fills up: RWF_DSYNC
 * writes straight to such a loop device, no tgtd involved,
 * read back lost for 298-426 of about 1,300 acknowledged ones, in each of
 * four runs; with direct I/O on, or nothing to allocate, none.  Nothing
 * above the loop driver sees it, so the LUN says so (bs_syncguard.c;
 * test_blockdev_loop_holes_warned).
 */
static bool holes_buffered(const char *sys, bool part, int fd)
{
	char attr[96];
	struct stat st;

	dio_attr(attr, sizeof(attr), sys, part);
	return dio_at(attr) == 0 && !fstat(fd, &st) &&
	       (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size;
}

/*
 * plp sends no flush, so nothing under it may hold a write in host RAM
 * (the mode contract).  A loop device with direct I/O off completes
 * writes in its backing file's page cache: 48 FUA writes of 1 MiB to a
 * plp LUN on such a loop would be answered GOOD while Dirty grows by
 * 48 MiB, and SYNCHRONIZE CACHE (nothing to do on plp) leaves it so
 * (test_blockdev_plp_loop_needs_direct_io).
 * Refused, as tmpfs is, for a LUN on the loop device (@what names it)
 * or on a file in a file system on it, at any depth; with direct I/O
 * on, the sysfs attribute is kept (the next free lun->loop_dio_attr) for
 * the mount watch, which latches the LUN if it is turned off later
 * (syncguard_loop_dio_lost).  Direct I/O on is not enough by itself: a
 * loop's O_DIRECT writes into a file that journals its data are
 * buffered all the same, which syncguard_check_fs refuses for plp on
 * the backing file.  0 or -EINVAL.
 */
static int plp_over_loop(struct syncguard_lun *lun, const char *sys,
			 bool part, const char *what, char *err, size_t errlen)
{
	char *attr = NULL;

	for (int i = 0; i <= SYNCGUARD_LOOP_DEPTH && !attr; i++)
		if (!lun->loop_dio_attr[i][0])
			attr = lun->loop_dio_attr[i];
	if (!attr)	/* the depth was checked first: cannot happen */
		return -EINVAL;
	dio_attr(attr, sizeof(lun->loop_dio_attr[0]), sys, part);
	if (dio_at(attr) == 0) {
		attr[0] = '\0';
		syncguard_seterr(err, errlen, "mode=plp: %s has direct I/O "
			"off, so its writes end in the page cache of its "
			"backing file, which plp never flushes: turn it on "
			"(losetup --direct-io=on) or use write-through or "
			"write-back", what);
		return -EINVAL;
	}
	return 0;
}

/*
 * Direct I/O on is not enough either when the backing file @bfd cannot
 * do direct I/O (syncguard_dio_align: fscrypt without inline crypto,
 * fs-verity, inline data): the loop's dio attribute says 1, and ext4
 * turns its O_DIRECT writes into buffered ones, which plp never flushes
 * (8 MiB of FUA writes to such a loop answered GOOD with 2,048 pages
 * dirty; tests/proto check_blockdev.c, test_blockdev_fscrypt).  A block
 * device behind the loop always can.  0 or -EINVAL.
 */
static bool is_blk(int fd);

static int plp_backing_dio(int bfd, const char *what, char *err,
			   size_t errlen)
{
	unsigned int align, mem_align;

	if (is_blk(bfd) || syncguard_dio_align(bfd, &align, &mem_align))
		return 0;
	syncguard_seterr(err, errlen, "mode=plp: %s cannot do direct I/O "
		"(fscrypt without inline encryption, fs-verity or inline "
		"data), so the loop's writes end in its page cache, which plp "
		"never flushes: use write-through or write-back", what);
	return -EINVAL;
}

bool syncguard_loop_dio_lost(const struct syncguard_lun *lun)
{
	/* none, or detached (-1): nothing to tell */
	for (int i = 0; i <= SYNCGUARD_LOOP_DEPTH; i++)
		if (lun->loop_dio_attr[i][0] &&
		    dio_at(lun->loop_dio_attr[i]) == 0)
			return true;
	return false;
}

static int loop_layer(struct syncguard_lun *lun, dev_t dev,
		      const char *path, bool plp, int level, char *err,
		      size_t errlen);

/* Is @fd a block device (a loop device's backing may be one)? */
static bool is_blk(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISBLK(st.st_mode);
}

/* The loop devices under the file @fd (the LUN's file, or the backing
 * of a loop device above, named @path), from level @level down:
 * loop_layer's checks for each.  The device the next loop down would be
 * is the one that holds @fd's data (syncguard_data_devs): its file
 * system's, or for a file on an overlay its upper layer's (a LUN opened
 * read-write has its file copied up there: a plp file on an overlay
 * over an ext4 on a loop with direct I/O off would otherwise be taken,
 * with 50 MiB left dirty: test_blockdev_plp_overlay_over_buffered_loop),
 * or a btrfs's.  A btrfs over several devices, one of them a loop, is
 * refused: one chain of loops is followed, not several.  0 or -errno.
 */
static int check_below(struct syncguard_lun *lun, int fd, const char *path,
		       bool plp, int level, char *err, size_t errlen)
{
	char *table = syncguard_mounts_read_for(path, err, errlen);
	dev_t devs[SYNCGUARD_LAYER_DEVS];
	char sys[64], bpath[PATH_MAX];
	bool part;
	int n;

	if (!table)
		return -EINVAL;	/* no table, nothing below known */
	n = syncguard_data_devs(fd, table, devs, SYNCGUARD_LAYER_DEVS);
	free(table);
	if (n < 0)
		return 0;	/* an overlay without an upper layer to find
				 * (syncguard_check_fs refused it already),
				 * or devices not listed (syncguard_check_beneath
				 * refuses the LUN) */
	if (n == 1)
		return loop_layer(lun, devs[0], path, plp, level, err, errlen);
	for (int i = 0; i < n; i++) {
		snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u",
			 major(devs[i]), minor(devs[i]));
		if (backing_path(sys, bpath, sizeof(bpath), &part))
			continue;
		syncguard_seterr(err, errlen, "%s: on a file system over %d "
			"devices, one of them a loop device (over %s), whose "
			"backing file these checks do not follow there: not "
			"exported", path, n, bpath);
		return -EINVAL;
	}
	return 0;
}

/* The checks of a loop device's backing @bfd (named @label in the
 * reasons): a file's as syncguard_check_fs; a block device (losetup
 * over a disk or another loop: its node is on devtmpfs, which is no RAM
 * store: test_blockdev_loop_over_block_device) must not be RAM.  0, or
 * -EINVAL. */
static int check_backing(int bfd, const char *label, bool plp, char *err,
			 size_t errlen)
{
	struct stat st;
	char name[64];

	if (fstat(bfd, &st))
		return 0;
	if (!S_ISBLK(st.st_mode))
		return syncguard_check_fs(bfd, label, plp, err, errlen);
	if (syncguard_dev_name(st.st_rdev, name, sizeof(name)))
		return 0;
	return syncguard_check_ram_device(name, label, err, errlen);
}

/* A loop device (@what) whose backing file @path cannot be opened
 * (@ret): deleted, or not in tgtd's mount name space.  What it survives,
 * and what is under it, cannot be checked, so it is refused (taken, a
 * plp loop over a deleted file on a loop with direct I/O off would
 * leave 39 MiB dirty: test_blockdev_loop_over_deleted_file_refused).
 * -EINVAL. */
static int unreachable(const char *what, const char *path, int ret,
		       char *err, size_t errlen)
{
	syncguard_seterr(err, errlen, "%s: its backing file %s cannot be "
		"opened (%s: deleted, or outside tgtd's mount name space), "
		"so what it survives cannot be checked: not exported", what,
		path, strerror(-ret));
	return -EINVAL;
}

int syncguard_loop_backing(struct syncguard_lun *lun, const char *dev,
			   dev_t rdev, bool plp, char *err, size_t errlen)
{
	char sys[64], path[PATH_MAX], label[PATH_MAX + 300];
	bool part;
	int ret;

	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(rdev),
		 minor(rdev));
	if (backing_path(sys, path, sizeof(path), &part))
		return 0;			/* not a loop device */
	lun->on_loop = true;
	if (plp && (ret = plp_over_loop(lun, sys, part, dev, err, errlen)))
		return ret;
	lun->loop_fd = open_backing(lun->fd, path);
	if (lun->loop_fd < 0)
		return unreachable(dev, path, lun->loop_fd, err, errlen);
	/* the reasons name the file, so say whose file it is */
	snprintf(label, sizeof(label), "%s (the backing file of %s)", path,
		 dev);
	ret = check_backing(lun->loop_fd, label, plp, err, errlen);
	if (!ret && plp)
		ret = plp_backing_dio(lun->loop_fd, label, err, errlen);
	if (!ret && plp && !is_blk(lun->loop_fd))
		ret = syncguard_check_plp_file(lun, lun->loop_fd, label,
					       lun->opts.alloc_check, err, errlen);
	/* partitions of one loop device are distinct stores (the O_EXCL
	 * claims keep the whole device and its partitions apart), so they
	 * share the lock; a LUN on the file itself or the whole device
	 * takes it alone, whichever comes first */
	if (!ret && flock(lun->loop_fd, (part ? LOCK_SH : LOCK_EX) | LOCK_NB)
	    && errno == EWOULDBLOCK) {
		syncguard_seterr(err, errlen, "%s: already exported by "
			"another syncguard LUN", label);
		ret = -EBUSY;
	}
	if (!ret)	/* and its copy in an overlay's upper layer */
		ret = syncguard_overlay_hold(lun, lun->loop_fd, part ? LOCK_SH :
					     LOCK_EX, label, err, errlen);
	if (!ret)
		ret = check_below(lun, lun->loop_fd, path, plp, 0, err,
				  errlen);
	if (ret) {
		close(lun->loop_fd);
		lun->loop_fd = -1;
		return ret;
	}
	lun->loop_holes_buffered = !is_blk(lun->loop_fd) &&
				   holes_buffered(sys, part, lun->loop_fd);
	return 0;
}

/* The loop device (the whole one, for a partition: @part) whose sysfs
 * directory is @sys, opened read-only from /dev; or -errno. */
static int open_loop_node(const char *sys, bool part)
{
	char real[PATH_MAX], node[PATH_MAX + 8], *slash;
	int fd;

	if (!realpath(sys, real))
		return -errno;
	if (part && (slash = strrchr(real, '/')))
		*slash = '\0';
	slash = strrchr(real, '/');
	snprintf(node, sizeof(node), "/dev/%s", slash ? slash + 1 : real);
	fd = open(node, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* One loop device under a store, level @level (0: the one right
 * under the file system of the file @path names, or of a loop LUN's
 * backing file): the device @dev, if it is a loop device (or a
 * partition of one).  For plp, its direct I/O must be on; its backing
 * file passes syncguard_check_fs and is kept in lun->under_fd[@level]
 * for the mount watch, and the loops under it are checked the same way.
 * 0 (also: not a loop), or -EINVAL with the reason in @err (also for a
 * backing file that cannot be opened, and a stack deeper than
 * SYNCGUARD_LOOP_DEPTH).
 */
static int loop_layer(struct syncguard_lun *lun, dev_t dev,
		      const char *path, bool plp, int level, char *err,
		      size_t errlen)
{
	char sys[64], bpath[PATH_MAX], label[2 * PATH_MAX + 64];
	bool part;
	int lfd, bfd, ret;

	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(dev),
		 minor(dev));
	if (backing_path(sys, bpath, sizeof(bpath), &part))
		return 0;			/* not on a loop device */
	if (level >= SYNCGUARD_LOOP_DEPTH) {
		syncguard_seterr(err, errlen, "%s: more than %d loop devices "
			"stacked under it: what it survives is not checked "
			"that deep, so it is not exported", path,
			SYNCGUARD_LOOP_DEPTH);
		return -EINVAL;
	}
	snprintf(label, sizeof(label), "the loop device under %s (over %s)",
		 path, bpath);
	if (plp && (ret = plp_over_loop(lun, sys, part, label, err, errlen)))
		return ret;
	if ((lfd = open_loop_node(sys, part)) < 0)
		return unreachable(label, bpath, lfd, err, errlen);
	bfd = open_backing(lfd, bpath);
	close(lfd);
	if (bfd < 0)
		return unreachable(label, bpath, bfd, err, errlen);
	snprintf(label, sizeof(label), "%s (its file system is on a loop "
		 "device over %s)", path, bpath);
	ret = check_backing(bfd, label, plp, err, errlen);
	if (!ret && plp)
		ret = plp_backing_dio(bfd, label, err, errlen);
	if (!ret)
		ret = check_below(lun, bfd, bpath, plp, level + 1, err, errlen);
	if (ret)
		close(bfd);
	else
		lun->under_fd[level] = bfd;
	return ret;
}

int syncguard_loop_under(struct syncguard_lun *lun, const char *path,
			 bool plp, char *err, size_t errlen)
{
	return check_below(lun, lun->fd, path, plp, 0, err, errlen);
}

/* A file named two ways: its path as tgtd sees it, and where that lies
 * (syncguard_mounts_fs_path), to recognise it through a bind mount. */
struct named_file {
	char path[PATH_MAX];
	char dev[32], inner[PATH_MAX];
	bool placed;		/* dev and inner are known */
};

/* Is @path (a loop's backing file, as sysfs prints it) @self? */
static bool same_file(const char *path, const struct named_file *self,
		      const char *table)
{
	char dev[32], inner[PATH_MAX];

	if (!strcmp(path, self->path))
		return true;
	return self->placed && !syncguard_mounts_fs_path(table, path, dev,
		sizeof(dev), inner, sizeof(inner)) &&
		!strcmp(dev, self->dev) && !strcmp(inner, self->inner);
}

/* Is loop device @name (sysfs, e.g. "loop3") backed by @self, and
 * claimed by someone (O_EXCL fails)?  Its /dev path into @dev.  The
 * paths are compared as strings, as the kernel prints them, and through
 * the mount table (a bind mount's alias of the file): nothing here may
 * touch another loop device's file system (a stopped FUSE daemon, a
 * dead NFS server would hang tgtd's event thread, and so stall every
 * LUN for as long as that daemon or server does not answer).  A hard
 * link of the file is not recognised. */
static bool loop_held_over(const char *name, const struct named_file *self,
			   const char *table, char *dev, size_t devlen)
{
	char sys[300], path[PATH_MAX];
	bool part;
	int fd;

	snprintf(sys, sizeof(sys), "/sys/block/%s", name);
	if (backing_path(sys, path, sizeof(path), &part) ||
	    !same_file(path, self, table))
		return false;
	snprintf(dev, devlen, "/dev/%s", name);
	fd = open(dev, O_RDONLY | O_CLOEXEC | O_EXCL);
	if (fd >= 0)
		close(fd);
	return fd < 0 && errno == EBUSY;
}

int syncguard_loop_users(int fd, const char *path, char *err, size_t errlen)
{
	struct named_file self;
	char dev[300], link[32], *table;
	struct dirent *e;
	ssize_t n;
	int ret = 0;
	DIR *d;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, self.path, sizeof(self.path) - 1);
	if (n <= 0 || !(d = opendir("/sys/block")))
		return 0;			/* cannot tell */
	self.path[n] = '\0';
	/* a loop over this file's mount, or another name of it */
	if (!(table = syncguard_mounts_read_for(path, err, errlen))) {
		closedir(d);
		return -EINVAL;
	}
	self.placed = !syncguard_mounts_fs_path(table, self.path,
		self.dev, sizeof(self.dev), self.inner, sizeof(self.inner));
	while (!ret && (e = readdir(d))) {
		if (strncmp(e->d_name, "loop", 4) ||
		    !loop_held_over(e->d_name, &self, table, dev, sizeof(dev)))
			continue;
		syncguard_seterr(err, errlen, "%s: backs %s, which is in use "
			"(mounted, swap, held by md or device-mapper, or "
			"exported): not exported", path, dev);
		ret = -EBUSY;
	}
	closedir(d);
	free(table);
	return ret;
}
