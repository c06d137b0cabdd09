/*
 * syncguard-stat --prometheus FILE: every LUN's counters in Prometheus's
 * text exposition format (version 0.0.4), for node_exporter's textfile
 * collector, so that an administrator graphs flushes per second and
 * latched LUNs per tgtd host.  The counters are those of the field table
 * (tools/statsfile.c), so the JSON, the manual page and this agree.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "prometheus.h"
#include "syncguard_opts.h"

/* @s as a label value: backslash, double quote and newline escaped */
static void label_value(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

/* @s as HELP text: backslash and newline escaped */
static void help_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void labels(FILE *f, const struct syncguard_prom_lun *l)
{
	fputs("{target=\"", f);
	label_value(f, l->target);
	fprintf(f, "\",lun=\"%lu\"", l->lun);
}

static uint64_t counter(const struct syncguard_stats *st, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)st + off, sizeof(v));
	return v;
}

/* the counters of the field table: syncguard_<name>_total, and WCE as
 * a gauge; flush_us_total goes into the latency histogram's _sum */
static void table_metrics(FILE *f, const struct syncguard_prom_lun *l,
			  size_t n)
{
	for (size_t k = 0; k < syncguard_stats_nfields; k++) {
		const struct syncguard_stats_field *fd =
			&syncguard_stats_fields[k];
		bool gauge = !strcmp(fd->name, "wce") ||
			     !strcmp(fd->name, "workers");

		if (fd->off == SYNCGUARD_OWN_CODE ||
		    !strcmp(fd->name, "flush_us_total"))
			continue;
		fprintf(f, "# HELP syncguard_%s%s ", fd->name,
			gauge ? "" : "_total");
		help_text(f, fd->meaning);
		fprintf(f, "\n# TYPE syncguard_%s%s %s\n", fd->name,
			gauge ? "" : "_total", gauge ? "gauge" : "counter");
		for (size_t i = 0; i < n; i++) {
			fprintf(f, "syncguard_%s%s", fd->name,
				gauge ? "" : "_total");
			labels(f, &l[i]);
			fprintf(f, "} %" PRIu64 "\n", counter(&l[i].st, fd->off));
		}
	}
}

/* device flush latency: buckets of [2^i, 2^(i+1)) us, cumulative, in
 * seconds as Prometheus's base unit */
static void flush_histogram(FILE *f, const struct syncguard_prom_lun *l,
			    size_t n)
{
	fputs("# HELP syncguard_device_flush_seconds device cache flushes "
	      "(fdatasync) by latency\n# TYPE syncguard_device_flush_seconds "
	      "histogram\n", f);
	for (size_t i = 0; i < n; i++) {
		uint64_t cum = 0;

		for (int b = 0; b < SYNCGUARD_FLUSH_BUCKETS; b++) {
			cum += l[i].st.flush_us[b];
			fputs("syncguard_device_flush_seconds_bucket", f);
			labels(f, &l[i]);
			/* 2^(b+1) us in seconds, exactly */
			fprintf(f, ",le=\"%.6f\"} %" PRIu64 "\n",
				(double)(2ull << b) / 1e6, cum);
		}
		fputs("syncguard_device_flush_seconds_bucket", f);
		labels(f, &l[i]);
		fprintf(f, ",le=\"+Inf\"} %" PRIu64 "\n", cum);
		fputs("syncguard_device_flush_seconds_sum", f);
		labels(f, &l[i]);
		fprintf(f, "} %g\n", (double)l[i].st.flush_us_total / 1e6);
		fputs("syncguard_device_flush_seconds_count", f);
		labels(f, &l[i]);
		fprintf(f, "} %" PRIu64 "\n", cum);
	}
}

/* a gauge per LUN from @value */
static void gauge(FILE *f, const char *name, const char *help,
		  const struct syncguard_prom_lun *l, size_t n,
		  uint64_t (*value)(const struct syncguard_prom_lun *))
{
	fprintf(f, "# HELP syncguard_%s %s\n# TYPE syncguard_%s gauge\n", name,
		help, name);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "syncguard_%s", name);
		labels(f, &l[i]);
		fprintf(f, "} %" PRIu64 "\n", value(&l[i]));
	}
}

static uint64_t up(const struct syncguard_prom_lun *l)
{
	return l->alive;
}

static uint64_t latched(const struct syncguard_prom_lun *l)
{
	return l->st.latched;
}

static uint64_t latched_soft(const struct syncguard_prom_lun *l)
{
	return l->st.latched && l->st.latched_soft;
}

static void info(FILE *f, const struct syncguard_prom_lun *l, size_t n)
{
	fputs("# HELP syncguard_info the LUN's mode, write_sync, engine and "
	      "what it sends through io_uring (value 1)\n"
	      "# TYPE syncguard_info gauge\n", f);
	for (size_t i = 0; i < n; i++) {
		fputs("syncguard_info", f);
		labels(f, &l[i]);
		fprintf(f, ",mode=\"%s\",write_sync=\"%s\",engine=\"%s\","
			"ring=\"%s\"} 1\n",
			syncguard_mode_name((enum syncguard_mode)l[i].st.mode),
			syncguard_write_sync_name(
				(enum syncguard_write_sync)l[i].st.write_sync),
			syncguard_engine_name(
				(enum syncguard_engine)l[i].st.engine),
			syncguard_ring_use_name(l[i].st.ring_use, true));
	}
}

static int write_all(FILE *f, const struct syncguard_prom_lun *l, size_t n)
{
	info(f, l, n);
	gauge(f, "tgtd_up", "1 while the tgtd that owns the LUN runs", l, n, up);
	gauge(f, "latched", "the errno the LUN has latched (0 none): its "
	      "durable commands fail", l, n, latched);
	gauge(f, "latched_soft", "1 when that latch is rechecked (a write "
	      "refused for want of space, say)", l, n, latched_soft);
	table_metrics(f, l, n);
	flush_histogram(f, l, n);
	return ferror(f) ? -EIO : 0;
}

int syncguard_prometheus_write(const char *path,
			       const struct syncguard_prom_lun *l, size_t n)
{
	char tmp[4096];
	FILE *f;
	int ret;

	if (!strcmp(path, "-"))
		return write_all(stdout, l, n);
	/* whole or not at all: the collector may read at any moment */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path,
			     (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	if (!(f = fopen(tmp, "w")))
		return -errno;
	ret = write_all(f, l, n);
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}
