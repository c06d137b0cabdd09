/* The private tgtd and the helpers every protocol test uses. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto.h"

static char top[256] = ".";
static char module[512];
static char scratch[400];
static char state[512];		/* tgtd-private's state directory */
static pid_t owner;		/* the process that started tgtd */

/* @fmt and @ap formatted whole, never cut (a command cut short fails
 * for its shell's syntax, and a test that wants it refused would pass):
 * free() it.  Without the memory for it the tests stop. */
static char *format(const char *fmt, va_list ap)
{
	char *s;

	if (vasprintf(&s, fmt, ap) < 0) {
		fprintf(stderr, "proto: no memory for a command\n");
		abort();
	}
	return s;
}

int proto_sh(const char *fmt, ...)
{
	va_list ap;
	char *cmd;
	int st;

	va_start(ap, fmt);
	cmd = format(fmt, ap);
	va_end(ap);
	st = system(cmd);
	free(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

long long proto_sh_number(const char *fmt, ...)
{
	long long v = -1;
	va_list ap;
	char *cmd;
	FILE *p;

	va_start(ap, fmt);
	cmd = format(fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	free(cmd);
	if (p && fscanf(p, "%lld", &v) != 1)
		v = -1;
	if (p)
		pclose(p);
	return v;
}

int proto_nofile_limit(void)
{
	return proto_sh("P=$(cat '%s/pid'); awk '/^Max open files/ "
		"{ print $4 }' /proc/$P/limits >'%s/nofile' && for i in "
		"$(seq 0 4096); do [ -e /proc/$P/fd/$i ] || break; done; "
		"prlimit --pid $P --nofile=$i:", state, scratch);
}

int proto_nofile_restore(void)
{
	return proto_sh("prlimit --pid $(cat '%s/pid') "
		"--nofile=$(cat '%s/nofile'):", state, scratch);
}

static void on_signal(int sig)
{
	proto_tgtd_stop();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void find_paths(void)
{
	const char *t = getenv("SYNCGUARD_TOP");
	const char *m = getenv("SYNCGUARD_MODULE");

	if (t)
		snprintf(top, sizeof(top), "%s", t);
	snprintf(module, sizeof(module), "%s", m ? m : "");
	if (!m)
		snprintf(module, sizeof(module), "%s/bs_syncguard.so", top);
}

void proto_prepare(void)
{
	if (scratch[0])
		return;
	find_paths();
	snprintf(scratch, sizeof(scratch), "%s/build/proto.XXXXXX", top);
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		exit(EXIT_FAILURE);
	}
}

const char *proto_iqn(void)
{
	static char iqn[64];

	if (!iqn[0])
		snprintf(iqn, sizeof(iqn), "iqn.2026-11.org.syncguard:proto-%ld",
			 (long)getpid());
	return iqn;
}

void proto_tgtd_start(void)
{
	proto_prepare();
	snprintf(state, sizeof(state), "%s/tgtd", scratch);
	owner = getpid();
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	atexit(proto_tgtd_stop);
	if (proto_sh("'%s/scripts/tgtd-private' start '%s' '%s'", top, state,
		     module) ||
	    proto_sh("'%s/scripts/tgtd-private' target '%s' %d %s", top, state,
		     PROTO_TID, PROTO_IQN)) {
		fprintf(stderr, "proto: cannot start a private tgtd\n");
		proto_tgtd_stop();
		exit(EXIT_FAILURE);
	}
}

void proto_tgtd_stop(void)
{
	if (!state[0] || getpid() != owner)
		return;		/* forked test children never stop it */
	proto_sh("'%s/scripts/tgtd-private' stop '%s'", top, state);
	if (scratch[0])
		/* a failed test_faults_immutable_file_recovers leaves its
		 * file immutable, which rm cannot remove */
		proto_sh("chattr -R -i '%s' 2>/dev/null; rm -rf '%s'",
			 scratch, scratch);
	state[0] = scratch[0] = '\0';
}

int proto_sh_in_tgtd(const char *fmt, ...)
{
	va_list ap;
	char *cmd;

	va_start(ap, fmt);
	cmd = format(fmt, ap);
	va_end(ap);
	setenv("PROTO_CMD", cmd, 1);
	free(cmd);
	return proto_sh("nsenter -t $(cat '%s/pid') -m sh -c \"$PROTO_CMD\"",
			state);
}

int proto_tgtd_signal(const char *sig)
{
	return proto_sh("kill -%s $(cat '%s/pid')", sig, state);
}

bool proto_tgtd_alive(void)
{
	return proto_sh("kill -0 $(cat '%s/pid') 2>/dev/null", state) == 0;
}

long long proto_tgtd_threads(void)
{
	return proto_sh_number("grep -lx tgtd /proc/$(cat '%s/pid')/task/*/comm"
			       " | wc -l", state);
}

long long proto_tgtd_rings(void)
{
	return proto_sh_number("find /proc/$(cat '%s/pid')/fd -lname "
			       "'anon_inode:\\[io_uring\\]' | wc -l", state);
}

int proto_log_count(const char *needle)
{
	char path[700], line[1024];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tgtd.log", state);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

bool proto_log_has(const char *needle)
{
	return proto_log_count(needle) > 0;
}

int proto_add_lun(int lun, const char *path, const char *bsopts,
		  unsigned int blocksize)
{
	char bsz[16] = "";

	if (blocksize)
		snprintf(bsz, sizeof(bsz), "%u", blocksize);
	return proto_sh("'%s/scripts/tgtd-private' lun '%s' %d %d '%s' '%s' "
			"'%s' 2>/dev/null", top, state, PROTO_TID, lun, path,
			bsopts ? bsopts : "", bsz);
}

int proto_adm(const char *fmt, ...)
{
	va_list ap;
	char *args;
	int ret;

	va_start(ap, fmt);
	args = format(fmt, ap);
	va_end(ap);
	ret = proto_sh("'%s/scripts/tgtd-private' adm '%s' --lld iscsi %s "
		       ">/dev/null 2>&1", top, state, args);
	free(args);
	return ret;
}

bool proto_lun_shows(int lun, const char *text)
{
	setenv("PROTO_TEXT", text, 1);
	return proto_sh("'%s/scripts/tgtd-private' adm '%s' --op show --mode "
			"target | awk -v t=\"$PROTO_TEXT\" '/^Target [0-9]+:/ "
			"{ tg = $2 == \"%d:\" } /^ +LUN: [0-9]/ { l = tg && "
			"$2 == %d } l && index($0, t) { f = 1 } END { exit !f }'",
			top, state, PROTO_TID, lun) == 0;
}

int proto_update_lun(int lun, const char *params)
{
	return proto_adm("--op update --mode logicalunit --tid %d --lun %d "
			 "--params '%s'", PROTO_TID, lun, params);
}

int proto_del_lun(int lun)
{
	/* tgtadm's own message for a LUN a test already deleted (or never
	 * made) is noise in a passing run (proto_adm drops it); the status
	 * says it */
	return proto_adm("--op delete --mode logicalunit --tid %d --lun %d",
			 PROTO_TID, lun);
}

int proto_del_left_luns(int keep)
{
	return proto_sh("'%s/scripts/tgtd-private' adm '%s' --op show --mode "
			"target | awk '/^Target [0-9]+:/ { t = $2 == \"%d:\" } "
			"t && /^ +LUN: [0-9]/ && $2 > %d { print $2 }' | while "
			"read -r n; do echo \"proto: deleting LUN $n, left "
			"behind by a failed test\" >&2; "
			"'%s/scripts/tgtd-private' adm '%s' --lld iscsi --op "
			"delete --mode logicalunit --tid %d --lun $n || exit 1; "
			"done", top, state, PROTO_TID, keep, top, state,
			PROTO_TID);
}

const char *proto_dir(void)
{
	/* never "": callers build paths and filters from it ("/" matches
	 * every loop device of the host) */
	if (!scratch[0]) {
		fprintf(stderr, "proto: proto_dir() with no scratch directory "
			"(after proto_tgtd_stop?)\n");
		abort();
	}
	return scratch;
}

const char *proto_file(const char *name, uint64_t bytes, bool sparse)
{
	static char paths[16][700];
	static int next;
	char *p = paths[next++ % 16];
	static char zero[1 << 16];
	int fd;

	snprintf(p, 700, "%s/%s", scratch, name);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)bytes))
		return NULL;
	for (uint64_t off = 0; !sparse && off < bytes; off += sizeof(zero))
		if (pwrite(fd, zero, bytes - off < sizeof(zero) ?
			   bytes - off : sizeof(zero), (off_t)off) < 0)
			break;
	fsync(fd);
	close(fd);
	return p;
}

const char *proto_url(int lun)
{
	static char url[256];
	char port[32] = "", path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/port", state);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(port, sizeof(port), f));
	fclose(f);
	port[strcspn(port, "\n")] = '\0';
	snprintf(url, sizeof(url), "iscsi://127.0.0.1:%s/%s/%d", port,
		 PROTO_IQN, lun);
	return url;
}

const char *proto_state_dir(void)
{
	static char dir[600];

	snprintf(dir, sizeof(dir), "%s/state", state);
	return dir;
}

int proto_clear_latches(void)
{
	return proto_sh("rm -rf '%s/latched'", proto_state_dir());
}

struct iscsi_context *proto_connect(int lun)
{
	return proto_connect_url(proto_url(lun));
}

struct iscsi_context *proto_connect_url(const char *url)
{
	struct iscsi_context *iscsi;
	struct iscsi_url *u;

	iscsi = iscsi_create_context("iqn.2026-11.org.syncguard:proto-init");
	ck_assert_ptr_nonnull(iscsi);
	u = iscsi_parse_full_url(iscsi, url);
	ck_assert_ptr_nonnull(u);
	iscsi_set_targetname(iscsi, u->target);
	iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
	ck_assert_msg(iscsi_full_connect_sync(iscsi, u->portal, u->lun) == 0,
		      "login to %s: %s", url, iscsi_get_error(iscsi));
	iscsi_destroy_url(u);
	return iscsi;
}

void proto_assert_sense(struct scsi_task *t, int key, int ascq,
			const char *what)
{
	ck_assert_msg(t != NULL, "%s: no task", what);
	ck_assert_msg(t->status == SCSI_STATUS_CHECK_CONDITION,
		      "%s: status 0x%x, expected CHECK CONDITION", what,
		      t->status);
	ck_assert_msg((int)t->sense.key == key && t->sense.ascq == ascq,
		      "%s: sense %s 0x%04x, expected 0x%x 0x%04x", what,
		      scsi_sense_key_str(t->sense.key), t->sense.ascq, key,
		      ascq);
	scsi_free_scsi_task(t);
}

void proto_assert_good(struct scsi_task *t, const char *what, bool keep)
{
	ck_assert_msg(t != NULL, "%s: no task", what);
	ck_assert_msg(t->status == SCSI_STATUS_GOOD,
		      "%s: status 0x%x sense %s 0x%04x", what, t->status,
		      scsi_sense_key_str(t->sense.key), t->sense.ascq);
	if (!keep)
		scsi_free_scsi_task(t);
}

void proto_caching(struct iscsi_context *iscsi, int lun, int *wce,
		   int *dpofua)
{
	struct scsi_task *t = iscsi_modesense10_sync(iscsi, lun, 0, 1,
		SCSI_MODESENSE_PC_CURRENT, SCSI_MODEPAGE_CACHING, 0, 255);
	struct scsi_mode_sense *ms;
	struct scsi_mode_page *pg;

	*wce = *dpofua = -1;
	proto_assert_good(t, "MODE SENSE(10)", true);
	ms = scsi_datain_unmarshall(t);
	ck_assert_ptr_nonnull(ms);
	*dpofua = !!(ms->device_specific_parameter & 0x10);
	pg = scsi_modesense_get_page(ms, SCSI_MODEPAGE_CACHING, 0);
	if (pg)
		*wce = pg->caching.wce;
	scsi_free_scsi_task(t);
}

/* MODE SELECT(6) of the Caching page with WCE = @wce. */
struct scsi_task *proto_select_wce(struct iscsi_context *iscsi, int lun,
				   int wce)
{
	struct scsi_task *t = iscsi_modesense6_sync(iscsi, lun, 1,
		SCSI_MODESENSE_PC_CURRENT, SCSI_MODEPAGE_CACHING, 0, 255);
	struct scsi_mode_sense *ms;
	struct scsi_mode_page *pg;
	struct scsi_task *sel;

	proto_assert_good(t, "MODE SENSE(6)", true);
	ms = scsi_datain_unmarshall(t);
	ck_assert_ptr_nonnull(ms);
	pg = scsi_modesense_get_page(ms, SCSI_MODEPAGE_CACHING, 0);
	ck_assert_ptr_nonnull(pg);
	pg->caching.wce = wce;
	pg->ps = 0;
	sel = iscsi_modeselect6_sync(iscsi, lun, 1, 0, pg);
	scsi_free_scsi_task(t);
	return sel;
}

long long proto_counter(int lun, const char *field)
{
	const char *top = getenv("SYNCGUARD_TOP");

	return proto_sh_number("'%s/tools/syncguard-stat' --json '%s' %d "
			       "2>/dev/null | jq '.[0].%s // -1'",
			       top ? top : ".", PROTO_IQN, lun, field);
}

pid_t proto_child(void)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	return pid;
}

int proto_child_end(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* A session reading LBA @lba until killed (a child process: it dies
 * with the test process, and stops if the session does). */
static pid_t start_reader(int lun, unsigned int bs, uint64_t lba)
{
	pid_t pid = proto_child();
	struct iscsi_context *iscsi;
	struct scsi_task *t;

	if (pid)
		return pid;
	iscsi = proto_connect(lun);
	while ((t = iscsi_read16_sync(iscsi, lun, lba, bs, (int)bs, 0, 0, 0,
				      0, 0)) != NULL)
		scsi_free_scsi_task(t);
	_exit(0);
}

uint32_t proto_stale_reads(int lun, unsigned int bs, uint64_t lba,
			   uint32_t writes, bool fua, uint32_t *first)
{
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char *out = calloc(1, bs);
	pid_t readers[2];
	uint32_t stale = 0;

	ck_assert_ptr_nonnull(out);
	*first = 0;
	for (int r = 0; r < 2; r++)
		readers[r] = start_reader(lun, bs, lba);
	for (uint32_t n = 1; n <= writes; n++) {
		struct scsi_task *t;
		uint32_t got;

		memset(out, 0, bs);
		memcpy(out, &n, sizeof(n));
		proto_assert_good(iscsi_write16_sync(iscsi, lun, lba, out, bs,
			(int)bs, 0, 0, fua, 0, 0), "WRITE(16)", false);
		t = iscsi_read16_sync(iscsi, lun, lba, bs, (int)bs, 0, 0, 0, 0,
				      0);
		proto_assert_good(t, "READ(16)", true);
		memcpy(&got, t->datain.data, sizeof(got));
		scsi_free_scsi_task(t);
		if (got != n && !stale++)
			*first = n;
	}
	for (int r = 0; r < 2; r++)
		proto_child_end(readers[r]);
	iscsi_destroy_context(iscsi);
	free(out);
	return stale;
}

/* ---- task attributes: libiscsi sends every command SIMPLE ---- */

static int attr_opcode = -1, attr_value;

void proto_task_attribute(int opcode, int attr)
{
	attr_opcode = opcode;
	attr_value = attr;
}

/*
 * libiscsi sends each PDU's 48-byte header with send(2); this one, in
 * the test program, comes first in the symbol search, so it sees them.
 * A SCSI Command header (opcode 0x01, RFC 7143 11.3) whose CDB (byte
 * 32 on) starts with the armed opcode goes out with the armed task
 * attribute (byte 1, bits 0-2) in a copy; the rest as it is.
 */
ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	static ssize_t (*real)(int, const void *, size_t, int);
	const unsigned char *h = buf;
	unsigned char copy[48];

	if (!real)
		real = (ssize_t (*)(int, const void *, size_t, int))
			dlsym(RTLD_NEXT, "send");
	if (attr_opcode < 0 || n != sizeof(copy) || (h[0] & 0x3f) != 0x01 ||
	    h[32] != attr_opcode)
		return real(fd, buf, n, flags);
	memcpy(copy, buf, sizeof(copy));
	copy[1] = (unsigned char)((copy[1] & ~7u) | (unsigned)attr_value);
	return real(fd, copy, sizeof(copy), flags);
}
