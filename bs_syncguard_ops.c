/*
 * The LUN's command table: the few SCSI commands syncguard answers or
 * checks itself before (or instead of) tgt's core.
 *
 * tgt copies its device-type template into every LUN
 * (lu->dev_type_template), so a backing store can change how one LUN
 * handles a command without patching tgt.  syncguard does it in one
 * place: every entry of the LUN's table is syncguard_dispatch(), which
 * first reports a pending deferred error, then runs bs->run[opcode]:
 * syncguard's handler for the opcodes in `overrides` below, tgt's own
 * entry for all others.  Each override says why it exists.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bs_syncguard.h"
#include "internal.h"

#define CACHING_PAGE		0x08
#define CACHING_PAGE_LEN	18	/* bytes after the page header */
#define WCE_BIT			0x04	/* byte 2 of the page: mode_data[0] */
/* SPC-4 ASC/ASCQ 2Ah/09h, which tgt's scsi.h does not name */
#define SYNCGUARD_ASC_CAPACITY_DATA_HAS_CHANGED	0x2a09

/* ---- the Caching mode page (SBC-3 6.4.5) ----
 *
 * The WCE the LUN honours lives in the core (syncguard_lun_wce); tgt's
 * Caching page is how initiators see it.  MODE SENSE refreshes the page
 * from the core first (syncguard_lun_reported_wce), so it never shows
 * WCE=0 before the LUN keeps WCE=0's promise: while a switch to WCE=0
 * waits for its flush, new writes are already durable but the page still
 * says WCE=1, which promises less.
 */

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

static bool wce_changeable(const struct syncguard_bs *bs)
{
	return syncguard_mode_wce_changeable(bs->opts.mode,
					     bs->opts.allow_wce);
}

/* Make WCE changeable by MODE SELECT only where it may change. */
static void page_set_mask(struct scsi_lu *lu)
{
	struct mode_pg *pg = caching_page(lu);
	uint8_t mask[CACHING_PAGE_LEN] = { 0 };

	if (!pg || pg->pcode_size != CACHING_PAGE_LEN)
		return;
	mask[0] = wce_changeable(SYNCGUARD_BS(lu)) ? WCE_BIT : 0;
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

static void page_restore(struct scsi_lu *lu, const struct page_copy *c)
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
	page_set_mask(lu);
}

/* ---- overrides ---- */

/*
 * tgt's MODE SENSE handler (sbc.c) writes the header's DEVICE-SPECIFIC
 * PARAMETER (byte 2 of (6)'s, 3 of (10)'s) whatever the ALLOCATION
 * LENGTH: through a NULL buffer when it is 0, which killed tgtd
 * (helper-69: one CDB from any initiator took every LUN down; tgt's rdwr
 * too), and past a shorter buffer.  So a buffer shorter than a header
 * gets the answer built in a scratch one and cut to what was asked
 * (SPC-4 4.2.5.6: an ALLOCATION LENGTH of 0 transfers nothing and is no
 * error); the CDB is still checked as ever.
 */
static int tgt_mode_sense(struct syncguard_bs *bs, int host_no,
			  struct scsi_cmd *cmd)
{
	uint8_t scratch[8] = { 0 };
	void *buf = scsi_get_in_buffer(cmd);
	int ret;

	if (scsi_get_in_length(cmd) >= 4)
		return bs->tgt_ops[cmd->scb[0]](host_no, cmd);
	scsi_set_in_buffer(cmd, scratch);
	ret = bs->tgt_ops[cmd->scb[0]](host_no, cmd);
	scsi_set_in_buffer(cmd, buf);
	if (ret == SAM_STAT_GOOD && buf)	/* at most the buffer's length */
		memcpy(buf, scratch, scsi_get_in_transfer_len(cmd));
	return ret;
}

/* MODE SENSE(6/10): show the WCE the LUN honours, and as default value
 * (PC 10b) its mode's, which a re-created LUN starts with (SPC-4 7.5.4;
 * tgt shows the current page for it: helper-70 read WCE=0 as write-back's
 * default after a MODE SELECT). */
static int syncguard_mode_sense(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	bool defaults = (cmd->scb[2] >> 6) == 2;
	int ret;

	if (!bs->open)
		return tgt_mode_sense(bs, host_no, cmd);
	page_set_wce(cmd->dev, defaults ? syncguard_mode_wce(bs->opts.mode) :
		     syncguard_lun_reported_wce(&bs->lun));
	ret = tgt_mode_sense(bs, host_no, cmd);
	if (defaults)
		page_set_wce(cmd->dev, syncguard_lun_reported_wce(&bs->lun));
	return ret;
}

/* CHECK CONDITION for @r through the one sense table, logged as every
 * failed command is (syncguard_answer: a latched LUN's SYNCHRONIZE
 * CACHE, answered here, had left no line after its first). */
static int fail(struct scsi_cmd *cmd, enum syncguard_reason r)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	struct syncguard_result res = { .reason = r };
	const struct syncguard_sense sense = syncguard_sense_of(r);

	/* a medium error answered here is the latch's: say its errno */
	if (bs->open && sense.key == MEDIUM_ERROR)
		res.err = syncguard_lun_latched(&bs->lun);
	syncguard_answer(cmd, &res);
	return sense.status;
}

/*
 * The WCE bit of the Caching page in a MODE SELECT(6/10) parameter list
 * (SPC-4 7.5.6: mode parameter header, block descriptors, mode pages),
 * read within the PARAMETER LIST LENGTH as tgt's handler reads it; -1 if
 * the list carries no Caching page, -2 if its PAGE LENGTH is not the
 * page's (SBC-3 6.4.5: 12h; tgt took a longer one and applied its WCE).
 */
static int selected_wce(struct scsi_cmd *cmd)
{
	const uint8_t *d = scsi_get_out_buffer(cmd);
	bool ten = cmd->scb[0] == MODE_SELECT_10;
	uint32_t len = ten ? (uint32_t)(cmd->scb[7] << 8 | cmd->scb[8]) :
			     cmd->scb[4];
	uint32_t off = ten ? 8 : 4;
	int wce = -1;

	if (len > scsi_get_out_length(cmd))
		len = scsi_get_out_length(cmd);
	if (!d || len < off)
		return -1;
	off += ten ? (uint32_t)(d[6] << 8 | d[7]) : d[3];
	while (off + 2 < len) {
		bool spf = d[off] & 0x40;	/* SUB_PAGE format: 4-byte header */

		/* tgt applies the pages in order: the last one counts
		 * (helper-55: the first was taken, and two pages 1 then 0
		 * left WCE 1) */
		if ((d[off] & 0x3f) == CACHING_PAGE && !spf && wce != -2)
			wce = d[off + 1] != CACHING_PAGE_LEN ? -2 :
			      !!(d[off + 2] & WCE_BIT);
		if (spf && off + 4 > len)
			break;
		off += spf ? 4u + (uint32_t)(d[off + 2] << 8 | d[off + 3]) :
			     2u + d[off + 1];
	}
	return wce;
}

/*
 * MODE SELECT(6/10).  tgt's handler edits the page (the changeable mask
 * already refuses WCE=1 where the mode does not allow it).  The page is
 * first set to what MODE SENSE shows, and WCE changes only when the
 * parameter list carries a Caching page (SPC-4 7.5: a MODE SELECT
 * changes the parameters it sends): the page said 1 during a switch to
 * 0 and after it until a MODE SENSE, so a later select of the Control
 * page alone, or a refused one, turned WCE back on, silently, under an
 * initiator that had turned it off (helper-53).  WCE 0 -> 1 takes effect
 * at once.  WCE 1 -> 0 waits for writes in flight and flushes
 * everything dirty, which can take long: a worker thread does it
 * (syncguard_wce_off_request), so tgtd's event loop, and with it every
 * other LUN and session, goes on meanwhile.  Until it is done the LUN
 * reports WCE=1 and SYNCHRONIZE CACHE still flushes, while new writes
 * are already made durable as under WCE=0 (syncguard_lun_set_wce).
 */
static int syncguard_mode_select(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	bool was = bs->open && syncguard_lun_wanted_wce(&bs->lun);
	bool shown = bs->open && syncguard_lun_reported_wce(&bs->lun);
	int ret, wce = selected_wce(cmd);
	/* WCE=0 on write-through or plp is their own value, though the
	 * switch a LUN starts as it opens still shows 1: not a change of a
	 * field that is not changeable (refused during that switch:
	 * helper-67); it is answered once the switch is done */
	bool to_mode = wce == 0 && !syncguard_mode_wce(bs->opts.mode);

	if (wce == -2 && !device_reserved(cmd))
		return fail(cmd, SYNCGUARD_ERR_INVALID_PARAM);
	if (bs->open)	/* tgt compares the select with the page shown */
		page_set_wce(cmd->dev, shown && !to_mode);
	ret = bs->tgt_ops[cmd->scb[0]](host_no, cmd);
	if (!bs->open)
		return ret;
	if (ret != SAM_STAT_GOOD)
		wce = -1;
	/* 0 asked for while 1 is shown and 0 already wanted: a switch to 0
	 * still runs (or failed): answered once it is done, with its
	 * outcome (helper-56: GOOD at once, and WCE back at 1 when that
	 * switch's flush failed) */
	if (wce < 0 || (wce == (int)was && (wce || !shown))) {
		page_set_wce(cmd->dev, syncguard_lun_reported_wce(&bs->lun));
		return ret;
	}
	if (!wce_changeable(bs) && !to_mode) {
		page_set_wce(cmd->dev, was);
		return fail(cmd, SYNCGUARD_ERR_INVALID_PARAM);
	}
	if (wce) {
		syncguard_lun_set_wce(&bs->lun, true);	/* no flush needed */
		/* over a switch to 0 still flushing (shown 1): tgt saw no
		 * change and told no one, and the initiator whose WCE=0 it
		 * overrode went on without flushes (helper-55) */
		if (shown)
			ua_sense_add_other_it_nexus(cmd->cmd_itn_id, cmd->dev,
						    ASC_MODE_PARAMETERS_CHANGED);
		return SAM_STAT_GOOD;
	}
	page_set_wce(cmd->dev, true);		/* until the flush is done */
	syncguard_lun_want_wce(&bs->lun, false);	/* a later WCE=1 wins */
	bs_thread_cmd_submit(cmd);		/* -> syncguard_wce_off_request */
	return SAM_STAT_GOOD;
}

void syncguard_wce_off_request(struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	int err = syncguard_lun_apply_wce(&bs->lun);
	struct syncguard_result res = {
		.reason = syncguard_reason_of_errno(-err, true), .err = -err,
	};

	if (err) {
		eprintf("syncguard: lun %" PRIu64 ": WCE=0 refused: flush "
			"failed: %s\n", cmd->dev->lun, strerror(-err));
		syncguard_count(&bs->lun.stats->errors); /* a failed command */
	}
	syncguard_answer(cmd, &res);	/* the flush's errno, as any write's */
}

/*
 * VERIFY(10/12/16): tgt's handler answers GOOD for BYTCHK=0 before it
 * checks the LBA range, and reads only BYTCHK's low bit; SBC-3 5.33
 * wants LOGICAL BLOCK ADDRESS OUT OF RANGE for a range beyond the
 * capacity whatever BYTCHK says, and SBC-4 reserves BYTCHK 10b.
 */
static int syncguard_verify(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	struct syncguard_cdb c;
	enum syncguard_reason r;

	if (bs->open &&
	    syncguard_cdb_decode(cmd->scb, (size_t)cmd->scb_len, &c) == 0 &&
	    (r = syncguard_check_verify(&bs->lun, &c))) {
		syncguard_count(&bs->lun.stats->errors);
		return fail(cmd, r);
	}
	return bs->tgt_ops[cmd->scb[0]](host_no, cmd);
}

/* With immed_lock held: the @n nexuses in @itn waited on a failed flush;
 * each is owed one deferred error (a full table forgets the oldest; the
 * latch still fails their next SYNCHRONIZE CACHE). */
static void owe_deferred(struct syncguard_bs *bs, const uint64_t *itn,
			 unsigned int n, int err)
{
	for (unsigned int i = 0; i < n; i++) {
		if (bs->n_deferred == SYNCGUARD_MAX_DEFERRED) {
			memmove(bs->deferred_itn, bs->deferred_itn + 1,
				sizeof(bs->deferred_itn) - sizeof(uint64_t));
			memmove(bs->deferred_err, bs->deferred_err + 1,
				sizeof(bs->deferred_err) - sizeof(int));
			bs->n_deferred--;
		}
		bs->deferred_itn[bs->n_deferred] = itn[i];
		bs->deferred_err[bs->n_deferred++] = err;
	}
	__atomic_store_n(&bs->any_deferred, (int)bs->n_deferred, __ATOMIC_SEQ_CST);
}

/* The IMMED=1 flusher: one thread per LUN, started on demand. */
static void *immed_flusher(void *arg)
{
	struct syncguard_bs *bs = arg;

	pthread_mutex_lock(&bs->immed_lock);
	for (;;) {
		uint64_t itn[SYNCGUARD_MAX_DEFERRED];
		unsigned int n;
		int err;

		while (!bs->immed_pending && !bs->immed_stop)
			pthread_cond_wait(&bs->immed_cond, &bs->immed_lock);
		if (!bs->immed_pending)
			break;		/* stopped, nothing left to do */
		bs->immed_pending = false;
		n = bs->n_immed_itn;
		memcpy(itn, bs->immed_itn, sizeof(itn));
		bs->n_immed_itn = 0;
		pthread_mutex_unlock(&bs->immed_lock);
		err = syncguard_lun_flush(&bs->lun, true);
		pthread_mutex_lock(&bs->immed_lock);
		if (err)	/* the latch holds it too; each nexus hears once */
			owe_deferred(bs, itn, n, -err);
	}
	pthread_mutex_unlock(&bs->immed_lock);
	return NULL;
}

/* Queue a background flush for @itn's SYNCHRONIZE CACHE; false if no
 * flusher thread could start. */
static bool immed_flush(struct syncguard_bs *bs, uint64_t itn)
{
	bool ok = true, known = false;

	pthread_mutex_lock(&bs->immed_lock);
	if (!bs->immed_running)
		bs->immed_running = !pthread_create(&bs->immed_thread, NULL,
						    immed_flusher, bs);
	ok = bs->immed_running;
	for (unsigned int i = 0; ok && i < bs->n_immed_itn; i++)
		known |= bs->immed_itn[i] == itn;
	if (ok && !known && bs->n_immed_itn < SYNCGUARD_MAX_DEFERRED)
		bs->immed_itn[bs->n_immed_itn++] = itn;
	if (ok) {
		bs->immed_pending = true;
		pthread_cond_signal(&bs->immed_cond);
	}
	pthread_mutex_unlock(&bs->immed_lock);
	return ok;
}

/* The deferred error owed to @itn, removed from the table; 0 if none. */
static int take_deferred(struct syncguard_bs *bs, uint64_t itn)
{
	int err = 0;

	if (!__atomic_load_n(&bs->any_deferred, __ATOMIC_SEQ_CST))
		return 0;
	pthread_mutex_lock(&bs->immed_lock);
	for (unsigned int i = 0; !err && i < bs->n_deferred; i++) {
		if (bs->deferred_itn[i] != itn)
			continue;
		err = bs->deferred_err[i];
		bs->n_deferred--;
		memmove(bs->deferred_itn + i, bs->deferred_itn + i + 1,
			(bs->n_deferred - i) * sizeof(uint64_t));
		memmove(bs->deferred_err + i, bs->deferred_err + i + 1,
			(bs->n_deferred - i) * sizeof(int));
	}
	__atomic_store_n(&bs->any_deferred, (int)bs->n_deferred, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&bs->immed_lock);
	return err;
}

/* The CDB's IMMED bit (SBC-3 5.22), as the core decodes it */
static bool immed(const struct scsi_cmd *cmd)
{
	struct syncguard_cdb c;

	return syncguard_cdb_decode(cmd->scb, (size_t)cmd->scb_len, &c) == 0 &&
	       c.immed;
}

/*
 * SYNCHRONIZE CACHE(10/16).  A command that needs no I/O (nothing dirty
 * since the last flush, nothing volatile in this mode, a range or
 * latched error) is answered here, in tgtd's event thread, without the
 * round trip through a worker.  IMMED=1 (SBC-3 5.22): GOOD once the CDB
 * is validated, the flush runs in the background, and its failure comes
 * back as a deferred error on the LUN's next command.  The rest goes to
 * tgt's handler, which checks reservations and hands it to a worker.
 */
static int syncguard_sync_cache(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	enum syncguard_reason r;

	if (!bs->open || device_reserved(cmd))
		return bs->tgt_ops[cmd->scb[0]](host_no, cmd);
	syncguard_lun_note_sync_cache(&bs->lun);
	if (syncguard_sync_cache_now(&bs->lun, cmd->scb, (size_t)cmd->scb_len,
				     &r))
		return r == SYNCGUARD_OK ? SAM_STAT_GOOD : fail(cmd, r);
	if (immed(cmd) && immed_flush(bs, cmd->cmd_itn_id)) {
		syncguard_count(&bs->lun.stats->sync_caches);
		scsi_set_in_resid_by_actual(cmd, 0);
		return SAM_STAT_GOOD;
	}
	if (syncguard_uring_sync_cache(cmd))
		return SAM_STAT_GOOD;	/* answered after the group flush */
	return bs->tgt_ops[cmd->scb[0]](host_no, cmd);
}

/*
 * UNMAP: tgt's sbc_unmap hands the command to the backing store and then
 * falls through to its error path, writing ILLEGAL REQUEST / LOGICAL UNIT
 * NOT SUPPORTED into the sense buffer while a worker may be answering
 * the same command.  Same checks, without that.
 */
static int syncguard_unmap(int host_no, struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->dev;

	(void)host_no;
	if (device_reserved(cmd))
		return SAM_STAT_RESERVATION_CONFLICT;
	if (lu->attrs.readonly || lu->attrs.swp)
		return fail(cmd, SYNCGUARD_ERR_WRITE_PROTECT);
	/* thin provisioning, ANCHOR, descriptors: core/exec.c */
	bs_thread_cmd_submit(cmd);
	return SAM_STAT_GOOD;
}

/*
 * COMPARE AND WRITE: tgt's core leaves opcode 0x89 unimplemented (its
 * table entry is commented out), though its generic read/write handler
 * knows the command.  syncguard executes it (core/exec.c, atomic against
 * every other write of the LUN, FUA honoured), so route it there.
 */
static int syncguard_compare_and_write(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);

	return bs->tgt_ops[WRITE_16](host_no, cmd);
}

static const struct {
	uint8_t op;
	syncguard_op_fn fn;
} overrides[] = {
	{ MODE_SENSE, syncguard_mode_sense },
	{ MODE_SENSE_10, syncguard_mode_sense },
	{ MODE_SELECT, syncguard_mode_select },
	{ MODE_SELECT_10, syncguard_mode_select },
	{ VERIFY_10, syncguard_verify },
	{ VERIFY_12, syncguard_verify },
	{ VERIFY_16, syncguard_verify },
	{ SYNCHRONIZE_CACHE, syncguard_sync_cache },
	{ SYNCHRONIZE_CACHE_16, syncguard_sync_cache },
	{ UNMAP, syncguard_unmap },
	{ COMPARE_AND_WRITE, syncguard_compare_and_write },
};

/* Commands a deferred error does not fail: they describe the device
 * rather than use its medium. */
static bool exempt(uint8_t op)
{
	return op == INQUIRY || op == REPORT_LUNS || op == REQUEST_SENSE;
}

/*
 * Every command of the LUN enters here.  A deferred error (an IMMED=1
 * flush that failed after its GOOD) is reported first, once, to the
 * I_T nexus whose SYNCHRONIZE CACHE was answered early, with response
 * code 0x71/0x73 (SPC-4 4.5.5); the latch in the core keeps failing
 * every later command, from any nexus, that would promise durability.
 */
static int syncguard_dispatch(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	uint8_t op = cmd->scb[0];
	int err = 0;

	if (!exempt(op))
		err = take_deferred(bs, cmd->cmd_itn_id);
	if (err) {
		struct syncguard_result res = {
			.reason = syncguard_reason_of_errno(err, true),
			.err = err, .deferred = true,
		};

		syncguard_answer(cmd, &res);
		scsi_set_in_resid_by_actual(cmd, 0);
		return syncguard_sense_of(res.reason).status;
	}
	return bs->run[op](host_no, cmd);
}

/* ---- VPD pages ---- */

/* UNMAP's PARAMETER LIST LENGTH is 16 bits: at most this many 16-byte
 * descriptors fit after the 8-byte header (SBC-3 5.28). */
#define MAX_UNMAP_DESCRIPTORS ((0xffff - 8) / 16)

/*
 * Block Limits (0xB0, SBC-3 6.5.3).  tgt fills it and rewrites it when
 * thin provisioning changes; syncguard then corrects: OPTIMAL TRANSFER
 * LENGTH GRANULARITY from the backing device's physical block (a zvol's
 * volblocksize, a disk's physical sector), in logical blocks; MAXIMUM
 * UNMAP BLOCK DESCRIPTOR COUNT as the count that fits the command, not
 * "unlimited", which some initiators read as -1.  MAXIMUM COMPARE AND
 * WRITE LENGTH as tgt reports it is what the core enforces.
 */
static void block_limits(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	struct vpd *b0 = lu->attrs.lu_vpd[PCODE_OFFSET(0xb0)];
	unsigned int gran = bs->lun.phys_block_size >> lu->blk_shift;

	if (!b0 || b0->size < 24)
		return;
	bs->lun.max_caw_blocks = b0->data[1];
	if (gran > 1 && gran <= 0xffff)
		put_unaligned_be16((uint16_t)gran, b0->data + 2);
	if (lu->attrs.thinprovisioning)
		put_unaligned_be32(MAX_UNMAP_DESCRIPTORS, b0->data + 20);
	/* OPTIMAL UNMAP GRANULARITY (SBC-3 6.5.3, page bytes 28-31): what
	 * a block device deallocates in, else the physical block; an UNMAP
	 * of less writes zeroes (syncguard_lun_punch).  It was 0 (helper-55) */
	if (b0->size >= 28) {
		unsigned int ug = bs->lun.punch_align ?
				  bs->lun.punch_align >> lu->blk_shift : gran;

		put_unaligned_be32(lu->attrs.thinprovisioning && ug > 1 ? ug : 0,
				   b0->data + 24);
	}
}

/*
 * Extended INQUIRY Data (0x86, SPC-4 7.8.7), which tgt's core lacks:
 * V_SUP when the LUN has a volatile cache an initiator may use
 * (write-back, or allow_wce=yes), NV_SUP for plp's non-volatile one,
 * SIMPSUP (simple task attribute).  Then Block Limits.
 */
static int install_vpd(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	struct vpd **vpd = lu->attrs.lu_vpd;

	if (!vpd[PCODE_OFFSET(0x86)] &&
	    !(vpd[PCODE_OFFSET(0x86)] = alloc_vpd(0x3c)))
		return -ENOMEM;
	vpd[PCODE_OFFSET(0x86)]->data[1] = 0x01;		/* SIMPSUP */
	vpd[PCODE_OFFSET(0x86)]->data[2] =
		(wce_changeable(bs) ? 0x01 : 0) |			/* V_SUP */
		(bs->opts.mode == SYNCGUARD_MODE_PLP ? 0x02 : 0);	/* NV_SUP */
	block_limits(lu);
	return 0;
}

/* ---- administration: tgtadm --op update ---- */

/*
 * Thin provisioning punches holes; a write into a hole allocates blocks,
 * which is metadata that plp's writes never flush.  So a plp LUN on a
 * regular file stays fully allocated: thin_provisioning is refused.  So
 * on a loop device: the loop driver turns a discard into a hole punched
 * in its backing file (helper-62: UNMAP, then a plp write into the
 * hole allocated a block of the file that nothing flushed).
 */
static int check_thin(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	struct vpd **vpd = lu->attrs.lu_vpd;

	if (lu->attrs.thinprovisioning && bs->opts.mode == SYNCGUARD_MODE_PLP &&
	    (!bs->lun.blockdev || bs->lun.on_loop)) {
		lu->attrs.thinprovisioning = 0;
		/* tgt rewrote Block Limits and Logical Block Provisioning for
		 * thin before this refusal: back to fully provisioned, or
		 * they advertised UNMAP (LBPU, MAXIMUM UNMAP LBA COUNT) that
		 * the LUN refuses (helper-63; SBC-3 6.6.3, 6.6.4) */
		for (int pg = 0xb0; pg <= 0xb2; pg += 2)
			if (vpd[PCODE_OFFSET(pg)] &&
			    vpd[PCODE_OFFSET(pg)]->vpd_update)
				vpd[PCODE_OFFSET(pg)]->vpd_update(lu, NULL);
		eprintf("syncguard: lun %" PRIu64 ": thin_provisioning refused: "
			"mode=plp on a regular file (or a loop device over "
			"one) must stay fully allocated\n", lu->lun);
		return -EPERM;
	}
	bs->lun.thin = lu->attrs.thinprovisioning;
	return 0;
}

/* The value of the first @key in @params ("key=value,key=value", after
 * tgtadm's "targetOps " prefix, which tgt's own parser skips too) that
 * starts after @after (NULL: anywhere), up to the next comma; NULL when
 * there is none.  tgt applies every one, in order. */
static const char *param_next(const char *params, const char *key,
			      const char *after)
{
	size_t n = strlen(key);
	const char *p = params;

	if (p && !strncmp(p, "targetOps ", 10))
		p += 10;
	while (p) {
		if ((!after || p > after) && !strncmp(p, key, n) &&
		    p[n] == '=')
			return p + n + 1;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return NULL;
}

static const char *param_value(const char *params, const char *key)
{
	return param_next(params, key, NULL);
}

/* Does @params set @key? */
static bool has_param(const char *params, const char *key)
{
	return param_value(params, key) != NULL;
}

/* The next mode_page= value after @after (NULL: the first) in @params
 * that sets the Caching mode page (8:...); NULL if none.  An update of
 * another page leaves WCE as the page shows it. */
static const char *next_caching_page(const char *params, const char *after)
{
	const char *v = after;

	/* tgt keeps the page code in a byte: 264 (0x108) is page 8 too
	 * (helper-73) */
	while ((v = param_next(params, "mode_page", v)))
		if ((uint8_t)strtol(v, NULL, 0) == CACHING_PAGE)
			return v;
	return NULL;
}

static bool sets_caching_page(const char *params)
{
	return next_caching_page(params, NULL) != NULL;
}

#define TGT_PARAM_MAX 1024	/* tgt's lu_config: char buf[1024] */

/* How many data bytes the mode_page= value @v (PCODE:SUBPCODE:LEN:B0:B1
 * ..., to the next comma) gives: the fields after the third; or -1 if
 * one of them is not a number from 0 to 255, or the value is longer
 * than tgt takes.  tgt takes fewer than LEN
 * and fills the rest with zeroes (helper-69: "mode_page=8:0:18:0x10"
 * zeroed every other field), and reads an empty or bad field as 0
 * (helper-71: "8:0:18:0x10::::..." did the same past the count). */
static int page_bytes(const char *v)
{
	int bytes = 0;

	/* tgt copies the value into 1024 bytes and drops the rest, which
	 * it then fills with zeroes (helper-73: a field padded with 1,100
	 * zeroes) */
	if (strcspn(v, ",") >= TGT_PARAM_MAX)
		return -1;
	for (int i = 0;; i++) {
		const char *stop = v + strcspn(v, ":,");
		char *end;
		long b;

		if (i >= 3) {
			b = strtol(v, &end, 0);
			if (end == v || end != stop || b < 0 || b > 255 ||
			    isspace((unsigned char)*v))
				return -1;
			bytes++;
		}
		if (*stop != ':')
			return bytes;
		v = stop + 1;
	}
}

/* Does every mode_page= of @params that sets the Caching page give
 * exactly its CACHING_PAGE_LEN bytes, each a number 0-255 (helper-71: a
 * second, short mode_page= in one update went unchecked)?  If not,
 * false, and the bytes the first bad one gives (-1: a bad field) in
 * @given. */
static bool caching_pages_whole(const char *params, int *given)
{
	const char *v = NULL;

	while ((v = next_caching_page(params, v)))
		if ((*given = page_bytes(v)) != CACHING_PAGE_LEN)
			return false;
	return true;
}

/*
 * tgt's path= update closes the backing store and opens it again without
 * waiting for the commands in flight (offline only stops new ones), and a
 * worker still running one would use what close freed (helper-found:
 * tgtd died at a QD32 FUA load).  Refused until they are answered, as
 * tgt refuses to delete such a LUN.
 */
static bool busy_for_path(struct scsi_lu *lu, const char *params)
{
	if (!has_param(params, "path") ||
	    (list_empty(&lu->cmd_queue.queue) && !lu->cmd_queue.active_cmd))
		return false;
	eprintf("syncguard: lun %" PRIu64 ": path change refused: %d commands "
		"still in flight; try again once they are answered\n", lu->lun,
		lu->cmd_queue.active_cmd);
	return true;
}

/*
 * After a tgtadm update: if the WCE initiators are shown changed from
 * @shown (a mode_page update, or path= reopening the store with its
 * mode's WCE), every I_T nexus gets a unit attention, MODE PARAMETERS
 * CHANGED (SPC-4, mode parameters: changed by other means than that
 * nexus's own MODE SELECT).  An initiator that set WCE=0 sends no
 * SYNCHRONIZE CACHE; told nothing, it would go on trusting plain writes
 * that now sit in a volatile cache (a helper's power-cut test lost
 * them).  tgt raises it for MODE SELECT, to the other nexuses, itself.
 */
static void announce_wce(struct scsi_lu *lu, int shown, bool was, int set)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	int now;

	if (!bs->open || shown < 0)
		return;
	/* a switch to 0 still flushing reports 1 (MODE SENSE shows what
	 * holds), but initiators hear of the change now: once at its end
	 * would need tgtd's event thread, and an initiator that reads 1
	 * meanwhile only flushes more than it needs to.  So WCE=1 over such
	 * a switch shows no change, and is one: the initiator that asked
	 * for 0 was told nothing and sent no flushes (helper-55) */
	now = set >= 0 ? set : syncguard_lun_reported_wce(&bs->lun);
	if (now == shown && (set < 0 || set == (int)was))
		return;
	page_set_wce(lu, now);
	/* itn ids are iSCSI TSIHs, never UINT64_MAX: every nexus */
	ua_sense_add_other_it_nexus(UINT64_MAX, lu, ASC_MODE_PARAMETERS_CHANGED);
	eprintf("syncguard: lun %" PRIu64 ": WCE %d -> %d by tgtadm: unit "
		"attention MODE PARAMETERS CHANGED to every initiator\n",
		lu->lun, now == shown ? (int)was : shown, now);
}

/*
 * tgtadm's switch to WCE=0 flushes everything dirty first
 * (syncguard_lun_set_wce), which takes as long as the page cache takes
 * to reach the device, or for ever on a device that stopped answering.
 * tgt runs tgtadm's update on its event thread, which runs every LUN's
 * commands: the flush there stopped the whole tgtd for as long
 * (helper-42: 10 s of 0 IOPS on an unrelated LUN with a 10 s flush).
 * So it runs on a thread of its own, as MODE SELECT's runs on a worker,
 * and tgtadm gets its answer at once; until the flush is done the LUN
 * reports WCE=1 and SYNCHRONIZE CACHE still flushes, while new writes
 * are already made durable.  A failed flush leaves WCE=1 and says so in
 * tgtd's log (the LUN latched the error, as any failed flush does).
 */
static void *wce_off_thread(void *arg)
{
	struct scsi_lu *lu = arg;
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	int err = syncguard_lun_apply_wce(&bs->lun);

	if (err)
		eprintf("syncguard: lun %" PRIu64 ": WCE=0 %s failed: "
			"flush failed: %s; WCE stays 1\n", lu->lun,
			bs->opening ? "at open" : "by tgtadm", strerror(-err));
	pthread_mutex_lock(&bs->immed_lock);
	bs->wce_switches--;
	bs->opening = false;
	pthread_cond_broadcast(&bs->immed_cond);
	pthread_mutex_unlock(&bs->immed_lock);
	return NULL;
}

/* Start wce_off_thread for @lu: 0, or -errno when no thread could be
 * started. */
static int wce_off_start(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	int ret;

	pthread_mutex_lock(&bs->immed_lock);
	bs->wce_switches++;
	pthread_mutex_unlock(&bs->immed_lock);
	ret = syncguard_start_detached(wce_off_thread, lu);
	if (ret) {
		pthread_mutex_lock(&bs->immed_lock);
		bs->wce_switches--;
		pthread_mutex_unlock(&bs->immed_lock);
	}
	return -ret;
}

/* How long a LUN's creation waits for its switch to WCE=0 at open */
#define OPEN_SWITCH_WAIT_S 1

void syncguard_ops_open_wce(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	bool wce = syncguard_mode_wce(bs->opts.mode);
	struct timespec until;

	if (wce || !syncguard_policy_open_flushes(bs->opts.mode,
						  bs->lun.synced_at_open)) {
		syncguard_lun_set_wce(&bs->lun, wce);
		return;
	}
	syncguard_lun_set_wce(&bs->lun, true);
	syncguard_lun_want_wce(&bs->lun, false);
	bs->opening = true;
	if (wce_off_start(lu)) {		/* no thread: here, as before */
		(void)syncguard_lun_apply_wce(&bs->lun);
		bs->opening = false;
		return;
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += OPEN_SWITCH_WAIT_S;
	pthread_mutex_lock(&bs->immed_lock);
	while (bs->wce_switches &&
	       pthread_cond_timedwait(&bs->immed_cond, &bs->immed_lock,
				      &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&bs->immed_lock);
}

/* A WCE change by tgtadm to @wce: 0 or -errno (-EPERM: the mode keeps
 * WCE=0).  A switch to 0 goes on in the background (wce_off_start), or
 * here, as before, when no thread can be started. */
static int admin_set_wce(struct scsi_lu *lu, int wce)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);

	/* 0 on write-through or plp: their own value (see
	 * syncguard_mode_select), during the switch at open */
	if (!wce_changeable(bs) && (wce || syncguard_mode_wce(bs->opts.mode)))
		return -EPERM;
	if (wce)
		return syncguard_lun_set_wce(&bs->lun, true);
	syncguard_lun_want_wce(&bs->lun, false);	/* a later WCE=1 wins */
	if (!wce_off_start(lu))
		return 0;
	syncguard_uring_quiesce(lu);	/* apply waits for ring writes */
	return syncguard_lun_apply_wce(&bs->lun);
}

/*
 * Updates that tgt would take although they leave a LUN without a store,
 * or that tgt refuses without a word in tgtd.log (helper-50): online=1
 * with no store (after a refused path=, tgt closed the old one first;
 * online, the LUN answered as a 0-byte disk), and path= while the LUN
 * is online.  And path= with online= in one update: tgt applies them in
 * order and answers with the last one's result, so "online=1,path=X"
 * brought a storeless LUN online when X failed, and "path=X,online=0"
 * said success for a move tgt had refused (helper-51); give them one
 * update each.
 */
static bool refused_state(struct scsi_lu *lu, const char *params)
{
	const char *online = param_value(params, "online");
	const char *why = NULL;

	if (has_param(params, "path") && online)
		why = "path= and online= in one update: give them one each";
	else if (has_param(params, "path") && lu->path && lu->attrs.online)
		why = "path change refused: the LUN is online; take it offline "
		      "first (--params online=0)";
	else if (online && atoi(online) && !lu->path)
		why = "online=1 refused: no backing store (a path= change "
		      "failed); give it one with path= first";
	if (why)
		eprintf("syncguard: lun %" PRIu64 ": %s\n", lu->lun, why);
	return why != NULL;
}

/*
 * After a path= move to a store of another size: every I_T nexus gets a
 * unit attention, CAPACITY DATA HAS CHANGED (SBC-3 4.10; SPC-4 unit
 * attention conditions).  Told nothing, an initiator goes on with the
 * capacity it read (helper-46: READ(16) and READ CAPACITY(16) answered
 * GOOD on a 16 MiB LUN moved to 32 MiB; tgt raises nothing, for its own
 * stores either).
 */
static void announce_capacity(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	uint64_t before = bs->size_shown;

	/* compared with what initiators were last told, not with the 0 of
	 * a LUN a failed path= left without a store (helper-51) */
	if (!bs->open || lu->size == before)
		return;
	bs->size_shown = lu->size;
	/* itn ids are iSCSI TSIHs, never UINT64_MAX: every nexus */
	ua_sense_add_other_it_nexus(UINT64_MAX, lu,
				    SYNCGUARD_ASC_CAPACITY_DATA_HAS_CHANGED);
	eprintf("syncguard: lun %" PRIu64 ": capacity %" PRIu64 " -> %" PRIu64
		" bytes by path=: unit attention CAPACITY DATA HAS CHANGED to "
		"every initiator\n", lu->lun, before, lu->size);
}

/*
 * tgtadm --op update --mode logicalunit (mode_page=, thin_provisioning=,
 * path=, ...).  A path change is refused while commands are in flight
 * (busy_for_path) or the LUN is online, and online=1 while it has no
 * store (refused_state).  A refused update changes no WCE; a path= move
 * to another size is announced (announce_capacity).  A Caching page
 * that is not 18 bytes (given or declared), or a WCE change
 * the LUN does not allow, is undone and refused.  A switch to WCE=0
 * flushes on a thread of its own (admin_set_wce); tgtadm gets its
 * answer at once.
 */
static tgtadm_err syncguard_lu_config(struct scsi_lu *lu, char *params)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	/* compared with the WCE last asked for: a switch to 0 that still
	 * waits for the write lock honours 1 until it has it (helper-44) */
	bool was = bs->open && syncguard_lun_wanted_wce(&bs->lun);
	struct page_copy before;
	tgtadm_err adm;
	int wce, shown, given = 0, set = -1, err = 0;

	if (busy_for_path(lu, params))
		return TGTADM_LUN_ACTIVE;
	if (refused_state(lu, params))
		return TGTADM_INVALID_REQUEST;
	if (!caching_pages_whole(params, &given)) {
		if (given < 0)
			eprintf("syncguard: lun %" PRIu64 ": refused: a Caching "
				"mode page field is empty or not a byte value "
				"(0-255), or the page is longer than tgt's %d "
				"characters\n", lu->lun, TGT_PARAM_MAX - 1);
		else
			eprintf("syncguard: lun %" PRIu64 ": refused: the "
				"Caching mode page must keep its %d bytes (%d "
				"given)\n", lu->lun, CACHING_PAGE_LEN, given);
		return TGTADM_INVALID_REQUEST;
	}
	/* a WCE change is one this update makes to the page as MODE SENSE
	 * would show it now: during a switch to WCE=0 the page says 1 until
	 * the flush is done, and an update of another parameter (readonly=)
	 * had read that 1 as a request and cancelled the switch */
	if (bs->open)
		page_set_wce(lu, syncguard_lun_reported_wce(&bs->lun));
	shown = page_wce(lu);
	page_save(lu, &before);
	adm = bs->tgt_lu_config(lu, params);
	announce_capacity(lu);
	/* tgt installs a mode_page= page and only then finds its data
	 * longer than it says and refuses the update: a refused update
	 * changes no WCE (it had switched WCE and told every initiator,
	 * while tgtadm said "invalid request": helper-46) */
	if (adm != TGTADM_SUCCESS) {
		page_restore(lu, &before);
		(void)check_thin(lu);
		block_limits(lu);
		return adm;
	}
	if (!caching_page(lu) || caching_page(lu)->pcode_size != CACHING_PAGE_LEN) {
		page_restore(lu, &before);
		eprintf("syncguard: lun %" PRIu64 ": refused: the Caching mode "
			"page must keep its %d bytes\n", lu->lun, CACHING_PAGE_LEN);
		return TGTADM_INVALID_REQUEST;
	}
	page_set_mask(lu);	/* a new page has no mask */
	wce = page_wce(lu);
	/* an update of the Caching page asks for its WCE even when the page
	 * shows it: WCE=1 during a switch to 0 (shown 1, honoured 0) was
	 * dropped, and the LUN ended at 0 (helper-43) */
	if (bs->open && (wce != (int)was || (!wce && shown)) &&
	    (wce != shown || sets_caching_page(params))) {
		err = admin_set_wce(lu, wce);
		if (err)
			page_restore(lu, &before);
		set = wce;
	}
	if (err) {
		eprintf("syncguard: lun %" PRIu64 ": WCE change refused: %s\n",
			lu->lun, err == -EPERM ? "this mode keeps WCE=0 (see "
			"bsopts allow_wce)" : strerror(-err));
		return TGTADM_INVALID_REQUEST;
	}
	announce_wce(lu, shown, was, set);
	err = check_thin(lu);
	block_limits(lu);	/* tgt rewrote it if thin changed */
	return err ? TGTADM_INVALID_REQUEST : adm;
}

/* ---- set-up ---- */

void syncguard_ops_install(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	struct device_type_operations *ops = lu->dev_type_template.ops;

	page_set_wce(lu, syncguard_mode_wce(bs->opts.mode));
	page_set_mask(lu);
	for (int op = 0; op < NR_SCSI_OPCODES; op++) {
		bs->tgt_ops[op] = bs->run[op] = ops[op].cmd_perform;
		ops[op].cmd_perform = syncguard_dispatch;
	}
	for (size_t i = 0; i < sizeof(overrides) / sizeof(overrides[0]); i++)
		bs->run[overrides[i].op] = overrides[i].fn;
	/* COMPARE AND WRITE and ORWRITE conflict with reservations as
	 * writes do (tgt gives ORWRITE a reader's bits) */
	ops[COMPARE_AND_WRITE].pr_conflict_bits = ops[WRITE_16].pr_conflict_bits;
	ops[ORWRITE_16].pr_conflict_bits = ops[WRITE_16].pr_conflict_bits;
	bs->tgt_lu_config = lu->dev_type_template.lu_config;
	lu->dev_type_template.lu_config = syncguard_lu_config;
	pthread_mutex_init(&bs->immed_lock, NULL);
	pthread_cond_init(&bs->immed_cond, NULL);
}

int syncguard_ops_open(struct scsi_lu *lu)
{
	/* refused here, the attribute is cleared and logged and the LUN
	 * opens; a later tgtadm update is refused (syncguard_lu_config) */
	(void)check_thin(lu);
	return install_vpd(lu);
}

void syncguard_ops_close(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	bool running;

	pthread_mutex_lock(&bs->immed_lock);
	bs->immed_stop = true;
	running = bs->immed_running;
	pthread_cond_signal(&bs->immed_cond);
	pthread_mutex_unlock(&bs->immed_lock);
	if (running)
		pthread_join(bs->immed_thread, NULL);	/* a queued flush runs */
	bs->immed_running = bs->immed_stop = false;
}

void syncguard_ops_wait_switches(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);

	pthread_mutex_lock(&bs->immed_lock);
	while (bs->wce_switches)
		pthread_cond_wait(&bs->immed_cond, &bs->immed_lock);
	pthread_mutex_unlock(&bs->immed_lock);
}
