/*
 * --merge: the JSON results of runs made at the same time (several
 * processes, on one host or several: --start-at starts them together)
 * into one result per workload.  Latency histograms are added bucket by
 * bucket, so the merged percentiles are those of all the operations
 * together, never an average of percentiles; IOPS and MB/s add up (the
 * runs overlapped), the time is the longest run's.  Each merged result
 * lists its sources.  The files must be runs of the same points: a
 * mismatch is a usage error naming the file and the field.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "syncbench.h"

/* what --merge takes of one result */
struct part {
	char label[64], workload[64], sync[24];
	int64_t block_size, qd, sessions, read_pct, random_pct;
	int64_t ops, reads, writes, flushes, errors, retries, unanswered;
	double seconds, iops, mbps;
	struct histogram hist;
};

static void bad(const char *file, const char *what, const char *field)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "--merge: %s: %s %s", file, what, field);
	syncguard_usage_error("%s", msg);
}

static json_object *member(json_object *o, const char *key, json_type type,
			   const char *file)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, type))
		bad(file, "no field, or not of its type:", key);
	return v;
}

static int64_t int_of(json_object *o, const char *key, const char *file)
{
	return json_object_get_int64(member(o, key, json_type_int, file));
}

static double num_of(json_object *o, const char *key, const char *file)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !(json_object_is_type(v, json_type_int) ||
	      json_object_is_type(v, json_type_double)))
		bad(file, "no number in", key);
	return json_object_get_double(v);
}

static void str_of(json_object *o, const char *key, char *out, size_t len,
		   const char *file)
{
	snprintf(out, len, "%s",
		 json_object_get_string(member(o, key, json_type_string, file)));
}

/* the "latency_hist" of result @o into @h */
static void hist_of(json_object *o, struct histogram *h, const char *file)
{
	json_object *lh = member(o, "latency_hist", json_type_object, file);
	json_object *bins = member(lh, "bins", json_type_array, file);

	if (int_of(lh, "sub_bits", file) != HIST_SUB_BITS)
		bad(file, "another histogram layout:", "latency_hist.sub_bits");
	syncguard_hist_init(h);
	h->count = (uint64_t)int_of(lh, "count", file);
	h->sum_ns = (uint64_t)int_of(lh, "sum_ns", file);
	h->min_ns = h->count ? (uint64_t)int_of(lh, "min_ns", file) : UINT64_MAX;
	h->max_ns = (uint64_t)int_of(lh, "max_ns", file);
	for (size_t i = 0; i < json_object_array_length(bins); i++) {
		json_object *b = json_object_array_get_idx(bins, i);
		int64_t at, n;

		if (!json_object_is_type(b, json_type_array) ||
		    json_object_array_length(b) != 2)
			bad(file, "a bin that is not [index, count] in",
			    "latency_hist.bins");
		at = json_object_get_int64(json_object_array_get_idx(b, 0));
		n = json_object_get_int64(json_object_array_get_idx(b, 1));
		if (at < 0 || at >= HIST_BUCKETS || n < 0)
			bad(file, "a bin out of range in", "latency_hist.bins");
		h->bucket[at] += (uint64_t)n;
	}
}

/* an open-loop result's asked rate and curve step would be lost from
 * the merged one, which would read as a closed loop's */
static void closed_loop(json_object *o, const char *file)
{
	static const char *const keys[] = { "asked_iops", "curve_step" };
	json_object *v;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (json_object_object_get_ex(o, keys[i], &v) && v)
			bad(file, "an open-loop result (--rate, --curve), which "
			    "--merge does not take:", keys[i]);
}

static void part_of(json_object *o, struct part *p, const char *file)
{
	closed_loop(o, file);
	str_of(o, "label", p->label, sizeof(p->label), file);
	str_of(o, "workload", p->workload, sizeof(p->workload), file);
	str_of(o, "sync", p->sync, sizeof(p->sync), file);
	p->block_size = int_of(o, "block_size", file);
	p->qd = int_of(o, "queue_depth", file);
	p->sessions = int_of(o, "sessions", file);
	p->read_pct = int_of(o, "read_pct", file);
	p->random_pct = int_of(o, "random_pct", file);
	p->ops = int_of(o, "ops", file);
	p->reads = int_of(o, "reads", file);
	p->writes = int_of(o, "writes", file);
	p->flushes = int_of(o, "flushes", file);
	p->errors = int_of(o, "errors", file);
	p->retries = int_of(o, "retries", file);
	p->unanswered = int_of(o, "unanswered", file);
	p->seconds = num_of(o, "seconds", file);
	p->iops = num_of(o, "iops", file);
	p->mbps = num_of(o, "mb_per_s", file);
	hist_of(o, &p->hist, file);
}

/* @file's results: the whole file is one run's JSON */
static json_object *results_of(const char *file)
{
	json_object *top = json_object_from_file(file), *res;
	char tool[64];

	if (!top)
		bad(file, "not JSON of a whole run:", json_util_get_last_err());
	str_of(top, "tool", tool, sizeof(tool), file);
	if (strcmp(tool, PROG))
		bad(file, "not a run of " PROG ":", "tool");
	if (int_of(top, "version", file) != 1)
		bad(file, "another version of the format:", "version");
	res = member(top, "results", json_type_array, file);
	json_object_get(res);
	json_object_put(top);
	return res;
}

/* @p, of file @file, may merge with @first, of the first file */
static void same_point(const struct part *first, const struct part *p,
		       const char *file)
{
	static const char *const names[] = { "block_size", "queue_depth",
		"read_pct", "random_pct" };
	const int64_t a[] = { first->block_size, first->qd, first->read_pct,
			      first->random_pct };
	const int64_t b[] = { p->block_size, p->qd, p->read_pct,
			      p->random_pct };

	if (strcmp(first->workload, p->workload))
		bad(file, "another workload than the first file's:", "workload");
	if (strcmp(first->sync, p->sync))
		bad(file, "another discipline than the first file's:", "sync");
	for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++)
		if (a[i] != b[i])
			bad(file, "another value than the first file's:",
			    names[i]);
}

static double pct_us(const struct histogram *h, double pct)
{
	return (double)syncguard_hist_percentile(h, pct) / 1e3;
}

static void print_merged(const struct part *m, const struct part *src,
			 char **files, int nfiles, bool first)
{
	static const double cdf[] = { 1, 5, 10, 25, 50, 75, 90, 95, 99,
				      99.9, 99.99 };
	const struct histogram *h = &m->hist;

	printf("%s{\"label\":\"merged\",\"workload\":\"%s\",\"sync\":\"%s\","
	       "\"block_size\":%" PRId64 ",\"queue_depth\":%" PRId64
	       ",\"sessions\":%" PRId64 ",\"read_pct\":%" PRId64
	       ",\"random_pct\":%" PRId64 ",\"seconds\":%.3f,\"ops\":%" PRId64
	       ",\"reads\":%" PRId64 ",\"writes\":%" PRId64 ",\"flushes\":%"
	       PRId64 ",\"errors\":%" PRId64 ",\"retries\":%" PRId64
	       ",\"unanswered\":%" PRId64 ",\"iops\":%.1f,\"mb_per_s\":%.3f,",
	       first ? "" : ",\n", m->workload, m->sync, m->block_size, m->qd,
	       m->sessions, m->read_pct, m->random_pct, m->seconds, m->ops,
	       m->reads, m->writes, m->flushes, m->errors, m->retries,
	       m->unanswered, m->iops, m->mbps);
	if (h->count)
		printf("\"latency_us\":{\"mean\":%.1f,\"p50\":%.1f,\"p90\":%.1f,"
		       "\"p99\":%.1f,\"p99_9\":%.1f,\"max\":%.1f},\"cdf\":[",
		       syncguard_hist_mean(h) / 1e3, pct_us(h, 50),
		       pct_us(h, 90), pct_us(h, 99), pct_us(h, 99.9),
		       (double)h->max_ns / 1e3);
	else
		printf("\"latency_us\":{\"mean\":null,\"p50\":null,\"p90\":null,"
		       "\"p99\":null,\"p99_9\":null,\"max\":null},\"cdf\":[");
	for (size_t i = 0; h->count && i < sizeof(cdf) / sizeof(cdf[0]); i++)
		printf("%s[%g,%.1f]", i ? "," : "", cdf[i], pct_us(h, cdf[i]));
	printf("],\"sources\":[");
	for (int f = 0; f < nfiles; f++) {
		json_object *name = json_object_new_string(files[f]);
		json_object *label = json_object_new_string(src[f].label);

		/* a file's name may hold any byte: json-c escapes it */
		printf("%s{\"file\":%s,\"label\":%s,\"ops\":%" PRId64
		       ",\"iops\":%.1f,\"p99\":%.1f,\"errors\":%" PRId64 "}",
		       f ? "," : "", json_object_to_json_string(name),
		       json_object_to_json_string(label), src[f].ops,
		       src[f].iops, src[f].hist.count ?
		       pct_us(&src[f].hist, 99) : 0.0, src[f].errors);
		json_object_put(name);
		json_object_put(label);
	}
	printf("]}");
}

static void add_part(struct part *m, const struct part *p, bool first)
{
	if (first) {
		*m = *p;
		return;
	}
	m->sessions += p->sessions;
	m->ops += p->ops;
	m->reads += p->reads;
	m->writes += p->writes;
	m->flushes += p->flushes;
	m->errors += p->errors;
	m->retries += p->retries;
	m->unanswered += p->unanswered;
	m->iops += p->iops;		/* the runs overlapped: rates add */
	m->mbps += p->mbps;
	if (p->seconds > m->seconds)
		m->seconds = p->seconds;
	syncguard_hist_merge(&m->hist, &p->hist);
}

int syncguard_merge_files(const struct config *c)
{
	json_object *res[MAX_MERGE];
	static struct part src[MAX_MERGE], m;
	size_t n;

	if (c->nfiles < 2 || c->nfiles > MAX_MERGE)
		syncguard_usage_error("--merge takes 2 to %s JSON files",
				      MAX_MERGE_TEXT);
	for (int f = 0; f < c->nfiles; f++)
		res[f] = results_of(c->files[f]);
	n = json_object_array_length(res[0]);
	for (int f = 1; f < c->nfiles; f++)
		if (json_object_array_length(res[f]) != n)
			bad(c->files[f], "another number of results than the "
			    "first file's:", "results");
	printf("{\"tool\":\"" PROG "\",\"version\":1,\"merged\":%d,"
	       "\"label\":\"merged\",\"results\":[\n", c->nfiles);
	for (size_t i = 0; i < n; i++) {
		for (int f = 0; f < c->nfiles; f++) {
			part_of(json_object_array_get_idx(res[f], i), &src[f],
				c->files[f]);
			if (f)
				same_point(&src[0], &src[f], c->files[f]);
			add_part(&m, &src[f], f == 0);
		}
		print_merged(&m, src, c->files, c->nfiles, i == 0);
	}
	printf("\n]}\n");
	for (int f = 0; f < c->nfiles; f++)
		json_object_put(res[f]);
	return 0;
}
