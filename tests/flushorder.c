/*
 * flushorder.so: an LD_PRELOAD shim under iscsi-syncbench that checks,
 * from libiscsi's side of the wire, that `--sync every:N` sends its k-th
 * SYNCHRONIZE CACHE of a session only once the session's first k x N
 * WRITEs are answered (a flush covers the writes completed before it,
 * SBC-3 5.22).  tests/syncbench.sh runs it.
 *
 *   FLUSHORDER_N=N FLUSHORDER_LOG=FILE LD_PRELOAD=build/flushorder.so \
 *     iscsi-syncbench -s every:N ...
 *
 * Each violation appends a line to FILE; at exit the shim appends
 * "flushes F writes W" (per session, the totals), so an empty run is
 * told from a clean one.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <iscsi/iscsi.h>

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
	const char *path = getenv("FLUSHORDER_LOG");
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
	const char *n_env = getenv("FLUSHORDER_N");
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

__attribute__((destructor)) static void totals(void)
{
	unsigned long f = 0, w = 0;

	for (int i = 0; i < MAX_CTX; i++) {
		f += ctx[i].flushes;
		w += ctx[i].writes;
	}
	say("flushes %lu writes %lu\n", f, w);
}
