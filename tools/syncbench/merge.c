/*
 * Merging the JSON results of runs made at the same time (several
 * processes or hosts started together with --start-at: --merge; the
 * LUNs of a run over several URLs: multi.c) into one result per point.
 * Latency histograms are added bucket by bucket, so the merged
 * percentiles are those of all the operations together, never an
 * average of percentiles; operations and bytes add up (the runs
 * overlapped), and IOPS and MB/s are theirs over the longest run's time
 * (not the sum of each run's rate).  Each merged result lists
 * its sources.  The files must be runs of the same points by the same
 * version of the tool: a mismatch is a usage error naming the file and
 * the field.  The merged result is reported as any other (report.c), so
 * that a merged file can be compared, plotted and merged again.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "syncbench.h"

/* what is taken of one result */
struct part {
	char label[64], workload[64], sync[24];
	int64_t block_size, qd, sessions, read_pct, random_pct;
	int64_t ops, reads, writes, flushes, errors, retries, unanswered;
	int64_t unit_attentions, busy_answers, verify_checked, verify_bad;
	double seconds, iops, mbps, fpo, queued_us, sess_min, sess_max;
	bool mode_changed, interrupted, verify_ran, verify_complete;
	struct histogram hist, retried;
	struct histogram cmd[SYNCGUARD_NCMD];	/* "commands" */
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

/* a number; a null is @null_value where @nullable, else an error */
static double num_of(json_object *o, const char *key, const char *file,
		     bool nullable, double null_value)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		bad(file, "no field:", key);
	if (!v && nullable)
		return null_value;
	if (!(json_object_is_type(v, json_type_int) ||
	      json_object_is_type(v, json_type_double)))
		bad(file, "no number in", key);
	return json_object_get_double(v);
}

static bool bool_of(json_object *o, const char *key, const char *file)
{
	return json_object_get_boolean(member(o, key, json_type_boolean,
					      file));
}

static void str_of(json_object *o, const char *key, char *out, size_t len,
		   const char *file)
{
	snprintf(out, len, "%s",
		 json_object_get_string(member(o, key, json_type_string, file)));
}

/* a histogram object (tools/histogram.h) into @h */
static void hist_from(json_object *lh, struct histogram *h, const char *file)
{
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

/* the "latency_hist" of @o into @h */
static void hist_of(json_object *o, struct histogram *h, const char *file)
{
	hist_from(member(o, "latency_hist", json_type_object, file), h, file);
}

/* each command's histogram, from the result's "commands" */
static void commands_of(json_object *o, struct part *p, const char *file)
{
	json_object *cmds = member(o, "commands", json_type_object, file);

	for (int k = 0; k < SYNCGUARD_NCMD; k++)
		hist_of(member(cmds, syncguard_cmd_key[k], json_type_object,
			       file), &p->cmd[k], file);
}

/* the counters of a result that are plain sums or flags */
static void counts_of(json_object *o, struct part *p, const char *file)
{
	json_object *verify = member(o, "verify", json_type_object, file);

	p->ops = int_of(o, "ops", file);
	p->reads = int_of(o, "reads", file);
	p->writes = int_of(o, "writes", file);
	p->flushes = int_of(o, "flushes", file);
	p->errors = int_of(o, "errors", file);
	p->retries = int_of(o, "retries", file);
	p->unanswered = int_of(o, "unanswered", file);
	p->unit_attentions = int_of(o, "unit_attentions", file);
	p->busy_answers = int_of(o, "busy_answers", file);
	p->mode_changed = bool_of(o, "mode_parameters_changed", file);
	p->interrupted = bool_of(o, "interrupted", file);
	p->verify_ran = bool_of(verify, "ran", file);
	p->verify_complete = bool_of(verify, "complete", file);
	p->verify_checked = int_of(verify, "checked", file);
	p->verify_bad = int_of(verify, "mismatches", file);
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
	json_object *spread = member(o, "session_iops", json_type_object, file);

	closed_loop(o, file);
	str_of(o, "label", p->label, sizeof(p->label), file);
	str_of(o, "workload", p->workload, sizeof(p->workload), file);
	str_of(o, "sync", p->sync, sizeof(p->sync), file);
	p->block_size = int_of(o, "block_size", file);
	p->qd = int_of(o, "queue_depth", file);
	p->sessions = int_of(o, "sessions", file);
	p->read_pct = int_of(o, "read_pct", file);
	p->random_pct = int_of(o, "random_pct", file);
	counts_of(o, p, file);
	p->seconds = num_of(o, "seconds", file, false, 0);
	p->iops = num_of(o, "iops", file, false, 0);
	p->mbps = num_of(o, "mb_per_s", file, false, 0);
	/* null: syncguard's counters could not be read */
	p->fpo = num_of(o, "device_flushes_per_op", file, true, -1);
	p->queued_us = num_of(o, "initiator_queued_us", file, true, 0);
	p->sess_min = num_of(spread, "min", file, false, 0);
	p->sess_max = num_of(spread, "max", file, false, 0);
	hist_of(o, &p->hist, file);
	hist_from(member(o, "retried_hist", json_type_object, file),
		  &p->retried, file);
	commands_of(o, p, file);
}

/* @file's results and, in @version (@vlen bytes), the tool version
 * that wrote them; *@top the whole run (its target report) */
static json_object *results_of(const char *file, char *version,
			       size_t vlen, json_object **top)
{
	char tool[64];

	*top = json_object_from_file(file);
	if (!*top)
		bad(file, "not a whole JSON run (empty, cut short, or not JSON):",
		    "the file");
	str_of(*top, "tool", tool, sizeof(tool), file);
	if (strcmp(tool, PROG))
		bad(file, "not a run of " PROG ":", "tool");
	if (int_of(*top, "version", file) != 1)
		bad(file, "another version of the format:", "version");
	str_of(*top, "tool_version", version, vlen, file);
	return member(*top, "results", json_type_array, file);
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

static void add_part(struct part *m, const struct part *p, bool first)
{
	if (first) {
		*m = *p;
		m->fpo = p->fpo >= 0 ? p->fpo * (double)p->ops : -1;
		m->queued_us = p->queued_us * (double)p->ops;
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
	m->unit_attentions += p->unit_attentions;
	m->busy_answers += p->busy_answers;
	m->verify_checked += p->verify_checked;
	m->verify_bad += p->verify_bad;
	m->mode_changed |= p->mode_changed;
	m->interrupted |= p->interrupted;
	m->verify_ran |= p->verify_ran;
	m->verify_complete &= p->verify_complete;
	/* device flushes per operation: known only if known for all */
	m->fpo = m->fpo >= 0 && p->fpo >= 0 ? m->fpo + p->fpo *
		 (double)p->ops : -1;
	m->queued_us += p->queued_us * (double)p->ops;
	m->sess_min = p->sess_min < m->sess_min ? p->sess_min : m->sess_min;
	m->sess_max = p->sess_max > m->sess_max ? p->sess_max : m->sess_max;
	if (p->seconds > m->seconds)
		m->seconds = p->seconds;
	syncguard_hist_merge(&m->hist, &p->hist);
	syncguard_hist_merge(&m->retried, &p->retried);
	for (int k = 0; k < SYNCGUARD_NCMD; k++)
		syncguard_hist_merge(&m->cmd[k], &p->cmd[k]);
}

/* "every:8" into SYNC_EVERY and 8 */
static enum sync_mode sync_of(const char *s, unsigned int *every,
			      const char *file)
{
	static const char *const names[] = { "none", "fua", "flush", "every",
					     "end", "flush-only" };

	*every = 0;
	if (!strncmp(s, "every:", 6)) {
		*every = (unsigned int)strtoul(s + 6, NULL, 10);
		if (*every)
			return SYNC_EVERY;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (i != SYNC_EVERY && !strcmp(s, names[i]))
			return (enum sync_mode)i;
	bad(file, "a discipline this tool does not know:", "sync");
	return SYNC_NONE;
}

/* merged part @m as a result @r (its strings stay in @m) */
static void result_of(struct part *m, struct result *r, unsigned int *every,
		      const char *file)
{
	memset(r, 0, sizeof(*r));
	r->p = (struct run_params){ .label = m->workload,
		.xfer = (uint64_t)m->block_size, .qd = (unsigned int)m->qd,
		.read_pct = (unsigned int)m->read_pct,
		.random_pct = (unsigned int)m->random_pct,
		.seconds = m->seconds };
	r->p.sync = sync_of(m->sync, every, file);
	r->seconds = m->seconds;
	r->ops = (uint64_t)m->ops;
	r->reads = (uint64_t)m->reads;
	r->writes = (uint64_t)m->writes;
	r->flushes = (uint64_t)m->flushes;
	/* flush-only's operations move no data */
	r->bytes = r->p.sync == SYNC_FLUSH_ONLY ? 0 : r->ops * r->p.xfer;
	r->errors = (uint64_t)m->errors;
	r->retries = (uint64_t)m->retries;
	r->unanswered = (uint64_t)m->unanswered;
	/* over the longest run's time, not the sum of each run's rate: a
	 * run that ended early (its LUN died) would be counted at its own
	 * rate for the whole time */
	r->iops = m->seconds > 0 ? (double)m->ops / m->seconds : 0;
	r->mbps = m->seconds > 0 ? (double)r->bytes / m->seconds / 1e6 : 0;
	r->hist = m->hist;
	r->retried_hist = m->retried;
	memcpy(r->cmd_hist, m->cmd, sizeof(r->cmd_hist));
	r->nsess = (unsigned int)m->sessions;
	r->flushes_per_op = m->fpo >= 0 && m->ops ? m->fpo / (double)m->ops :
			    -1;
	r->queued_ns = (uint64_t)(m->queued_us * 1e3);
	r->queued_n = (uint64_t)m->ops;
	r->unit_attentions = (uint64_t)m->unit_attentions;
	r->busy_answers = (uint64_t)m->busy_answers;
	r->mode_changed = m->mode_changed;
	r->verify_checked = (uint64_t)m->verify_checked;
	r->verify_bad = (uint64_t)m->verify_bad;
	r->verify_ran = m->verify_ran;
	r->verify_complete = m->verify_complete;
	r->interrupted = m->interrupted;
	r->merged = true;
	r->sess_min = m->sess_min;
	r->sess_max = m->sess_max;
}

/* the first file's target report (block sizes, WCE, DPOFUA) */
static void target_of(json_object *top, struct target_info *ti,
		      const char *file)
{
	json_object *t = member(top, "target", json_type_object, file), *off;

	memset(ti, 0, sizeof(*ti));
	str_of(t, "name", ti->target, sizeof(ti->target), file);
	ti->lun = (int)int_of(t, "lun", file);
	ti->block_size = (uint32_t)int_of(t, "block_size", file);
	ti->phys_block_size = (uint32_t)int_of(t, "physical_block_size", file);
	ti->blocks = (uint64_t)int_of(t, "blocks", file);
	ti->wce = (int)int_of(t, "wce", file);
	ti->dpofua = (int)int_of(t, "dpofua", file);
	ti->wce_changeable = (int)int_of(t, "wce_changeable", file);
	ti->max_transfer = (uint32_t)int_of(t, "max_transfer_blocks", file);
	/* --cache-off's mark; files of older versions have none */
	ti->wce_forced_off = json_object_object_get_ex(t, "wce_forced_off",
						       &off) &&
			     json_object_get_boolean(off);
}

static void source_of(const struct part *p, const char *name,
		      struct merge_source *s)
{
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->label, sizeof(s->label), "%.*s",
		 (int)sizeof(s->label) - 1, p->label);
	s->ops = (uint64_t)p->ops;
	s->errors = (uint64_t)p->errors;
	s->iops = p->iops;
	s->p99_us = p->hist.count ? (double)
		syncguard_hist_percentile(&p->hist, 99) / 1e3 : -1;
}

/*
 * The same run given twice (its operations would count twice): the same
 * host, start, seed and command line.  A merged file names the runs it
 * holds ("merged_from", written by merge_header), so a run is found
 * twice also in a merged file and one of its runs, or the merged file
 * given twice.  Every run's identity is kept for merge_header.
 */
static json_object *merged_from;

/* @top's runs, each { host, start, seed, command_line }, appended to
 * @ids with their file's index in @from (up to MAX_RUNS) */
#define MAX_RUNS 256
static void runs_of(json_object *top, int f, json_object *ids, int *from)
{
	static const char *const keys[] = { "host", "start", "seed",
					    "command_line" };
	json_object *list, *id = json_object_new_object(), *v;

	if (json_object_object_get_ex(top, "merged_from", &list) &&
	    json_object_is_type(list, json_type_array)) {
		json_object_put(id);
		for (size_t i = 0; i < json_object_array_length(list) &&
		     json_object_array_length(ids) < MAX_RUNS; i++) {
			from[json_object_array_length(ids)] = f;
			json_object_array_add(ids, json_object_get(
				json_object_array_get_idx(list, i)));
		}
		return;
	}
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (json_object_object_get_ex(top, keys[k], &v))
			json_object_object_add(id, keys[k], json_object_get(v));
	if (json_object_object_length(id) != (int)(sizeof(keys) /
						   sizeof(keys[0])) ||
	    json_object_array_length(ids) >= MAX_RUNS) {
		json_object_put(id);	/* not identified: never "the same" */
		return;
	}
	from[json_object_array_length(ids)] = f;
	json_object_array_add(ids, id);
}

static void same_runs(json_object **top, char **files, int n)
{
	static int from[MAX_RUNS];
	json_object *ids = json_object_new_array();

	for (int f = 0; f < n; f++)
		runs_of(top[f], f, ids, from);
	for (size_t a = 0; a < json_object_array_length(ids); a++)
		for (size_t b = a + 1; b < json_object_array_length(ids); b++)
			if (json_object_equal(json_object_array_get_idx(ids, a),
					      json_object_array_get_idx(ids, b)))
				bad(files[from[b]], "the same run as another "
				    "file, or in it (host, start, seed, command "
				    "line):", files[from[a]]);
	json_object_put(merged_from);
	merged_from = ids;
}

int syncguard_merge_report(const struct config *c, char **files,
			   char **names, int n,
			   void (*header)(const struct config *c,
					  const struct target_info *ti))
{
	static struct part src[MAX_MERGE], m;
	static struct merge_source sources[MAX_MERGE];
	static struct result r;
	json_object *res[MAX_MERGE] = { NULL }, *top[MAX_MERGE] = { NULL };
	struct config mc = *c;
	struct target_info ti, each;
	char version[2][32];
	size_t points;
	int status = 0;

	if (n < 1 || n > MAX_MERGE)
		return 2;
	/* another version of the tool may time or count otherwise */
	for (int f = 0; f < n; f++) {
		res[f] = results_of(files[f], version[f > 0],
				    sizeof(version[0]), &top[f]);
		if (f && strcmp(version[0], version[1]))
			bad(files[f], "another tool version than the first "
			    "file's:", "tool_version");
	}
	points = json_object_array_length(res[0]);
	if (!points)
		bad(files[0], "no results in it (a run interrupted before its "
		    "first):", "results");
	for (int f = 1; f < n; f++)
		if (json_object_array_length(res[f]) != points)
			bad(files[f], "another number of results than the "
			    "first file's:", "results");
	/* every point checked before anything is printed: a mismatch at
	 * the last point must not leave half a JSON document behind */
	for (size_t i = 0; i < points; i++)
		for (int f = 0; f < n; f++) {
			part_of(json_object_array_get_idx(res[f], i), &src[f],
				files[f]);
			if (f)
				same_point(&src[0], &src[f], files[f]);
		}
	same_runs(top, files, n);
	target_of(top[0], &ti, files[0]);
	/* LUNs that differ in WCE or DPOFUA: the merged run's is unknown
	 * (-1), each source says its own */
	for (int f = 1; f < n; f++) {
		target_of(top[f], &each, files[f]);
		ti.wce = each.wce == ti.wce ? ti.wce : -1;
		ti.dpofua = each.dpofua == ti.dpofua ? ti.dpofua : -1;
		ti.wce_forced_off = ti.wce_forced_off && each.wce_forced_off;
	}
	header(c, &ti);
	for (size_t i = 0; i < points; i++) {
		for (int f = 0; f < n; f++) {
			part_of(json_object_array_get_idx(res[f], i), &src[f],
				files[f]);
			if (f)
				same_point(&src[0], &src[f], files[f]);
			add_part(&m, &src[f], f == 0);
			source_of(&src[f], names[f], &sources[f]);
			target_of(top[f], &each, files[f]);
			sources[f].wce = each.wce;
		}
		result_of(&m, &r, &mc.every, files[0]);
		r.src = sources;
		r.nsrc = (unsigned int)n;
		syncguard_report_result(&mc, &ti, &r, i == 0);
		if (r.errors || r.unanswered || r.verify_bad)
			status = 1;
	}
	syncguard_report_end(c);
	for (int f = 0; f < n; f++)
		json_object_put(top[f]);
	return status;
}

/* --merge's opening: no URL of its own, the label "merged", the first
 * file's target report */
static void merge_header(const struct config *c, const struct target_info *ti)
{
	json_object *name = json_object_new_string(ti->target);

	printf("{\"tool\":\"" PROG "\",\"version\":1,\"tool_version\":\""
	       SYNCGUARD_VERSION "\",\"merged\":%d,\"label\":\"merged\","
	       "\"target\":{\"name\":%s,\"lun\":%d,\"block_size\":%u,"
	       "\"physical_block_size\":%u,\"blocks\":%" PRIu64 ",\"wce\":%d,"
	       "\"wce_changeable\":%d,\"dpofua\":%d,\"max_transfer_blocks\":%u,"
	       "\"wce_forced_off\":%s},\"merged_from\":%s,\"results\":[\n",
	       c->nfiles, json_object_to_json_string(name), ti->lun,
	       ti->block_size, ti->phys_block_size, ti->blocks, ti->wce,
	       ti->wce_changeable, ti->dpofua, ti->max_transfer,
	       ti->wce_forced_off ? "true" : "false", merged_from ?
	       json_object_to_json_string_ext(merged_from,
					      JSON_C_TO_STRING_PLAIN) : "[]");
	json_object_put(name);
}

int syncguard_merge_files(const struct config *c)
{
	struct config mc = *c;

	if (c->nfiles < 2 || c->nfiles > MAX_MERGE)
		syncguard_usage_error("--merge takes 2 to %s JSON files",
				      MAX_MERGE_TEXT);
	mc.format = OUT_JSON;
	mc.label = "merged";
	return syncguard_merge_report(&mc, c->files, c->files, c->nfiles,
				      merge_header);
}
