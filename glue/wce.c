/*
 * The Caching mode page (SBC-3 6.4.5) and every change of WCE: MODE SENSE
 * and MODE SELECT, the switch to WCE=0 (which flushes first, off tgtd's
 * event thread: a worker for MODE SELECT, a thread of its own for tgtadm
 * and for the switch a write-through or plp LUN makes as it opens), and
 * the unit attentions that tell initiators.
 *
 * The WCE the LUN honours lives in the core (syncguard_lun_wce); tgt's
 * Caching page is how initiators see it.  MODE SENSE refreshes the page
 * from the core first (syncguard_lun_reported_wce), so it never shows
 * WCE=0 before the LUN keeps WCE=0's promise.
 *
 * Layer: used by cmdtable.c and admin.c; it uses uring.c and answer.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "glue.h"
#include "internal.h"

/* ---- the Caching mode page (SBC-3 6.4.5) ----
 *
 * The WCE the LUN honours lives in the core (syncguard_lun_wce); tgt's
 * Caching page is how initiators see it.  MODE SENSE refreshes the page
 * from the core first (syncguard_lun_reported_wce), so it never shows
 * WCE=0 before the LUN keeps WCE=0's promise: while a switch to WCE=0
 * waits for its flush, new writes are already durable but the page still
 * says WCE=1, which promises less.
 */

struct mode_pg *syncguard_caching_page(struct scsi_lu *lu)
{
	struct mode_pg *pg = find_mode_page(lu, CACHING_PAGE, 0);

	return pg && pg->pcode_size >= 1 ? pg : NULL;
}

int syncguard_page_wce(struct scsi_lu *lu)
{
	struct mode_pg *pg = syncguard_caching_page(lu);

	return pg ? !!(pg->mode_data[0] & WCE_BIT) : -1;
}

void syncguard_page_set_wce(struct scsi_lu *lu, bool wce)
{
	struct mode_pg *pg = syncguard_caching_page(lu);

	if (!pg)
		return;
	if (wce)
		pg->mode_data[0] |= WCE_BIT;
	else
		pg->mode_data[0] &= ~WCE_BIT;
}

bool syncguard_wce_changeable(const struct syncguard_bs *bs)
{
	return syncguard_mode_wce_changeable(bs->opts.mode,
					     bs->opts.allow_wce);
}

/* Make WCE changeable by MODE SELECT only where it may change. */
void syncguard_page_set_mask(struct scsi_lu *lu)
{
	struct mode_pg *pg = syncguard_caching_page(lu);
	uint8_t mask[CACHING_PAGE_LEN] = { 0 };

	if (!pg || pg->pcode_size != CACHING_PAGE_LEN)
		return;
	mask[0] = syncguard_wce_changeable(SYNCGUARD_BS(lu)) ? WCE_BIT : 0;
	set_mode_page_changeable_mask(lu, CACHING_PAGE, 0, mask);
}

void syncguard_page_save(struct scsi_lu *lu, struct syncguard_page_copy *c)
{
	struct mode_pg *pg = syncguard_caching_page(lu);

	c->valid = pg && pg->pcode_size == CACHING_PAGE_LEN;
	if (c->valid)
		memcpy(c->data, pg->mode_data, CACHING_PAGE_LEN);
}

void syncguard_page_restore(struct scsi_lu *lu,
			    const struct syncguard_page_copy *c)
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
	syncguard_page_set_mask(lu);
}

/* ---- overrides ---- */

/*
 * tgt's MODE SENSE handler (sbc.c) writes the header's DEVICE-SPECIFIC
 * PARAMETER (byte 2 of (6)'s, 3 of (10)'s) whatever the ALLOCATION
 * LENGTH: through a NULL buffer when it is 0, which kills tgtd (one CDB
 * from any initiator takes every LUN down, on tgt's rdwr too:
 * test_modes_mode_sense_short_allocation), and past a shorter buffer.
 * So a buffer shorter than a header gets the answer built in a scratch
 * one and cut to what was asked (SPC-4 4.2.5.6: an ALLOCATION LENGTH of
 * 0 transfers nothing and is no error); tgt's handler still checks the
 * CDB.
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
 * tgt shows the current page for it, where WCE=0 after a MODE SELECT
 * would read as write-back's default: test_modes_mode_select_wce). */
int syncguard_mode_sense(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	bool defaults = (cmd->scb[2] >> 6) == 2;
	int ret;

	if (!bs->open)
		return tgt_mode_sense(bs, host_no, cmd);
	syncguard_page_set_wce(cmd->dev, defaults ? syncguard_mode_wce(bs->opts.mode) :
		     syncguard_lun_reported_wce(&bs->lun));
	ret = tgt_mode_sense(bs, host_no, cmd);
	if (defaults)
		syncguard_page_set_wce(cmd->dev, syncguard_lun_reported_wce(&bs->lun));
	return ret;
}

/*
 * The WCE bit of the Caching page in a MODE SELECT(6/10) parameter list
 * (SPC-4 7.5.6: mode parameter header, block descriptors, mode pages),
 * read within the PARAMETER LIST LENGTH as tgt's handler reads it; -1 if
 * the list carries no Caching page, -2 if its PAGE LENGTH is not the
 * page's (SBC-3 6.4.5: 12h; tgt takes a longer one and applies its WCE:
 * test_modes_mode_select_wce).
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

		/* tgt applies the pages in order: the last one counts (two
		 * pages 1 then 0 leave WCE 0: test_modes_mode_select_wce) */
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
 * changes the parameters it sends): the page says 1 during a switch to
 * 0 and after it until a MODE SENSE, so a later select of the Control
 * page alone, or a refused one, would turn WCE back on, silently, under
 * an initiator that had turned it off (test_modes_mode_select_wce).
 * WCE 0 -> 1 takes effect at once.  WCE 1 -> 0 waits for writes in
 * flight and flushes everything dirty, which can take long: a worker
 * thread does it (syncguard_wce_off_request), so tgtd's event loop, and
 * with it every other LUN and session, goes on meanwhile.  Until it is
 * done the LUN reports WCE=1 and SYNCHRONIZE CACHE still flushes, while
 * new writes are already made durable as under WCE=0
 * (syncguard_lun_set_wce).
 */
int syncguard_mode_select(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	bool was = bs->open && syncguard_lun_wanted_wce(&bs->lun);
	bool shown = bs->open && syncguard_lun_reported_wce(&bs->lun);
	int ret, wce = selected_wce(cmd);
	/* WCE=0 on write-through or plp is their own value, though the
	 * switch a LUN starts as it opens still shows 1: not a change of a
	 * field that is not changeable (not refused during that switch:
	 * test_faults_open_flush_in_background); it is answered once the
	 * switch is done */
	bool to_mode = wce == 0 && !syncguard_mode_wce(bs->opts.mode);

	if (wce == -2 && !device_reserved(cmd))
		return syncguard_fail(cmd, SYNCGUARD_ERR_INVALID_PARAM);
	if (bs->open)	/* tgt compares the select with the page shown */
		syncguard_page_set_wce(cmd->dev, shown && !to_mode);
	ret = bs->tgt_ops[cmd->scb[0]](host_no, cmd);
	if (!bs->open)
		return ret;
	if (ret != SAM_STAT_GOOD)
		wce = -1;
	/* 0 asked for while 1 is shown and 0 already wanted: a switch to 0
	 * still runs (or failed): answered once it is done, with its
	 * outcome (not GOOD at once, with WCE back at 1 when that switch's
	 * flush fails: test_faults_second_wce_off_shares_failure) */
	if (wce < 0 || (wce == (int)was && (wce || !shown))) {
		syncguard_page_set_wce(cmd->dev, syncguard_lun_reported_wce(&bs->lun));
		return ret;
	}
	if (!syncguard_wce_changeable(bs) && !to_mode) {
		syncguard_page_set_wce(cmd->dev, was);
		return syncguard_fail(cmd, SYNCGUARD_ERR_INVALID_PARAM);
	}
	if (wce) {
		syncguard_lun_set_wce(&bs->lun, true);	/* no flush needed */
		/* over a switch to 0 still flushing (shown 1): tgt sees no
		 * change and tells no one, and the initiator whose WCE=0 it
		 * overrides would go on without flushes
		 * (test_faults_wce_on_over_switch_told) */
		if (shown)
			ua_sense_add_other_it_nexus(cmd->cmd_itn_id, cmd->dev,
						    ASC_MODE_PARAMETERS_CHANGED);
		return SAM_STAT_GOOD;
	}
	syncguard_page_set_wce(cmd->dev, true);		/* until the flush is done */
	syncguard_lun_want_wce(&bs->lun, false);	/* a later WCE=1 wins */
	syncguard_workers_submit(cmd);		/* -> syncguard_wce_off_request */
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
 * After a tgtadm update: if the WCE initiators are shown changed from
 * @shown (a mode_page update, or path= reopening the store with its
 * mode's WCE), every I_T nexus gets a unit attention, MODE PARAMETERS
 * CHANGED (SPC-4, mode parameters: changed by other means than that
 * nexus's own MODE SELECT).  An initiator that set WCE=0 sends no
 * SYNCHRONIZE CACHE; told nothing, it would go on trusting plain writes
 * that now sit in a volatile cache, lost on a power cut
 * (test_modes_admin_wce_change_announced).  tgt raises it for MODE
 * SELECT, to the other nexuses, itself.
 */
void syncguard_wce_announce(struct scsi_lu *lu, int shown, bool was, int set)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	int now;

	if (!bs->open || shown < 0)
		return;
	/* a switch to 0 still flushing reports 1 (MODE SENSE shows what
	 * holds), but initiators hear of the change now: once at its end
	 * would need tgtd's event thread, and an initiator that reads 1
	 * meanwhile only flushes more than it needs to.  So WCE=1 over such
	 * a switch shows no change, and is one: else the initiator that
	 * asked for 0 is told nothing and sends no flushes
	 * (test_faults_wce_on_over_switch_told) */
	now = set >= 0 ? set : syncguard_lun_reported_wce(&bs->lun);
	if (now == shown && (set < 0 || set == (int)was))
		return;
	syncguard_page_set_wce(lu, now);
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
 * commands: the flush there would stop the whole tgtd for as long
 * (10 s of 0 IOPS on an unrelated LUN with a 10 s flush:
 * tests/stall.sh).
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
	pthread_mutex_lock(&bs->wce_lock);
	bs->wce_switches--;
	bs->opening = false;
	pthread_cond_broadcast(&bs->wce_cond);
	pthread_mutex_unlock(&bs->wce_lock);
	return NULL;
}

/* Start wce_off_thread for @lu: 0, or -errno when no thread could be
 * started. */
static int wce_off_start(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	int ret;

	pthread_mutex_lock(&bs->wce_lock);
	bs->wce_switches++;
	pthread_mutex_unlock(&bs->wce_lock);
	ret = syncguard_start_detached(wce_off_thread, lu);
	if (ret) {
		pthread_mutex_lock(&bs->wce_lock);
		bs->wce_switches--;
		pthread_mutex_unlock(&bs->wce_lock);
	}
	return -ret;
}

/* How long a LUN's creation waits for its switch to WCE=0 at open */
#define OPEN_SWITCH_WAIT_S 1

void syncguard_wce_open(struct scsi_lu *lu)
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
	if (wce_off_start(lu)) {		/* no thread: switch here */
		(void)syncguard_lun_apply_wce(&bs->lun);
		bs->opening = false;
		return;
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += OPEN_SWITCH_WAIT_S;
	pthread_mutex_lock(&bs->wce_lock);
	while (bs->wce_switches &&
	       pthread_cond_timedwait(&bs->wce_cond, &bs->wce_lock,
				      &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&bs->wce_lock);
}

/* A WCE change by tgtadm to @wce: 0 or -errno (-EPERM: the mode keeps
 * WCE=0).  A switch to 0 goes on in the background (wce_off_start), or
 * here, on the caller's thread, when no thread can be started. */
int syncguard_wce_admin_set(struct scsi_lu *lu, int wce)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);

	/* 0 on write-through or plp: their own value (see
	 * syncguard_mode_select), during the switch at open */
	if (!syncguard_wce_changeable(bs) &&
	    (wce || syncguard_mode_wce(bs->opts.mode)))
		return -EPERM;
	if (wce)
		return syncguard_lun_set_wce(&bs->lun, true);
	syncguard_lun_want_wce(&bs->lun, false);	/* a later WCE=1 wins */
	if (!wce_off_start(lu))
		return 0;
	syncguard_uring_quiesce(lu);	/* apply waits for ring writes */
	return syncguard_lun_apply_wce(&bs->lun);
}

void syncguard_wce_wait_switches(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);

	pthread_mutex_lock(&bs->wce_lock);
	while (bs->wce_switches)
		pthread_cond_wait(&bs->wce_cond, &bs->wce_lock);
	pthread_mutex_unlock(&bs->wce_lock);
}
