/*
 * The core: the tgt-independent half of bs_syncguard.
 *
 * Everything here works on a plain file descriptor and a CDB, so it is
 * unit-tested without tgtd (tests/unit).  The glue (glue/) only
 * translates between tgt's struct scsi_cmd and these types.
 *
 * Units: "bytes" and "blocks" (logical blocks of the LUN) are named in
 * every field; times are microseconds.  Functions return 0 or -errno
 * unless their comment says otherwise.
 */
#ifndef SYNCGUARD_CORE_H
#define SYNCGUARD_CORE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <pthread.h>

#include "syncguard_opts.h"
#include "syncguard_stats.h"

/* ---- durability policy (core/policy.c: the one place it is decided) ---- */

/* How far a write's own data must have gone before GOOD. */
enum syncguard_persist {
	SYNCGUARD_PERSIST_CACHED,	/* host page cache or, O_DIRECT, the
					 * device's cache (volatile) */
	SYNCGUARD_PERSIST_WRITTEN,	/* in the device, host holds nothing
					 * volatile; no device cache flush */
	SYNCGUARD_PERSIST_DURABLE,	/* data + metadata on stable media:
					 * device cache flushed for it */
};

/* Command classes the policy distinguishes. */
enum syncguard_class {
	SYNCGUARD_CLASS_WRITE,		/* WRITE, WRITE SAME, FUA=0 */
	SYNCGUARD_CLASS_WRITE_FUA,	/* FUA=1, WRITE AND VERIFY */
	SYNCGUARD_CLASS_SYNC_CACHE,	/* SYNCHRONIZE CACHE(10/16) */
	SYNCGUARD_CLASS_READ,
	SYNCGUARD_CLASS_READ_FUA,
	SYNCGUARD_CLASS_UNMAP,		/* UNMAP, WRITE SAME with UNMAP */
};

struct syncguard_action {
	/* make every write completed before this command durable first
	 * (a device cache flush) */
	bool flush_before;
	/* the command's own data (writes, unmaps) */
	enum syncguard_persist persist;
};

/*
 * What @class needs in @mode while the Caching mode page reports @wce.
 * Pure function; see the comment in core/policy.c for the argument.
 */
struct syncguard_action syncguard_policy(enum syncguard_mode mode, bool wce,
					 enum syncguard_class class);

/* WCE bit a LUN in @mode reports in the Caching mode page (SBC-3 6.4.5). */
bool syncguard_mode_wce(enum syncguard_mode mode);

/* May an initiator (MODE SELECT, SBC-3 6.4.5) or an administrator
 * (tgtadm) change WCE of a LUN in @mode, with bsopts allow_wce? */
bool syncguard_mode_wce_changeable(enum syncguard_mode mode, bool allow_wce);

/* Must a switch of the honoured WCE from @was to @wce flush what was
 * written before the new page takes effect?  (1 -> 0 only) */
bool syncguard_policy_switch_flushes(bool was, bool wce);

/* Must a LUN in @mode flush before it reports its WCE=0 when it opens
 * (@synced: the open has synced the file already)?  Every LUN starts
 * dirty, so that its first flush is not elided. */
bool syncguard_policy_open_flushes(enum syncguard_mode mode, bool synced);

/* Must a LUN in @mode flush before its backing file closes?  @clean:
 * nothing written since the last completed flush, by syncguard's count. */
bool syncguard_policy_close_flushes(enum syncguard_mode mode, bool clean);

/* May an RWF_DSYNC O_DIRECT write go asynchronously (io_uring) and
 * still come back only once durable, on a block device (@blockdev) or a
 * file system whose statfs f_type is @fs_magic? */
bool syncguard_policy_async_dsync_honoured(bool blockdev,
					   unsigned long fs_magic);

/* Does an O_DIRECT write that completes asynchronously (io_uring) drop
 * the pages a page-cache read of its blocks cached while it was in
 * flight, on a block device (@blockdev) or a file system whose statfs
 * f_type is @fs_magic?  Where not, a later read could return the data
 * from before the write, so the LUN reads O_DIRECT too. */
bool syncguard_policy_async_direct_drops_cache(bool blockdev,
					       unsigned long fs_magic);

/* May ENOSPC, EDQUOT or EPERM from a write on its way to durability be
 * taken as a refusal (a soft latch, rechecked: core/lun.c), on a block device
 * (@blockdev) or a file system whose statfs f_type is @fs_magic?  Else
 * it latches for good. */
bool syncguard_policy_enospc_refused(bool blockdev, unsigned long fs_magic);

/* May a LUN in @mode stand on a ZFS zvol whose dataset has property
 * sync=@sync?  NULL if so, else why not and what to do instead. */
const char *syncguard_policy_zvol(enum syncguard_mode mode, const char *sync);

/* May a LUN in @mode stand on a layer that keeps a write's metadata in
 * host RAM until a flush (device-mapper thin, cache, writecache, vdo;
 * bcache in write-back)? */
bool syncguard_policy_ram_metadata_ok(enum syncguard_mode mode);

/* The calls whose failures the rule for every failing call tells apart
 * (core/policy.c, syncguard_policy_latches). */
enum syncguard_call {
	SYNCGUARD_CALL_WRITE,		/* a data write: into the page cache,
					 * or O_DIRECT without RWF_DSYNC */
	SYNCGUARD_CALL_DSYNC_WRITE,	/* a data write and its sync: RWF_DSYNC */
	SYNCGUARD_CALL_WRITEOUT,	/* plp's write-out: sync_file_range */
	SYNCGUARD_CALL_FLUSH,		/* fdatasync, fsync, io_uring's fsync */
};

/* Does a failure of @call, with any errno, latch the LUN (may it have
 * lost data an earlier GOOD vouched for)?  A resource a command could
 * not get before any I/O (SYNCGUARD_ERESOURCE) never does. */
bool syncguard_policy_latches(enum syncguard_call call);

/* ---- CDB decoding (core/cdb.c) ---- */

enum syncguard_op {
	SYNCGUARD_OP_UNSUPPORTED = 0,
	SYNCGUARD_OP_READ,
	SYNCGUARD_OP_WRITE,
	SYNCGUARD_OP_WRITE_VERIFY,
	SYNCGUARD_OP_VERIFY,
	SYNCGUARD_OP_SYNC_CACHE,
	SYNCGUARD_OP_WRITE_SAME,
	SYNCGUARD_OP_UNMAP,
	SYNCGUARD_OP_COMPARE_AND_WRITE,
	SYNCGUARD_OP_ORWRITE,
	SYNCGUARD_OP_PRE_FETCH,
	SYNCGUARD_OP_START_STOP,
	SYNCGUARD_OP_COUNT,
};

/* The fields of a CDB the backing store acts on, decoded. */
struct syncguard_cdb {
	enum syncguard_op op;
	uint8_t opcode;
	uint64_t lba;		/* logical blocks */
	uint32_t nblocks;	/* logical blocks; 0 keeps the SBC meaning
				 * of the command (e.g. "to the end" for
				 * SYNCHRONIZE CACHE and WRITE SAME) */
	bool fua;		/* force unit access: the READ and WRITE
				 * CDBs' FUA bit (SBC-3) */
	bool dpo;		/* disable page out: a cache hint only */
	bool immed;		/* SYNCHRONIZE CACHE: GOOD before the flush */
	uint8_t bytchk;		/* VERIFY / WRITE AND VERIFY BYTCHK field */
	bool unmap;		/* WRITE SAME: UNMAP bit */
	bool lbdata, pbdata;	/* WRITE SAME: LBDATA / PBDATA */
	bool ndob;		/* WRITE SAME(16): no Data-Out buffer, the
				 * blocks are written with zeroes (SBC-4) */
	/* START STOP UNIT: POWER CONDITION, NO_FLUSH, START */
	uint8_t power_condition;
	bool no_flush, start;
};

/* Does START STOP UNIT @c (SBC-3 5.25) write every cached block to the
 * medium first, as SYNCHRONIZE CACHE of the whole medium does?  With
 * NO_FLUSH=0, on a move to a power condition without access to the
 * medium: stopped (START=0 under START_VALID) or standby (STANDBY,
 * FORCE_STANDBY_0).  core/exec.c */
bool syncguard_start_stop_flushes(const struct syncguard_cdb *c);

/*
 * Decode @cdb (@len bytes; CDB formats of SPC-4 4.3 and the SBC-3
 * command descriptions: READ, WRITE, WRITE AND VERIFY, VERIFY, WRITE
 * SAME, COMPARE AND WRITE, ORWRITE(16), PRE-FETCH, SYNCHRONIZE CACHE,
 * UNMAP, START STOP UNIT).
 * Returns 0; -ENOTSUP for an opcode the
 * backing store does not handle; -EINVAL when @len is shorter than the
 * command's CDB length.  Field validity (reserved bits) is the
 * executor's business, not the decoder's.
 */
int syncguard_cdb_decode(const uint8_t *cdb, size_t len,
			 struct syncguard_cdb *out);

/* ---- errors and sense (core/sense.c: the one table) ---- */

enum syncguard_reason {
	SYNCGUARD_OK = 0,
	SYNCGUARD_ERR_WRITE,		/* MEDIUM ERROR, WRITE ERROR */
	SYNCGUARD_ERR_READ,		/* MEDIUM ERROR, UNRECOVERED READ ERROR */
	SYNCGUARD_ERR_NOSPACE,		/* DATA PROTECT, SPACE ALLOCATION FAILED
					 * WRITE PROTECT */
	SYNCGUARD_ERR_WRITE_PROTECT,	/* DATA PROTECT, WRITE PROTECTED (a
					 * read-only LUN) */
	SYNCGUARD_ERR_LBA_RANGE,	/* ILLEGAL REQUEST, LBA OUT OF RANGE */
	SYNCGUARD_ERR_INVALID_CDB,	/* ILLEGAL REQUEST, INVALID FIELD IN CDB */
	SYNCGUARD_ERR_INVALID_OPCODE,	/* ILLEGAL REQUEST, INVALID COMMAND
					 * OPERATION CODE */
	SYNCGUARD_ERR_PARAM_LEN,	/* ILLEGAL REQUEST, PARAMETER LIST
					 * LENGTH ERROR */
	SYNCGUARD_ERR_INVALID_PARAM,	/* ILLEGAL REQUEST, INVALID FIELD IN
					 * PARAMETER LIST */
	SYNCGUARD_ERR_MISCOMPARE,	/* MISCOMPARE, MISCOMPARE DURING
					 * VERIFY OPERATION */
	SYNCGUARD_ERR_INVALID_IU,	/* ILLEGAL REQUEST, INVALID FIELD IN
					 * COMMAND INFORMATION UNIT */
	SYNCGUARD_ERR_BUSY,		/* status BUSY, no sense: a resource
					 * short for now (SAM-5 5.3) */
	SYNCGUARD_ERR_NO_MEDIUM,	/* NOT READY, MEDIUM NOT PRESENT: the
					 * LUN has no store (a refused path=) */
	SYNCGUARD_ERR_INTERNAL,		/* HARDWARE ERROR, INTERNAL TARGET
					 * FAILURE (a reason out of range) */
	SYNCGUARD_REASON_COUNT,
};

struct syncguard_sense {
	uint8_t status;		/* SAM status: 0x00 GOOD, 0x02 CHECK
				 * CONDITION */
	uint8_t key;		/* sense key (SPC-4 4.5.6) */
	uint16_t asc;		/* ASC << 8 | ASCQ */
};

/* Status and sense data for @reason (SPC-4 / SBC-3 tables). */
struct syncguard_sense syncguard_sense_of(enum syncguard_reason reason);

/* Reason for a failed I/O system call with errno @err (positive, or
 * SYNCGUARD_ERESOURCE: BUSY); @writing: the call wrote or flushed (WRITE
 * ERROR; ENOSPC and EDQUOT SPACE ALLOCATION FAILED; EROFS and EPERM WRITE
 * PROTECTED) or read (UNRECOVERED READ ERROR). */
enum syncguard_reason syncguard_reason_of_errno(int err, bool writing);

/*
 * Not an errno: a resource a command needed before any I/O could not be
 * had (a descriptor from the pools, an aligned buffer, an io_uring slot).
 * Nothing was written, so nothing latches; the command is answered BUSY
 * and the initiator retries it.  Above every errno (Linux's are < 4096).
 */
#define SYNCGUARD_ERESOURCE 4096

/* ---- the system calls the core makes, swappable by tests (core/sys.c) ---- */

struct statx;

struct syncguard_sysops {
	ssize_t (*pwritev2)(int fd, const struct iovec *iov, int cnt,
			    off_t off, int flags);
	ssize_t (*pread)(int fd, void *buf, size_t len, off_t off);
	int (*fdatasync)(int fd);
	int (*fsync)(int fd);
	int (*sync_file_range)(int fd, off_t off, off_t len,
			       unsigned int flags);
	int (*fallocate)(int fd, int mode, off_t off, off_t len);
	/* open(2) of a descriptor for the pools (never O_CREAT) */
	int (*open)(const char *path, int flags);
	/* statx of @fd itself (AT_EMPTY_PATH): 0 or -1 with errno */
	int (*statx)(int fd, unsigned int mask, struct statx *stx);
	/* An io_uring completion of @call on @fd with result @res (bytes,
	 * or -errno) as the engine takes it: @res itself, or what a test
	 * injects in its place. */
	int (*ring_result)(enum syncguard_call call, int fd, int res);
};

/* The table the core and the io_uring engine call through; tests
 * replace entries to inject faults (any errno, EINTR, short writes) and
 * count syncs. */
extern struct syncguard_sysops syncguard_sys;

/* ---- a LUN (core/lun.c) ---- */

/*
 * A running A/B trial between two ways of doing something (core/flush.c):
 * epochs, one run each way every 8 (every 64 while one way answers more
 * than twice as many as the other), the rest the way whose last epoch
 * answered more commands per second.
 */
struct syncguard_trial {
	bool arm;		/* the way this epoch runs (read lock-free) */
	unsigned int epoch, ticks;
	uint64_t answered, t0_us;	/* in this epoch */
	uint64_t m0_us;		/* its scored second half began (0: not) */
	uint64_t last_us;	/* the last note */
	uint64_t rate[2];	/* answered/s, last epoch of each way */
	bool scored;		/* an epoch was scored since the restart */
};

/*
 * Note (under the caller's lock) that @answered commands were answered
 * at @now_us (microseconds, monotonic), counting @ticks toward the
 * epoch's length (what an epoch is measured in: flushes, writes).  An
 * epoch lasts at least @epoch_us; only its second half is scored, and
 * it ends once that has seen @epoch_ticks; then the next
 * arm is set: epoch % P == 0 runs arm 0, == 1 arm 1, the others the
 * faster one (arm 0 on a tie); P = 8, or 64 while one arm's last rate
 * is more than twice the other's.  After a pause (no note for longer
 * than an epoch and 100 ms) it starts again: arm 0, then arm 1, unless
 * one arm's last rate was more than twice the other's; then the epochs
 * go on counting, the faster arm runs and the other keeps its turn
 * (epoch % 64 == 0 or 1), except that a load that scored no epoch since
 * the last pause begins with the faster arm.
 * Returns true when the arm or the
 * rates may have changed (an epoch ended, or the trial started again
 * after a pause): only then is there anything new to publish.
 */
bool syncguard_trial_note(struct syncguard_trial *t, uint64_t answered,
			  unsigned int ticks, uint64_t now_us,
			  unsigned int epoch_ticks, uint64_t epoch_us);

/* Count @answered more commands in @t's epoch under way (its scored
 * half, and no pause since the last note), without lengthening the
 * epoch or keeping up the trial: commands answered the same way
 * whichever arm runs (a durable write alone: core/writesync.c;
 * test_flush_trial_count). */
void syncguard_trial_count(struct syncguard_trial *t, uint64_t answered,
			   uint64_t now_us, uint64_t epoch_us);

/* Copy @t's way (0 or 1) and its two last rates (commands answered per
 * second) into a LUN's counters (include/syncguard_stats.h), under the
 * trial's lock; readers see each field whole. */
void syncguard_trial_publish(const struct syncguard_trial *t, uint64_t *way,
			     uint64_t rate[2]);

/* Group commit state (core/flush.c). */
struct syncguard_flusher {
	pthread_mutex_t lock;
	pthread_cond_t done;
	uint64_t started, completed;	/* flush generations */
	uint64_t failed;		/* the last generation that failed */
	int failed_err;			/* its answer (-errno) */
	bool running;
	bool batching;		/* a leader holds the next flush back */
	unsigned int joining;	/* callers the next flush will answer */
	unsigned int last_group;	/* callers the last flush answered */
	unsigned int avg_us;	/* mean device flush time, microseconds */
	struct syncguard_trial trial;	/* hold flushes back (arm 1)? */
	uint64_t dirty;		/* bumped (atomically) by each write that
				 * leaves data volatile */
	uint64_t clean_at;	/* value of dirty the last completed flush
				 * covered */
};

/*
 * Page-cache writes and O_DIRECT writes to the same folio of one file
 * never run at the same time (core/mix.c says why).  The file is cut in
 * granules of the largest folio size (2 MiB on x86-64), counted in
 * SYNCGUARD_MIX_SLOTS slots by granule index modulo the slot count: two
 * writes that share a granule share a slot (two that only share a slot
 * wait for nothing worse than each other).
 */
#define SYNCGUARD_MIX_SLOTS 1024

/* Devices under a LUN whose write cache setting the watch follows (64
 * at most: a bit each, core/stack.c); a LUN over more is refused, and
 * one under which more stand at once later latches */
#define SYNCGUARD_CACHED_DEVS 64

/* ZFS datasets a LUN's store may stand on (core/stack.c) */
#define SYNCGUARD_ZFS_DEPTH 4

/* Loop devices followed under a LUN's store (a loop over a file in a
 * file system on another loop ...); a deeper stack is refused. */
#define SYNCGUARD_LOOP_DEPTH 4

/* Block devices whose layers are checked under a LUN's store: its own
 * or its file system's (a btrfs's several), each loop's backing file's;
 * more are refused. */
#define SYNCGUARD_LAYER_DEVS 16

enum syncguard_mix_kind {
	SYNCGUARD_MIX_NONE,		/* holds nothing */
	SYNCGUARD_MIX_CACHED,		/* a write through the page cache */
	SYNCGUARD_MIX_DIRECT,		/* an O_DIRECT write */
};

struct syncguard_mix {
	bool on;			/* the LUN writes both ways */
	unsigned int granule_shift;	/* log2(granule size in bytes) */
	pthread_mutex_t lock;
	pthread_cond_t drained;		/* an O_DIRECT write ended */
	unsigned int waiting;		/* threads in syncguard_mix_wait */
	uint32_t cached[SYNCGUARD_MIX_SLOTS];
	uint32_t direct[SYNCGUARD_MIX_SLOTS];
};

struct syncguard_lun {
	int fd;
	char path[4096];		/* as given at open (for records) */
	char store_id[256];		/* the store's identity, "" if none
					 * (syncguard_store_id) */
	unsigned int final_seq;		/* its final flush's number, once
					 * closed (syncguard_final_flush_begin) */
	char poison[512];		/* the record it started latched by,
					 * "" if none (core/poison.c) */
	char poison_dir[4096];		/* the state directory it is in */
	/* the ZFS datasets it stands on, "" past the last: its own zvol's
	 * first, then those under it (a zvol under a loop or a file system,
	 * a ZFS file system); their sync and logbias as at open, and the
	 * zvol each is (0: a file system's), to find it again if renamed */
	char zfs[SYNCGUARD_ZFS_DEPTH][256];
	char zfs_sync[SYNCGUARD_ZFS_DEPTH][16];
	char zfs_logbias[SYNCGUARD_ZFS_DEPTH][16];
	dev_t zfs_dev[SYNCGUARD_ZFS_DEPTH];
	/* it and the devices under it (sysfs slaves) whose write cache
	 * Linux sends flushes to ("write back") at open, for the watch */
	dev_t cached_dev[SYNCGUARD_CACHED_DEVS];
	unsigned int n_cached_dev;
	/* the devices whose layers were checked at open (its own or its
	 * file system's, each loop's backing file's), for the watch */
	dev_t layer_dev[SYNCGUARD_LAYER_DEVS];
	unsigned int n_layer_dev;
	bool stacked;	/* on device-mapper, md or bcache: a layer under
			 * it can change while it lives */
	uint64_t size;			/* bytes, multiple of the block size */
	unsigned int block_shift;	/* log2(logical block size in bytes) */
	unsigned int phys_block_size;	/* bytes; 0 if unknown */
	unsigned int punch_align;	/* bytes a block device deallocates
					 * in (its logical sector); 0 = any */
	bool blockdev;
	int dev_write_cache;		/* the block device under the LUN
					 * (itself, or under its file
					 * system): 1 volatile, 0 none,
					 * -errno unknown; see
					 * syncguard_dev_write_cache */
	char dev_name[32];		/* its sysfs name, "" if unknown */
	bool thin;			/* UNMAP allowed (tgt's
					 * thin_provisioning attribute) */
	unsigned int max_caw_blocks;	/* MAXIMUM COMPARE AND WRITE LENGTH
					 * the Block Limits VPD reports; 0 =
					 * no limit */
	struct syncguard_opts opts;
	bool wce;			/* Caching page WCE the LUN honours;
					 * read/written atomically */
	bool wce_wanted;		/* the WCE last asked for (MODE SELECT,
					 * tgtadm), set when asked */
	unsigned int wce_switching;	/* WCE 1 -> 0 switches whose flush
					 * still runs: reported as 1 while
					 * any does (a count: two overlap) */
	pthread_rwlock_t write_lock;	/* writes share it; COMPARE AND WRITE
					 * and WCE changes take it alone */
	int flush_error;		/* first failed flush's errno, latched;
					 * encoded, see syncguard_latch */
	pthread_mutex_t recheck_lock;	/* one soft-latch recheck at a time */
	pthread_mutex_t switch_lock;	/* one switch to WCE=0 at a time */
	bool closing;			/* switches still queued stand down:
					 * the final flush covers them */
	bool enospc_soft;		/* ENOSPC/EDQUOT latch soft here
					 * (syncguard_policy_enospc_refused) */
	/* write_sync=auto: RWF_DSYNC (arm 0) or group commit (arm 1),
	 * by a running trial (syncguard_use_dsync) */
	pthread_mutex_t sync_trial_lock;
	struct syncguard_trial sync_trial;
	unsigned int durable_inflight;	/* durable writes between their
					 * write_sync choice and their answer
					 * (atomic; see syncguard_use_dsync) */
	/* The WRITE+SYNCHRONIZE CACHE loop (syncguard_write_persist):
	 * SYNCHRONIZE CACHEs in a row that each followed a plain write,
	 * and whether the last of the two kinds was a write; tgtd's event
	 * thread writes them, workers read them (relaxed atomics) */
	unsigned int sync_streak;
	bool last_was_write;
	int async_writes;		/* planned writes in flight (any kind),
					 * and COMPARE AND WRITEs and ORWRITEs
					 * running: each waits for the other
					 * (atomic; see exclusive_begin,
					 * core/exec.c) */
	int exclusive_running;
	int async_cached;		/* planned cached writes in flight
					 * (syncguard_plan); a switch to WCE=0
					 * waits for them */
	/* An O_DIRECT descriptor for aligned writes, which then reach the
	 * device without a page-cache copy or a writeout; -1 if none.
	 * direct_io: writes use it (bsopts direct; see open_direct);
	 * else with mix.on (write-back, direct=auto) RWF_DSYNC writes do,
	 * and the rest take the page cache. */
	int dfd;
	int group_fd;			/* the group flushes' descriptor
					 * (see "sync descriptors", lun.c) */
	int loop_fd;			/* a loop device's backing file,
					 * flocked; -1 otherwise (core/loopdev.c) */
	int real_fd;			/* its file, or its loop device's
					 * backing file, on an overlay: the
					 * same file in the upper layer,
					 * flocked; -1 otherwise
					 * (syncguard_overlay_hold) */
	bool on_loop;			/* a loop device (over a file) */
	bool synced_at_open;		/* the open fsynced the file (plp's
					 * allocation check) */
	bool loop_holes_buffered;	/* that loop has direct I/O off and
					 * its file has holes (a warning) */
	/* plp over loop devices (its own, and those under the file systems
	 * below it): each one's sysfs dio attribute, for the mount watch;
	 * "" past the last (core/loopdev.c) */
	char loop_dio_attr[SYNCGUARD_LOOP_DEPTH + 1][96];
	/* The backing files of the loop devices under the file system of
	 * the LUN's file (or of its loop device's backing file), the next
	 * one down first, for the mount watch; -1 past the last */
	int under_fd[SYNCGUARD_LOOP_DEPTH];
	bool direct_io;
	bool direct_reads;		/* reads use dfd too (direct_io where
					 * an asynchronous write leaves cached
					 * pages: syncguard_lun_writes_async) */
	struct syncguard_mix mix;
	bool async_dsync_ok;		/* RWF_DSYNC on dfd is honoured when
					 * asynchronous (io_uring) too */
	bool no_dio;			/* the inode cannot do direct I/O
					 * (syncguard_dio_align): every write
					 * takes the page cache */
	unsigned int dio_align;		/* offset and length, bytes */
	unsigned int dio_mem_align;	/* buffer address, bytes */
	/* Descriptors for durability calls, one per call in flight (see
	 * "sync descriptors" in core/lun.c): pool[0] buffered, pool[1]
	 * O_DIRECT (RWF_DSYNC writes that bypass the page cache), each
	 * opened by syncguard_reopen. */
	pthread_mutex_t pool_lock;
	struct syncguard_fd_pool {
		int *fds;
		unsigned int n, cap;
	} pool[2];
	struct syncguard_flusher flusher;
	struct syncguard_stats *stats;	/* local_stats or a shared mapping */
	char *stats_path;		/* the mapping's file, or NULL */
	unsigned long stats_ino;	/* its inode: removed only if ours */
	struct syncguard_stats local_stats;
};

/*
 * Open @path (regular file or block device) read-write for @lun, whose
 * logical block is 1 << @block_shift bytes, and check it can honour
 * @opts.  Fills fd, size, phys_block_size, blockdev.  Returns 0 or
 * -errno with a one-line reason in @err.
 */
int syncguard_lun_open(struct syncguard_lun *lun, const char *path,
		       unsigned int block_shift,
		       const struct syncguard_opts *opts,
		       char *err, size_t errlen);

/*
 * The engine runs @lun's O_DIRECT writes asynchronously (io_uring): where
 * such a write does not drop the pages a page-cache read cached while it
 * was in flight (syncguard_policy_async_direct_drops_cache), the LUN's
 * reads go O_DIRECT too.  Call after syncguard_lun_open, before any I/O.
 */
void syncguard_lun_writes_async(struct syncguard_lun *lun);

/*
 * Close @lun.  What may be volatile is flushed first
 * (syncguard_policy_close_flushes), so a clean shutdown leaves nothing
 * volatile.  Returns 0, the flush's -errno, or -(the latched errno)
 * without a flush.
 */
int syncguard_lun_close(struct syncguard_lun *lun);

/*
 * Close @lun as syncguard_lun_close does, but leave its final flush to
 * the caller, who may run it on another thread: a sync descriptor of
 * the file or device (>= 0; fdatasync it, then close it) when a flush is
 * owed (syncguard_policy_close_flushes, and no error latched for good:
 * that LUN's data is already reported lost), SYNCGUARD_NO_FINAL_FLUSH
 * when none is (or it had to run here and did); the flush's -errno
 * (-EPERM included) when it had to run here, because the store could
 * not be marked for it (syncguard_final_flush_begin), and failed.  It is the
 * group flushes' descriptor, opened with the LUN, so it reports every
 * writeback error since the last one it reported, as every group
 * flush's does.
 */
#define SYNCGUARD_NO_FINAL_FLUSH INT_MIN	/* no descriptor, no -errno */
int syncguard_lun_close_deferred(struct syncguard_lun *lun);

/*
 * Make every write completed before the call durable (data, the metadata
 * needed to read it, device cache flush), sharing device flushes with
 * concurrent callers (group commit, core/flush.c).  With @elide, costs no
 * device flush when nothing was written since the last completed one
 * (SYNCHRONIZE CACHE on a clean cache).  Returns 0, or -errno: the
 * failed flush's own errno, whatever it is, or the errno latched (a
 * failed flush latches: core/latch.c).
 */
int syncguard_lun_flush(struct syncguard_lun *lun, bool elide);

/*
 * Group commit batching, for either engine: how long to hold a
 * device flush back (microseconds, 0 = start now) so that more commands
 * join it.  @last_group is how many commands the previous flush answered,
 * @flush_us the recent mean device flush time (microseconds).  Only a
 * concurrent load is held back (@last_group >= 2): a lone command at
 * queue depth 1 never waits.  Pure arithmetic; see core/flush.c.
 */
unsigned int syncguard_flush_batch_us(unsigned int last_group,
				      unsigned int flush_us);

/* The wait (microseconds) an engine holds its next flush back now: the
 * above while the running trial (core/flush.c) finds that holding back
 * answers more commands per second than not, else 0. */
unsigned int syncguard_flush_hold_us(struct syncguard_lun *lun);

/*
 * The queue depth the initiators keep lately, as the io_uring engine sees
 * it: the most commands it had at once over the current window of
 * SUBMIT_DEPTH_WINDOW commands (@peak) and the one before (@prev).
 * Zeroed: nothing seen yet (then only the batch limit and the passes
 * decide).  The engine's own, over all its LUNs; core/flush.c.
 */
struct syncguard_depth {
	unsigned int peak, prev;
	unsigned int seen;	/* commands in the current window */
};

/* A command entered the engine, which now has @ops (this one included;
 * at least 1). */
void syncguard_depth_note(struct syncguard_depth *d, unsigned int ops);

/*
 * Submission batching, for the io_uring engine: may a read or write just
 * prepared wait for the end of tgtd's event-loop pass?  @held: prepared
 * and not submitted, this one included; @ops: commands in the engine
 * (held, in the kernel, waiting for a flush, or done and waiting to be
 * answered from the event loop), this one included;
 * @depth: as noted above.  Pure; the rules and their reasons are in
 * core/flush.c.
 */
bool syncguard_submit_hold(unsigned int held, unsigned int ops,
			   const struct syncguard_depth *depth);

/* At the end of a pass of tgtd's event loop: is what is held due now?
 * @waited_us: microseconds the first held has waited; @quiet: passes in
 * a row, this one included, that brought no new read or write while
 * some were held (0 when this one brought one); @in_kernel: O_DIRECT reads and writes submitted
 * and not yet completed (page-cache I/O keeps no device busy).  Then
 * everything held is submitted. */
bool syncguard_submit_due(uint64_t waited_us, unsigned int quiet,
			  unsigned int in_kernel);

/* Nothing written (data or metadata) since the last completed flush? */
bool syncguard_lun_clean(struct syncguard_lun *lun);

/* The dirty counter (core/flush.c): read it before a device flush an
 * engine runs itself, and hand it to syncguard_flush_done. */
uint64_t syncguard_lun_dirty(struct syncguard_lun *lun);

/*
 * An engine's own device flush ended with @res (0 or -errno) after @us
 * microseconds; it covered everything counted dirty up to @covers.
 * It answered @group commands.  Counts and times it, latches a failure,
 * or lets later SYNCHRONIZE CACHE commands skip what it made durable.
 * Returns what each of the commands it answers is answered with: @res
 * when it failed (any errno), else the errno latched meanwhile (as
 * -errno), else 0.
 */
int syncguard_flush_done(struct syncguard_lun *lun, uint64_t covers, int res,
			 uint64_t us, unsigned int group);

/*
 * Publish @lun's counters in the file @path (created, mode 0644, mapped
 * shared; parent directories created).  Until then, and if this fails,
 * they live in lun->local_stats.  Returns 0, -EEXIST when a live process
 * (another tgtd with a target of the same name) publishes there, or
 * -errno.
 */
int syncguard_stats_publish(struct syncguard_lun *lun, const char *path);




/*
 * The WCE of a LUN (Caching mode page, SBC-3 6.4.5), read lock-free:
 * syncguard_lun_wce, what it honours for new writes;
 * syncguard_lun_wanted_wce, the last asked for; syncguard_lun_reported_wce,
 * what it reports (MODE SENSE) and honours for SYNCHRONIZE CACHE and FUA
 * reads: 1 also while a switch to WCE=0 has not yet made durable what
 * was written under WCE=1; syncguard_lun_switch_pending: a switch to
 * WCE=0 asked for (the one at open, tgtadm's, MODE SELECT's, or one whose
 * flush failed) or still flushing: until it is done, SYNCHRONIZE CACHE
 * flushes in every mode, plp's included.
 */
static inline bool syncguard_lun_wce(struct syncguard_lun *lun)
{
	return __atomic_load_n(&lun->wce, __ATOMIC_SEQ_CST);
}

static inline bool syncguard_lun_wanted_wce(struct syncguard_lun *lun)
{
	return __atomic_load_n(&lun->wce_wanted, __ATOMIC_SEQ_CST);
}

static inline bool syncguard_lun_reported_wce(struct syncguard_lun *lun)
{
	return __atomic_load_n(&lun->wce_switching, __ATOMIC_SEQ_CST) != 0 ||
	       syncguard_lun_wce(lun);
}

static inline bool syncguard_lun_switch_pending(struct syncguard_lun *lun)
{
	return __atomic_load_n(&lun->wce_switching, __ATOMIC_SEQ_CST) != 0 ||
	       (syncguard_lun_wce(lun) && !syncguard_lun_wanted_wce(lun));
}

/*
 * Switch the WCE the LUN honours.  Waits for writes in flight; on 1 -> 0
 * flushes, so no write completed before the change stays volatile once
 * the initiator is told WCE=0.  Returns 0 or the flush's -errno (WCE
 * then stays 1).  Whether the mode allows the change is the caller's
 * check (syncguard_mode_wce_changeable); whether it flushes is
 * syncguard_policy_switch_flushes's.
 */
int syncguard_lun_set_wce(struct syncguard_lun *lun, bool wce);

/*
 * The same in two steps, for a switch carried out on another thread
 * (MODE SELECT's worker, tgtadm's thread): syncguard_lun_want_wce
 * records the request where it arrives, at once, and
 * syncguard_lun_apply_wce later carries out whatever was asked for last.
 * A switch to 0 that a newer request for 1 overtook while it waited for
 * the write lock stands down (returns 0, changes nothing).  Switches to 0
 * run one at a time, each answered after its own flush or the one before
 * it.  syncguard_lun_wanted_wce: the WCE last asked for, which is what a
 * new request is compared with (after a failed switch to 0 it stays 0
 * while 1 is honoured and shown: a new request for 0 then switches
 * again).  syncguard_lun_set_wce(l, w) is want + apply.
 */
void syncguard_lun_want_wce(struct syncguard_lun *lun, bool wce);
int syncguard_lun_apply_wce(struct syncguard_lun *lun);

struct syncguard_req;

/* ---- planning a command for an asynchronous engine (core/exec.c) ---- */

/* One plain read or write of the backing file, as syncguard_plan()
 * decided it; what to do with it is the engine's business. */
struct syncguard_plan {
	bool write;
	uint64_t off;		/* bytes */
	uint32_t len;		/* bytes */
	enum syncguard_persist persist;	/* writes; PERSIST_DURABLE ones by
					 * dsync, else a cached write and a
					 * group flush */
	bool direct;		/* by O_DIRECT (lun->dfd, or with dsync a
				 * descriptor of its own); a read too */
	bool dsync;		/* PERSIST_DURABLE by RWF_DSYNC, O_DIRECT,
				 * on a descriptor of its own */
	bool scored;		/* PERSIST_DURABLE: false for a lone one
				 * (syncguard_use_dsync), whose answer
				 * only counts in write_sync=auto's rate */
	bool fua;		/* the write had FUA (for the counters) */
	bool write_ref;		/* holds lun->async_writes until written,
				 * answered or cancelled */
	bool cached_ref;	/* holds lun->async_cached: dropped by
				 * syncguard_plan_written() */
	bool written;		/* syncguard_plan_written() was called */
	bool durable_ref;	/* counted in lun->durable_inflight until
				 * answered or cancelled */
	enum syncguard_mix_kind mix;	/* what it holds in lun->mix, until
					 * written, answered or cancelled */
};

/*
 * Can @req run as one plain READ or WRITE of the backing file, with
 * nothing else than the durability its class needs?  Validates as
 * syncguard_execute would and counts the command.  Returns true with
 * @plan filled; false when the command needs more (a flush before a FUA
 * read, an error to report, WRITE AND VERIFY, ...): run it through
 * syncguard_execute on a worker instead, which also counts it.
 */
bool syncguard_plan(struct syncguard_lun *lun, const struct syncguard_req *req,
		    struct syncguard_plan *plan);

/* A planned write reached the page cache (or the device): note what
 * became dirty.  Call before joining a group flush; syncguard_plan_done
 * calls it otherwise. */
void syncguard_plan_written(struct syncguard_lun *lun,
			    struct syncguard_plan *plan);

/* The engine cannot carry out @plan after all (no memory for an aligned
 * copy, no descriptor): undo what syncguard_plan did -- its count and
 * its hold on a WCE switch -- so that the command can go to a worker,
 * which counts it again.  Nothing was written. */
void syncguard_plan_cancel(struct syncguard_lun *lun,
			   struct syncguard_plan *plan);

/* The planned I/O completed with @err (0 or -errno, after retrying
 * short transfers, and after the flush it needed): note what became
 * dirty, latch a failed durable write, count errors.  Returns the reason
 * to report. */
enum syncguard_reason syncguard_plan_done(struct syncguard_lun *lun,
					  struct syncguard_plan *plan, int err);

/* ---- executing a command (core/exec.c) ---- */

/*
 * The CDB checks of VERIFY and WRITE AND VERIFY (10/12/16), in the order
 * tgt's core checks WRITE AND VERIFY before a backing store sees it: the
 * range (syncguard_check_range), then BYTCHK.  SBC-4 defines BYTCHK 00b
 * and 01b for both, 11b (one block compared with every block) for VERIFY
 * only, and reserves the rest; SBC-3 had one BYTCHK bit beside a
 * reserved one.  Returns SYNCGUARD_OK, SYNCGUARD_ERR_LBA_RANGE or
 * SYNCGUARD_ERR_INVALID_CDB.
 */
enum syncguard_reason syncguard_check_verify(const struct syncguard_lun *lun,
					     const struct syncguard_cdb *c);

/*
 * SBC-3 4.5: does [lba, lba + nblocks) lie inside @lun's medium?
 * nblocks == 0 checks only that @lba is addressable.  Returns
 * SYNCGUARD_OK or SYNCGUARD_ERR_LBA_RANGE.
 */
enum syncguard_reason syncguard_check_range(const struct syncguard_lun *lun,
					    uint64_t lba, uint64_t nblocks);

struct syncguard_req {
	const uint8_t *cdb;
	size_t cdb_len;
	const uint8_t *out;	/* Data-Out buffer (initiator to target) */
	uint32_t out_len;	/* bytes */
	uint8_t *in;		/* Data-In buffer */
	uint32_t in_len;	/* bytes */
};

struct syncguard_result {
	enum syncguard_reason reason;
	uint32_t in_done;	/* bytes of Data-In filled */
	uint64_t info;		/* MISCOMPARE: byte offset of the difference */
	bool info_valid;
	int err;		/* errno behind an I/O error (for the log), 0 */
	bool deferred;		/* a deferred error (SPC-4 4.5.5: response
				 * code 71h/73h): an IMMED=1 flush's */
};

/*
 * SYNCHRONIZE CACHE(10/16) (SBC-3 5.22, 5.23) without blocking, for
 * tgtd's event thread: validates @cdb (@len bytes) and answers it when
 * that needs no I/O -- an LBA range or latched error, a mode with nothing
 * volatile, or nothing dirty since the last completed flush.  Returns
 * true with *@reason set when answered; false when it needs a device
 * flush (run it through syncguard_execute, on a worker).
 */
bool syncguard_sync_cache_now(struct syncguard_lun *lun, const uint8_t *cdb,
			      size_t len, enum syncguard_reason *reason);

/*
 * Execute one SBC command against @lun: decode, validate (LBA range,
 * reserved fields this store cares about), move data, and make it as
 * durable as syncguard_policy() demands before returning.  Thread-safe:
 * the LUN's worker threads call it concurrently.
 */
void syncguard_execute(struct syncguard_lun *lun,
		       const struct syncguard_req *req,
		       struct syncguard_result *res);

#endif
