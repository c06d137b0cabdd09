/*
 * The durability policy: the one place syncguard decides what each
 * command must make durable before it may answer GOOD.
 *
 * "Durable" means it survives a power cut of the target host and of the
 * backing device's volatile cache.  The initiator learns what to expect
 * from the Caching mode page (SBC-3 6.4.5): WCE=1 tells it completed
 * writes may sit in a volatile cache until SYNCHRONIZE CACHE (SBC-3
 * 5.22/5.23) or FUA; WCE=0 tells it every completed write is already
 * durable, so it will never send a flush.  Reporting WCE=0 while a
 * completed write is still volatile is how iSCSI setups lose
 * acknowledged data; every choice below exists to prevent that.
 *
 * write-through (WCE=0).
 *   Every write is PERSIST_DURABLE before GOOD (its data, the metadata
 *   needed to read it, and a device cache flush: RWF_DSYNC or a group
 *   flush, core/lun.c).  Nothing volatile remains after any GOOD, so
 *   SYNCHRONIZE CACHE has nothing to do and answers GOOD without touching
 *   the device.  Only with bsopts allow_wce=yes may an initiator set
 *   WCE=1; the LUN then behaves exactly as write-back, which is what the
 *   page now promises.
 *
 * write-back (WCE=1, the default).
 *   A plain write completes once it is in the host page cache: the
 *   initiator was told the cache is volatile.  A FUA write must be
 *   durable itself (PERSIST_DURABLE) and SBC-3 asks nothing about other
 *   writes: RWF_DSYNC on that write alone, or a cached write that joins
 *   a device flush shared with concurrent commands, whichever answers
 *   more (bsopts write_sync, core/lun.c); a flush of its own for every
 *   FUA write would make FUA cost as much as SYNCHRONIZE CACHE.
 *   SYNCHRONIZE CACHE makes every write completed
 *   before it durable (fdatasync).  SBC-3 lets a device flush only the
 *   LBA range named in the CDB, but it may always flush more; a whole
 *   fdatasync is both correct and what the device can do in one go.
 *   A READ with FUA=1 must return data from the medium (SBC-3 5.8), so
 *   dirty data is flushed before the read.
 *   If an initiator or administrator clears WCE (MODE SELECT, tgtadm),
 *   the LUN behaves exactly as write-through from then on: the page now
 *   promises that, and the switch itself flushes what was dirty before
 *   the page shows WCE=0 (syncguard_policy_switch_flushes, carried out
 *   by syncguard_lun_set_wce).  A LUN that closes flushes what may be
 *   volatile (syncguard_policy_close_flushes).
 *
 * plp (WCE=0).
 *   The device's own cache is power-loss protected, so data in the
 *   device is durable and a device cache flush is pure cost.  The host
 *   page cache is not protected, so every write is PERSIST_WRITTEN
 *   before GOOD: written to the device and waited for (an O_DIRECT
 *   write; with bsopts direct=no, a page-cache write and
 *   sync_file_range), without a flush.  That is only true if no
 *   metadata must change to find the data again; core/lun.c therefore
 *   refuses plp on a regular file that is not fully allocated and
 *   written, and on copy-on-write file systems.  SYNCHRONIZE CACHE has
 *   nothing volatile to flush and answers GOOD at once.
 *   WCE set to 1 on a plp LUN (allow_wce=yes) changes nothing: writes
 *   stay PERSIST_WRITTEN, which is more than WCE=1 promises.
 *
 * What the modes stand on.  write-through and write-back make a write
 * durable with a device cache flush: fdatasync, RWF_DSYNC, or a block
 * device's flush.  A file system mounted "nobarrier" (ext4's barrier=0,
 * btrfs, f2fs) sends no flush for fdatasync, so on it neither mode
 * could keep its promise, and core/lun.c refuses them there (measured on
 * a loop device: 20 fdatasyncs, 0 flushes), also under a loop device
 * whose backing file is on such a file system (core/loopdev.c) or as an
 * overlay's upper layer, or under the loop device its own file system
 * sits on; and a LUN whose file system (any of these) is remounted so
 * later latches an error (the mount watch, glue/watch.c), so that what
 * it can no longer make durable is refused, not acknowledged; a LUN that
 * would need the watch is not exported while the watch cannot run.  plp
 * asks for no flush and is allowed: nobarrier is only safe where the
 * cache is protected anyway, which is what plp declares.  Whether the device honours a
 * flush it receives is outside what a target can see; the power-cut
 * test (scripts/crashtest.sh) proves the contract on a model that does.
 *
 * UNMAP and WRITE SAME with UNMAP change file metadata (punched holes),
 * which only a flush makes durable.  Where plain writes must be durable
 * or written (write-through, plp, write-back with WCE=0) the unmap is
 * followed by a flush: unmaps are rare and correctness wins over cost.
 *
 * WRITE AND VERIFY is classed as a FUA write by the caller: SBC-3 says
 * it writes to the medium and then verifies the medium, which a page
 * cache copy cannot honour.
 *
 * How each level is reached is core/lun.c's business, and changes none
 * of the above: O_DIRECT or the page cache, RWF_DSYNC or a group flush
 * are ways to the same level, chosen for speed; and core/lun.c may make
 * a write more durable than its level asks, never less (a plain
 * write-back write in a WRITE+SYNCHRONIZE CACHE loop is made durable at
 * once, so that the SYNCHRONIZE CACHE finds nothing to flush, at queue
 * depth 1 always and with more in flight where a running trial finds
 * it faster: syncguard_write_persist).  The one such choice
 * that decides durability, whether an asynchronous RWF_DSYNC write is
 * durable when it completes, is made here
 * (syncguard_policy_async_dsync_honoured).  Besides that: with O_DIRECT
 * (bsopts direct) a PERSIST_CACHED write sits in the device's volatile
 * cache instead of the page cache and is counted dirty the same way, so
 * SYNCHRONIZE CACHE still flushes it; a
 * PERSIST_DURABLE one is RWF_DSYNC on O_DIRECT or an O_DIRECT write and
 * a device flush.  A write-back LUN on a file (direct=auto) writes its
 * RWF_DSYNC writes O_DIRECT and the rest into the page cache, never both
 * at once in one 2 MiB granule (as large as a folio): core/mix.c says
 * why that would lose data, and why not on a block device.
 */
#include <string.h>

#include "core.h"

static const struct syncguard_action NOTHING = {
	.flush_before = false, .persist = SYNCGUARD_PERSIST_CACHED,
};

/* write-through, and write-back while WCE=0 */
static struct syncguard_action policy_durable(enum syncguard_class class)
{
	struct syncguard_action a = NOTHING;

	switch (class) {
	case SYNCGUARD_CLASS_WRITE:
	case SYNCGUARD_CLASS_WRITE_FUA:
	case SYNCGUARD_CLASS_UNMAP:
		a.persist = SYNCGUARD_PERSIST_DURABLE;
		break;
	case SYNCGUARD_CLASS_SYNC_CACHE:	/* nothing is volatile */
	case SYNCGUARD_CLASS_READ:
	case SYNCGUARD_CLASS_READ_FUA:		/* the medium is current */
		break;
	}
	return a;
}

static struct syncguard_action policy_write_back(enum syncguard_class class)
{
	struct syncguard_action a = NOTHING;

	switch (class) {
	case SYNCGUARD_CLASS_WRITE:
	case SYNCGUARD_CLASS_UNMAP:
	case SYNCGUARD_CLASS_READ:
		break;
	case SYNCGUARD_CLASS_WRITE_FUA:
		a.persist = SYNCGUARD_PERSIST_DURABLE;
		break;
	case SYNCGUARD_CLASS_SYNC_CACHE:
	case SYNCGUARD_CLASS_READ_FUA:
		a.flush_before = true;
		break;
	}
	return a;
}

static struct syncguard_action policy_plp(enum syncguard_class class)
{
	struct syncguard_action a = NOTHING;

	switch (class) {
	case SYNCGUARD_CLASS_WRITE:
	case SYNCGUARD_CLASS_WRITE_FUA:
		a.persist = SYNCGUARD_PERSIST_WRITTEN;
		break;
	case SYNCGUARD_CLASS_UNMAP:		/* metadata: needs a flush */
		a.persist = SYNCGUARD_PERSIST_DURABLE;
		break;
	case SYNCGUARD_CLASS_SYNC_CACHE:	/* nothing is volatile */
	case SYNCGUARD_CLASS_READ:
	case SYNCGUARD_CLASS_READ_FUA:
		break;
	}
	return a;
}

struct syncguard_action syncguard_policy(enum syncguard_mode mode, bool wce,
					 enum syncguard_class class)
{
	switch (mode) {
	case SYNCGUARD_MODE_WRITE_BACK:
	case SYNCGUARD_MODE_WRITE_THROUGH:
		/* the page decides: WCE=1 reaches a write-through LUN only
		 * when bsopts allow_wce lets an initiator turn its cache on */
		return wce ? policy_write_back(class) : policy_durable(class);
	case SYNCGUARD_MODE_PLP:
		return policy_plp(class);
	}
	return policy_durable(class);	/* any unknown mode: the safe answer */
}

bool syncguard_mode_wce(enum syncguard_mode mode)
{
	return mode == SYNCGUARD_MODE_WRITE_BACK;
}

bool syncguard_mode_wce_changeable(enum syncguard_mode mode, bool allow_wce)
{
	/* Only write-back has a volatile cache an initiator may turn off;
	 * letting it turn WCE on for write-through or plp would make
	 * initiators send flushes that cost and buy nothing, so that takes
	 * the administrator's bsopts allow_wce=yes (a write-through LUN
	 * with WCE=1 then behaves as write-back, which the page promises;
	 * a plp LUN's writes stay PERSIST_WRITTEN, more than it promises). */
	return mode == SYNCGUARD_MODE_WRITE_BACK || allow_wce;
}

bool syncguard_policy_switch_flushes(bool was, bool wce)
{
	/* 1 -> 0: every write completed so far may be volatile, and the
	 * page is about to promise that none is; 0 -> 1 promises less. */
	return was && !wce;
}

bool syncguard_policy_close_flushes(enum syncguard_mode mode, bool clean)
{
	/* What only the page cache or the device's volatile cache holds
	 * goes to the medium before the file is closed: tgt closes a LUN
	 * on delete and on a path= change, and nobody flushes it later.
	 * write-back flushes whatever its count says: the page cache may
	 * hold dirty pages of the file that no command of this LUN counted
	 * (an earlier tgtd's, another program's), and a flush of nothing is
	 * cheap; the other modes hold nothing volatile unless an initiator
	 * turned WCE on (allow_wce), which the count then shows. */
	return mode == SYNCGUARD_MODE_WRITE_BACK || !clean;
}

bool syncguard_policy_open_flushes(enum syncguard_mode mode, bool synced)
{
	/* A LUN that opens may stand on data nobody has flushed: what an
	 * earlier tgtd acknowledged before it was killed (a crash, an OOM
	 * kill, SIGKILL: no close, so no final flush), or what another
	 * program wrote, in the page cache or the device's volatile cache.
	 * A LUN that started out clean would elide the first SYNCHRONIZE
	 * CACHE and the first switch to WCE=0, and write-through would
	 * report WCE=0 over it (40-55% of the acknowledged blocks lost at
	 * a power cut after such a GOOD, 12 of 12 runs:
	 * test_faults_fresh_lun_flushes_what_it_finds).  So every LUN starts
	 * dirty: write-back's first SYNCHRONIZE CACHE or switch to WCE=0
	 * flushes.  write-through and plp report WCE=0, which promises that
	 * nothing is volatile: they open at WCE=1 and switch to 0 as tgtadm
	 * does, in the background (the switch flushes first), unless the
	 * open already synced the file (@synced: plp's allocation check
	 * fsyncs it).  A flush on tgtd's event thread, which opens LUNs,
	 * would hold every other LUN for as long (5 s beside a 5 s flush;
	 * for ever on a device that never answers one:
	 * test_faults_open_flush_in_background). */
	return mode != SYNCGUARD_MODE_WRITE_BACK && !synced;
}

/* Block devices, ext4 (and ext2/3) and XFS: where the two choices below
 * were checked (XFS by its code, iomap as ext4's: no mkfs.xfs here) */
static bool iomap_fs(bool blockdev, unsigned long fs_magic)
{
	return blockdev || fs_magic == 0xef53 /* ext2/3/4 */ ||
	       fs_magic == 0x58465342 /* xfs */;
}

bool syncguard_policy_async_dsync_honoured(bool blockdev,
					   unsigned long fs_magic)
{
	/* Does an RWF_DSYNC O_DIRECT write submitted asynchronously
	 * (io_uring) come back only once durable?  A block device sends it
	 * as a FUA write, and ext4 and XFS (iomap) as a FUA write or with a
	 * sync at completion; checked on this disk: 17,772 device flushes
	 * for 17,769 such writes.  FUSE's asynchronous direct I/O answers it
	 * without the sync (the power-cut test lost acknowledged writes; the
	 * device model saw 10,205 writes and no fsync), although a
	 * synchronous pwritev2 of the same write is followed by one.  So
	 * only where it is known to hold; elsewhere RWF_DSYNC writes stay on
	 * the worker threads (core/exec.c). */
	return iomap_fs(blockdev, fs_magic);
}

bool syncguard_policy_async_direct_drops_cache(bool blockdev,
					       unsigned long fs_magic)
{
	/* iomap drops them when the write completes, in its completion
	 * work.  A block device does not (block/fops.c drops them only
	 * after a synchronous write: 9-164 stale reads in 3,000 writes,
	 * test_blockdev_read_after_write), nor does FUSE's asynchronous
	 * direct I/O (54-85 in 3,000 with engine=uring on the device
	 * model, test_faults_fuse_uring_read_after_write); anything else
	 * is not known to. */
	return !blockdev && iomap_fs(blockdev, fs_magic);
}

bool syncguard_policy_enospc_refused(bool blockdev, unsigned long fs_magic)
{
	/* A write that failed on its way to durability latches the LUN
	 * (lun.c, syncguard_latch): the failure may have lost other writes.
	 * ENOSPC and EDQUOT are mostly a file system refusing a write for
	 * want of space, which loses nothing, and a thin LUN should work
	 * again once space is freed (and EPERM, a file made immutable or a
	 * block device set read-only, is a refusal the same way: ext4, XFS
	 * and block devices check it before they write, and their syncs do
	 * not return it).  But an RWF_DSYNC write returns the
	 * same errno when it went in and its sync failed, and nothing
	 * outside the kernel can tell the two apart (reading the block back
	 * could not: a write that allocated part of its range on a full
	 * ext4 held its data and was refused, and a failed flush of a FUSE
	 * device model had dropped a write that was in).  Where a sync's
	 * ENOSPC can only be a writeback error of the file's pages, which
	 * Linux records per file (errseq), the witness descriptor
	 * (syncguard_lun_recheck) sees it, and the latch may be soft: ext4
	 * and XFS, whose fsync otherwise fails with the journal's or the
	 * device flush's error, and block devices, whose flush fails with
	 * EIO (a thin pool refuses writes with ENOSPC, not flushes).  A file
	 * system that returns a flush error it had from a server or a
	 * device directly (FUSE, where writes are lost that way:
	 * test_faults_fua_enospc_from_flush_latches; network file systems)
	 * latches for good, as any failed flush. */
	return iomap_fs(blockdev, fs_magic);
}

/*
 * A ZFS zvol's dataset property sync decides what its flushes do.
 * sync=disabled: ZFS answers every flush, FUA and O_DSYNC write at once
 * and writes the data with its next transaction group (seconds later):
 * nothing any mode promises holds, so the LUN is refused in every mode.
 * plp sends no flush, and ZFS keeps a write in its open transaction
 * group, in host RAM, until one comes, unless sync=always sends each
 * write to the ZIL (on a protected log device) before it completes:
 * plp needs sync=always.  sync=standard honours flushes, FUA and
 * O_DSYNC, which write-through and write-back stand on.
 * tests/proto check_blockdev.c, test_blockdev_zvol (a stand-in zfs).
 */
const char *syncguard_policy_zvol(enum syncguard_mode mode, const char *sync)
{
	if (!strcmp(sync, "disabled"))
		return "every flush is a no-op there: set sync=standard "
		       "(sync=always for plp), or measure that unsafe setup "
		       "with tgt's rdwr store";
	if (mode == SYNCGUARD_MODE_PLP && strcmp(sync, "always"))
		return "plp sends no flush, and ZFS keeps writes in its "
		       "transaction group, in host RAM, until one: set "
		       "sync=always (zfs set sync=always DATASET), or use "
		       "write-back";
	return NULL;
}

bool syncguard_policy_ram_metadata_ok(enum syncguard_mode mode)
{
	/* device-mapper thin, cache, writecache, vdo, clone, zoned and
	 * integrity targets, and bcache in write-back, keep what a first
	 * write needs (its block's mapping, its place in the cache, its
	 * journal entry) in host RAM until a flush or FUA commits it: plp
	 * sends neither, the other modes do */
	return mode != SYNCGUARD_MODE_PLP;
}

/*
 * The rule for every failing call.  What the command hears follows the
 * errno (core/sense.c: WRITE ERROR; SPACE ALLOCATION FAILED for ENOSPC
 * and EDQUOT; WRITE PROTECTED for EROFS and EPERM; BUSY only for
 * SYNCGUARD_ERESOURCE, a resource missing before any I/O); whether the
 * LUN latches follows the call, never the errno (EINTR and EAGAIN
 * included: core/sys.c, syncguard_retry):
 * - a flush (fdatasync, fsync, io_uring's fsync) that failed may have
 *   dropped every dirty page it could not write, and Linux reports that
 *   once: latched, whatever the errno.  fdatasync returns whatever error
 *   the mapping recorded: FUSE passes its daemon's errno, 9p its
 *   server's, CIFS maps a server's too-many-open-files to EMFILE, so no
 *   errno means "nothing was lost" (tests/unit check_errno.c fails a
 *   flush with each of them);
 * - plp's write-out (sync_file_range) and an RWF_DSYNC write end in the
 *   same report of the mapping's writeback errors (errseq), which may be
 *   other writes' errors: latched too (soft where a refusal is possible,
 *   syncguard_policy_enospc_refused);
 * - a plain data write (into the page cache, or O_DIRECT) reports its own
 *   failure only: that command fails, nothing an earlier GOOD vouched for
 *   was touched, and the LUN goes on;
 * - a short write's rest is written again, and a call that only moves
 *   data is made again after EINTR or EAGAIN, a bounded number of times
 *   (syncguard_retry); a flush, a write-out or an RWF_DSYNC write is not:
 *   its retry's success proves nothing (Linux can have dropped the
 *   writeback error behind an EINTR, and a FUSE or network file system
 *   answers EAGAIN for data that is gone), so its EINTR and EAGAIN are
 *   failures like any errno.
 */
bool syncguard_policy_latches(enum syncguard_call call)
{
	return call != SYNCGUARD_CALL_WRITE;
}
