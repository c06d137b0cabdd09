/*
 * The one table that turns a reason into SCSI status and sense data
 * (SPC-4 4.5.6 sense keys, SPC-4 Annex D ASC/ASCQ assignments).
 */
#include <errno.h>

#include "core.h"

#define GOOD		0x00
#define CHECK_CONDITION	0x02
#define BUSY		0x08

#define NO_SENSE	0x00
#define NOT_READY	0x02
#define MEDIUM_ERROR	0x03
#define HARDWARE_ERROR	0x04
#define ILLEGAL_REQUEST	0x05
#define DATA_PROTECT	0x07
#define MISCOMPARE	0x0e

static const struct syncguard_sense sense_table[SYNCGUARD_REASON_COUNT] = {
	[SYNCGUARD_OK] = { GOOD, NO_SENSE, 0x0000 },
	[SYNCGUARD_ERR_WRITE] = { CHECK_CONDITION, MEDIUM_ERROR, 0x0c00 },
	[SYNCGUARD_ERR_READ] = { CHECK_CONDITION, MEDIUM_ERROR, 0x1100 },
	[SYNCGUARD_ERR_NOSPACE] = { CHECK_CONDITION, DATA_PROTECT, 0x2707 },
	[SYNCGUARD_ERR_WRITE_PROTECT] = { CHECK_CONDITION, DATA_PROTECT,
					  0x2700 },
	[SYNCGUARD_ERR_LBA_RANGE] = { CHECK_CONDITION, ILLEGAL_REQUEST, 0x2100 },
	[SYNCGUARD_ERR_INVALID_CDB] = { CHECK_CONDITION, ILLEGAL_REQUEST, 0x2400 },
	[SYNCGUARD_ERR_INVALID_OPCODE] = { CHECK_CONDITION, ILLEGAL_REQUEST,
					   0x2000 },
	[SYNCGUARD_ERR_PARAM_LEN] = { CHECK_CONDITION, ILLEGAL_REQUEST, 0x1a00 },
	[SYNCGUARD_ERR_INVALID_PARAM] = { CHECK_CONDITION, ILLEGAL_REQUEST,
					  0x2600 },
	[SYNCGUARD_ERR_MISCOMPARE] = { CHECK_CONDITION, MISCOMPARE, 0x1d00 },
	[SYNCGUARD_ERR_INVALID_IU] = { CHECK_CONDITION, ILLEGAL_REQUEST,
				       0x0e03 },
	[SYNCGUARD_ERR_BUSY] = { BUSY, NO_SENSE, 0x0000 },
	[SYNCGUARD_ERR_NO_MEDIUM] = { CHECK_CONDITION, NOT_READY, 0x3a00 },
	[SYNCGUARD_ERR_INTERNAL] = { CHECK_CONDITION, HARDWARE_ERROR, 0x4400 },
};

struct syncguard_sense syncguard_sense_of(enum syncguard_reason reason)
{
	if ((unsigned int)reason >= SYNCGUARD_REASON_COUNT)
		reason = SYNCGUARD_ERR_INTERNAL;
	return sense_table[reason];
}

enum syncguard_reason syncguard_reason_of_errno(int err, bool writing)
{
	switch (err) {
	case 0:
		return SYNCGUARD_OK;
	case SYNCGUARD_ERESOURCE:	/* nothing written: retry (SAM-5 5.3) */
		return SYNCGUARD_ERR_BUSY;
	case ENOSPC:
	case EDQUOT:
		/* a full thin (sparse) LUN: SBC-3 4.7.3.6 */
		return writing ? SYNCGUARD_ERR_NOSPACE : SYNCGUARD_ERR_READ;
	case EPERM:	/* the file made immutable (chattr +i) */
	case EROFS:	/* its file system remounted read-only */
		return writing ? SYNCGUARD_ERR_WRITE_PROTECT : SYNCGUARD_ERR_READ;
	default:
		return writing ? SYNCGUARD_ERR_WRITE : SYNCGUARD_ERR_READ;
	}
}
