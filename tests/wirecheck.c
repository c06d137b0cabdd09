/*
 * wirecheck.so: an LD_PRELOAD shim under iscsi-syncbench that checks,
 * from libiscsi's side of the wire, what the tool sends.  tests/
 * syncbench.sh runs it.
 *
 *   WIRECHECK_EVERY=N WIRECHECK_LOG=FILE LD_PRELOAD=build/wirecheck.so \
 *     iscsi-syncbench ...
 *
 * - With WIRECHECK_EVERY=N (for `--sync every:N`): a session's k-th
 *   SYNCHRONIZE CACHE(16) goes only once its first k x N WRITE(16)s are
 *   answered (a flush covers the writes completed before it, SBC-3
 *   5.22); each violation appends a line to FILE.
 * - Always: READ(16)s of blocks no WRITE(16) of this process wrote
 *   before are counted (a preset that reads what it did not write reads
 *   holes, which a sparse LUN answers without touching the device).
 * - With WIRECHECK_DPOFUA0=1: MODE SENSE answers read as DPOFUA=0 (a
 *   LUN without FUA, which tgt never reports: its sbc.c sets the bit
 *   for every LUN), for the tool's warning about the fua discipline.
 *
 * - Always: the SCSI Command and SCSI Data-Out PDU headers libiscsi
 *   sends are counted, and those sent while their socket was not corked
 *   (TCP_CORK, set by the tool around its writes) apart: uncorked, a
 *   header leaves as a segment of its own, without its data.
 *
 * - Always: blocks a WRITE(16) writes that a WRITE(16) of this process
 *   wrote before are counted (the points of a sweep each draw their own
 *   offsets: one that repeated the last point's rewrites all of them).
 *
 * At exit it appends "command_pdus C uncorked U", then "flushes F
 * writes W reads R unwritten_reads U", then "rewritten_blocks B"
 * (totals), so that an empty run is told from a clean one.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define MAX_CTX 64
#define MAX_WRITES (1u << 20)

/* one per iSCSI context (session); the tool's control session sends no
 * WRITE(16) or SYNCHRONIZE CACHE(16) */
static struct ctx {
	struct iscsi_context *iscsi;
	uint32_t writes, flushes;
	unsigned char *answered;	/* [write number]: its answer came */
} ctx[MAX_CTX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* the logical blocks this process's WRITE(16)s went to (one LUN) */
#define MAX_BLOCKS (1u << 26)
static unsigned char *written;
static unsigned long reads, unwritten_reads, rewritten_blocks;

static void note_blocks(uint64_t lba, uint64_t n, bool write, bool *hole)
{
	if (!written)
		written = calloc(MAX_BLOCKS / 8, 1);
	for (uint64_t b = lba; written && b < lba + n && b < MAX_BLOCKS; b++) {
		if (write && written[b / 8] & (1u << (b % 8)))
			rewritten_blocks++;
		if (write)
			written[b / 8] |= (unsigned char)(1u << (b % 8));
		else if (!(written[b / 8] & (1u << (b % 8))))
			*hole = true;
	}
}

/* a write's callback, wrapped: notes the answer, then the tool's own */
struct wrapped {
	iscsi_command_cb cb;
	void *priv;
	struct ctx *c;
	uint32_t no;
};

static struct ctx *ctx_of(struct iscsi_context *iscsi)
{
	for (int i = 0; i < MAX_CTX; i++)
		if (ctx[i].iscsi == iscsi)
			return &ctx[i];
	for (int i = 0; i < MAX_CTX; i++)
		if (!ctx[i].iscsi) {
			ctx[i].iscsi = iscsi;
			ctx[i].answered = calloc(MAX_WRITES, 1);
			return ctx[i].answered ? &ctx[i] : NULL;
		}
	return NULL;
}

static void say(const char *fmt, unsigned long a, unsigned long b)
{
	const char *path = getenv("WIRECHECK_LOG");
	FILE *f = path ? fopen(path, "a") : NULL;

	if (f) {
		fprintf(f, fmt, a, b);
		fclose(f);
	}
}

static void write_done(struct iscsi_context *iscsi, int status, void *data,
		       void *priv)
{
	struct wrapped *w = priv;

	w->c->answered[w->no] = 1;
	w->cb(iscsi, status, data, w->priv);
	free(w);
}

struct scsi_task *iscsi_write16_task(struct iscsi_context *iscsi, int lun,
				     uint64_t lba, unsigned char *data,
				     uint32_t datalen, int blocksize,
				     int wrprotect, int dpo, int fua,
				     int fua_nv, int group_number,
				     iscsi_command_cb cb, void *private_data)
{
	static struct scsi_task *(*real)(struct iscsi_context *, int,
					 uint64_t, unsigned char *, uint32_t,
					 int, int, int, int, int, int,
					 iscsi_command_cb, void *);
	struct wrapped *w = malloc(sizeof(*w));
	struct ctx *c;

	if (!real)
		real = dlsym(RTLD_NEXT, "iscsi_write16_task");
	pthread_mutex_lock(&lock);
	c = ctx_of(iscsi);
	if (blocksize > 0)
		note_blocks(lba, datalen / (uint32_t)blocksize, true, NULL);
	pthread_mutex_unlock(&lock);
	if (!w || !c || c->writes + 1 >= MAX_WRITES) {
		free(w);
		return real(iscsi, lun, lba, data, datalen, blocksize,
			    wrprotect, dpo, fua, fua_nv, group_number, cb,
			    private_data);
	}
	*w = (struct wrapped){ cb, private_data, c, ++c->writes };
	return real(iscsi, lun, lba, data, datalen, blocksize, wrprotect, dpo,
		    fua, fua_nv, group_number, write_done, w);
}

struct scsi_task *iscsi_synchronizecache16_task(struct iscsi_context *iscsi,
						int lun, uint64_t lba,
						uint32_t num_blocks, int syncnv,
						int immed, iscsi_command_cb cb,
						void *private_data)
{
	static struct scsi_task *(*real)(struct iscsi_context *, int,
					 uint64_t, uint32_t, int, int,
					 iscsi_command_cb, void *);
	const char *n_env = getenv("WIRECHECK_EVERY");
	unsigned long n = n_env ? strtoul(n_env, NULL, 10) : 0, upto;
	struct ctx *c;

	if (!real)
		real = dlsym(RTLD_NEXT, "iscsi_synchronizecache16_task");
	pthread_mutex_lock(&lock);
	c = ctx_of(iscsi);
	if (c) {
		upto = (unsigned long)++c->flushes * n;
		for (unsigned long i = 1; i <= upto && i <= c->writes; i++)
			if (!c->answered[i]) {
				say("flush %lu sent before write %lu was "
				    "answered\n", c->flushes, i);
				break;
			}
	}
	pthread_mutex_unlock(&lock);
	return real(iscsi, lun, lba, num_blocks, syncnv, immed, cb,
		    private_data);
}

struct scsi_task *iscsi_read16_iov_task(struct iscsi_context *iscsi, int lun,
					uint64_t lba, uint32_t datalen,
					int blocksize, int rdprotect, int dpo,
					int fua, int fua_nv, int group_number,
					iscsi_command_cb cb, void *private_data,
					struct scsi_iovec *iov, int niov)
{
	static struct scsi_task *(*real)(struct iscsi_context *, int,
					 uint64_t, uint32_t, int, int, int,
					 int, int, int, iscsi_command_cb,
					 void *, struct scsi_iovec *, int);
	bool hole = false;

	if (!real)
		real = dlsym(RTLD_NEXT, "iscsi_read16_iov_task");
	pthread_mutex_lock(&lock);
	reads++;
	if (blocksize > 0)
		note_blocks(lba, datalen / (uint32_t)blocksize, false, &hole);
	unwritten_reads += hole;
	pthread_mutex_unlock(&lock);
	return real(iscsi, lun, lba, datalen, blocksize, rdprotect, dpo, fua,
		    fua_nv, group_number, cb, private_data, iov, niov);
}

/* the sockets corked now, by descriptor */
#define MAX_FD 1024
static bool corked[MAX_FD];
static unsigned long command_pdus, uncorked_pdus;

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	static int (*real)(int, int, int, const void *, socklen_t);

	if (!real)
		real = dlsym(RTLD_NEXT, "setsockopt");
	if (fd >= 0 && fd < MAX_FD && level == IPPROTO_TCP &&
	    name == TCP_CORK && val && len >= (socklen_t)sizeof(int))
		corked[fd] = *(const int *)val != 0;
	return real(fd, level, name, val, len);
}

/* libiscsi sends each PDU's 48-byte basic header with send() */
ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	static ssize_t (*real)(int, const void *, size_t, int);
	const unsigned char *h = buf;

	if (!real)
		real = dlsym(RTLD_NEXT, "send");
	if (n == 48 && fd >= 0 && fd < MAX_FD &&
	    ((h[0] & 0x3f) == 0x01 || (h[0] & 0x3f) == 0x05)) {
		pthread_mutex_lock(&lock);
		command_pdus++;
		uncorked_pdus += !corked[fd];
		pthread_mutex_unlock(&lock);
	}
	return real(fd, buf, n, flags);
}

/* the tool's MODE SENSE answers, unmarshalled: DPOFUA cleared if asked */
void *scsi_datain_unmarshall(struct scsi_task *task)
{
	static void *(*real)(struct scsi_task *);
	struct scsi_mode_sense *ms;

	if (!real)
		real = dlsym(RTLD_NEXT, "scsi_datain_unmarshall");
	ms = real(task);
	if (ms && getenv("WIRECHECK_DPOFUA0") &&
	    (task->cdb[0] == SCSI_OPCODE_MODESENSE6 ||
	     task->cdb[0] == SCSI_OPCODE_MODESENSE10))
		ms->device_specific_parameter &= (uint8_t)~0x10;
	return ms;
}

__attribute__((destructor)) static void totals(void)
{
	const char *path = getenv("WIRECHECK_LOG");
	unsigned long f = 0, w = 0;
	FILE *out = path ? fopen(path, "a") : NULL;

	for (int i = 0; i < MAX_CTX; i++) {
		f += ctx[i].flushes;
		w += ctx[i].writes;
	}
	if (out) {
		fprintf(out, "command_pdus %lu uncorked %lu\n", command_pdus,
			uncorked_pdus);
		fprintf(out, "flushes %lu writes %lu reads %lu unwritten_reads "
			"%lu\n", f, w, reads, unwritten_reads);
		fprintf(out, "rewritten_blocks %lu\n", rewritten_blocks);
		fclose(out);
	}
}
