/*
 * --fio-json: results in the layout of fio's --output-format=json+, so
 * that what reads fio's results (fio_jsonplus_clat2csv, fio-plot, a
 * site's own scripts) reads these too.  One fio "job" per measured
 * point; its read, write and sync sections are the READ, WRITE (or
 * WRITE FUA) and SYNCHRONIZE CACHE commands, each with fio's fields
 * that apply (iops, bw, runtime, clat_ns and lat_ns with percentiles
 * and the json+ bins, whose bucket layout, 64 per power of two, is the
 * histogram's own).  What fio has no field for (the discipline's
 * operation, device flushes per operation, the LUN's report) is under
 * "syncguard" in each job and at the top.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "syncbench.h"

/* fio's default percentile list */
static const double fio_pcts[] = { 1, 5, 10, 20, 30, 40, 50, 60, 70, 80,
				   90, 95, 99, 99.5, 99.9, 99.95, 99.99 };
#define NPCT (sizeof(fio_pcts) / sizeof(fio_pcts[0]))

/* @s as a JSON string (quotes and escapes by json-c) */
static void json_str(const char *s)
{
	json_object *o = json_object_new_string(s ? s : "");

	fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
	      stdout);
	json_object_put(o);
}

/* fio's stat block: "min","max","mean","stddev","N" (ns) and, with
 * @full, "percentile" and the json+ "bins" ({"value ns": count}) */
static void stat_ns(const struct histogram *h, bool full)
{
	double mean = syncguard_hist_mean(h);

	printf("{\"min\":%" PRIu64 ",\"max\":%" PRIu64 ",\"mean\":%.3f,"
	       "\"stddev\":%.3f,\"N\":%" PRIu64, h->count ? h->min_ns : 0,
	       h->max_ns, mean, syncguard_hist_stddev(h), h->count);
	if (full && h->count) {
		printf(",\"percentile\":{");
		for (size_t i = 0; i < NPCT; i++)
			printf("%s\"%f\":%" PRIu64, i ? "," : "", fio_pcts[i],
			       syncguard_hist_percentile(h, fio_pcts[i]));
		printf("},\"bins\":{");
		for (unsigned int i = 0, first = 1; i < HIST_BUCKETS; i++) {
			if (!h->bucket[i])
				continue;
			printf("%s\"%" PRIu64 "\":%" PRIu64, first ? "" : ",",
			       syncguard_hist_bucket_value(i), h->bucket[i]);
			first = 0;
		}
		printf("}");
	}
	printf("}");
}

/* fio's bw_ and iops_ sample statistics: of one sample, the whole
 * measured window (fio takes one each 500 ms; what reads them gets
 * the window's own rates, and _samples says how many there were) */
static void samples(double kibps, double iops)
{
	int n = kibps > 0 || iops > 0;

	printf(",\"bw_min\":%.0f,\"bw_max\":%.0f,\"bw_agg\":%.6f,"
	       "\"bw_mean\":%.6f,\"bw_dev\":0,\"bw_samples\":%d,"
	       "\"iops_min\":%.0f,\"iops_max\":%.0f,\"iops_mean\":%.6f,"
	       "\"iops_stddev\":0,\"iops_samples\":%d", kibps, kibps,
	       n ? 100.0 : 0, kibps, n, iops, iops, iops, n);
}

/* a read or write section: @h's commands of @xfer bytes over @secs */
static void direction(const struct histogram *h, uint64_t xfer, double secs)
{
	uint64_t bytes = h->count * xfer;
	double bps = secs > 0 ? (double)bytes / secs : 0;
	double iops = secs > 0 ? (double)h->count / secs : 0;

	printf("{\"io_bytes\":%" PRIu64 ",\"io_kbytes\":%" PRIu64
	       ",\"bw_bytes\":%.0f,\"bw\":%.0f,\"iops\":%.6f,\"runtime\":%.0f,"
	       "\"total_ios\":%" PRIu64 ",\"short_ios\":0,\"drop_ios\":0,"
	       "\"slat_ns\":{\"min\":0,\"max\":0,\"mean\":0,\"stddev\":0,"
	       "\"N\":0},\"clat_ns\":", bytes, bytes / 1024, bps, bps / 1024,
	       secs > 0 ? (double)h->count / secs : 0, secs * 1e3, h->count);
	/* timed from the moment the command went to libiscsi: no
	 * submission latency of its own, so lat = clat */
	stat_ns(h, true);
	printf(",\"lat_ns\":");
	stat_ns(h, false);
	samples(bps / 1024, iops);
	printf("}");
}

/* fio's latency_ns, latency_us and latency_ms: the percent of @h's
 * commands under each bound (2, 4, 10 ... 1000 of the unit; a
 * millisecond's last, at 2000 and over); a command is counted in the
 * unit of its latency, as fio does */
static void latency_buckets(const struct histogram *h)
{
	static const unsigned int bound[] = { 2, 4, 10, 20, 50, 100, 250, 500,
					      750, 1000, 2000 };
	static const char *const unit[] = { "ns", "us", "ms" };
	double pct[3][12] = { { 0 } };

	for (unsigned int i = 0; h->count && i < HIST_BUCKETS; i++) {
		uint64_t ns = syncguard_hist_bucket_value(i);
		int u = ns < 1000 ? 0 : ns < 1000000 ? 1 : 2;
		uint64_t v = u == 0 ? ns : u == 1 ? ns / 1000 : ns / 1000000;
		unsigned int k = 0;

		while (k < (u == 2 ? 11u : 10u) && v >= bound[k])
			k++;
		pct[u][k < 10 || u == 2 ? k : 9] +=
			(double)h->bucket[i] * 100 / (double)h->count;
	}
	for (int u = 0; u < 3; u++) {
		printf(",\"latency_%s\":{", unit[u]);
		for (unsigned int k = 0; k < (u == 2 ? 12u : 10u); k++) {
			if (k == 11)
				printf(",\">=2000\":%.6f", pct[u][k]);
			else
				printf("%s\"%u\":%.6f", k ? "," : "", bound[k],
				       pct[u][k]);
		}
		printf("}");
	}
}

/* fio's job-wide fields besides the sections: this process's CPU, the
 * depth kept (each session keeps the depth asked; each command is sent
 * and answered on its own), the latency buckets of every command */
static void job_wide(const struct result *r)
{
	static const char *const level[] = { "1", "2", "4", "8", "16", "32",
					     ">=64" };
	static const char *const batch[] = { "0", "4", "8", "16", "32", "64",
					     ">=64" };
	unsigned int at = 0;
	struct histogram all;

	while (at < 6 && r->p.qd >= 2u << at)
		at++;
	printf(",\"usr_cpu\":%.6f,\"sys_cpu\":%.6f,\"ctx\":%" PRIu64
	       ",\"majf\":%" PRIu64 ",\"minf\":%" PRIu64, r->usr_cpu,
	       r->sys_cpu, r->ctx, r->majf, r->minf);
	printf(",\"iodepth_level\":{");
	for (unsigned int k = 0; k < 7; k++)
		printf("%s\"%s\":%d", k ? "," : "", level[k],
		       k == at && r->ops ? 100 : 0);
	for (int d = 0; d < 2; d++) {
		printf("},\"iodepth_%s\":{", d ? "complete" : "submit");
		for (unsigned int k = 0; k < 7; k++)
			printf("%s\"%s\":%d", k ? "," : "", batch[k],
			       k == 1 && r->ops ? 100 : 0);
	}
	printf("}");
	syncguard_hist_init(&all);
	for (int k = 0; k < SYNCGUARD_NCMD; k++)
		syncguard_hist_merge(&all, &r->cmd_hist[k]);
	latency_buckets(&all);
	printf(",\"latency_depth\":%u,\"latency_target\":0,"
	       "\"latency_percentile\":100.000000,\"latency_window\":0",
	       r->p.qd);
}

/* fio's rw= for the point's mix */
static const char *fio_rw(const struct run_params *p)
{
	bool rnd = p->random_pct > 0;

	if (p->read_pct == 100)
		return rnd ? "randread" : "read";
	if (p->read_pct == 0)
		return rnd ? "randwrite" : "write";
	return rnd ? "randrw" : "rw";
}

/* "job options": what fio would be given for the same point */
static void job_options(const struct config *c, const struct result *r,
			const char *name)
{
	const struct run_params *p = &r->p;

	printf("\"job options\":{\"name\":");
	json_str(name);
	printf(",\"rw\":\"%s\",\"bs\":\"%" PRIu64 "\",\"iodepth\":\"%u\","
	       "\"numjobs\":\"%u\",\"direct\":\"1\",\"ioengine\":\"" PROG "\"",
	       fio_rw(p), p->xfer, p->qd, r->nsess);
	if (p->read_pct && p->read_pct < 100)
		printf(",\"rwmixread\":\"%u\"", p->read_pct);
	if (p->random_pct && p->random_pct < 100)
		printf(",\"percentage_random\":\"%u\"", p->random_pct);
	if (p->sync == SYNC_FUA)		/* the sg engine's option */
		printf(",\"writefua\":\"1\"");
	else if (p->sync == SYNC_FLUSH)
		printf(",\"fsync\":\"1\"");
	else if (p->sync == SYNC_EVERY)
		printf(",\"fsync\":\"%u\"", c->every);
	else if (p->sync == SYNC_END)
		printf(",\"end_fsync\":\"1\"");
	if (p->rate > 0)	/* an open loop: fio's own pacing options */
		printf(",\"rate_iops\":\"%.0f\",\"rate_process\":\"%s\"",
		       p->rate, p->arrivals == ARRIVALS_POISSON ? "poisson" :
		       "linear");
	if (c->warmup > 0)
		printf(",\"ramp_time\":\"%g\"", c->warmup);
	if (!p->bytes)
		printf(",\"runtime\":\"%g\",\"time_based\":\"1\"", p->seconds);
	printf("}");
}

void syncguard_fio_result(const struct config *c, const struct target_info *ti,
			  const struct result *r, bool first)
{
	const char *name = c->label ? c->label : r->p.label;
	const struct histogram *w = r->cmd_hist[CMD_WRITE_FUA].count ?
		&r->cmd_hist[CMD_WRITE_FUA] : &r->cmd_hist[CMD_WRITE];
	struct histogram none;
	char sy[24];

	syncguard_hist_init(&none);
	printf("%s{\"jobname\":", first ? "" : ",\n");
	json_str(name);
	printf(",\"groupid\":0,\"error\":%d,\"eta\":0,\"elapsed\":%.0f,",
	       r->errors ? 5 : 0, ceil(r->seconds));	/* 5: EIO */
	job_options(c, r, name);
	printf(",\"read\":");
	direction(&r->cmd_hist[CMD_READ], r->p.xfer, r->seconds);
	printf(",\"write\":");
	direction(w, r->p.xfer, r->seconds);
	printf(",\"trim\":");
	direction(&none, r->p.xfer, r->seconds);
	printf(",\"sync\":{\"total_ios\":%" PRIu64 ",\"lat_ns\":",
	       r->cmd_hist[CMD_SYNC_CACHE].count);
	stat_ns(&r->cmd_hist[CMD_SYNC_CACHE], true);
	printf("},\"job_runtime\":%.0f", r->seconds * 1e3);
	job_wide(r);
	printf(",\"syncguard\":{\"sync\":\"%s\",\"workload\":",
	       syncguard_sync_name(r->p.sync, c->every, sy, sizeof(sy)));
	json_str(r->p.label);
	if (r->p.rate > 0)
		printf(",\"asked_iops\":%.3f,\"rate_sustained\":%s",
		       r->p.rate, r->rate_sustained ? "true" : "false");
	printf(",\"ops\":%" PRIu64 ",\"iops\":%.3f,\"errors\":%" PRIu64
	       ",\"retries\":%" PRIu64 ",\"wce\":%d,\"dpofua\":%d,"
	       "\"device_flushes_per_op\":", r->ops, r->iops, r->errors,
	       r->retries, ti->wce, ti->dpofua);
	if (r->flushes_per_op >= 0)
		printf("%.6g", r->flushes_per_op);
	else
		printf("null");
	/* the discipline's operation (WRITE+SYNCHRONIZE CACHE as one under
	 * -s flush): fio has no such section */
	printf(",\"operation_lat_ns\":");
	stat_ns(&r->hist, true);
	printf("}}");
}

void syncguard_fio_target(const struct config *c, const struct target_info *ti)
{
	struct timespec now;
	char when[64], host[256] = "", url[1024];
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &now);
	localtime_r(&now.tv_sec, &tm);
	strftime(when, sizeof(when), "%a %b %e %H:%M:%S %Y", &tm);
	gethostname(host, sizeof(host) - 1);
	syncguard_shown_url(c->url, url, sizeof(url));
	printf("{\"fio version\":\"" PROG "-" SYNCGUARD_VERSION "\","
	       "\"timestamp\":%lld,\"timestamp_ms\":%lld,\"time\":\"%s\","
	       "\"syncguard\":{\"tool\":\"" PROG "\",\"tool_version\":\""
	       SYNCGUARD_VERSION "\",\"host\":", (long long)now.tv_sec,
	       (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000, when);
	json_str(host);
	printf(",\"command_line\":");
	syncguard_print_command_line(c);
	printf(",\"seed\":%" PRIu64 ",\"url\":", c->seed);
	json_str(url);
	printf(",\"target\":{\"name\":");
	json_str(ti->target);
	printf(",\"lun\":%d,\"block_size\":%u,\"physical_block_size\":%u,"
	       "\"blocks\":%" PRIu64 ",\"wce\":%d,\"dpofua\":%d,"
	       "\"wce_forced_off\":%s}},\"jobs\":[\n", ti->lun, ti->block_size,
	       ti->phys_block_size, ti->blocks, ti->wce, ti->dpofua,
	       ti->wce_forced_off ? "true" : "false");
}

void syncguard_fio_end(void)
{
	printf("\n]}\n");
}
