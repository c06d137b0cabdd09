/*
 * Helpers shared by the core sources and the two engines that execute
 * commands (core/exec.c on worker threads, glue/uring.c on
 * io_uring); not part of the API tools or tgt see.  Unit tests may call
 * them.
 */
#ifndef SYNCGUARD_INTERNAL_H
#define SYNCGUARD_INTERNAL_H

#include "core.h"

/* printf into @err (@errlen bytes) when @err is not NULL */
void syncguard_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- the mount table (core/mounts.c) ---- */

/* The whole text of @mountinfo (/proc/self/mountinfo), malloc'd and
 * NUL-terminated; NULL if it cannot be read. */
char *syncguard_mounts_read(const char *mountinfo);

/* /proc/self/mountinfo's text for the open-time checks of the LUN at
 * @path: NULL, with @err saying so, when it cannot be read.  A check
 * that cannot read the table refuses the LUN rather than take its file
 * system's flushes on trust (test_stack_mountinfo_unreadable). */
char *syncguard_mounts_read_for(const char *path, char *err, size_t errlen);

/* The same from an open descriptor of it, read again from offset 0 (a
 * seq_file regenerates the text; the mount watch reads through the
 * descriptor it polls, so that no descriptor need be free then). */
char *syncguard_mounts_read_fd(int fd);

/* Does the file system of @fd flush the device's write cache on
 * fdatasync, as the mountinfo text @table says?  1 yes, 0 no (mounted
 * "nobarrier" or "barrier=0"; f2fs "fsync_mode=nobarrier"; cifs
 * "nostrictsync"), -errno when it cannot tell (-ENOENT: neither @fd's
 * mount nor its device is listed). */
int syncguard_fs_barriers(int fd, const char *table);

/* Does the file system of @fd journal file data (mounted data=journal,
 * as ext3/ext4 can be), as the mountinfo text @table says?  1 yes, 0
 * no, -errno as syncguard_fs_barriers. */
int syncguard_fs_journals_data(int fd, const char *table);

/* Is the file system of @fd an overlay mounted "volatile" (which
 * ignores fsync and syncfs, and drops O_SYNC/O_DSYNC from writes)?  1
 * yes, 0 no, -errno as syncguard_fs_barriers. */
int syncguard_fs_volatile(int fd, const char *table);

/* Where the absolute path @path (as the kernel prints paths: no
 * symbolic links, no "..") lies, by the mountinfo text @table, without
 * touching any file system: the "major:minor" of its mount's device
 * into @dev, and the path inside that file system (the mount's root
 * joined with the rest of @path) into @out.  The mount is the one whose
 * mount point is the longest prefix of @path (of equals the last
 * listed, which covers the others).  Two paths with the same device
 * and inner path name one file, through bind mounts too.  0, or
 * -ENOENT (no mount found), -EINVAL (too long, unparsable). */
int syncguard_mounts_fs_path(const char *table, const char *path,
			     char *dev, size_t devlen, char *out, size_t len);

/* The file system type and source of @fd's mount (mountinfo's fields
 * after " - ": "zfs" and "tank/luns", say) in the mountinfo text @table
 * into @type and @src: 0, or -errno (-ENOENT: not listed). */
int syncguard_mount_source(int fd, const char *table, char *type,
			   size_t tlen, char *src, size_t slen);

/* The upper directory of the overlay @fd is on, from its super options
 * in @table (mountinfo's and overlayfs's escapes undone) into @dir (@len
 * bytes): 0, or -errno (-ENOENT: no upperdir, or the mount is not
 * listed; -EINVAL: relative, or too long). */
int syncguard_overlay_upper(int fd, const char *table, char *dir,
			    size_t len);

/* syncguard_overlay_upper, and that directory opened: its descriptor,
 * or -errno. */
int syncguard_overlay_upper_open(int fd, const char *table, char *dir,
				 size_t len);

/*
 * A file on an overlay is a file of its upper layer under a second name
 * (opened for writing, it was copied up there): a LUN on either name, or
 * on a loop device over either, is one store.  So for @fd (the LUN's
 * file, or its loop device's backing file, named @path) on an overlay,
 * the upper file is kept open in lun->real_fd and flocked (@lock:
 * LOCK_EX, or LOCK_SH as a loop's partitions share their file), as @fd
 * is; its store identity is that file's (syncguard_store_ids).
 * Otherwise a LUN on each name would keep two caches for the same
 * blocks, and a latch recorded under one name would be missed under the
 * other (test_blockdev_overlay_and_upper_one_store).  An overlay file
 * whose upper file cannot be found is refused: what other name it has
 * cannot be told; so is one whose store lun->store_id does not name by
 * that file.  0 (also: not on an overlay), -EINVAL, -EBUSY or -EAGAIN
 * with the reason in @err.
 */
int syncguard_overlay_hold(struct syncguard_lun *lun, int fd, int lock,
			   const char *path, char *err, size_t errlen);

/* The file @fd names on an overlay, in that overlay's upper layer (where
 * a file opened for writing lives, under its path in the overlay),
 * opened read-only, through stacked overlays (@depth 0 for the first, 3
 * deep): its descriptor, or -errno: -ENOTTY (@fd is on no overlay),
 * -ENOENT (no upper layer, or no such file there), -ESTALE (the file
 * there is another: its size or times differ), or open's and fstat's
 * own.  One store under two
 * names is locked and identified by this file (syncguard_overlay_hold,
 * syncguard_store_ids). */
int syncguard_overlay_file_open(int fd, const char *table, int depth);

/* Has the file system under @lun (its file, a loop device's backing
 * file, an overlay's upper layer, the backing file of the loop device
 * under its file system) been remounted nobarrier since the LUN
 * was created, as @table says, so that its flushes no longer reach the
 * device?  Always false for plp, whose durability never rests on a
 * device cache flush (the cache is protected; an UNMAP's fdatasync still
 * commits the file system's journal, which nobarrier does not skip). */
bool syncguard_lun_flushes_lost(struct syncguard_lun *lun, const char *table);

/* Can a remount make @lun's flushes lost (syncguard_lun_flushes_lost):
 * a file or a loop device, in write-through or write-back; or can what
 * lies beneath it change (syncguard_lun_beneath_lost: a zvol, a device
 * whose write cache Linux sends flushes to, a device-mapper, md or
 * bcache layer)?  Such a LUN is not exported without the mount watch. */
bool syncguard_lun_needs_watch(const struct syncguard_lun *lun);

/* What Linux believes of the write cache of the block device with
 * number @dev (sysfs queue/write_cache; a partition's is its disk's):
 * 1 volatile ("write back": flushes are sent to it), 0 none ("write
 * through": the block layer completes flushes without sending them),
 * -errno when @dev is no block device in sysfs (FUSE, NFS, btrfs).
 * Its sysfs name goes to @name (@namelen bytes). */
int syncguard_dev_write_cache(dev_t dev, char *name, size_t namelen);

#define OVERLAYFS_MAGIC 0x794c7630	/* statfs f_type */

/* The name of the file system with statfs f_type @magic if its
 * fdatasync sends the device no cache flush (JFS, HFS), else NULL:
 * refused for write-through and write-back (syncguard_check_fs).
 * tests/unit check_stack.c, test_stack_flushless_fs. */
const char *syncguard_fs_flushless(unsigned long magic);

/* The block devices that hold the data of @fd (a file or a block device)
 * into @devs (room for @max): a block device's own number; a file's file
 * system's device, through an overlay to its upper layer's file system
 * (where a file opened for writing lives), 4 deep, the overlays read
 * from the mount table @table; on btrfs, whose files carry a device
 * number of its own (0:N) that no block device has, every device of the
 * file system (/sys/fs/btrfs/FSID/devices).  Returns how many (1 or
 * more), -ENOBUFS (more than @max), -ENOENT (an overlay whose upper
 * layer cannot be found; syncguard_check_fs refuses it) or -errno (the
 * btrfs devices could not be listed).  tests/proto check_blockdev.c,
 * test_blockdev_ram_device_under_btrfs_and_overlay. */
int syncguard_data_devs(int fd, const char *table, dev_t *devs, int max);

/* The sysfs name ("vda", "loop3", "dm-0") of the block device with
 * number @dev into @name: 0, or -errno (no such block device). */
int syncguard_dev_name(dev_t dev, char *name, size_t namelen);

/* Is @n the sysfs name of a RAM block device (zramN, brd's ramN; and
 * null_blk's nullbN, which keeps writes in RAM or throws them away)? */
bool syncguard_ram_device_name(const char *n);

/* Is the block device named @n (its sysfs name: the LUN's device, the
 * one under its file system, or one a loop device stands on) RAM (zram,
 * brd's /dev/ramN)?  Nothing on it survives a power cut, as on tmpfs;
 * pmem is persistent and not matched.  0, or -EINVAL with the reason
 * (@path names what stands on it) in @err. */
int syncguard_check_ram_device(const char *n, const char *path, char *err,
			       size_t errlen);

/* Can the inode @fd do direct I/O?  1 with its offset and memory
 * alignments (bytes), or 0: statx says none (fscrypt, fs-verity, data
 * journalling, inline data; O_DIRECT writes would be buffered silently).
 * core/lun.c */
int syncguard_dio_align(int fd, unsigned int *align, unsigned int *mem_align);

/* A new descriptor (@flags, O_CLOEXEC added) of the very file or device
 * the LUN has open, whatever its path names now; or -errno. */
int syncguard_reopen(const struct syncguard_lun *lun, int flags);

/* The open-time checks of a regular file's file system (RAM-backed;
 * unless @plp, mounted nobarrier or not in tgtd's mountinfo; for @plp,
 * copy-on-write or journalling file data), for the LUN's file or a loop
 * device's backing file: 0, or -EINVAL with the reason in @err. */
int syncguard_check_fs(int fd, const char *path, bool plp, char *err,
		       size_t errlen);

/* plp on a regular file @fd of @lun's store (the LUN's file, or its
 * loop device's backing file): fsync it (a failure is recorded for the
 * store, core/poison.c), then (@alloc_check) require every block
 * allocated and written (FIEMAP): 0, -EINVAL (reason in @err),
 * -EOPNOTSUPP (no FIEMAP), or the fsync's -errno. */
int syncguard_check_plp_file(struct syncguard_lun *lun, int fd,
			     const char *path, bool alloc_check, char *err,
			     size_t errlen);

/* A LUN on block device @dev (number @rdev): if it is a loop device,
 * check its backing file as syncguard_check_fs does (a block device
 * behind it: not RAM) and flock it (kept in lun->loop_fd), and the loop
 * devices under it as syncguard_loop_under does.  0 (also: not a loop),
 * -EINVAL (also: the backing file cannot be opened) or -EBUSY with the
 * reason in @err.  core/loopdev.c */
int syncguard_loop_backing(struct syncguard_lun *lun, const char *dev,
			   dev_t rdev, bool plp, char *err, size_t errlen);

/* A LUN on the regular file @path (lun->fd) whose data is on a loop
 * device (or a partition of one), under its file system or under an
 * overlay's upper layer: check that loop's backing file as
 * syncguard_check_fs does (for @plp, the loop's direct I/O too), keep
 * it open in lun->under_fd[0] for the mount watch, and so on down the
 * loops under it, to SYNCGUARD_LOOP_DEPTH levels.  0 (also: no loop),
 * or -EINVAL with the reason in @err (a deeper stack, or a backing file
 * that cannot be opened, too). */
int syncguard_loop_under(struct syncguard_lun *lun, const char *path,
			 bool plp, char *err, size_t errlen);

/* Has a loop device under a plp LUN (lun->loop_dio_attr) had its
 * direct I/O turned off since the LUN opened?  Then plp's writes end in
 * the host's page cache, which nothing flushes.  false also when there
 * is no such loop, or it cannot be read (detached).  core/loopdev.c */
bool syncguard_loop_dio_lost(const struct syncguard_lun *lun);

/* A LUN on the regular file @fd: -EBUSY (reason in @err) if it backs a
 * loop device that is mounted or otherwise claimed, else 0. */
int syncguard_loop_users(int fd, const char *path, char *err, size_t errlen);

/* ---- what lies beneath a LUN (core/stack.c) ---- */

/* A ZFS zvol's dataset properties, as zfs get -Hp gives them */
struct syncguard_zfs_props {
	char sync[16];			/* standard, always, disabled */
	char logbias[16];		/* latency, throughput */
	unsigned int volblocksize;	/* bytes */
};

/* The name of the zvol @rdev, by the link to it under @root
 * ("/dev/zvol"), into @ds (@len bytes): its dataset, or for one of its
 * partitions VOLUME-partN; 1, or 0 when no link names it.
 * core/zvolname.c */
int syncguard_zvol_name(const char *root, dev_t rdev, char *ds, size_t len);

/* Is the block device @rdev, opened by @path, a ZFS zvol?  1 with its
 * dataset into @ds (the path under @root, "/dev/zvol", or the link there
 * that names @rdev); 0 no; -ENOENT a zvol (zdN) whose dataset no link
 * tells; -ENAMETOOLONG. */
int syncguard_zvol_dataset(const char *root, const char *path, dev_t rdev,
			   char *ds, size_t len);

/* The properties of dataset @ds, from /usr/sbin/zfs or /sbin/zfs (never
 * by PATH), which has 5 s to answer, and is killed then; 6 s at most in
 * all.  0, or -errno (-ENOENT: no zfs; -ETIMEDOUT: killed; -EBUSY: an
 * earlier zfs get for @ds's pool that would not die still lives, and
 * none is started; -EIO: it exited with a failure, as for no such
 * dataset, or said no sync).  Thread-safe. */
int syncguard_zfs_get(const char *ds, struct syncguard_zfs_props *p);

/* Where the layers under a device are read: the sysfs root, and the
 * device-mapper target kinds of a device (as syncguard_dm_table_kinds
 * gives them, into @types; 0 or -errno).  syncguard_host_layers reads
 * the host's; tests give their own. */
struct syncguard_layers {
	const char *sysfs;
	int (*dm_targets)(dev_t dev, char *types, size_t len);
};
extern const struct syncguard_layers syncguard_host_layers;

/* The device-mapper target kinds of @dev (DM_TABLE_STATUS, as
 * syncguard_dm_table_kinds): 0 or -errno */
int syncguard_dm_targets(dev_t dev, char *types, size_t len);

/* The kinds of the targets of one device-mapper table, as the kernel's
 * DM_TABLE_STATUS with DM_STATUS_TABLE_FLAG answered it in @io (@size
 * bytes): each distinct kind once, space-separated, into @kinds (@len
 * bytes).  A kind is the target's type, or for a flakey that drops or
 * corrupts writes, or a transient snapshot, its type and how
 * ("flakey:drop_writes", "flakey:corrupt_writes", "snapshot:transient").
 * 0; -ENOBUFS when the answer did not fit (DM_BUFFER_FULL_FLAG: ask
 * again with more room); -ENOSPC when @kinds is too short; -EIO for an
 * answer whose targets do not lie within it, each after the last, or
 * one with no type. */
struct dm_ioctl;
int syncguard_dm_table_kinds(const struct dm_ioctl *io, size_t size,
			     char *kinds, size_t len);

/* What the layers at @dev and under it (sysfs slaves/: device-mapper, md,
 * bcache; 8 levels) mean for a LUN on it.  SYNCGUARD_LAYER_UNSAFE, in
 * every mode: a RAM block device (zram, brd, null_blk) at any level; a
 * loop device or ZFS zvol under another layer (core/loopdev.c and the
 * zvol check follow only those right under the LUN or its file system);
 * a deeper stack; a device-mapper target that loses writes (zero,
 * flakey while it drops or corrupts them, a transient snapshot), or a
 * table that could be asked for but not read whole (too long, or
 * malformed), so whether it has one cannot be told.
 * SYNCGUARD_LAYER_RAM, looked for when @plp: a layer that keeps what a
 * write needs in host RAM until a flush, which plp never sends
 * (device-mapper thin, thin-pool, cache, writecache, vdo, clone, zoned,
 * integrity; bcache in write-back), or a device-mapper device whose
 * table cannot be asked for.  The first found, its reason in @what; or
 * 0. */
enum { SYNCGUARD_LAYER_UNSAFE = 1, SYNCGUARD_LAYER_RAM = 2 };
int syncguard_layer_refused(const struct syncguard_layers *l, dev_t dev,
			    bool plp, char *what, size_t len);

/* The open-time checks of what lies beneath @lun, from the block devices
 * its data is on (syncguard_data_devs: its own or its file system's, a
 * btrfs's every one, an overlay's upper layer's, each loop's backing
 * file's): a zvol's sync property (syncguard_policy_zvol; its
 * volblocksize becomes the physical block), the layers under each
 * (syncguard_layer_refused: RAM devices and targets that lose writes in
 * every mode, metadata held in RAM for plp), and the write caches the
 * watch follows.  0, or -EINVAL with the reason in @err. */
int syncguard_check_beneath(struct syncguard_lun *lun, const char *path,
			    char *err, size_t errlen);

/* While the LUN lives (the mount watch): has the device it stands on
 * stopped honouring its flushes?  Its write cache, or that of a device
 * under it now, set from "write back" to "write through" (Linux then
 * drops every flush; not for plp, which sends none), or its layers
 * changed (syncguard_lun_layers_lost).  true with why in @why (@len
 * bytes).  A zvol's sync property is the zvol watch's
 * (glue/zvolwatch.c), which runs zfs get off tgtd's event thread. */
bool syncguard_lun_beneath_lost(struct syncguard_lun *lun, char *why,
				size_t len);

/* Have the layers under the devices @lun's open checked (lun->layer_dev,
 * read at @l) become what the open refuses (syncguard_layer_refused in
 * its mode)?  A device-mapper table is reloaded live: lvconvert attaching
 * dm-cache or dm-writecache to a plp LUN's volume, a pvmove onto a RAM
 * disk.  Only what is found counts: a table that cannot be read now,
 * which the open refuses for plp, or a stack grown past 8 layers, does
 * not fail a live LUN.  true with why in @why (@len bytes). */
bool syncguard_lun_layers_lost(const struct syncguard_lun *lun,
			       const struct syncguard_layers *l, char *why,
			       size_t len);

/* ---- latches that outlive the LUN (core/poison.c) ---- */

/* The state directory for @opts (bsopts state_dir, else tgtd's
 * $SYNCGUARD_STATE_DIR when absolute, else SYNCGUARD_STATE_DIR_DEFAULT);
 * @opts may be NULL. */
const char *syncguard_state_dir(const struct syncguard_opts *opts);

/* The identity of the store @fd (a regular file or a block device) that
 * survives re-creation and reboots but not reuse, as a file name, into
 * @id (@len bytes): 0 or -errno.  core/storeid.c */
int syncguard_store_id(int fd, char *id, size_t len);

/* Room for a store's former identities (syncguard_store_ids) */
#define SYNCGUARD_FORMER_LEN 1024

/* The same, and into @former (SYNCGUARD_FORMER_LEN bytes) the identities
 * earlier builds or kernels gave the store where they differ, one per
 * line ('\n' between them; "" for none): a record under any is the
 * store's (syncguard_poison_adopt takes the list). */
int syncguard_store_ids(int fd, char *id, size_t len, char *former,
			size_t former_len);

/* A block device's identity, as syncguard_store_ids gives it, its sysfs
 * read under @sysfs ("/sys") and its zvol links looked for under
 * @zvol_root ("/dev/zvol"; tests give their own).  0, or -errno. */
int syncguard_block_store_id(const char *sysfs, const char *zvol_root,
			     dev_t rdev, char *id, size_t len, char *former,
			     size_t former_len);

/* Record that store @id (at @path, for the administrator) latched @err:
 * written, synced and renamed into @dir/latched/@id.  0 or -errno. */
int syncguard_poison_write(const char *dir, const char *id, const char *path,
			   int err);

/* The errno recorded for store @id in @dir (its text into @text, @len
 * bytes; EIO for a record left unfinished, its ".tmp" alone), 0 if none,
 * or -errno when the record cannot be read. */
int syncguard_poison_read(const char *dir, const char *id, char *text,
			  size_t len);

/* The records of the stores @from (finished or not; one name per line,
 * syncguard_store_ids' former identities) in @dir made store @to's:
 * renamed, or removed where @to has its own, and the directory synced;
 * a name that is @to's own is passed over, and so, unless @numbers, is
 * a device number's (blk-M.m), which another store may have had when
 * it was recorded (syncguard_poison_held).  So a latch survives a
 * change of how stores are named.  0 (also when @from has none) or the
 * first -errno. */
int syncguard_poison_adopt(const char *dir, const char *from, const char *to,
			   bool numbers);

/* Does @dir hold a record, or a final flush's marker, under a device
 * number's name (blk-M.m, partN-blk-M.m) among the former identities
 * @from (syncguard_store_record's look)?  It may be the store's, or
 * another's that had the number then: left in place, it latches the
 * store's LUN until the administrator clears it (syncguard-stat
 * --clear-latch, which takes it over first).  1 with the first such
 * name in @name (@len bytes) and what it says in @text (@text_len), 0,
 * or -errno when it cannot be read (@name set too). */
int syncguard_poison_held(const char *dir, const char *from, char *name,
			  size_t len, char *text, size_t text_len);

/* Remove store @id's record, finished or not, from @dir: 0 or -errno
 * (-ENOENT: none). */
int syncguard_poison_clear(const char *dir, const char *id);

/* The store whose record, record being written (".<id>.tmp") or final
 * flush marker (".<id>.flush-...", ".<id>.failed-...") entry @name of a
 * state directory's latched/ is, into @id (@len bytes): 0, or -EINVAL
 * for a name of none. */
int syncguard_record_store(const char *name, char *id, size_t len);

/* The errno of store @id's latch as a new LUN with state directory @dir
 * finds it (its text into @text, @len bytes): the record in @dir, else
 * the one this process last wrote for the store in another state
 * directory while it is still there, else EINPROGRESS while another
 * process's final flush of the store runs, or EIO where that process
 * stopped on the way; 0 if none, or -errno when a record cannot be read,
 * as syncguard_poison_read.  The directory looked in
 * last into @where (@where_len bytes; @where may be NULL). */
int syncguard_store_record(const char *dir, const char *id, char *text,
			   size_t len, char *where, size_t where_len);

/* A LUN on store @id is about to let go of it with a final flush still
 * to run: mark the store until syncguard_final_flush_end, in this
 * process and, for other processes, in state directory @dir (a marker
 * that cannot be made is said in the log); the flush's number into
 * *@seq.  0, or -ENOMEM (no mark: the caller flushes before it lets
 * go). */
int syncguard_final_flush_begin(const char *dir, const char *id,
				unsigned int *seq);

/* The path of the marker in state directory @dir of final flush @seq of
 * store @id by process @pid, into @buf (@len bytes): 0, -ESRCH (no such
 * process, or a zombie) or -ENAMETOOLONG. */
int syncguard_flush_marker(const char *dir, const char *id, long pid,
			   unsigned int seq, char *buf, size_t len);

/* That final flush (@seq from syncguard_final_flush_begin) ended with
 * @err (0 or positive errno): recorded as syncguard_store_failed does,
 * then its marker and the mark's flush taken off (a failure that could
 * not be recorded leaves its marker, renamed ".failed-" or, failing
 * that, dated 1970).  0, or the record's -errno. */
int syncguard_final_flush_end(const char *dir, const char *id,
			      unsigned int seq, const char *path, int err);

/* A flush of store @id, by a LUN letting go of it or opening it, failed
 * with @err (positive): what an earlier GOOD vouched for may be lost.
 * Recorded in @dir (at @path, for the administrator); where the record
 * cannot be written, the store is marked with @err for the rest of the
 * process.  0, or the record's -errno; 0 for an @id of "". */
int syncguard_store_failed(const char *dir, const char *id,
			   const char *path, int err);

/* A latch of store @id whose record could not be written: its next LUN
 * in this process starts latched all the same. */
void syncguard_store_unrecorded(const char *id, int err);

/* What the store of @lun was left with by its last LUN's final flush,
 * once that has ended (waits for it): the errno it latched (its record,
 * or its mark where the record could not be written; EIO for a record
 * that cannot be read), or 0. */
int syncguard_store_outcome(const struct syncguard_lun *lun);

/* Store @id's mark in this process: the errno of a failure that could
 * not be recorded, else EINPROGRESS while a final flush of it runs (with
 * @wait: waits for that flush first), else 0. */
int syncguard_store_marked(const char *id, bool wait);

/* Where the core says what only a log can tell (a record that could not
 * be written): tgtd's log in the module (set by the glue), stderr in
 * tests; printf-style. */
extern void (*syncguard_logf)(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Count one event; counters are read concurrently (relaxed is enough). */
static inline void syncguard_count(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/* errno latched by a failed flush, 0 if none (core/latch.c) */
int syncguard_lun_latched(struct syncguard_lun *lun);

/* Is the latched error a soft one, to be rechecked on a worker
 * (syncguard_lun_recheck) before a command fails with it? */
bool syncguard_lun_latched_soft(struct syncguard_lun *lun);

/* Latch @err (positive errno) unless an error is latched already (a soft
 * one gives way): from now on every command that would promise
 * durability fails with it. */
void syncguard_latch(struct syncguard_lun *lun, int err);

/* A failed device flush's errno @err (positive) latched as
 * syncguard_call_failed does, but its record (core/poison.c) left to
 * the caller: *@record is the errno to hand syncguard_latch_record, once
 * no lock another thread may wait for is held (the record fsyncs the
 * state directory), or 0 when none is owed.  Returns -@err. */
int syncguard_flush_failed(struct syncguard_lun *lun, int err, int *record);

/* Record a latch for good of @lun with @err for the store's next LUN
 * (core/poison.c), or say in the log that it cannot be.  Blocks for the
 * state directory's writes and fsyncs. */
void syncguard_latch_record(struct syncguard_lun *lun, int err);

/* The store's last LUN's final flush still runs (syncguard_store_marked):
 * a soft latch with EINPROGRESS, which syncguard_lun_recheck turns into
 * that flush's outcome before the first durable command. */
void syncguard_latch_pending(struct syncguard_lun *lun);

/* For a write that succeeded on its way to durability (RWF_DSYNC, an
 * O_DIRECT write in plp): -errno if the LUN is latched for good now, as
 * after a flush that failed while the write ran (a device that fails a
 * flush may drop all its cache held, this write's data too, though the
 * write's own flush then succeeds:
 * test_exec_fua_with_failed_flush_meanwhile), else 0.  A soft latch lost
 * nothing (a refused write) and does not count. */
int syncguard_lun_lost_meanwhile(struct syncguard_lun *lun);

/* The same for a write that failed on its way to durability: ENOSPC and
 * EDQUOT latch soft (the write may just have been refused), the rest as
 * syncguard_latch. */
void syncguard_latch_write(struct syncguard_lun *lun, int err);

/* On a worker, before a command that promises durability: a soft latch
 * is rechecked with fdatasync on the witness (lun->fd), and cleared if
 * that reports nothing, or latched for good with what it reports.
 * Returns the errno latched after that, 0 if none.  Blocks for a device
 * flush when it rechecks: never on tgtd's event thread. */
int syncguard_lun_recheck(struct syncguard_lun *lun);

/* A descriptor for one durability call, used by nobody else meanwhile
 * (see "sync descriptors" in lun.c); >= 0, or -errno. */
int syncguard_sync_fd_get(struct syncguard_lun *lun);
void syncguard_sync_fd_put(struct syncguard_lun *lun, int fd);
/* The same, opened O_DIRECT: for an RWF_DSYNC write that bypasses the
 * page cache (its errors then reach that write alone). */
int syncguard_direct_fd_get(struct syncguard_lun *lun);
void syncguard_direct_fd_put(struct syncguard_lun *lun, int fd);

/* Is a durable write done with RWF_DSYNC (rather than a group flush)?
 * bsopts write_sync; auto asks the running trial (see writesync.c).
 * *@scored: false for a write that had no other durable write in
 * flight, which takes the same path whichever way the trial runs (its
 * answer is a lone one: syncguard_durable_answered).  The caller has counted the write in
 * lun->durable_inflight (durable_begin) and uncounts it (durable_end)
 * once it is answered or goes elsewhere. */
bool syncguard_use_dsync(struct syncguard_lun *lun, bool *scored);
void syncguard_durable_begin(struct syncguard_lun *lun);
void syncguard_durable_end(struct syncguard_lun *lun);

/*
 * What a write whose policy level is @persist (syncguard_policy) is made:
 * @persist, or for a plain write of WCE=1 (PERSIST_CACHED) that runs in
 * a WRITE+SYNCHRONIZE CACHE loop, PERSIST_DURABLE (see lun.c: at queue
 * depth 1 by a streak, with several commands in flight while a running
 * trial finds it faster).  Never less than @persist.
 */
enum syncguard_persist syncguard_write_persist(struct syncguard_lun *lun,
					       enum syncguard_persist persist);

/* SYNCHRONIZE CACHEs in a row, each after one plain write, that make a
 * single writer's loop (lun.c) */
#define SYNC_STREAK 8

/* Commands as tgtd receives them, on its event thread, for
 * syncguard_write_persist: a CDB handed to the LUN (@cdb, @len bytes;
 * only plain WRITEs count), and a SYNCHRONIZE CACHE(10/16). */
void syncguard_lun_note_cdb(struct syncguard_lun *lun, const uint8_t *cdb,
			    size_t len);
void syncguard_lun_note_sync_cache(struct syncguard_lun *lun);

/* @scored durable writes were answered GOOD, and @lone ones that had
 * no other in flight (syncguard_use_dsync): write_sync=auto's score.
 * The lone ones count in the rate of an epoch under way, but neither
 * lengthen one nor start or keep up the trial. */
void syncguard_durable_answered(struct syncguard_lun *lun,
				unsigned int scored, unsigned int lone);

/* Calls that only move data, made again after EINTR or EAGAIN: at most
 * this many times */
#define SYNCGUARD_RETRIES 8

/* Is a call that only moves data (a plain write, a read, an open, a hole
 * punch: never one that reports writeback errors) and failed with @err
 * (positive) to be made again?  EINTR and EAGAIN, while *@tries (counted
 * here) is below SYNCGUARD_RETRIES.  core/sys.c */
bool syncguard_retry(int err, unsigned int *tries);

/* fdatasync / fsync through syncguard_sys, once: any errno, EINTR and
 * EAGAIN included, is a failure (syncguard_retry says why): 0 or -errno */
int syncguard_datasync(int fd);
int syncguard_fsync(int fd);

/* @err (positive) from a call that only gets a resource (open(2) for a
 * descriptor, an allocation): SYNCGUARD_ERESOURCE for EMFILE, ENFILE and
 * ENOMEM, else @err. */
int syncguard_resource_errno(int err);

/* strerror(@err), and a description of SYNCGUARD_ERESOURCE */
const char *syncguard_strerror(int err);

/* @call failed with @err (positive): latch @lun as the policy says
 * (syncguard_policy_latches: a flush for good, a write-out or RWF_DSYNC
 * write soft where syncguard_latch_write allows).  Returns -@err. */
int syncguard_call_failed(struct syncguard_lun *lun, enum syncguard_call call,
			  int err);

/* Can a write of @len bytes at byte offset @off go to lun->dfd
 * (O_DIRECT)?  Every aligned one with lun->direct_io; with lun->mix.on
 * only an RWF_DSYNC one (@dsync), which must then also win its granules
 * (syncguard_mix_try).  Alignment: the file's (STATX_DIOALIGN). */
bool syncguard_direct_ok(struct syncguard_lun *lun, uint64_t off, size_t len,
			 bool dsync);

/* ---- page cache and O_DIRECT on one LUN (core/mix.c) ---- */

/* Set up @m; @on when the LUN writes both ways.  0 or -errno. */
int syncguard_mix_init(struct syncguard_mix *m, bool on);
void syncguard_mix_destroy(struct syncguard_mix *m);

/* Claim the granules (2 MiB) of @len bytes at byte offset @off for a
 * write of @kind (CACHED or DIRECT) if no write of the other kind holds
 * any of them; never waits.  true when claimed (release with
 * syncguard_mix_end).  Only with m->on. */
bool syncguard_mix_try(struct syncguard_mix *m, enum syncguard_mix_kind kind,
		       uint64_t off, uint64_t len);

/* Claim the granules for a page-cache write, then wait until no O_DIRECT
 * write holds any of them (no new one can take them meanwhile).  Blocks:
 * worker threads only, and tgtd's event thread must never wait for one
 * that may be waiting here (core/mix.c).  Only with m->on. */
void syncguard_mix_wait(struct syncguard_mix *m, uint64_t off, uint64_t len);

/* Release what a write of @kind claimed (NONE: nothing). */
void syncguard_mix_end(struct syncguard_mix *m, enum syncguard_mix_kind kind,
		       uint64_t off, uint64_t len);

/* @buf as O_DIRECT takes it: itself if its address is aligned, else a
 * copy in *@bounce (the caller frees it); NULL when out of memory. */
const uint8_t *syncguard_direct_buf(struct syncguard_lun *lun,
				    const uint8_t *buf, size_t len,
				    uint8_t **bounce);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t syncguard_now_us(void);

/* Fold a sample @us (microseconds, capped at 1 s) into the running mean
 * *@mean (weight 1/8; the first sample sets it).  Lock-free: a lost
 * update only delays the mean. */
void syncguard_ewma(unsigned int *mean, uint64_t us);

/* Note that data or metadata just became volatile (flush.c elides
 * flushes only while nothing did). */
static inline void syncguard_mark_dirty(struct syncguard_lun *lun)
{
	__atomic_fetch_add(&lun->flusher.dirty, 1, __ATOMIC_SEQ_CST);
}

/* Group commit state set-up and tear-down: 0 or -errno. */
int syncguard_flusher_init(struct syncguard_flusher *f);
void syncguard_flusher_destroy(struct syncguard_flusher *f);

/* Undo syncguard_stats_publish: counters back to local, file removed. */
void syncguard_stats_unpublish(struct syncguard_lun *lun);

/*
 * Write @len bytes of @buf at byte offset @off and take them as far as
 * @persist says before returning (policy.c decides which; core/io.c).
 * The write family's one route, from exec_write (core/exec.c, on tgt's
 * workers) and the io_uring engine's plan (core/plan.c) alike:
 *
 *  - CACHED: the page cache, or O_DIRECT into the device's volatile
 *    cache (core/mix.c decides which), counted dirty for the next flush;
 *  - DURABLE: RWF_DSYNC on that write alone, or a cached write and a
 *    group flush (core/flush.c) shared with concurrent commands, as
 *    syncguard_write_sync (core/writesync.c) chooses;
 *  - WRITTEN (plp): O_DIRECT and waited for, or a buffered write and its
 *    write-out (sync_file_range) on a descriptor opened before it.
 *
 * Retries EINTR and EAGAIN of a plain write, and short writes; never of
 * a call that reports writeback errors.  A failure latches as
 * syncguard_policy_latches says for the call that failed.  Returns 0 or
 * -errno (-SYNCGUARD_ERESOURCE: nothing written).
 */
int syncguard_lun_write(struct syncguard_lun *lun, const uint8_t *buf,
			size_t len, uint64_t off, enum syncguard_persist persist);

/* Take what the command already wrote cached (WRITE SAME's chunks,
 * punched holes) as far as @persist says: nothing for CACHED, a device
 * flush (syncguard_lun_flush) for the others.  0 or -errno. */
int syncguard_lun_persist(struct syncguard_lun *lun,
			  enum syncguard_persist persist);

/* Read exactly @len bytes at byte offset @off, O_DIRECT where the LUN
 * reads so (lun->direct_reads; through an aligned copy if @buf or @len
 * is not aligned).  0 or -errno (-SYNCGUARD_ERESOURCE for the copy, -EIO
 * at EOF). */
int syncguard_lun_read(struct syncguard_lun *lun, uint8_t *buf, size_t len,
		       uint64_t off);

/* Deallocate bytes [off, off+len) so they read back as zeroes (a block
 * device's partial sectors at either end are written with zeroes
 * instead, PERSIST_CACHED).  0 or -errno. */
int syncguard_lun_punch(struct syncguard_lun *lun, uint64_t off, uint64_t len);

#endif
