/*
 * bs_syncguard: a tgt backing store that honours SYNCHRONIZE CACHE and
 * FUA according to a per-LUN write-cache mode (write-through,
 * write-back, plp).
 *
 * This file is only glue between tgt's internal API (struct scsi_lu,
 * struct scsi_cmd, bs_thread workers) and the tgt-independent core in
 * core/.  The durability policy is in core/policy.c, the error-to-sense
 * table in core/sense.c.
 *
 * Load: tgtd dlopen()s every .so in its backing-store directory
 * (/usr/lib/tgt/backing-store on Debian) and calls register_bs_module().
 * Use: tgtadm --op new --mode logicalunit ... --bstype syncguard
 *      --bsopts "mode=write-back"
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "util.h"
#include "tgtd.h"
#include "scsi.h"
#include "spc.h"
#include "bs_thread.h"
#include "target.h"

#include "syncguard.h"

#define CACHING_PAGE	0x08
#define WCE_BIT		0x04	/* byte 2 of the Caching page: mode_data[0] */

/* Per-LUN private data, placed after tgt's struct bs_thread_info. */
struct syncguard_bs {
	struct syncguard_opts opts;
	struct syncguard_lun lun;
	bool open;
	/* tgt's handlers we wrap in this LUN's copy of the device template */
	int (*tgt_mode_select)(int host_no, struct scsi_cmd *cmd);
	int (*tgt_verify)(int host_no, struct scsi_cmd *cmd);
	int (*tgt_mode_sense)(int host_no, struct scsi_cmd *cmd);
	int (*tgt_sync_cache)(int host_no, struct scsi_cmd *cmd);
	tgtadm_err (*tgt_lu_config)(struct scsi_lu *lu, char *params);
};

static struct syncguard_bs *SYNCGUARD_BS(struct scsi_lu *lu)
{
	return (struct syncguard_bs *)((char *)BS_THREAD_I(lu) +
				       sizeof(struct bs_thread_info));
}

/* ---- the Caching mode page (SBC-3 6.4.5) ----
 *
 * The WCE the LUN honours lives in the core (syncguard_lun_wce); tgt's
 * Caching page is how initiators see it.  MODE SENSE refreshes the page
 * from the core first, so it never shows a WCE the LUN does not honour,
 * not even while a switch to WCE=0 waits for its flush.
 */
#define CACHING_PAGE_LEN 18	/* bytes after the page header (SBC-3) */

static struct mode_pg *caching_page(struct scsi_lu *lu)
{
	struct mode_pg *pg = find_mode_page(lu, CACHING_PAGE, 0);

	return pg && pg->pcode_size >= 1 ? pg : NULL;
}

static int page_wce(struct scsi_lu *lu)
{
	struct mode_pg *pg = caching_page(lu);

	return pg ? !!(pg->mode_data[0] & WCE_BIT) : -1;
}

static void page_set_wce(struct scsi_lu *lu, bool wce)
{
	struct mode_pg *pg = caching_page(lu);

	if (!pg)
		return;
	if (wce)
		pg->mode_data[0] |= WCE_BIT;
	else
		pg->mode_data[0] &= ~WCE_BIT;
}

/* Make WCE changeable by MODE SELECT only where the mode allows it. */
static void page_set_mask(struct scsi_lu *lu, enum syncguard_mode mode)
{
	struct mode_pg *pg = caching_page(lu);
	uint8_t mask[CACHING_PAGE_LEN] = { 0 };

	if (!pg || pg->pcode_size != CACHING_PAGE_LEN)
		return;
	mask[0] = syncguard_mode_wce_changeable(mode) ? WCE_BIT : 0;
	set_mode_page_changeable_mask(lu, CACHING_PAGE, 0, mask);
}

/* A copy of the Caching page, to undo a refused tgtadm update. */
struct page_copy {
	bool valid;
	uint8_t data[CACHING_PAGE_LEN];
};

static void page_save(struct scsi_lu *lu, struct page_copy *c)
{
	struct mode_pg *pg = caching_page(lu);

	c->valid = pg && pg->pcode_size == CACHING_PAGE_LEN;
	if (c->valid)
		memcpy(c->data, pg->mode_data, CACHING_PAGE_LEN);
}

static void page_restore(struct scsi_lu *lu, const struct page_copy *c,
			 enum syncguard_mode mode)
{
	char spec[16 + CACHING_PAGE_LEN * 5];
	int n;

	if (!c->valid)
		return;
	n = snprintf(spec, sizeof(spec), "%d:0:%d", CACHING_PAGE,
		     CACHING_PAGE_LEN);
	for (int i = 0; i < CACHING_PAGE_LEN; i++)
		n += snprintf(spec + n, sizeof(spec) - (size_t)n, ":%u",
			      c->data[i]);
	add_mode_page(lu, spec);	/* replaces the page */
	page_set_mask(lu, mode);
}

/* MODE SENSE(6/10) wrapper: show the WCE the LUN honours. */
static int syncguard_mode_sense(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);

	if (bs->open)
		page_set_wce(cmd->dev, syncguard_lun_wce(&bs->lun));
	return bs->tgt_mode_sense(host_no, cmd);
}

/*
 * MODE SELECT(6/10) wrapper.  tgt's handler edits the page (the
 * changeable mask already refuses WCE=1 for write-through and plp).
 * WCE 0 -> 1 takes effect at once.  WCE 1 -> 0 waits for writes in
 * flight and flushes everything dirty, which can take long: a worker
 * thread does it (wce_off_request), so tgtd's event loop, and with it
 * every other LUN and session, goes on meanwhile.  Until it is done the
 * LUN keeps honouring and reporting WCE=1.
 */
static int syncguard_mode_select(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	bool was = bs->open && syncguard_lun_wce(&bs->lun);
	int ret = bs->tgt_mode_select(host_no, cmd);
	int wce = page_wce(cmd->dev);

	if (ret != SAM_STAT_GOOD || !bs->open || wce < 0 || wce == (int)was)
		return ret;
	if (!syncguard_mode_wce_changeable(bs->opts.mode)) {
		page_set_wce(cmd->dev, was);
		sense_data_build(cmd, ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARMS);
		return SAM_STAT_CHECK_CONDITION;
	}
	if (wce) {
		syncguard_lun_set_wce(&bs->lun, true);	/* no flush needed */
		return SAM_STAT_GOOD;
	}
	page_set_wce(cmd->dev, true);		/* until the flush is done */
	bs_thread_cmd_submit(cmd);		/* -> wce_off_request() */
	return SAM_STAT_GOOD;
}

/* In a worker: the second half of MODE SELECT with WCE 1 -> 0. */
static void wce_off_request(struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	int err = syncguard_lun_set_wce(&bs->lun, false);

	if (!err) {
		scsi_set_result(cmd, SAM_STAT_GOOD);
		return;
	}
	eprintf("syncguard: lun %" PRIu64 ": WCE=0 refused: flush failed: %s\n",
		cmd->dev->lun, strerror(-err));
	scsi_set_result(cmd, SAM_STAT_CHECK_CONDITION);
	sense_data_build(cmd, MEDIUM_ERROR, ASC_WRITE_ERROR);
}

/*
 * VERIFY(10/12/16) wrapper: tgt's handler answers GOOD for BYTCHK=0
 * before it checks the LBA range; SBC-3 5.33 wants LOGICAL BLOCK ADDRESS
 * OUT OF RANGE for a range beyond the capacity whatever BYTCHK says.
 */
static int syncguard_verify(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	struct syncguard_cdb c;

	if (bs->open &&
	    syncguard_cdb_decode(cmd->scb, (size_t)cmd->scb_len, &c) == 0 &&
	    syncguard_check_range(&bs->lun, c.lba, c.nblocks)) {
		scsi_set_in_resid_by_actual(cmd, 0);
		sense_data_build(cmd, ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
		return SAM_STAT_CHECK_CONDITION;
	}
	return bs->tgt_verify(host_no, cmd);
}

/*
 * SYNCHRONIZE CACHE(10/16) wrapper: a command that needs no I/O (nothing
 * dirty since the last flush, nothing volatile in this mode, a range or
 * latched error) is answered here, in tgtd's event thread, without the
 * round trip through a worker; the rest goes to tgt's handler, which
 * checks reservations and hands it to a worker.
 */
static int syncguard_sync_cache(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	enum syncguard_reason r;
	struct syncguard_sense s;

	if (!bs->open || device_reserved(cmd) ||
	    !syncguard_sync_cache_now(&bs->lun, cmd->scb, (size_t)cmd->scb_len,
				      &r))
		return bs->tgt_sync_cache(host_no, cmd);
	scsi_set_in_resid_by_actual(cmd, 0);
	if (r == SYNCGUARD_OK)
		return SAM_STAT_GOOD;
	s = syncguard_sense_of(r);
	sense_data_build(cmd, s.key, s.asc);
	return SAM_STAT_CHECK_CONDITION;
}

/*
 * Thin provisioning punches holes; a write into a hole allocates blocks,
 * which is metadata that mode=plp never flushes.  So a plp LUN on a
 * regular file stays fully allocated: thin_provisioning is refused.
 */
static int check_thin(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);

	if (lu->attrs.thinprovisioning && bs->opts.mode == SYNCGUARD_MODE_PLP &&
	    !bs->lun.blockdev) {
		lu->attrs.thinprovisioning = 0;
		eprintf("syncguard: lun %" PRIu64 ": thin_provisioning refused: "
			"mode=plp on a regular file must stay fully allocated\n",
			lu->lun);
		return -EPERM;
	}
	bs->lun.thin = lu->attrs.thinprovisioning;
	return 0;
}

/*
 * tgtadm --op update --mode logicalunit wrapper (mode_page=,
 * thin_provisioning=, ...).  A Caching page that is not 18 bytes, or a
 * WCE change the mode does not allow, is undone and refused.  A switch
 * to WCE=0 flushes before tgtadm gets its answer (tgtd waits for it:
 * an administrator's command, done rarely).
 */
static tgtadm_err syncguard_lu_config(struct scsi_lu *lu, char *params)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	bool was = bs->open && syncguard_lun_wce(&bs->lun);
	struct page_copy before;
	tgtadm_err adm;
	int wce, err = 0;

	page_save(lu, &before);
	adm = bs->tgt_lu_config(lu, params);
	if (!caching_page(lu) || caching_page(lu)->pcode_size != CACHING_PAGE_LEN) {
		page_restore(lu, &before, bs->opts.mode);
		eprintf("syncguard: lun %" PRIu64 ": refused: the Caching mode "
			"page must keep its %d bytes\n", lu->lun, CACHING_PAGE_LEN);
		return TGTADM_INVALID_REQUEST;
	}
	page_set_mask(lu, bs->opts.mode);	/* a new page has no mask */
	wce = page_wce(lu);
	if (bs->open && wce != (int)was) {
		err = syncguard_mode_wce_changeable(bs->opts.mode) ?
		      syncguard_lun_set_wce(&bs->lun, wce) : -EPERM;
		if (err)
			page_restore(lu, &before, bs->opts.mode);
	}
	if (err) {
		eprintf("syncguard: lun %" PRIu64 ": WCE change refused: %s\n",
			lu->lun, err == -EPERM ? "mode=write-through and "
			"mode=plp keep WCE=0" : strerror(-err));
		return TGTADM_INVALID_REQUEST;
	}
	return check_thin(lu) ? TGTADM_INVALID_REQUEST : adm;
}

static void wrap_template(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	struct device_type_operations *ops = lu->dev_type_template.ops;

	bs->tgt_mode_select = ops[MODE_SELECT].cmd_perform;
	ops[MODE_SELECT].cmd_perform = syncguard_mode_select;
	ops[MODE_SELECT_10].cmd_perform = syncguard_mode_select;
	bs->tgt_mode_sense = ops[MODE_SENSE].cmd_perform;
	ops[MODE_SENSE].cmd_perform = syncguard_mode_sense;
	ops[MODE_SENSE_10].cmd_perform = syncguard_mode_sense;
	bs->tgt_verify = ops[VERIFY_10].cmd_perform;
	ops[VERIFY_10].cmd_perform = syncguard_verify;
	ops[VERIFY_12].cmd_perform = syncguard_verify;
	ops[VERIFY_16].cmd_perform = syncguard_verify;
	bs->tgt_sync_cache = ops[SYNCHRONIZE_CACHE].cmd_perform;
	ops[SYNCHRONIZE_CACHE].cmd_perform = syncguard_sync_cache;
	ops[SYNCHRONIZE_CACHE_16].cmd_perform = syncguard_sync_cache;
	bs->tgt_lu_config = lu->dev_type_template.lu_config;
	lu->dev_type_template.lu_config = syncguard_lu_config;
}

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
	struct syncguard_result res;
	struct syncguard_sense s;

	if (cmd->scb[0] == MODE_SELECT || cmd->scb[0] == MODE_SELECT_10) {
		wce_off_request(cmd);
		return;
	}
	syncguard_execute(&bs->lun, &req, &res);
	s = syncguard_sense_of(res.reason);
	scsi_set_result(cmd, s.status);
	if (res.reason == SYNCGUARD_OK)
		return;
	if (res.info_valid)
		sense_data_build_with_info(cmd, s.key, s.asc, res.info);
	else
		sense_data_build(cmd, s.key, s.asc);
	if (req.in_len)
		scsi_set_in_resid_by_actual(cmd, res.in_done);
	eprintf("syncguard: lun %" PRIu64 ": opcode 0x%02x: sense %x/%04x%s%s\n",
		cmd->dev->lun, cmd->scb[0], s.key, s.asc, res.err ? ": " : "",
		res.err ? strerror(res.err) : "");
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
	if (ret)
		eprintf("syncguard: lun %" PRIu64 ": no counters in %s: %s\n",
			lu->lun, path, strerror(-ret));
}

static int bs_syncguard_open(struct scsi_lu *lu, char *path, int *fd,
			     uint64_t *size)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	char err[512];
	int ret;

	ret = syncguard_lun_open(&bs->lun, path, lu->blk_shift, &bs->opts,
				 err, sizeof(err));
	if (ret) {
		eprintf("syncguard: lun %" PRIu64 ": %s\n", lu->lun, err);
		return ret;
	}
	bs->open = true;
	publish_stats(lu);
	syncguard_lun_set_wce(&bs->lun, syncguard_mode_wce(bs->opts.mode));
	check_thin(lu);
	if (!lu->attrs.no_auto_lbppbe && bs->lun.phys_block_size)
		update_lbppbe(lu, (int)bs->lun.phys_block_size);
	*fd = bs->lun.fd;
	*size = bs->lun.size;
	eprintf("syncguard: lun %" PRIu64 ": %s, mode=%s, %" PRIu64
		" bytes, %u-byte blocks\n", lu->lun, path,
		syncguard_mode_name(bs->opts.mode), bs->lun.size,
		1u << lu->blk_shift);
	return 0;
}

static void bs_syncguard_close(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	int ret;

	if (!bs->open)
		return;
	ret = syncguard_lun_close(&bs->lun);
	bs->open = false;
	if (ret)
		eprintf("syncguard: lun %" PRIu64 ": final flush failed: %s\n",
			lu->lun, strerror(-ret));
}

static tgtadm_err bs_syncguard_init(struct scsi_lu *lu, char *bsopts)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	char err[256];

	memset(bs, 0, sizeof(*bs));
	bs->lun.fd = -1;
	if (syncguard_opts_parse(bsopts, &bs->opts, err, sizeof(err))) {
		eprintf("syncguard: lun %" PRIu64 ": %s\n", lu->lun, err);
		return TGTADM_INVALID_REQUEST;
	}
	page_set_wce(lu, syncguard_mode_wce(bs->opts.mode));
	page_set_mask(lu, bs->opts.mode);
	wrap_template(lu);
	return bs_thread_open(BS_THREAD_I(lu), bs_syncguard_request,
			      nr_iothreads);
}

static void bs_syncguard_exit(struct scsi_lu *lu)
{
	bs_thread_close(BS_THREAD_I(lu));
}

static struct backingstore_template syncguard_bst = {
	.bs_name = "syncguard",
	.bs_datasize = sizeof(struct bs_thread_info) +
		       sizeof(struct syncguard_bs),
	.bs_open = bs_syncguard_open,
	.bs_close = bs_syncguard_close,
	.bs_init = bs_syncguard_init,
	.bs_exit = bs_syncguard_exit,
	.bs_cmd_submit = bs_thread_cmd_submit,
	.bs_oflags_supported = 0,	/* the mode replaces O_SYNC/O_DIRECT */
};

/* The SBC commands tgt may hand to this store (others stay in tgt's core). */
static unsigned char syncguard_opcodes[] = {
	ALLOW_MEDIUM_REMOVAL, COMPARE_AND_WRITE, FORMAT_UNIT, INQUIRY,
	MAINT_PROTOCOL_IN, MODE_SELECT, MODE_SELECT_10, MODE_SENSE,
	MODE_SENSE_10, PERSISTENT_RESERVE_IN, PERSISTENT_RESERVE_OUT,
	PRE_FETCH_10, PRE_FETCH_16, READ_10, READ_12, READ_16, READ_6,
	READ_CAPACITY, RELEASE, REPORT_LUNS, REQUEST_SENSE, RESERVE,
	SEND_DIAGNOSTIC, SERVICE_ACTION_IN, START_STOP, SYNCHRONIZE_CACHE,
	SYNCHRONIZE_CACHE_16, TEST_UNIT_READY, UNMAP, VERIFY_10, VERIFY_12,
	VERIFY_16, WRITE_10, WRITE_12, WRITE_16, WRITE_6, WRITE_SAME,
	WRITE_SAME_16, WRITE_VERIFY, WRITE_VERIFY_12, WRITE_VERIFY_16,
};

/* Called by tgtd after dlopen(): register the "syncguard" bstype.  The
 * only symbol the module exports (built with -fvisibility=hidden). */
__attribute__((visibility("default"))) void register_bs_module(void);

void register_bs_module(void)
{
	bs_create_opcode_map(&syncguard_bst, syncguard_opcodes,
			     sizeof(syncguard_opcodes));
	register_backingstore_template(&syncguard_bst);
}
