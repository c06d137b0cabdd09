/*
 * fio's JSON (--output-format=json or json+, from fio itself or from
 * this tool's --fio-json) as rows of --compare and --plot, so that a
 * kernel-initiator run (openiscsi-syncbench, fio) sits beside a
 * libiscsi one.  Each job becomes a row: its rw, bs, iodepth and
 * numjobs map to the workload, size, depth and sessions; its sync
 * options to a discipline (writefua=1 or sync/dsync: fua, each write
 * durable when answered; fsync=1 or fdatasync=1: flush; fsync=N:
 * every:N; end_fsync=1: end); its write (or read; both together in a
 * mixed job) completion latency to the p99 and CDF, and its read, write
 * and sync sections to the
 * per-command columns.  fio has no WRITE+flush operation: under fsync
 * a job's p99 is left empty and only the per-command p99s compare.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rows.h"

/* a one-line error naming the file and the field; exits 2 */
static void bad(const char *file, const char *what, const char *field)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s: fio JSON: %s %s", file, what, field);
	syncguard_usage_error("%s", msg);
}

bool syncguard_is_fio_json(json_object *top)
{
	json_object *v;

	return json_object_is_type(top, json_type_object) &&
	       json_object_object_get_ex(top, "fio version", &v);
}

/* option @key of the job (else of the file's global options) as a
 * string, NULL when neither sets it */
static const char *option(json_object *job, json_object *global,
			  const char *key)
{
	json_object *opts, *v;

	if (json_object_object_get_ex(job, "job options", &opts) &&
	    json_object_object_get_ex(opts, key, &v))
		return json_object_get_string(v);
	if (global && json_object_object_get_ex(global, key, &v))
		return json_object_get_string(v);
	return NULL;
}

/* fio's size syntax, as bs takes it ("4k", "64KiB", "4096", the first
 * of "4k,8k" or "4k-16k"; k = 1024, fio's default kb_base): bytes, 0
 * when it is none */
static double fio_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (tolower((unsigned char)*end)) {
	case 'k': return v * 1024;
	case 'm': return v * 1024 * 1024;
	case 'g': return v * 1024 * 1024 * 1024;
	case '\0': case ',': case '-': case ':': return v;
	default: return 0;
	}
}

/* a numeric option, @dflt when not set; a value that is no number is a
 * usage error */
static double num_option(json_object *job, json_object *global,
			 const char *key, double dflt, const char *file)
{
	const char *s = option(job, global, key);
	char *end;
	double v;

	if (!s)
		return dflt;
	v = strtod(s, &end);
	if (end == s)
		bad(file, "not a number in job options:", key);
	return v;
}

/* rw= into the row's mix and workload name (this tool's names) */
static void mix(json_object *job, json_object *global, const char *file,
		struct row *r)
{
	static const struct { const char *rw; int read, rnd; } map[] = {
		{ "read", 100, 0 }, { "write", 0, 0 }, { "randread", 100, 1 },
		{ "randwrite", 0, 1 }, { "rw", -1, 0 }, { "readwrite", -1, 0 },
		{ "randrw", -1, 1 } };
	const char *rw = option(job, global, "rw");
	char kind[16];
	size_t i;

	rw = rw ? rw : option(job, global, "readwrite");
	rw = rw ? rw : "read";			/* fio's default */
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strncmp(rw, map[i].rw, strlen(map[i].rw)) &&
		    (!rw[strlen(map[i].rw)] || rw[strlen(map[i].rw)] == ':'))
			break;
	if (i == sizeof(map) / sizeof(map[0])) {
		char what[128];

		snprintf(what, sizeof(what), "rw=%.60s, which this tool has no "
			 "workload for:", rw);
		bad(file, what, "rw");
	}
	r->read_pct = map[i].read >= 0 ? map[i].read :
		      num_option(job, global, "rwmixread", 50, file);
	r->random_pct = num_option(job, global, "percentage_random",
				   map[i].rnd ? 100 : 0, file);
	snprintf(kind, sizeof(kind), "%s", r->read_pct == 0 ? "write" :
		 r->read_pct == 100 ? "read" : "mixed");
	if (r->random_pct == 0 || r->random_pct == 100)
		snprintf(r->workload, sizeof(r->workload), "%s-%s",
			 r->random_pct ? "rand" : "seq", kind);
	else
		snprintf(r->workload, sizeof(r->workload), "rand%.0f-%s",
			 r->random_pct, kind);
}

/* the sync options into this tool's discipline */
static void discipline(json_object *job, json_object *global,
		       const char *file, struct row *r)
{
	const char *sync = option(job, global, "sync");
	double fsync = num_option(job, global, "fsync", 0, file);
	double fdatasync = num_option(job, global, "fdatasync", 0, file);
	double n = fsync > 0 ? fsync : fdatasync;

	if (num_option(job, global, "writefua", 0, file) > 0 ||
	    (sync && (!strcmp(sync, "1") || !strcmp(sync, "sync") ||
		      !strcmp(sync, "dsync"))))
		snprintf(r->sync, sizeof(r->sync), "fua");
	else if (n == 1)
		snprintf(r->sync, sizeof(r->sync), "flush");
	else if (n > 1)
		snprintf(r->sync, sizeof(r->sync), "every:%.0f", n);
	else if (num_option(job, global, "end_fsync", 0, file) > 0)
		snprintf(r->sync, sizeof(r->sync), "end");
	else
		snprintf(r->sync, sizeof(r->sync), "none");
}

/* a stat block's percentiles ({"99.000000": ns, ...}) as a CDF in us,
 * in increasing order; the number of points */
static int percentiles(json_object *stat, double pts[ROW_CDF][2])
{
	json_object *pct;
	int n = 0;

	if (!json_object_object_get_ex(stat, "percentile", &pct) ||
	    !json_object_is_type(pct, json_type_object))
		return 0;
	json_object_object_foreach(pct, key, val) {
		double p = strtod(key, NULL), v = json_object_get_double(val);
		int at = n;

		if (n == ROW_CDF || p <= 0 || p > 100)
			continue;
		while (at > 0 && pts[at - 1][0] > p) {	/* insertion sort */
			pts[at][0] = pts[at - 1][0];
			pts[at][1] = pts[at - 1][1];
			at--;
		}
		pts[at][0] = p;
		pts[at][1] = v / 1e3;
		n++;
	}
	return n;
}

/* the p99 of a CDF, -1 when it has none */
static double p99_of(double pts[ROW_CDF][2], int n)
{
	for (int i = 0; i < n; i++)
		if (pts[i][0] == 99)
			return pts[i][1];
	return -1;
}

/* the share (a percentile) of the operations of CDF @c (@n points) that
 * took at most @us */
static double share_within(double c[ROW_CDF][2], int n, double us)
{
	double p = 0;

	for (int i = 0; i < n && c[i][1] <= us; i++)
		p = c[i][0];
	return p;
}

/* The CDF of reads and writes taken together, as this tool's operation
 * latency is, from fio's two (reads' @a with @wa operations, writes' @b
 * with @wb) into @out: at each percentile of @b, the least latency
 * either reports at which that share of both had completed (an upper
 * bound, from the points fio gives).  The number of points. */
static int merge_cdfs(double a[ROW_CDF][2], int na, double wa,
		      double b[ROW_CDF][2], int nb, double wb,
		      double out[ROW_CDF][2])
{
	int n = 0;

	for (int i = 0; i < nb; i++) {
		double best = -1;

		for (int j = 0; j < na + nb; j++) {
			double us = j < na ? a[j][1] : b[j - na][1];

			if ((best < 0 || us < best) &&
			    wa * share_within(a, na, us) +
			    wb * share_within(b, nb, us) >= b[i][0] * (wa + wb))
				best = us;
		}
		if (best >= 0) {
			out[n][0] = b[i][0];
			out[n++][1] = best;
		}
	}
	return n;
}

/* section @dir ("read", "write", "sync") of @job: its operations, and
 * its latency CDF into the row's command @k */
static double section(json_object *job, const char *dir, int k,
		      const char *file, struct row *r)
{
	json_object *sec, *stat;
	const char *lat = strcmp(dir, "sync") ? "clat_ns" : "lat_ns";
	double ios;

	if (!json_object_object_get_ex(job, dir, &sec) ||
	    !json_object_is_type(sec, json_type_object)) {
		if (strcmp(dir, "sync"))	/* old fio: no sync section */
			bad(file, "a job without its section", dir);
		return 0;
	}
	ios = json_object_get_double(json_object_object_get(sec, "total_ios"));
	if (ios > 0 && json_object_object_get_ex(sec, lat, &stat)) {
		r->cmd_ncdf[k] = percentiles(stat, r->cmd_cdf[k]);
		r->cmd_p99[k] = p99_of(r->cmd_cdf[k], r->cmd_ncdf[k]);
	}
	return ios;
}

static double field(json_object *job, const char *dir, const char *key)
{
	json_object *sec, *v;

	return json_object_object_get_ex(job, dir, &sec) &&
	       json_object_object_get_ex(sec, key, &v) ?
	       json_object_get_double(v) : 0;
}

/* a job of several transfer sizes (bsrange, bssplit, "4k-64k", reads
 * and writes of different sizes: "4k,8k") has no one size to pair
 * with: refused rather than shown as its first */
static void one_size(json_object *job, json_object *global, const char *file)
{
	static const char *const ranges[] = { "bsrange", "blocksize_range",
					      "bssplit" };
	const char *bs = option(job, global, "bs");

	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
		if (option(job, global, ranges[i]))
			bad(file, "several transfer sizes, which this tool has "
			    "no one row for:", ranges[i]);
	bs = bs ? bs : option(job, global, "blocksize");
	if (bs && (strchr(bs, '-') || strchr(bs, ':') ||
		   (strchr(bs, ',') && fio_size(bs) !=
		    fio_size(strchr(bs, ',') + 1))))
		bad(file, "several transfer sizes, which this tool has no one "
		    "row for:", "bs");
}

/* A job this tool wrote (--fio-json) carries what fio has no field
 * for under "syncguard": its discipline and workload as this tool names
 * them (flush-only, which no fio option says), and the operation's
 * latency (WRITE+SYNCHRONIZE CACHE as one under flush). */
static void own_fields(json_object *job, struct row *r)
{
	json_object *sg, *v, *op;

	if (!json_object_object_get_ex(job, "syncguard", &sg) ||
	    !json_object_is_type(sg, json_type_object))
		return;
	if (json_object_object_get_ex(sg, "sync", &v) &&
	    json_object_is_type(v, json_type_string))
		snprintf(r->sync, sizeof(r->sync), "%s",
			 json_object_get_string(v));
	if (json_object_object_get_ex(sg, "workload", &v) &&
	    json_object_is_type(v, json_type_string))
		snprintf(r->workload, sizeof(r->workload), "%s",
			 json_object_get_string(v));
	if (json_object_object_get_ex(sg, "iops", &v))
		r->iops = json_object_get_double(v);
	if (json_object_object_get_ex(sg, "operation_lat_ns", &op)) {
		r->ncdf = percentiles(op, r->cdf);
		r->p99 = p99_of(r->cdf, r->ncdf);
	}
}

/* How many of @jobs have the name of job @i: fio reports each clone of
 * numjobs under its job's name, unless group_reporting sums them into
 * one (given bare, that option leaves no trace in fio's JSON). */
static size_t same_name(json_object *jobs, size_t i)
{
	json_object *a, *b;
	size_t n = 0;

	if (!json_object_object_get_ex(json_object_array_get_idx(jobs, i),
				       "jobname", &a))
		return 1;
	for (size_t k = 0; k < json_object_array_length(jobs); k++)
		if (json_object_object_get_ex(json_object_array_get_idx(jobs,
					      k), "jobname", &b) &&
		    json_object_equal(a, b))
			n++;
	return n ? n : 1;
}

/* Row @r of job @job (@clones: the jobs of its name, same_name). */
static void job_row(json_object *job, json_object *global, int f,
		    const char *file, size_t clones, struct row *r)
{
	json_object *e;
	const char *bs;
	double reads, writes;
	int w, k;

	memset(r, 0, sizeof(*r));
	r->asked = r->curve_step = r->curve_pct = -1;	/* a closed loop */
	if (!json_object_is_type(job, json_type_object) ||
	    !json_object_object_get_ex(job, "job options", NULL))
		bad(file, "a job without", "job options");
	r->file = f;
	syncguard_file_label(file, r->label, sizeof(r->label));
	mix(job, global, file, r);
	discipline(job, global, file, r);
	one_size(job, global, file);
	bs = option(job, global, "bs");
	bs = bs ? bs : option(job, global, "blocksize");
	r->size = bs ? fio_size(bs) : 4096;	/* fio's default */
	if (r->size <= 0)
		bad(file, "a size this tool cannot read in job options:", "bs");
	r->qd = num_option(job, global, "iodepth", 1, file);
	/* numjobs clones report one job each, unless group_reporting
	 * sums them into this one (then the only job of its name) */
	r->sessions = option(job, global, "group_reporting") || clones == 1 ?
		      num_option(job, global, "numjobs", 1, file) : 1;
	w = !strcmp(r->sync, "fua") ? CMD_WRITE_FUA : CMD_WRITE;
	for (int k = 0; k < SYNCGUARD_NCMD; k++)
		r->cmd_p99[k] = -1;
	reads = section(job, "read", CMD_READ, file, r);
	writes = section(job, "write", w, file, r);
	section(job, "sync", CMD_SYNC_CACHE, file, r);
	r->iops = field(job, "read", "iops") + field(job, "write", "iops");
	r->mbps = (field(job, "read", "bw_bytes") +
		   field(job, "write", "bw_bytes")) / 1e6;
	r->errors = json_object_object_get_ex(job, "error", &e) &&
		    json_object_get_int(e) ? 1 : 0;
	/* the row's own latency: the writes' (a read job's reads'), or
	 * both's where the job does both; none under fsync, where fio keeps
	 * the write and the flush apart */
	k = r->cmd_ncdf[w] ? w : CMD_READ;
	r->ncdf = r->cmd_ncdf[k];
	memcpy(r->cdf, r->cmd_cdf[k], sizeof(r->cdf));
	if (reads > 0 && writes > 0 && r->cmd_ncdf[w] && r->cmd_ncdf[CMD_READ])
		r->ncdf = merge_cdfs(r->cmd_cdf[CMD_READ],
				     r->cmd_ncdf[CMD_READ], reads,
				     r->cmd_cdf[w], r->cmd_ncdf[w], writes,
				     r->cdf);
	r->p99 = p99_of(r->cdf, r->ncdf);
	if (strcmp(r->sync, "none") && strcmp(r->sync, "fua"))
		r->p99 = -1, r->ncdf = 0;	/* no WRITE+flush operation */
	own_fields(job, r);
	syncguard_gnuplot_safe(r->label);
	syncguard_gnuplot_safe(r->workload);
}

int syncguard_fio_rows(json_object *top, int f, const char *file,
		       struct row *rows, int n)
{
	json_object *jobs, *global = NULL;
	size_t njobs;

	if (!json_object_object_get_ex(top, "jobs", &jobs) ||
	    !json_object_is_type(jobs, json_type_array))
		bad(file, "no array of", "jobs");
	json_object_object_get_ex(top, "global options", &global);
	njobs = json_object_array_length(jobs);
	for (size_t i = 0; i < njobs; i++) {
		if (n == MAX_ROWS) {
			fprintf(stderr, PROG ": more than %d results in the "
				"files: compare fewer\n", MAX_ROWS);
			return -1;
		}
		job_row(json_object_array_get_idx(jobs, i), global, f, file,
			same_name(jobs, i), &rows[n++]);
	}
	return n;
}
