/*
 * The file system under a LUN, checked when it is created: RAM-backed
 * stores (every mode), flushes that do not reach the device (nobarrier
 * and its kin, for write-through and write-back), overlays (their upper
 * layer is the store), and for plp what overwriting in place needs
 * (no copy-on-write, no journalled data, every block allocated and
 * written, direct I/O that is not buffered behind its back).
 *
 * Layer: below lun.c and loopdev.c (which check a loop's backing file
 * the same way); it uses mounts.c, latch.c and poison.c.
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
#include <sys/sysmacros.h>
#include <dirent.h>
#include <linux/btrfs.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

#include "core.h"
#include "internal.h"

#define BTRFS_MAGIC 0x9123683e	/* statfs f_type */

/* File systems on which plp cannot hold for a regular file: copy-on-write
 * or log-structured ones allocate new blocks (metadata) on overwrite, and
 * RAM-backed ones are never durable. */
static const struct {
	unsigned long magic;
	const char *name;
} plp_unsafe_fs[] = {
	{ BTRFS_MAGIC, "btrfs (copy-on-write)" },
	{ 0x2fc12fc1, "zfs (copy-on-write; export a zvol instead)" },
	{ 0xca451a4e, "bcachefs (copy-on-write)" },
	{ 0xf2f52010, "f2fs (log-structured)" },
	{ 0x3434, "nilfs2 (log-structured)" },
};

/* File systems whose fdatasync writes the data out but sends the device
 * no cache flush: JFS writes its log without one, HFS ends with a
 * sync_blockdev.  write-through and write-back stand on that flush. */
static const struct {
	unsigned long magic;
	const char *name;
} flushless_fs[] = {
	{ 0x3153464a, "JFS" },
	{ 0x4244, "HFS" },
};

const char *syncguard_fs_flushless(unsigned long magic)
{
	for (size_t i = 0; i < sizeof(flushless_fs) / sizeof(flushless_fs[0]);
	     i++)
		if (flushless_fs[i].magic == magic)
			return flushless_fs[i].name;
	return NULL;
}

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

/* The devices of the btrfs file system of @fd into @devs (room for
 * @max), from sysfs's list under its UUID: how many, or -errno */
static int btrfs_devs(int fd, dev_t *devs, int max)
{
	struct btrfs_ioctl_fs_info_args fi;
	char dir[96], p[PATH_MAX], num[32];
	const uint8_t *u = fi.fsid;
	unsigned int ma, mi;
	struct dirent *e;
	int n = 0;
	FILE *f;
	DIR *d;

	memset(&fi, 0, sizeof(fi));
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi))
		return -errno;
	snprintf(dir, sizeof(dir), "/sys/fs/btrfs/%02x%02x%02x%02x-%02x%02x-"
		 "%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x/devices", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
		 u[11], u[12], u[13], u[14], u[15]);
	if (!(d = opendir(dir)))
		return -errno;
	while (n >= 0 && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s/dev", dir, e->d_name);
		if (!(f = fopen(p, "re"))) {
			n = -errno;
			break;
		}
		if (!fgets(num, sizeof(num), f) ||
		    sscanf(num, "%u:%u", &ma, &mi) != 2)
			n = -EIO;
		else if (n >= max)
			n = -ENOBUFS;
		else
			devs[n++] = makedev(ma, mi);
		fclose(f);
	}
	closedir(d);
	return n ? n : -ENODEV;
}

static int data_devs_at(int fd, const char *table, dev_t *devs, int max,
			int depth)
{
	char upper[PATH_MAX];
	struct statfs sfs;
	struct stat st;
	int dfd, ret;

	if (fstat(fd, &st) || fstatfs(fd, &sfs))
		return -errno;
	if (S_ISBLK(st.st_mode) ||
	    ((unsigned long)sfs.f_type != OVERLAYFS_MAGIC &&
	     ((unsigned long)sfs.f_type != BTRFS_MAGIC || major(st.st_dev)))) {
		devs[0] = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
		return 1;
	}
	if ((unsigned long)sfs.f_type == BTRFS_MAGIC)
		return btrfs_devs(fd, devs, max);
	if (depth >= 4 || !table ||
	    (dfd = syncguard_overlay_upper_open(fd, table, upper,
						sizeof(upper))) < 0)
		return -ENOENT;
	ret = data_devs_at(dfd, table, devs, max, depth + 1);
	close(dfd);
	return ret;
}

int syncguard_data_devs(int fd, const char *table, dev_t *devs, int max)
{
	return max < 1 ? -ENOBUFS : data_devs_at(fd, table, devs, max, 0);
}

/* Does the store identity @id end with that of the file @fd (a loop
 * partition's is its file's with "partN-" before it)? */
static bool named_by(const char *id, int fd)
{
	char own[256];
	size_t n = strlen(id), k;

	if (syncguard_store_id(fd, own, sizeof(own)))
		return false;
	k = strlen(own);
	return k <= n && !strcmp(id + n - k, own);
}

int syncguard_overlay_hold(struct syncguard_lun *lun, int fd, int lock,
			   const char *path, char *err, size_t errlen)
{
	struct statfs sfs;
	char *table;
	int rfd;

	if (fstatfs(fd, &sfs) ||
	    (unsigned long)sfs.f_type != OVERLAYFS_MAGIC)
		return 0;	/* fstatfs failing: syncguard_check_fs refuses */
	if (!(table = syncguard_mounts_read_for(path, err, errlen)))
		return -EINVAL;
	rfd = syncguard_overlay_file_open(fd, table, 0);
	free(table);
	if (rfd < 0) {
		syncguard_seterr(err, errlen, "%s: on an overlay, but its file "
			"in the upper layer cannot be found (%s), so its other "
			"name cannot be told: not exported", path,
			strerror(-rfd));
		return -EINVAL;
	}
	lun->real_fd = rfd;
	if (flock(rfd, lock | LOCK_NB) && errno == EWOULDBLOCK) {
		syncguard_seterr(err, errlen, "%s: already exported by another "
			"syncguard LUN (under its name in the overlay's upper "
			"layer)", path);
		return -EBUSY;
	}
	/* the store was named before (syncguard_store_ids, which finds this
	 * file on its own): by this file, unless that lookup failed then
	 * (a write between its fstats, no descriptor left), and a record
	 * kept under the overlay's name would be missed under this one */
	if (lun->store_id[0] && !named_by(lun->store_id, rfd)) {
		syncguard_seterr(err, errlen, "%s: its store was not named by "
			"its copy in the overlay's upper layer (that copy was "
			"not found then): try again", path);
		return -EAGAIN;
	}
	return 0;
}

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

	if (depth >= 4)
		return 0;	/* the kernel nests no upper layers anyway */
	if ((ret = syncguard_fs_volatile(fd, table)) < 0) {
		syncguard_seterr(err, errlen, "%s: on an overlay whose mount "
			"options cannot be read (%s), so whether it is volatile "
			"cannot be told: not exported", path, strerror(-ret));
		return -EINVAL;
	}
	if (ret) {
		/* else 48 WRITE + SYNCHRONIZE CACHE of 1 MiB on write-back
		 * are answered GOOD with 48 MiB left dirty:
		 * test_blockdev_volatile_overlay_refused */
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
 * such a file buffers the same way
 * (test_blockdev_plp_journalled_data_refused).  plp never forces that
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
	 * mountinfo (test_blockdev_plp_journalled_data_refused) */
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
	return syncguard_fs_journals_data(fd, table) == 1;
}

int syncguard_check_fs(int fd, const char *path, bool plp, char *err,
		       size_t errlen)
{
	char *table = syncguard_mounts_read_for(path, err, errlen);
	int ret;

	if (!table)
		return -EINVAL;
	ret = check_fs_at(fd, table, path, plp, err, errlen, 0);
	free(table);
	return ret;
}

static int check_fs_at(int fd, const char *table, const char *path,
		       bool plp, char *err, size_t errlen, int depth)
{
	struct statfs sfs;
	const char *name;
	int barriers;

	if (fstatfs(fd, &sfs)) {	/* cannot tell: refused, as above */
		syncguard_seterr(err, errlen, "%s: its file system cannot be "
			"told (fstatfs: %s); not opened", path, strerror(errno));
		return -EINVAL;
	}
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
	barriers = plp ? 1 : syncguard_fs_barriers(fd, table);
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
	if (barriers < 0) {	/* options too long to read, no statx */
		syncguard_seterr(err, errlen,
			"%s: its mount options cannot be read (%s), so whether "
			"its file system sends flushes cannot be told: not "
			"exported", path, strerror(-barriers));
		return -EINVAL;
	}
	if (!plp && (name = syncguard_fs_flushless(sfs.f_type))) {
		syncguard_seterr(err, errlen,
			"%s: the file system is %s, whose fdatasync sends the "
			"device no cache flush, so no write could be made "
			"durable; use mode=plp if that cache is power-loss "
			"protected, or another file system", path, name);
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
			"near byte %llu; write every block of it once in place, "
			"which keeps its data (dd if=FILE of=FILE bs=1M "
			"conv=notrunc,fsync), or use write-back", path,
			(unsigned long long)covered);
	if (ret == -EOPNOTSUPP)
		syncguard_seterr(err, errlen,
			"%s: mode=plp cannot check the file's allocation (no "
			"FIEMAP on this file system); write the whole file "
			"once, sync, and set alloc_check=no", path);
	return ret ? ret : covered < size ? -EINVAL : 0;
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

int syncguard_check_plp_file(struct syncguard_lun *lun, int fd,
			     const char *path, bool alloc_check, char *err,
			     size_t errlen)
{
	struct stat st;
	int ret = syncguard_fsync(fd);

	/* a failed fsync of the store: what an earlier LUN left may be
	 * lost, and the kernel now takes the error as seen (core/poison.c) */
	if (ret)
		syncguard_store_failed(syncguard_state_dir(&lun->opts),
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

bool syncguard_ram_device_name(const char *n)
{
	size_t skip = !strncmp(n, "zram", 4) ? 4 : !strncmp(n, "ram", 3) ? 3 :
		      !strncmp(n, "nullb", 5) ? 5 : 0;

	return skip && n[skip] >= '0' && n[skip] <= '9';
}

int syncguard_check_ram_device(const char *n, const char *path, char *err,
			       size_t errlen)
{
	if (!syncguard_ram_device_name(n))
		return 0;
	syncguard_seterr(err, errlen, "%s: on a RAM block device (%s): nothing "
			 "on it survives a power cut; put the LUN on a disk",
			 path, n);
	return -EINVAL;
}
