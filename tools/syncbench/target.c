/*
 * The LUN: logging in, what it reports about itself, WCE for
 * --cache-off, and a syncguard LUN's flush counter when it is local.
 */
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "syncbench.h"
#include "syncguard_stats.h"
#include "statsfile.h"

const char *syncguard_sense_text(const struct scsi_sense *sense, char *buf,
				 size_t len)
{
	/* SPC-4 table 28; libiscsi's own names miss some (MEDIUM ERROR) */
	static const char *const keys[16] = {
		"NO SENSE", "RECOVERED ERROR", "NOT READY", "MEDIUM ERROR",
		"HARDWARE ERROR", "ILLEGAL REQUEST", "UNIT ATTENTION",
		"DATA PROTECT", "BLANK CHECK", "VENDOR SPECIFIC",
		"COPY ABORTED", "ABORTED COMMAND", "(reserved)",
		"VOLUME OVERFLOW", "MISCOMPARE", "COMPLETED",
	};
	/* SPC-4 annex D, the ones a syncguard LUN answers and libiscsi
	 * may not name */
	static const struct {
		int ascq;
		const char *name;
	} ascqs[] = {
		{ 0x0c00, "WRITE ERROR" }, { 0x1100, "UNRECOVERED READ ERROR" },
		{ 0x2707, "SPACE ALLOCATION FAILED WRITE PROTECT" },
		{ 0x2100, "LOGICAL BLOCK ADDRESS OUT OF RANGE" },
		{ 0x2400, "INVALID FIELD IN CDB" },
		{ 0x2000, "INVALID COMMAND OPERATION CODE" },
		{ 0x1a00, "PARAMETER LIST LENGTH ERROR" },
		{ 0x2600, "INVALID FIELD IN PARAMETER LIST" },
		{ 0x1d00, "MISCOMPARE DURING VERIFY OPERATION" },
		{ 0x0e03, "INVALID FIELD IN COMMAND INFORMATION UNIT" },
		{ 0x4400, "INTERNAL TARGET FAILURE" },
	};
	const char *ascq = scsi_sense_ascq_str(sense->ascq);
	char *p;
	int n;

	for (size_t i = 0; !ascq && i < sizeof(ascqs) / sizeof(ascqs[0]); i++)
		if (ascqs[i].ascq == sense->ascq)
			ascq = ascqs[i].name;

	n = snprintf(buf, len, "sense key %s (0x%x), ASC/ASCQ 0x%04x%s",
		     keys[sense->key & 0xf], sense->key, sense->ascq,
		     ascq ? " " : "");
	if (ascq && n >= 0 && (size_t)n < len) {
		snprintf(buf + n, len - (size_t)n, "%s", ascq);
		/* libiscsi writes CAPACITY_DATA_HAS_CHANGED: SPC-4 has
		 * spaces */
		for (p = buf + n; *p; p++)
			if (*p == '_')
				*p = ' ';
	}
	return buf;
}

/* Why a login failed, in words a user can act on: libiscsi's message
 * after a refused TCP connection names its reconnect logic instead. */
static void login_failed(const struct config *c, struct iscsi_context *iscsi,
			 const char *portal, int lun)
{
	const char *why = iscsi_get_error(iscsi);
	char host[256], url[1024], *port;
	struct addrinfo *ai = NULL, hints = { .ai_socktype = SOCK_STREAM };
	int fd = -1, err = 0;

	snprintf(host, sizeof(host), "%s", portal);
	port = strrchr(host, ':');
	if (port && !strchr(port, ']'))
		*port++ = '\0';
	else
		port = "3260";
	if (host[0] == '[')
		memmove(host, host + 1, strlen(host));	/* [v6] */
	if (host[0] && host[strlen(host) - 1] == ']')
		host[strlen(host) - 1] = '\0';
	if (getaddrinfo(host, port, &hints, &ai)) {
		fprintf(stderr, PROG ": cannot resolve the portal's host %s\n",
			host);
		return;
	}
	if ((fd = socket(ai->ai_family, SOCK_STREAM, 0)) < 0 ||
		 connect(fd, ai->ai_addr, ai->ai_addrlen))
		err = errno;
	if (fd >= 0)
		close(fd);
	if (ai)
		freeaddrinfo(ai);
	syncguard_shown_url(c->url, url, sizeof(url));
	if (err)
		fprintf(stderr, PROG ": cannot connect to the portal %s: %s\n",
			portal, strerror(err));
	else if (iscsi_is_logged_in(iscsi))	/* the LUN's TEST UNIT READY */
		fprintf(stderr, PROG ": %s: logged in to the target, but LUN "
			"%d %s: %s\n", url, lun,
			strstr(why, "LOGICAL_UNIT_NOT_SUPPORTED") ?
			"does not exist there" : "is not ready", why);
	else
		fprintf(stderr, PROG ": cannot log in to %s: %s\n", url, why);
}

/* Is the port of "host[:port]" (or "[v6][:port]") 1..65535, or absent?
 * libiscsi takes 99999 and fails to connect. */
static bool portal_port_ok(const char *portal)
{
	const char *colon = strrchr(portal, ':'), *bracket = strrchr(portal, ']');
	char *end;
	long port;

	if (!colon || (bracket && colon < bracket) ||
	    (portal[0] != '[' && strchr(portal, ':') != colon))
		return true;		/* no port (or a bare IPv6 address) */
	port = strtol(colon + 1, &end, 10);
	return end != colon + 1 && !*end && port >= 1 && port <= 65535;
}

struct iscsi_context *syncguard_target_login(const struct config *c, int *lun,
					     char *target, size_t len)
{
	struct iscsi_context *iscsi = iscsi_create_context(c->initiator);
	struct iscsi_url *u;

	if (!iscsi) {
		fprintf(stderr, PROG ": cannot create an iSCSI context\n");
		return NULL;
	}
	u = iscsi_parse_full_url(iscsi, c->url);
	if (u && !portal_port_ok(u->portal))
		syncguard_usage_error("bad URL: the port must be 1..65535, in %s",
				      u->portal);
	if (!u || u->lun < 0 || u->lun > 16383) {	/* SAM's flat space */
		char why[1024];

		/* libiscsi's message quotes the URL: its CHAP secret masked,
		 * not printed in clear */
		syncguard_shown_url(u ? "the LUN must be 0..16383" :
				    iscsi_get_error(iscsi), why, sizeof(why));
		syncguard_usage_error("bad URL: %s", why);
	}
	iscsi_set_targetname(iscsi, u->target);
	iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(iscsi, c->header_digest ?
		ISCSI_HEADER_DIGEST_CRC32C : ISCSI_HEADER_DIGEST_NONE_CRC32C);
	if (u->user[0])		/* CHAP from the URL */
		iscsi_set_initiator_username_pwd(iscsi, u->user, u->passwd);
	iscsi_set_timeout(iscsi, (int)c->timeout);
	*lun = u->lun;
	if (target)
		snprintf(target, len, "%s", u->target);
	if (SYNCGUARD_HELD(iscsi_full_connect_sync(iscsi, u->portal, u->lun))) {
		login_failed(c, iscsi, u->portal, u->lun);
		iscsi_destroy_url(u);
		iscsi_destroy_context(iscsi);
		return NULL;
	}
	iscsi_destroy_url(u);
	return iscsi;
}

static void read_caching(struct iscsi_context *iscsi, int lun,
			 struct target_info *ti)
{
	struct scsi_task *t;
	struct scsi_mode_sense *ms;
	struct scsi_mode_page *pg;

	for (int pc = 0; pc <= 1; pc++) {	/* current, then changeable */
		t = SYNCGUARD_HELD(iscsi_modesense10_sync(iscsi, lun, 0, 1, pc ?
			SCSI_MODESENSE_PC_CHANGEABLE : SCSI_MODESENSE_PC_CURRENT,
			SCSI_MODEPAGE_CACHING, 0, 255));
		if (t && t->status == SCSI_STATUS_GOOD &&
		    (ms = scsi_datain_unmarshall(t)) != NULL) {
			pg = scsi_modesense_get_page(ms, SCSI_MODEPAGE_CACHING, 0);
			if (!pc) {
				ti->dpofua = !!(ms->device_specific_parameter & 0x10);
				ti->write_protected =
					!!(ms->device_specific_parameter & 0x80);
			}
			if (pg && !pc)
				ti->wce = pg->caching.wce;
			else if (pg)
				ti->wce_changeable = pg->caching.wce;
		}
		if (t)
			scsi_free_scsi_task(t);
	}
}

/* MAXIMUM TRANSFER LENGTH, Block Limits VPD (SBC-3 6.5.3), in blocks */
static void read_block_limits(struct iscsi_context *iscsi, int lun,
			      struct target_info *ti)
{
	struct scsi_task *t =
		SYNCGUARD_HELD(iscsi_inquiry_sync(iscsi, lun, 1, 0xb0, 255));
	struct scsi_inquiry_block_limits *bl;

	if (t && t->status == SCSI_STATUS_GOOD &&
	    (bl = scsi_datain_unmarshall(t)) != NULL)
		ti->max_transfer = bl->max_xfer_len;
	if (t)
		scsi_free_scsi_task(t);
}

/* READ CAPACITY failed on @lun: if INQUIRY says it is no block device
 * (tgt's LUN 0 is the target's controller, SPC-4 peripheral device type
 * 0x0c), say so, else libiscsi's error. */
static void describe_failed(struct iscsi_context *iscsi, int lun)
{
	char why[256];
	struct scsi_task *t;
	struct scsi_inquiry_standard *inq;

	snprintf(why, sizeof(why), "%s", iscsi_get_error(iscsi));
	t = SYNCGUARD_HELD(iscsi_inquiry_sync(iscsi, lun, 0, 0, 255));
	if (t && t->status == SCSI_STATUS_GOOD &&
	    (inq = scsi_datain_unmarshall(t)) != NULL &&
	    inq->device_type != SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_DIRECT_ACCESS)
		fprintf(stderr, PROG ": LUN %d is no block device (peripheral "
			"device type 0x%02x%s); a tgt target's LUNs start at 1\n",
			lun, (unsigned int)inq->device_type, inq->device_type ==
			SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_STORAGE_ARRAY_CONTROLLER ?
			", the target's controller" : "");
	else
		fprintf(stderr, PROG ": READ CAPACITY(16) failed: %s\n", why);
	if (t)
		scsi_free_scsi_task(t);
}

int syncguard_target_describe(struct iscsi_context *iscsi, int lun,
			      struct target_info *ti)
{
	struct scsi_task *t =
		SYNCGUARD_HELD(iscsi_readcapacity16_sync(iscsi, lun));
	struct scsi_readcapacity16 *rc;

	*ti = (struct target_info){ .wce = -1, .dpofua = -1,
				    .wce_changeable = -1 };
	if (!t || t->status != SCSI_STATUS_GOOD ||
	    !(rc = scsi_datain_unmarshall(t))) {
		describe_failed(iscsi, lun);
		if (t)
			scsi_free_scsi_task(t);
		return -1;
	}
	ti->block_size = rc->block_length;
	ti->blocks = rc->returned_lba + 1;
	ti->phys_block_size = rc->block_length << rc->lbppbe;
	scsi_free_scsi_task(t);
	read_caching(iscsi, lun, ti);
	read_block_limits(iscsi, lun, ti);
	return 0;
}

/* One MODE SENSE and, unless WCE is @wce already, one MODE SELECT: 0,
 * 1 (a unit attention: try again), -1 with the reason in @why. */
static int set_wce_once(struct iscsi_context *iscsi, int lun, int wce,
			char *why, size_t len)
{
	/* libiscsi's last error, to tell a new one from it: a command that
	 * got no answer sets none, and an older command's (a unit attention
	 * the run retried) would be given as the reason */
	char before[256];
	struct scsi_task *t, *sel = NULL, *failed;
	struct scsi_mode_sense *ms;
	struct scsi_mode_page *pg = NULL;
	int ret = -1;

	snprintf(before, sizeof(before), "%s", iscsi_get_error(iscsi));
	t = failed = SYNCGUARD_HELD(iscsi_modesense6_sync(iscsi, lun, 1,
		SCSI_MODESENSE_PC_CURRENT, SCSI_MODEPAGE_CACHING, 0, 255));

	if (t && t->status == SCSI_STATUS_GOOD &&
	    (ms = scsi_datain_unmarshall(t)) != NULL)
		pg = scsi_modesense_get_page(ms, SCSI_MODEPAGE_CACHING, 0);
	if (pg && pg->caching.wce == wce) {
		ret = 0;	/* a target restarted meanwhile resets it */
	} else if (pg) {
		pg->caching.wce = wce;
		pg->ps = 0;
		sel = SYNCGUARD_HELD(iscsi_modeselect6_sync(iscsi, lun, 1, 0,
							    pg));
		ret = sel && sel->status == SCSI_STATUS_GOOD ? 0 : -1;
		failed = sel;
	}
	if (ret && failed && failed->status == SCSI_STATUS_CHECK_CONDITION) {
		ret = failed->sense.key == SCSI_SENSE_UNIT_ATTENTION ? 1 : -1;
		syncguard_sense_text(&failed->sense, why, len);
	} else if (ret && !strcmp(before, iscsi_get_error(iscsi))) {
		snprintf(why, len, "no answer from the target (the session "
			 "is lost, or the command timed out)");
	} else if (ret) {
		snprintf(why, len, "%s", iscsi_get_error(iscsi));
	}
	if (sel)
		scsi_free_scsi_task(sel);
	if (t)
		scsi_free_scsi_task(t);
	return ret;
}

int syncguard_target_set_wce(struct iscsi_context *iscsi, int lun, int wce)
{
	char why[160] = "";
	int ret = 1;

	/* a unit attention (the session came back after a reset, the page
	 * changed) says nothing about the request: up to 3 tries */
	for (int i = 0; i < 3 && ret == 1; i++)
		ret = set_wce_once(iscsi, lun, wce, why, sizeof(why));
	if (ret)
		fprintf(stderr, PROG ": MODE SELECT WCE=%d refused: %s\n", wce,
			why);
	return ret ? -1 : 0;
}

/* The counters of a syncguard LUN of a live tgtd on this host
 * (include/syncguard_stats.h) into @st: true, or false when there are
 * none (another backing store, another host, another version). */
static bool read_stats(const char *url_target, int lun,
		       struct syncguard_stats *st)
{
	char path[512];

	snprintf(path, sizeof(path), SYNCGUARD_STATS_DIR "/%s/lun%d.stats",
		 url_target, lun);
	return syncguard_stats_load(path, st) == 0 &&
	       syncguard_stats_owner_alive(st->pid, st->pid_start);
}

void syncguard_target_sample(const char *url_target, int lun, struct target_sample *ts)
{
	struct syncguard_stats st;

	ts->syncs = ts->commands = -1;
	if (!read_stats(url_target, lun, &st))
		return;
	ts->syncs = (double)(st.device_flushes + st.dsync_writes);
	ts->commands = (double)(st.reads + st.writes + st.fua_writes +
				st.sync_caches);
}

void syncguard_target_ways(const char *url_target, int lun, struct result *r)
{
	struct syncguard_stats st;

	r->target_writes[0] = r->target_batching[0] = '\0';
	r->target_sync_loop[0] = r->target_engine[0] = '\0';
	if (!read_stats(url_target, lun, &st))
		return;
	syncguard_ways_writes(&st, r->target_writes, sizeof(r->target_writes));
	syncguard_ways_batching(&st, r->target_batching,
				sizeof(r->target_batching));
	syncguard_ways_sync_loop(&st, r->target_sync_loop,
				 sizeof(r->target_sync_loop));
	syncguard_ways_engine(&st, r->target_engine, sizeof(r->target_engine));
}
