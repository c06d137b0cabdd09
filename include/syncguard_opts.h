/*
 * The write-cache modes and the bsopts that configure a LUN
 * (core/opts.c): what crosses from the module to the tools, which parse
 * and name them too (syncguard-stat, iscsi-syncbench).
 *
 * Functions return 0 or -errno unless their comment says otherwise.
 */
#ifndef SYNCGUARD_OPTS_H
#define SYNCGUARD_OPTS_H

#include <stdbool.h>
#include <stddef.h>

/* ---- write-cache modes and bsopts (core/opts.c) ---- */

enum syncguard_mode {
	SYNCGUARD_MODE_WRITE_THROUGH,
	SYNCGUARD_MODE_WRITE_BACK,
	SYNCGUARD_MODE_PLP,
};

/* How a write that must be durable becomes durable (bsopts write_sync). */
enum syncguard_write_sync {
	SYNCGUARD_WRITE_SYNC_AUTO,	/* DSYNC or GROUP, whichever a running
					 * trial measures faster (core/lun.c) */
	SYNCGUARD_WRITE_SYNC_GROUP,	/* cached write, then a device flush
					 * shared with concurrent commands */
	SYNCGUARD_WRITE_SYNC_DSYNC,	/* RWF_DSYNC on that write alone */
};

/* Whether writes bypass the host page cache (bsopts direct). */
enum syncguard_direct {
	SYNCGUARD_DIRECT_AUTO,		/* by mode, as measured (core/lun.c) */
	SYNCGUARD_DIRECT_YES,		/* O_DIRECT where aligned */
	SYNCGUARD_DIRECT_NO,		/* the page cache */
};

/* How commands reach the backing file (bsopts engine). */
enum syncguard_engine {
	SYNCGUARD_ENGINE_AUTO,		/* io_uring where the file takes
					 * non-blocking I/O (RWF_NOWAIT) */
	SYNCGUARD_ENGINE_THREADS,	/* the LUN's worker threads only */
	SYNCGUARD_ENGINE_URING,		/* io_uring, or the LUN is refused */
};

/* Group commit's batching trial (bsopts flush_batch, core/flush.c). */
enum syncguard_flush_batch {
	SYNCGUARD_FLUSH_BATCH_AUTO,	/* hold a flush back while a running
					 * trial finds that it pays */
	SYNCGUARD_FLUSH_BATCH_OFF,	/* start every flush at once */
};

/* write-back's WRITE+SYNCHRONIZE CACHE loop (bsopts sync_loop,
 * core/writesync.c). */
enum syncguard_sync_loop {
	SYNCGUARD_SYNCLOOP_AUTO,	/* a single writer's streak makes its
					 * plain writes durable at once */
	SYNCGUARD_SYNCLOOP_OFF,		/* plain writes stay cached */
};

struct syncguard_opts {
	enum syncguard_mode mode;
	enum syncguard_engine engine;
	enum syncguard_write_sync write_sync;
	enum syncguard_direct direct;
	enum syncguard_flush_batch flush_batch;
	enum syncguard_sync_loop sync_loop;
	/* plp on a regular file: verify at open that every block is
	 * allocated and written (FIEMAP).  false only when the user vouches
	 * for it on a file system without FIEMAP. */
	bool alloc_check;
	/* write-through or plp: may an initiator or administrator set
	 * WCE=1?  (write-through then behaves as write-back) */
	bool allow_wce;
	/* where latches that may stand for lost data are recorded
	 * (core/poison.c); "" = $SYNCGUARD_STATE_DIR, else
	 * SYNCGUARD_STATE_DIR_DEFAULT */
	char state_dir[256];
	/* worker threads for the LUN; 0 = auto (syncguard_workers) */
	unsigned int workers;
};

/* The state directory when neither bsopts state_dir nor the environment
 * of tgtd (SYNCGUARD_STATE_DIR, absolute) names one */
#define SYNCGUARD_STATE_DIR_DEFAULT "/var/lib/syncguard"

/*
 * How many worker threads a LUN gets (glue/workers.c): @opts->workers if set
 * (1..SYNCGUARD_WORKERS_MAX), else @tgt_threads (tgtd's --nr_iothreads)
 * within SYNCGUARD_WORKERS_AUTO_MIN..SYNCGUARD_WORKERS_MAX; fixed when
 * the LUN is created (tgt starts them before the LUN opens).  The
 * workers run every read and write on engine=threads (FUSE, NFS: no
 * RWF_NOWAIT) and whatever io_uring leaves to them elsewhere.  A write
 * that must be durable holds its worker until its group flush has
 * answered it, so a flush can answer at most as many of them as there
 * are workers: fewer workers than the initiators keep in flight cap
 * durable writes per flush.  32 is open-iscsi's queue depth per LUN
 * and make bench's; on the 2 ms-flush FUSE model at QD32, write-through
 * writes made 5.7-6.0k IOPS with 32, 48 or 64 workers and 3.9k with
 * tgt's 16 (docs/performance.md); on the disk, where io_uring runs the
 * writes, the count makes no difference.  Each idle worker costs about
 * 8 KiB of tgtd's resident memory, and its stack's 8 MiB of address
 * space.
 */
#define SYNCGUARD_WORKERS_AUTO_MIN	32u
#define SYNCGUARD_WORKERS_MAX		256u
unsigned int syncguard_workers(const struct syncguard_opts *opts,
			       int tgt_threads);

/* Short name of @mode as used in bsopts ("write-back", ...). */
const char *syncguard_mode_name(enum syncguard_mode mode);
/* "auto", "group", "dsync" (bsopts write_sync); "?" if out of range */
const char *syncguard_write_sync_name(enum syncguard_write_sync ws);
/* "auto", "threads", "uring" (bsopts engine); "?" if out of range */
const char *syncguard_engine_name(enum syncguard_engine e);
/* "auto", "off" (bsopts flush_batch, sync_loop); "?" if out of range */
const char *syncguard_flush_batch_name(enum syncguard_flush_batch fb);
const char *syncguard_sync_loop_name(enum syncguard_sync_loop sl);

/*
 * Parse a tgt --bsopts string: "key=value" pairs separated by ';' or
 * ':' (tgt splits its own --params on ',', so ',' never reaches us).
 * Every field of @opts is set: a key not given gets its default
 * (mode=write-back, engine/write_sync/direct/flush_batch/sync_loop
 * auto, alloc_check yes, allow_wce no, state_dir "", workers auto), so
 * @bsopts NULL or empty gives the defaults.
 * Returns 0; -EINVAL with a one-line reason in @err (NUL-terminated,
 * at most @errlen bytes) naming the offending key or value; or -ENOMEM.
 */
int syncguard_opts_parse(const char *bsopts, struct syncguard_opts *opts,
			 char *err, size_t errlen);

/*
 * Describe every bsopts key, one line each, into @buf (@len bytes,
 * NUL-terminated when @len > 0).  Returns the bytes the full text needs,
 * excluding the NUL, as snprintf does.
 */
size_t syncguard_opts_help(char *buf, size_t len);

/*
 * The @i-th bsopts key (0 on), with its accepted values and meaning in
 * *@values and *@help (static strings), for the manual page; NULL past
 * the last key.
 */
const char *syncguard_opts_doc(size_t i, const char **values,
			       const char **help);

#endif
