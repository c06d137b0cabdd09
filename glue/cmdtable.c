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
 * entry for all others.  One entry function per command family: MODE
 * SENSE/SELECT (glue/wce.c), SYNCHRONIZE CACHE (glue/synccache.c),
 * VERIFY (glue/vpd.c), UNMAP, COMPARE AND WRITE and START STOP UNIT
 * (here); everything else tgt hands to the backing store, which runs it
 * through the core (core/exec.c) or the io_uring engine (glue/uring.c).
 *
 * Layer: used by bs_syncguard.c; it uses wce.c, synccache.c, vpd.c,
 * admin.c and answer.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "glue.h"
#include "internal.h"

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
		return syncguard_fail(cmd, SYNCGUARD_ERR_WRITE_PROTECT);
	/* thin provisioning, ANCHOR, descriptors: core/exec.c */
	syncguard_workers_submit(cmd);
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

/*
 * START STOP UNIT: tgt's spc_start_stop answers GOOD at once.  One that
 * stops access to the medium with NO_FLUSH=0 first writes every cached
 * block (SBC-3 5.25; syncguard_start_stop_flushes): a worker runs it
 * through the core (exec_start_stop).  tgt keeps the rest.  LOEJ, which
 * tgt acts on for removable media only, is nothing here: a syncguard LUN
 * is never removable (glue/admin.c refuses removable=1).
 */
static int syncguard_start_stop(int host_no, struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	struct syncguard_cdb c;

	if (device_reserved(cmd) || !bs->open ||
	    syncguard_cdb_decode(cmd->scb, (size_t)cmd->scb_len, &c) ||
	    !syncguard_start_stop_flushes(&c))
		return bs->tgt_ops[START_STOP](host_no, cmd);
	scsi_set_in_resid_by_actual(cmd, 0);
	syncguard_workers_submit(cmd);
	return SAM_STAT_GOOD;
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
	{ START_STOP, syncguard_start_stop },
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
		err = syncguard_take_deferred(bs, cmd->cmd_itn_id);
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

/* ---- set-up ---- */

/*
 * Commands that change the medium conflict with a persistent reservation
 * as WRITE(16) does (SBC-3's table of commands allowed in the presence
 * of reservations): a Write Exclusive holder's fenced peers may write
 * nothing.  tgt gives WRITE AND VERIFY and ORWRITE a reader's bits and
 * WRITE SAME and UNMAP none, so they got through
 * (test_cmd_reservation_fences_writes).
 */
static const uint8_t medium_writers[] = {
	WRITE_VERIFY, WRITE_VERIFY_12, WRITE_VERIFY_16, WRITE_SAME,
	WRITE_SAME_16, UNMAP, COMPARE_AND_WRITE, ORWRITE_16,
};

void syncguard_cmdtable_install(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	struct device_type_operations *ops = lu->dev_type_template.ops;

	syncguard_page_set_wce(lu, syncguard_mode_wce(bs->opts.mode));
	syncguard_page_set_mask(lu);
	for (int op = 0; op < NR_SCSI_OPCODES; op++) {
		bs->tgt_ops[op] = bs->run[op] = ops[op].cmd_perform;
		ops[op].cmd_perform = syncguard_dispatch;
	}
	for (size_t i = 0; i < sizeof(overrides) / sizeof(overrides[0]); i++)
		bs->run[overrides[i].op] = overrides[i].fn;
	for (size_t i = 0; i < sizeof(medium_writers); i++)
		ops[medium_writers[i]].pr_conflict_bits =
			ops[WRITE_16].pr_conflict_bits;
	bs->tgt_lu_config = lu->dev_type_template.lu_config;
	lu->dev_type_template.lu_config = syncguard_lu_config;
}
