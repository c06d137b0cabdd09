/*
 * Results: a human table, JSON (one result object per line inside the
 * results array, so --compare and other tools can read them line by
 * line) or CSV; interval lines; what the target reported.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "syncbench.h"

static const double cdf_points[] = { 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9,
				     99.99 };
#define NCDF (sizeof(cdf_points) / sizeof(cdf_points[0]))

const char *const syncguard_cmd_name[SYNCGUARD_NCMD] = {
	"READ", "WRITE", "WRITE FUA", "SYNCHRONIZE CACHE" };
const char *const syncguard_cmd_key[SYNCGUARD_NCMD] = {
	"read", "write", "write_fua", "synchronize_cache" };

static double us(const struct result *r, double pct)
{
	return (double)syncguard_hist_percentile(&r->hist, pct) / 1e3;
}

static const char *bit(int v)
{
	return v < 0 ? "unknown" : v ? "1" : "0";
}

void syncguard_shown_url(const char *url, char *out, size_t len)
{
	const char *auth = strstr(url, "://"), *at, *pct;

	/* the user part ends at an '@' after the scheme, wherever the first
	 * '/' is: a secret may hold '/' (base64), and an IQN never holds
	 * '@'; the last one, so that a secret holding '@' (refused by
	 * check_url, whose message shows the URL) stays hidden too */
	auth = auth ? auth + 3 : url;
	at = strrchr(auth, '@');
	pct = at ? memchr(auth, '%', (size_t)(at - auth)) : NULL;
	if (pct)
		snprintf(out, len, "%.*s%%***%s", (int)(pct - url), url, at);
	else
		snprintf(out, len, "%s", url);
}

/* @in as the inside of a JSON string */
static void json_escaped(const char *in, char *out, size_t len)
{
	size_t n = 0;

	for (; *in && n + 7 < len; in++) {
		unsigned char ch = (unsigned char)*in;

		if (ch == '"' || ch == '\\')
			n += (size_t)snprintf(out + n, len - n, "\\%c", ch);
		else if (ch < 0x20)
			n += (size_t)snprintf(out + n, len - n, "\\u%04x", ch);
		else
			out[n++] = (char)ch;
	}
	out[n] = '\0';
}

void syncguard_print_command_line(const struct config *c)
{
	char line[4096] = "", url[1024];
	size_t n = 0;
	json_object *o;

	for (int i = 0; i < c->argc && n + 1 < sizeof(line); i++) {
		/* a URL's CHAP secret stays out of the record */
		syncguard_shown_url(c->argv[i], url, sizeof(url));
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s",
				      i ? " " : "", strstr(c->argv[i], "://") ?
				      url : c->argv[i]);
	}
	o = json_object_new_string(line);
	fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
	      stdout);
	json_object_put(o);
}

/* ,"tool_version":..,"host":..,"start":..,"command_line":.. */
static void run_details(const struct config *c)
{
	char host[256] = "", when[32];
	/* the measuring starts then: with --start-at, at the time asked
	 * (or later, when the login made it late) */
	time_t now = syncguard_run_start > 0 ? (time_t)syncguard_run_start :
		     time(NULL);
	struct tm tm;
	json_object *o;

	gethostname(host, sizeof(host) - 1);
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	o = json_object_new_string(host);
	printf(",\"tool_version\":\"" SYNCGUARD_VERSION "\",\"host\":%s,"
	       "\"start\":\"%s\",\"command_line\":",
	       json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), when);
	json_object_put(o);
	syncguard_print_command_line(c);
}

void syncguard_report_target(const struct config *c, const struct target_info *ti)
{
	char url[1024], esc[2048], name[600];

	syncguard_shown_url(c->url, url, sizeof(url));
	if (c->format == OUT_FIO) {
		syncguard_fio_target(c, ti);
		return;
	}
	if (c->format == OUT_JSON) {
		json_escaped(url, esc, sizeof(esc));
		json_escaped(ti->target, name, sizeof(name));
		/* no --label: null, not "" (each result has its own) */
		printf("{\"tool\":\"" PROG "\",\"version\":1");
		run_details(c);
		printf(",\"url\":\"%s\","
		       "\"seed\":%" PRIu64 ",\"label\":%s%s%s,\"target\":{\"name\":\"%s\",\"lun\":%d,"
		       "\"block_size\":%u,\"physical_block_size\":%u,\"blocks\":%"
		       PRIu64 ",\"wce\":%d,\"wce_changeable\":%d,\"dpofua\":%d,"
		       "\"max_transfer_blocks\":%u,\"wce_forced_off\":%s,"
		       "\"write_protected\":%s},"
		       "\"results\":[\n", esc, c->seed, c->label ? "\"" : "",
		       c->label ? c->label : "null", c->label ? "\"" : "", name, ti->lun,
		       ti->block_size, ti->phys_block_size, ti->blocks, ti->wce,
		       ti->wce_changeable, ti->dpofua, ti->max_transfer,
		       ti->wce_forced_off ? "true" : "false",
		       ti->write_protected ? "true" : "false");
		return;
	}
	if (c->format == OUT_CSV)
		return;
	printf("target:  %s\n", url);
	printf("lun:     %" PRIu64 " blocks of %u bytes (%u-byte physical "
	       "blocks), WCE=%s%s, DPOFUA=%s, maximum transfer %s\n",
	       ti->blocks, ti->block_size, ti->phys_block_size, bit(ti->wce),
	       ti->wce_forced_off ? " (set by --cache-off for the run; restored "
	       "after)" : ti->wce_changeable > 0 ? " (changeable)" : "",
	       bit(ti->dpofua),
	       ti->max_transfer ? "reported" : "not reported");
	if (ti->write_protected)
		printf("         write protected (WP=1): reads and SYNCHRONIZE "
		       "CACHE only\n");
	if (ti->max_transfer)
		printf("         MAXIMUM TRANSFER LENGTH %u blocks\n",
		       ti->max_transfer);
	printf("seed:    %" PRIu64 " (--seed %" PRIu64 " repeats these "
	       "offsets)\n", c->seed, c->seed);
}

void syncguard_report_interval(const struct config *c, const struct interval *iv)
{
	if (c->format != OUT_TEXT)
		return;
	if (iv->iops > 0)
		printf("  %8.1fs %10.0f IOPS %9.2f MB/s  p99 %8.0f us\n",
		       iv->t, iv->iops, iv->mbps, iv->p99_us);
	else	/* nothing completed: no latency to give */
		printf("  %8.1fs %10.0f IOPS %9.2f MB/s  p99        - us\n",
		       iv->t, iv->iops, iv->mbps);
}

static void session_spread(const struct result *r, double *mn, double *avg,
			   double *mx)
{
	if (r->merged) {	/* the sessions' own IOPS are not kept */
		*mn = r->sess_min;
		*mx = r->sess_max;
		*avg = r->nsess ? r->iops / r->nsess : 0;
		return;
	}
	*mn = *mx = *avg = r->nsess ? r->sess[0].iops : 0;
	for (unsigned int i = 1; i < r->nsess; i++) {
		*mn = r->sess[i].iops < *mn ? r->sess[i].iops : *mn;
		*mx = r->sess[i].iops > *mx ? r->sess[i].iops : *mx;
		*avg += r->sess[i].iops;
	}
	if (r->nsess)
		*avg /= r->nsess;
}

/* the run's name: --label, else the workload's */
static const char *run_label(const struct config *c, const struct result *r)
{
	return c->label ? c->label : r->p.label;
}

/* The mean time a counted command waited in libiscsi's queue before it
 * went out, us (-1: none timed) */
static double queued_us(const struct result *r)
{
	return r->queued_n ? (double)r->queued_ns / (double)r->queued_n / 1e3 :
	       -1;
}

/* Commands in flight on the wire, all sessions, the run's mean (Little's
 * law: IOPS x the latency outside the initiator's queue); -1 unknown */
static double wire_qd(const struct result *r)
{
	double lat_s = syncguard_hist_mean(&r->hist) / 1e9, q = queued_us(r);

	if (!r->ops || q < 0 || r->iops <= 0)
		return -1;
	lat_s -= q / 1e6;
	return lat_s > 0 ? r->iops * lat_s : 0;
}

/* a merged result's runs, one line each */
static void print_sources_text(const struct result *r)
{
	for (unsigned int i = 0; i < r->nsrc; i++) {
		const struct merge_source *s = &r->src[i];

		printf("    %s (WCE=%s): %" PRIu64 " operations, %.0f IOPS, "
		       "p99 ", s->name, bit(s->wce), s->ops, s->iops);
		if (s->p99_us >= 0)
			printf("%.1f us", s->p99_us);
		else
			printf("-");
		printf(", errors %" PRIu64 "\n", s->errors);
	}
}

/* ,"sources":[{"source":..,"label":..,"ops":..,"iops":..,"p99":..,
 * "errors":..},...] of a merged result (nothing for another) */
static void print_sources_json(const struct result *r)
{
	if (!r->nsrc)
		return;
	printf(",\"sources\":[");
	for (unsigned int i = 0; i < r->nsrc; i++) {
		const struct merge_source *s = &r->src[i];
		/* a file's name may hold any byte: json-c escapes it */
		json_object *name = json_object_new_string(s->name);
		json_object *label = json_object_new_string(s->label);
		char p99[32] = "null";

		if (s->p99_us >= 0)
			snprintf(p99, sizeof(p99), "%.1f", s->p99_us);
		printf("%s{\"source\":%s,\"label\":%s,\"ops\":%" PRIu64
		       ",\"iops\":%.1f,\"p99\":%s,\"errors\":%" PRIu64
		       ",\"wce\":%d}", i ? "," : "",
		       json_object_to_json_string(name),
		       json_object_to_json_string(label), s->ops, s->iops, p99,
		       s->errors, s->wce);
		json_object_put(name);
		json_object_put(label);
	}
	printf("]");
}

/* Kinds of command with an answer counted in @r */
static int command_kinds(const struct result *r)
{
	int n = 0;

	for (int k = 0; k < SYNCGUARD_NCMD; k++)
		n += r->cmd_hist[k].count > 0;
	return n;
}

/* Latency per command, when the run sent more than one kind: under -s
 * flush the operation's latency above is the WRITE and its SYNCHRONIZE
 * CACHE together, and a mix blends reads with writes. */
static void print_commands_text(const struct result *r)
{
	if (command_kinds(r) < 2)
		return;
	printf("  per command, us: %10s %9s %9s %9s %9s %9s\n", "count",
	       "mean", "p50", "p99", "p99.9", "max");
	for (int k = 0; k < SYNCGUARD_NCMD; k++) {
		const struct histogram *h = &r->cmd_hist[k];

		if (!h->count)
			continue;
		printf("    %-17s %10" PRIu64 " %9.1f %9.1f %9.1f %9.1f %9.1f\n",
		       syncguard_cmd_name[k], h->count,
		       syncguard_hist_mean(h) / 1e3,
		       (double)syncguard_hist_percentile(h, 50) / 1e3,
		       (double)syncguard_hist_percentile(h, 99) / 1e3,
		       (double)syncguard_hist_percentile(h, 99.9) / 1e3,
		       (double)h->max_ns / 1e3);
	}
}

static void print_text(const struct config *c, const struct result *r)
{
	char sy[24];
	double mn, avg, mx;

	printf("%s: sync=%s, %" PRIu64 " bytes, QD %u x %u session(s), %u%% "
	       "reads, %u%% random, %.1f s\n", r->p.label,
	       syncguard_sync_name(r->p.sync, c->every, sy, sizeof(sy)), r->p.xfer,
	       r->p.qd, r->nsess, r->p.read_pct, r->p.random_pct, r->seconds);
	printf("  %" PRIu64 " operations: %.0f IOPS, %.2f MB/s; errors %" PRIu64
	       ", retries %" PRIu64 "%s\n", r->ops, r->iops, r->mbps, r->errors,
	       r->retries, r->interrupted ? " (interrupted)" : "");
	if (!r->ops)	/* else it would print a latency of 0 us */
		printf("  latency us: none (no operation completed)\n");
	else
		printf("  latency us: mean %.1f  p50 %.1f  p90 %.1f  p99 %.1f  "
		       "p99.9 %.1f  max %.1f\n", syncguard_hist_mean(&r->hist) / 1e3,
		       us(r, 50), us(r, 90), us(r, 99), us(r, 99.9),
		       (double)r->hist.max_ns / 1e3);
	print_commands_text(r);
	print_sources_text(r);
	syncguard_rate_text(r);
	if (r->retried_hist.count)
		printf("  retried: %" PRIu64 " operations (after %" PRIu64
		       " unit attentions, %" PRIu64 " BUSY or TASK SET FULL), "
		       "latency us mean %.1f p99 %.1f max %.1f (counted in the "
		       "latency above too)\n", r->retried_hist.count,
		       r->unit_attentions, r->busy_answers,
		       syncguard_hist_mean(&r->retried_hist) / 1e3,
		       (double)syncguard_hist_percentile(&r->retried_hist, 99) /
		       1e3, (double)r->retried_hist.max_ns / 1e3);
	if (r->mode_changed)
		printf("  the LUN's mode parameters changed during the run "
		       "(MODE PARAMETERS CHANGED: another initiator or the "
		       "administrator): its WCE may no longer be the one above\n");
	if (wire_qd(r) >= 0)
		printf("  on the wire: %.1f commands in flight (mean, of %u "
		       "asked); %.1f us queued in the initiator first (mean)\n",
		       wire_qd(r), r->p.qd * r->nsess, queued_us(r));
	if (r->nsess > 1) {
		session_spread(r, &mn, &avg, &mx);
		printf("  per session IOPS: min %.0f  avg %.0f  max %.0f\n", mn,
		       avg, mx);
	}
	/* three significant digits below 0.001: one flush in a --bytes
	 * run with -s end would read 0.000; in fixed notation, as the
	 * other lines (not 3.05e-05) */
	if (r->flushes_per_op >= 0) {
		double f = r->flushes_per_op;
		int digits = 3;
		char v[32];

		while (f > 0 && f < 0.001 && digits < 12 &&
		       f * pow(10, digits) < 100)
			digits++;
		snprintf(v, sizeof(v), "%.*f", digits, f);
		printf("  target: %s device syncs per operation (fdatasync "
		       "calls + RWF_DSYNC writes, from syncguard's counters)\n",
		       v);
	}
	if (r->target_writes[0])
		printf("  target writes: %s\n  target flush batching: %s\n"
		       "  target sync loop: %s\n  target engine: %s\n",
		       r->target_writes, r->target_batching,
		       r->target_sync_loop, r->target_engine);
	if (r->verify_checked)	/* a stopped read-back too: "incomplete" */
		printf("  verify: %" PRIu64 " blocks checked, %" PRIu64
		       " mismatches%s\n", r->verify_checked, r->verify_bad,
		       r->verify_complete ? "" : " (incomplete)");
}

/* device syncs per operation as text, or @unknown when the target's
 * counters could not be read (another backing store, a dead target) */
static void flushes_per_op(const struct result *r, char *buf, size_t len,
			   const char *unknown)
{
	if (r->flushes_per_op >= 0)	/* %.4f would read 0 for 1 in 131072 */
		snprintf(buf, len, "%.4g", r->flushes_per_op);
	else
		snprintf(buf, len, "%s", unknown);
}

/* A latency of @r in microseconds as text, @none when no operation
 * completed (rather than 0.0 us) */
static const char *lat(const struct result *r, double v, char *buf,
		       const char *none)
{
	if (!r->ops)
		return none;
	snprintf(buf, 32, "%.1f", v);
	return buf;
}

void syncguard_print_commands_json(const struct histogram *cmd)
{
	printf(",\"commands\":{");
	for (int k = 0; k < SYNCGUARD_NCMD; k++) {
		printf("%s\"%s\":{\"ops\":%" PRIu64 ",\"latency_us\":{",
		       k ? "," : "", syncguard_cmd_key[k], cmd[k].count);
		syncguard_hist_print_summary(stdout, &cmd[k]);
		printf("},\"cdf\":[");
		for (size_t i = 0; cmd[k].count && i < NCDF; i++)
			printf("%s[%g,%.1f]", i ? "," : "", cdf_points[i],
			       (double)syncguard_hist_percentile(&cmd[k],
						cdf_points[i]) / 1e3);
		printf("],\"latency_hist\":");
		syncguard_hist_print_json(stdout, &cmd[k]);
		printf("}");
	}
	printf("}");
}

static void print_json(const struct config *c, const struct result *r,
		       bool first)
{
	char sy[24], fpo[32], l[6][32], wq[32] = "null", qu[32] = "null";
	char rl[3][32] = { "null", "null", "null" };
	double mn, avg, mx;

	session_spread(r, &mn, &avg, &mx);
	flushes_per_op(r, fpo, sizeof(fpo), "null");
	if (wire_qd(r) >= 0) {
		snprintf(wq, sizeof(wq), "%.1f", wire_qd(r));
		snprintf(qu, sizeof(qu), "%.1f", queued_us(r));
	}
	if (r->retried_hist.count) {
		snprintf(rl[0], sizeof(rl[0]), "%.1f",
			 syncguard_hist_mean(&r->retried_hist) / 1e3);
		snprintf(rl[1], sizeof(rl[1]), "%.1f", (double)
			 syncguard_hist_percentile(&r->retried_hist, 99) / 1e3);
		snprintf(rl[2], sizeof(rl[2]), "%.1f",
			 (double)r->retried_hist.max_ns / 1e3);
	}
	printf("%s{\"label\":\"%s\",\"workload\":\"%s\",\"sync\":\"%s\","
	       "\"block_size\":%" PRIu64
	       ",\"queue_depth\":%u,\"sessions\":%u,\"read_pct\":%u,"
	       "\"random_pct\":%u,\"seconds\":%.3f,\"ops\":%" PRIu64 ",\"reads\":%"
	       PRIu64 ",\"writes\":%" PRIu64 ",\"flushes\":%" PRIu64 ",\"errors\":%"
	       PRIu64 ",\"retries\":%" PRIu64 ",\"unanswered\":%" PRIu64
	       ",\"interrupted\":%s,\"iops\":%.1f,\"mb_per_s\":%.3f,"
	       "\"device_flushes_per_op\":%s,\"latency_us\":{\"mean\":%s,"
	       "\"p50\":%s,\"p90\":%s,\"p99\":%s,\"p99_9\":%s,\"max\":%s},"
	       "\"session_iops\":{\"min\":%.1f,\"avg\":%.1f,\"max\":%.1f},"
	       "\"queue_depth_on_wire\":%s,\"initiator_queued_us\":%s,"
	       "\"unit_attentions\":%" PRIu64 ",\"busy_answers\":%" PRIu64 ","
	       "\"mode_parameters_changed\":%s,\"retried\":{\"ops\":%" PRIu64
	       ",\"latency_us\":{\"mean\":%s,\"p99\":%s,\"max\":%s}},"
	       "\"verify\":{\"ran\":%s,\"checked\":%" PRIu64 ",\"mismatches\":%"
	       PRIu64 ",\"complete\":%s},"
	       "\"cdf\":[", first ? "" : ",\n", run_label(c, r), r->p.label,
	       syncguard_sync_name(r->p.sync, c->every, sy,
	       sizeof(sy)), r->p.xfer, r->p.qd, r->nsess, r->p.read_pct,
	       r->p.random_pct, r->seconds, r->ops, r->reads, r->writes,
	       r->flushes, r->errors, r->retries, r->unanswered,
	       r->interrupted ? "true" : "false", r->iops, r->mbps,
	       fpo, lat(r, syncguard_hist_mean(&r->hist) / 1e3, l[0], "null"),
	       lat(r, us(r, 50), l[1], "null"), lat(r, us(r, 90), l[2], "null"),
	       lat(r, us(r, 99), l[3], "null"), lat(r, us(r, 99.9), l[4], "null"),
	       lat(r, (double)r->hist.max_ns / 1e3, l[5], "null"), mn, avg, mx,
	       wq, qu, r->unit_attentions, r->busy_answers,
	       r->mode_changed ? "true" : "false", r->retried_hist.count,
	       rl[0], rl[1], rl[2],
	       r->verify_ran ? "true" : "false", r->verify_checked,
	       r->verify_bad, r->verify_complete ? "true" : "false");
	for (size_t i = 0; r->ops && i < NCDF; i++)	/* none: [] */
		printf("%s[%g,%.1f]", i ? "," : "", cdf_points[i],
		       us(r, cdf_points[i]));
	/* the distribution itself: --merge adds histograms of runs bucket
	 * by bucket, so that merged percentiles are exact */
	printf("],\"latency_hist\":");
	syncguard_hist_print_json(stdout, &r->hist);
	syncguard_print_commands_json(r->cmd_hist);
	printf(",\"retried_hist\":");
	syncguard_hist_print_json(stdout, &r->retried_hist);
	print_sources_json(r);
	if (r->target_writes[0])	/* plain text: no quotes in it */
		printf(",\"target_writes\":\"%s\",\"target_flush_batching\""
		       ":\"%s\",\"target_sync_loop\":\"%s\","
		       "\"target_engine\":\"%s\",\"intervals\":[",
		       r->target_writes, r->target_batching,
		       r->target_sync_loop, r->target_engine);
	else
		printf(",\"target_writes\":null,\"target_flush_batching\":"
		       "null,\"target_sync_loop\":null,\"target_engine\":null,"
		       "\"intervals\":[");
	for (unsigned int i = 0; i < r->niv; i++) {
		char p99[32] = "null";	/* nothing completed: no latency */

		if (r->iv[i].iops > 0)
			snprintf(p99, sizeof(p99), "%.1f", r->iv[i].p99_us);
		printf("%s[%.1f,%.1f,%.3f,%s]", i ? "," : "", r->iv[i].t,
		       r->iv[i].iops, r->iv[i].mbps, p99);
	}
	printf("]");
	syncguard_rate_json(r);
	printf("}");
}

/* CSV columns, in this order (scripts/demo.sh and bench.sh rely on it) */
#define CSV_HEADER "label,sync,block_size,queue_depth,sessions,read_pct," \
	"random_pct,wce,dpofua,seconds,ops,errors,iops,mb_per_s,lat_mean_us," \
	"lat_p50_us,lat_p99_us,lat_p99_9_us,lat_max_us,device_flushes_per_op," \
	"workload,interrupted,unanswered,verify_checked,verify_mismatches," \
	"verify_complete,read_ops,read_lat_mean_us,read_lat_p99_us," \
	"write_ops,write_lat_mean_us,write_lat_p99_us,write_fua_ops," \
	"write_fua_lat_mean_us,write_fua_lat_p99_us,synchronize_cache_ops," \
	"synchronize_cache_lat_mean_us,synchronize_cache_lat_p99_us" \
	RATE_CSV_HEADER ",retried_ops"

static void print_csv(const struct config *c, const struct target_info *ti,
		      const struct result *r, bool first)
{
	char sy[24], fpo[32], vc[24] = "", vm[24] = "", vd[4] = "", l[5][32];

	if (first && c->csv_header)
		printf(CSV_HEADER "\n");
	flushes_per_op(r, fpo, sizeof(fpo), "");
	if (r->verify_ran) {	/* empty unless a read-back ran */
		snprintf(vc, sizeof(vc), "%" PRIu64, r->verify_checked);
		snprintf(vm, sizeof(vm), "%" PRIu64, r->verify_bad);
		snprintf(vd, sizeof(vd), "%d", r->verify_complete ? 1 : 0);
	}
	printf("%s,%s,%" PRIu64 ",%u,%u,%u,%u,%d,%d,%.3f,%" PRIu64 ",%" PRIu64
	       ",%.1f,%.3f,%s,%s,%s,%s,%s,%s,%s,%d,%" PRIu64 ",%s,%s,%s",
	       run_label(c, r),
	       syncguard_sync_name(r->p.sync, c->every, sy, sizeof(sy)), r->p.xfer, r->p.qd,
	       r->nsess, r->p.read_pct, r->p.random_pct, ti->wce, ti->dpofua,
	       r->seconds, r->ops, r->errors, r->iops, r->mbps,
	       lat(r, syncguard_hist_mean(&r->hist) / 1e3, l[0], ""),
	       lat(r, us(r, 50), l[1], ""), lat(r, us(r, 99), l[2], ""),
	       lat(r, us(r, 99.9), l[3], ""),
	       lat(r, (double)r->hist.max_ns / 1e3, l[4], ""),
	       fpo, r->p.label, r->interrupted ? 1 : 0, r->unanswered, vc, vm,
	       vd);
	/* per command: its count, mean and p99 (empty when none was sent) */
	for (int k = 0; k < SYNCGUARD_NCMD; k++) {
		const struct histogram *h = &r->cmd_hist[k];

		if (h->count)
			printf(",%" PRIu64 ",%.1f,%.1f", h->count,
			       syncguard_hist_mean(h) / 1e3, (double)
			       syncguard_hist_percentile(h, 99) / 1e3);
		else
			printf(",0,,");
	}
	syncguard_rate_csv(r);
	printf(",%" PRIu64 "\n", r->retried_hist.count);
}

void syncguard_report_result(const struct config *c, const struct target_info *ti,
			     const struct result *r, bool first)
{
	if (c->format == OUT_FIO)
		syncguard_fio_result(c, ti, r, first);
	else if (c->format == OUT_JSON)
		print_json(c, r, first);
	else if (c->format == OUT_CSV)
		print_csv(c, ti, r, first);
	else
		print_text(c, r);
	fflush(stdout);
}

void syncguard_report_end(const struct config *c)
{
	if (c->format == OUT_JSON)
		printf("\n]}\n");
	else if (c->format == OUT_FIO)
		syncguard_fio_end();
	fflush(stdout);
}
