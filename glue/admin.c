/*
 * tgtadm --op update --mode logicalunit: path=, online=, mode_page= and
 * thin_provisioning= checked and carried out so that no update leaves a
 * LUN without a store, changes WCE silently, or gives a Caching page tgt
 * would fill with zeroes.
 *
 * Layer: used by cmdtable.c; it uses wce.c and vpd.c.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glue.h"
#include "internal.h"

/* SPC-4 ASC/ASCQ 2Ah/09h, which tgt's scsi.h does not name */
#define SYNCGUARD_ASC_CAPACITY_DATA_HAS_CHANGED	0x2a09

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

/* Does any @key in @params have a value other than 0 (tgt reads each
 * with atoi, and applies them in order)? */
static bool param_nonzero(const char *params, const char *key)
{
	const char *v = NULL;

	while ((v = param_next(params, key, v)))
		if (atoi(v))
			return true;
	return false;
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
	 * (test_modes_bad_caching_page) */
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
 * and fills the rest with zeroes ("mode_page=8:0:18:0x10" zeroes every
 * other field), and reads an empty or bad field as 0
 * ("8:0:18:0x10::::..." does the same past the count):
 * test_modes_bad_caching_page. */
static int page_bytes(const char *v)
{
	int bytes = 0;

	/* tgt copies the value into 1024 bytes and drops the rest, which
	 * it then fills with zeroes (a field padded with 1,100 zeroes:
	 * test_modes_bad_caching_page) */
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
 * exactly its CACHING_PAGE_LEN bytes, each a number 0-255 (a second,
 * short mode_page= in one update too: test_modes_bad_caching_page)?  If
 * not, false, and the bytes the first bad one gives (-1: a bad field) in
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
 * worker still running one would use what close freed (tgtd dies at a
 * QD32 FUA load: test_faults_path_change_waits).  Refused until they are
 * answered, as tgt refuses to delete such a LUN.
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
 * Updates that tgt would take although they leave a LUN without a store,
 * or that tgt refuses without a word in tgtd.log: online=1 with no
 * store (after a refused path=, tgt has closed the old one; online, the
 * LUN would answer as a 0-byte disk), and path= while the LUN is
 * online.  And path= with online= in one update: tgt applies them in
 * order and answers with the last one's result, so "online=1,path=X"
 * would bring a storeless LUN online when X fails, and "path=X,online=0"
 * would say success for a move tgt refused; give them one update each
 * (test_modes_path_refusals).  And removable=1: a media changer's MOVE
 * MEDIUM unloads a removable LUN by closing its store with no regard for
 * the commands in flight (tgt's dtd_load_unload), so a syncguard LUN is
 * a fixed disk (bs_syncguard_open; test_modes_fixed_media).
 */
static bool refused_state(struct scsi_lu *lu, const char *params)
{
	const char *online = param_value(params, "online");
	const char *why = NULL;

	/* every value counts: "removable=0,removable=1" ends removable */
	if (param_nonzero(params, "removable"))
		why = "removable=1 refused: a syncguard LUN is a fixed disk (a "
		      "media changer would close its store under the commands "
		      "in flight)";
	else if (has_param(params, "path") && online)
		why = "path= and online= in one update: give them one each";
	else if (has_param(params, "path") && lu->path && lu->attrs.online)
		why = "path change refused: the LUN is online; take it offline "
		      "first (--params online=0)";
	else if (param_nonzero(params, "online") && !lu->path)
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
 * capacity it read (READ(16) and READ CAPACITY(16) answered GOOD on a
 * 16 MiB LUN moved to 32 MiB; tgt raises nothing, for its own stores
 * either: test_modes_path_capacity_change_announced).
 */
static void announce_capacity(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	uint64_t before = bs->size_shown;

	/* compared with what initiators were last told, not with the 0 of
	 * a LUN a failed path= left without a store
	 * (test_modes_path_refusals) */
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
 * (busy_for_path) or the LUN is online, online=1 while it has no store,
 * and removable=1 (refused_state).  A refused update changes no WCE; a
 * path= move to another size is announced (announce_capacity).  A
 * Caching page that is not 18 bytes (given or declared), or a WCE
 * change the LUN does not allow, is undone and refused.  A switch to
 * WCE=0 flushes on a thread of its own (admin_set_wce); tgtadm gets its
 * answer at once.
 */
tgtadm_err syncguard_lu_config(struct scsi_lu *lu, char *params)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	/* compared with the WCE last asked for: a switch to 0 that still
	 * waits for the write lock honours 1 until it has it
	 * (test_flush_wce_request_supersedes_switch) */
	bool was = bs->open && syncguard_lun_wanted_wce(&bs->lun);
	struct syncguard_page_copy before;
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
	 * would read that 1 as a request and cancel the switch
	 * (test_faults_wce_switch_survives_update) */
	if (bs->open)
		syncguard_page_set_wce(lu, syncguard_lun_reported_wce(&bs->lun));
	shown = syncguard_page_wce(lu);
	syncguard_page_save(lu, &before);
	adm = bs->tgt_lu_config(lu, params);
	announce_capacity(lu);
	/* tgt installs a mode_page= page and only then finds its data
	 * longer than it says and refuses the update: a refused update
	 * changes no WCE (else WCE would switch, and every initiator be
	 * told, while tgtadm says "invalid request":
	 * test_modes_bad_caching_page) */
	if (adm != TGTADM_SUCCESS) {
		syncguard_page_restore(lu, &before);
		(void)syncguard_check_thin(lu);
		syncguard_block_limits(lu);
		return adm;
	}
	if (!syncguard_caching_page(lu) ||
	    syncguard_caching_page(lu)->pcode_size != CACHING_PAGE_LEN) {
		syncguard_page_restore(lu, &before);
		eprintf("syncguard: lun %" PRIu64 ": refused: the Caching mode "
			"page must keep its %d bytes\n", lu->lun, CACHING_PAGE_LEN);
		return TGTADM_INVALID_REQUEST;
	}
	syncguard_page_set_mask(lu);	/* a new page has no mask */
	wce = syncguard_page_wce(lu);
	/* an update of the Caching page asks for its WCE even when the page
	 * shows it: WCE=1 during a switch to 0 (shown 1, honoured 0) would
	 * be dropped, and the LUN end at 0
	 * (test_faults_wce_on_over_switch_told) */
	if (bs->open && (wce != (int)was || (!wce && shown)) &&
	    (wce != shown || sets_caching_page(params))) {
		err = syncguard_wce_admin_set(lu, wce);
		if (err)
			syncguard_page_restore(lu, &before);
		set = wce;
	}
	if (err) {
		eprintf("syncguard: lun %" PRIu64 ": WCE change refused: %s\n",
			lu->lun, err == -EPERM ? "this mode keeps WCE=0 (see "
			"bsopts allow_wce)" : strerror(-err));
		return TGTADM_INVALID_REQUEST;
	}
	syncguard_wce_announce(lu, shown, was, set);
	err = syncguard_check_thin(lu);
	syncguard_block_limits(lu);	/* tgt rewrote it if thin changed */
	return err ? TGTADM_INVALID_REQUEST : adm;
}
