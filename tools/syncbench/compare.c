/*
 * --compare and --plot over saved --json runs, read with json-c: the
 * files may have been through jq (pretty-printed, compacted) or come
 * from anyone, so nothing in them is trusted beyond its type.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "syncbench.h"

#include "rows.h"

/* @obj's member @key (a dotted path one level deep: "latency_us.p99")
 * as a number, -1 when absent or not a number */
static double num(json_object *obj, const char *key)
{
	const char *dot = strchr(key, '.');
	json_object *v;

	if (dot) {
		char outer[32];

		snprintf(outer, sizeof(outer), "%.*s", (int)(dot - key), key);
		if (!json_object_object_get_ex(obj, outer, &v))
			return -1;
		return num(v, dot + 1);
	}
	if (!json_object_object_get_ex(obj, key, &v) ||
	    !(json_object_is_type(v, json_type_int) ||
	      json_object_is_type(v, json_type_double)) ||
	    !isfinite(json_object_get_double(v)))	/* json-c takes NaN */
		return -1;
	return json_object_get_double(v);
}

/* @obj's string member @key into @out (@len bytes), "" when absent */
static void str(json_object *obj, const char *key, char *out, size_t len)
{
	json_object *v;

	out[0] = '\0';
	if (json_object_object_get_ex(obj, key, &v) &&
	    json_object_is_type(v, json_type_string))
		snprintf(out, len, "%s", json_object_get_string(v));
}

/* "cdf": [[percentile, latency us], ...] of @obj into @pts; their
 * number */
static int parse_cdf(json_object *obj, double pts[ROW_CDF][2])
{
	json_object *cdf, *pt;
	int n = 0;

	if (!json_object_object_get_ex(obj, "cdf", &cdf) ||
	    !json_object_is_type(cdf, json_type_array))
		return 0;
	for (size_t i = 0; i < json_object_array_length(cdf) && n < ROW_CDF;
	     i++) {
		pt = json_object_array_get_idx(cdf, i);
		if (!json_object_is_type(pt, json_type_array) ||
		    json_object_array_length(pt) != 2)
			continue;
		pts[n][0] = json_object_get_double(
			json_object_array_get_idx(pt, 0));
		pts[n][1] = json_object_get_double(
			json_object_array_get_idx(pt, 1));
		n++;
	}
	return n;
}

/* "commands": each command's p99 and CDF (none: p99 -1) */
static void parse_commands(json_object *res, struct row *r)
{
	json_object *cmds, *one;

	for (int k = 0; k < SYNCGUARD_NCMD; k++) {
		r->cmd_p99[k] = -1;
		r->cmd_ncdf[k] = 0;
		if (!json_object_object_get_ex(res, "commands", &cmds) ||
		    !json_object_object_get_ex(cmds, syncguard_cmd_key[k], &one))
			continue;
		if (num(one, "ops") > 0) {
			r->cmd_p99[k] = num(one, "latency_us.p99");
			r->cmd_ncdf[k] = parse_cdf(one, r->cmd_cdf[k]);
		}
	}
}

/* The strings go into gnuplot's single-quoted titles, and the files may
 * come from anyone: nothing that could end the quote survives. */
void syncguard_gnuplot_safe(char *s)
{
	for (; *s; s++)
		if (*s == '\'' || *s == '\\' || *s == '"' || (unsigned char)*s < 0x20)
			*s = '_';
}

/* One result object of file @f (named @file) into @r: false when it is
 * none (no IOPS or sync discipline) */
void syncguard_file_label(const char *file, char *out, size_t len)
{
	const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	size_t n = strlen(base);

	if (n > 5 && !strcmp(base + n - 5, ".json"))
		n -= 5;
	snprintf(out, len, "%.*s", (int)n, base);
}

static bool load_result(json_object *res, int f, const char *file,
			struct row *r)
{
	if (!json_object_is_type(res, json_type_object))
		return false;
	str(res, "sync", r->sync, sizeof(r->sync));
	r->iops = num(res, "iops");
	if (!r->sync[0] || r->iops < 0)
		return false;
	r->file = f;
	str(res, "label", r->label, sizeof(r->label));
	str(res, "workload", r->workload, sizeof(r->workload));
	/* no --label (the result's label is its workload's name): the
	 * file's name, so that rows of two such files can be told apart */
	if (!r->label[0] || !strcmp(r->label, r->workload))
		syncguard_file_label(file, r->label, sizeof(r->label));
	r->size = num(res, "block_size");
	r->qd = num(res, "queue_depth");
	r->sessions = num(res, "sessions");
	r->read_pct = num(res, "read_pct");
	r->random_pct = num(res, "random_pct");
	r->errors = num(res, "errors");
	r->mbps = num(res, "mb_per_s");
	r->p99 = num(res, "latency_us.p99");
	r->p50 = num(res, "latency_us.p50");
	r->asked = num(res, "asked_iops");
	r->curve_step = num(res, "curve_step");
	r->curve_pct = num(res, "curve_pct");
	r->ncdf = parse_cdf(res, r->cdf);
	parse_commands(res, r);
	syncguard_gnuplot_safe(r->label);
	syncguard_gnuplot_safe(r->workload);
	syncguard_gnuplot_safe(r->sync);
	return true;
}

/* @r, a result of file @f, after the @n in @rows: the new number, or -1
 * after saying that there are more than MAX_ROWS */
static int add_row(struct row *rows, int n, const struct row *r)
{
	if (n == MAX_ROWS) {
		fprintf(stderr, PROG ": more than %d results in the files: "
			"compare fewer\n", MAX_ROWS);
		return -1;
	}
	rows[n] = *r;
	return n + 1;
}

/* The results in one parsed JSON value: a run ({"results": [...]}) or,
 * from a file read line by line, a result object itself. */
static int add_results(json_object *v, int f, const char *file,
		       struct row *rows, int n)
{
	json_object *results;
	struct row r;

	if (syncguard_is_fio_json(v))
		return syncguard_fio_rows(v, f, file, rows, n);
	if (json_object_object_get_ex(v, "results", &results) &&
	    json_object_is_type(results, json_type_array)) {
		for (size_t i = 0; n >= 0 &&
		     i < json_object_array_length(results); i++)
			if (load_result(json_object_array_get_idx(results, i),
					f, file, &r))
				n = add_row(rows, n, &r);
	} else if (load_result(v, f, file, &r)) {
		n = add_row(rows, n, &r);
	}
	return n;
}

/* What is left of a file that is not whole JSON from @text on (a run
 * cut short: killed, a second Ctrl-C), line by line: each result is one
 * line of its own, after a comma. */
static int add_lines(char *text, int f, const char *file, struct row *rows,
		     int n)
{
	for (char *line = strtok(text, "\n"); n >= 0 && line;
	     line = strtok(NULL, "\n")) {
		json_object *v = json_tokener_parse(line[0] == ',' ? line + 1 :
						    line);

		if (v)
			n = add_results(v, f, file, rows, n);
		json_object_put(v);
	}
	return n;
}

/* @file in a new NUL-terminated buffer of *@len bytes, or NULL after
 * saying why (a directory; 1 GiB or more).  A pipe is read to its end,
 * as cat would (jq ... | iscsi-syncbench --compare /dev/stdin). */
static char *read_all(const char *file, size_t *len)
{
	FILE *fp = fopen(file, "re");
	const char *why = NULL;
	size_t cap = 1 << 16, got;
	struct stat st;
	char *buf = NULL, *more;

	if (!fp || fstat(fileno(fp), &st))
		why = strerror(errno);
	else if (S_ISDIR(st.st_mode))
		why = "a directory";
	else if (!(buf = malloc(cap)))
		why = strerror(ENOMEM);
	for (*len = 0; buf && (got = fread(buf + *len, 1, cap - 1 - *len,
					   fp)) > 0;) {
		*len += got;
		if (*len < cap - 1)
			continue;
		if (cap >= (1u << 30) || !(more = realloc(buf, cap * 2))) {
			why = "1 GiB or more: no --json output of this tool";
			free(buf);
			buf = NULL;
		} else {
			buf = more;
			cap *= 2;
		}
	}
	if (buf)
		buf[*len] = '\0';
	else
		fprintf(stderr, PROG ": %s: %s\n", file, why);
	if (fp)
		fclose(fp);
	return buf;
}

/* The results of file @f after the @n in @rows: the new number, or -1.
 * One run or several, one after another (appended with >>), any
 * layout; the part that does not parse is read line by line. */
static int load_file(char **files, int f, struct row *rows, int n)
{
	json_tokener *tok = json_tokener_new();
	size_t len, at = 0;
	char *text = read_all(files[f], &len);

	if (!text || !tok) {
		free(text);
		json_tokener_free(tok);
		return -1;
	}
	/* fio writes its notes ("note: both iodepth >= 1 and synchronous
	 * I/O engine...") to stdout before its JSON: skip lines of text */
	while (at < len && text[at] != '{' && text[at] != '[') {
		char *nl = strchr(text + at, '\n');

		at = nl ? (size_t)(nl - text) + 1 : len;
	}
	while (n >= 0 && (at += strspn(text + at, " \t\r\n")) < len) {
		json_object *v = json_tokener_parse_ex(tok, text + at,
						       (int)(len - at));

		if (!v || json_tokener_get_error(tok) != json_tokener_success)
			break;
		n = add_results(v, f, files[f], rows, n);
		json_object_put(v);
		at += json_tokener_get_parse_end(tok);
		json_tokener_reset(tok);
	}
	if (n >= 0 && at < len)
		n = add_lines(text + at, f, files[f], rows, n);
	json_tokener_free(tok);
	free(text);
	return n;
}

/* The results of every file, in order, into @rows: their number, or -1
 * after saying which file has none (a typo would compare less) or that
 * there are too many. */
static int load(char **files, int nfiles, struct row *rows)
{
	int n = 0;

	for (int f = 0; f < nfiles; f++) {
		int first = n;

		n = load_file(files, f, rows, n);
		if (n < 0)
			return -1;
		if (n == first) {
			fprintf(stderr, PROG ": %s: no " PROG " --json results "
				"in it (empty, not JSON, or cut short before "
				"its first result)\n", files[f]);
			return -1;
		}
	}
	return n;
}

/* Two runs of one load: closed loop both, or open loop at the same
 * asked rate, or the same step of two curves (the same percentage of
 * each one's own maximum; its IOPS differ with the target) */
static bool same_load(const struct row *a, const struct row *b)
{
	if (a->curve_step >= 1 || b->curve_step >= 1)
		return a->curve_step >= 1 && b->curve_step >= 1 &&
		       a->curve_pct == b->curve_pct;
	return a->asked == b->asked;
}

/* Two runs of one workload: the same mix, size, depth, sessions, sync
 * discipline (a ratio between two disciplines would be quoted as the
 * targets' difference) and load */
static bool same_point(const struct row *a, const struct row *b)
{
	return !strcmp(a->workload, b->workload) && a->size == b->size &&
	       a->qd == b->qd && a->sessions == b->sessions &&
	       a->read_pct == b->read_pct && a->random_pct == b->random_pct &&
	       !strcmp(a->sync, b->sync) && same_load(a, b);
}

/* the first file's row for the same workload, or NULL (no ratio) */
static const struct row *base_of(const struct row *rows, int n,
				 const struct row *r)
{
	for (int i = 0; i < n && rows[i].file == rows[0].file; i++)
		if (same_point(&rows[i], r))
			return &rows[i];
	return NULL;
}

/* IOPS x, p99 us, p99 x of @r against its base @b (NULL: none).  A
 * p99 of -1 is none: no operation completed, or a fio job under fsync,
 * whose write and sync latencies fio keeps apart (no WRITE+flush
 * operation to compare with this tool's). */
static void print_ratios(const struct row *r, const struct row *b)
{
	if (b && b->iops > 0)
		printf("%8.2f", r->iops / b->iops);
	else
		printf("%8s", "-");
	if (r->p99 >= 0)
		printf(" %10.0f", r->p99);
	else
		printf(" %10s", "-");
	if (b && b->p99 > 0 && r->p99 >= 0)
		printf(" %8.2f", r->p99 / b->p99);
	else
		printf(" %8s", "-");
}

/* the p99 of @r's WRITEs (with or without FUA) and of its SYNCHRONIZE
 * CACHEs, us, "-" for none: under -s flush the operation's p99 is the
 * pair's, and these tell which of the two costs */
static void print_command_p99s(const struct row *r)
{
	double w = r->cmd_p99[CMD_WRITE] >= 0 ? r->cmd_p99[CMD_WRITE] :
		   r->cmd_p99[CMD_WRITE_FUA];
	double sc = r->cmd_p99[CMD_SYNC_CACHE];

	if (w >= 0)
		printf(" %10.0f", w);
	else
		printf(" %10s", "-");
	if (sc >= 0)
		printf(" %10.0f", sc);
	else
		printf(" %10s", "-");
}

/* The end of a --compare line: with open-loop runs among the rows, the
 * IOPS asked and the curve step's load ("max": the closed-loop maximum
 * of a curve); the header's when @r is NULL */
static void open_columns(bool open, const struct row *r)
{
	char asked[24] = "-", load[8] = "-";

	if (open && !r) {
		printf(" %10s %5s", "asked", "load");
	} else if (open) {
		if (r->asked >= 0)
			snprintf(asked, sizeof(asked), "%.0f", r->asked);
		if (r->curve_pct >= 0)
			snprintf(load, sizeof(load), "%.0f%%", r->curve_pct);
		else if (r->curve_step >= 1)
			snprintf(load, sizeof(load), "max");
		printf(" %10s %5s", asked, load);
	}
	putchar('\n');
}

int syncguard_compare_files(const struct config *c)
{
	static struct row rows[MAX_ROWS];
	int n = load(c->files, c->nfiles, rows);
	bool open = false;

	if (n < 0)
		return 1;
	for (int i = 0; i < n; i++)
		open |= rows[i].asked >= 0 || rows[i].curve_step >= 1;
	printf("%-20s %-16s %-10s %8s %4s %4s %10s %8s %10s %8s %10s %10s "
	       "%7s", "run", "workload", "sync", "size", "QD", "sess", "IOPS",
	       "IOPS x", "p99 us", "p99 x", "WRITE p99", "SYNC p99", "errors");
	open_columns(open, NULL);
	for (int i = 0; i < n; i++) {
		const struct row *r = &rows[i], *b = base_of(rows, n, r);

		printf("%-20.20s %-16.16s %-10s %8.0f %4.0f %4.0f %10.0f ",
		       r->label, r->workload, r->sync, r->size, r->qd,
		       r->sessions, r->iops);
		print_ratios(r, b);
		print_command_p99s(r);
		/* beside the ratio: a run with errors is no fair comparison */
		if (r->errors >= 0)
			printf(" %7.0f", r->errors);
		else
			printf(" %7s", "-");
		open_columns(open, r);
	}
	return 0;
}

/* one data file per series (run, workload, sync); @npts[s] counts its
 * points */
static int write_series(const struct row *rows, int n, bool by_size,
			const char *dir, char names[][160], int *npts, int max)
{
	int ns = 0;

	for (int i = 0; i < n; i++) {
		char key[160], path[512];
		int s;
		FILE *f;

		snprintf(key, sizeof(key), "%.60s %.40s %.40s", rows[i].label,
			 rows[i].workload, rows[i].sync);
		for (s = 0; s < ns && strcmp(names[s], key); s++)
			;
		if (s == ns) {
			if (ns == max)
				return -2;
			npts[ns] = 0;
			snprintf(names[ns++], 160, "%s", key);
		}
		npts[s]++;
		snprintf(path, sizeof(path), "%s/s%d.dat", dir, s);
		f = fopen(path, "a");
		if (!f)
			return -1;
		fprintf(f, "%g %g %g\n", by_size ? rows[i].size : rows[i].qd,
			rows[i].iops, rows[i].mbps);
		fclose(f);
	}
	return ns;
}

/* Kinds of command in @r with a latency CDF */
static int cdf_kinds(const struct row *r)
{
	int n = 0;

	for (int k = 0; k < SYNCGUARD_NCMD; k++)
		n += r->cmd_ncdf[k] > 0;
	return n;
}

/* file @f's per-command CDFs (c@f-K.dat), when it sent more than one
 * kind of command: a flush run's WRITE and SYNCHRONIZE CACHE apart */
static int write_command_cdfs(const struct row *r, const char *dir, int f)
{
	char path[512];
	FILE *fp;

	if (cdf_kinds(r) < 2)
		return 0;
	for (int k = 0; k < SYNCGUARD_NCMD; k++) {
		if (!r->cmd_ncdf[k])
			continue;
		snprintf(path, sizeof(path), "%s/c%d-%d.dat", dir, f, k);
		if (!(fp = fopen(path, "w")))
			return -1;
		for (int i = 0; i < r->cmd_ncdf[k]; i++)
			fprintf(fp, "%g %g\n", r->cmd_cdf[k][i][1],
				r->cmd_cdf[k][i][0]);
		fclose(fp);
	}
	return 0;
}

/* one latency CDF per file (its first result); @first[k] is its row */
static int write_cdfs(const struct row *rows, int n, const char *dir,
		      int *first, int max)
{
	int nf = 0;

	for (int i = 0; i < n; i++) {
		char path[512];
		FILE *f;

		if (i && rows[i].file == rows[i - 1].file)
			continue;	/* the first result of each file */
		if (nf == max)
			return -1;
		first[nf] = i;
		snprintf(path, sizeof(path), "%s/c%d.dat", dir, nf++);
		if (!(f = fopen(path, "w")))
			return -1;
		for (int k = 0; k < rows[i].ncdf; k++)
			fprintf(f, "%g %g\n", rows[i].cdf[k][1], rows[i].cdf[k][0]);
		fclose(f);
		if (write_command_cdfs(&rows[i], dir, nf - 1))
			return -1;
	}
	return nf;
}

/* IOPS and MB/s panels: the series that sweep (two points or more),
 * unless none does; single points only clutter a sweep's picture */
static void plot_series(FILE *g, const char *dir, char names[][160],
			const int *npts, int ns, int column)
{
	bool sweeps = false, first = true;

	for (int s = 0; s < ns; s++)
		sweeps |= npts[s] > 1;
	for (int s = 0; s < ns; s++) {
		if (sweeps && npts[s] < 2)
			continue;
		fprintf(g, "%s'%s/s%d.dat' using 1:%d with linespoints title "
			"'%s'", first ? "" : ", ", dir, s, column, names[s]);
		first = false;
	}
	fprintf(g, "\n");
}

/* largest over smallest positive IOPS (@mbps false) or MB/s */
static double spread(const struct row *rows, int n, bool mbps)
{
	double lo = 0, hi = 0;

	for (int i = 0; i < n; i++) {
		double v = mbps ? rows[i].mbps : rows[i].iops;

		if (v <= 0)
			continue;
		lo = lo > 0 && lo < v ? lo : v;
		hi = hi > v ? hi : v;
	}
	return lo > 0 ? hi / lo : 1;
}

static void gnuplot_script(FILE *g, const struct config *c, bool by_size,
			   const char *dir, char names[][160], const int *npts,
			   int ns, const struct row *rows, int n, const int *first,
			   int nf)
{
	bool svg = strstr(c->plot, ".svg") != NULL;

	fprintf(g, "set terminal %s noenhanced size 1200,1100\n"
		"set output '%s'\n"
		"set multiplot layout 3,1\nset grid\nset key outside right\n",
		svg ? "svg" : "pngcairo", c->plot);
	if (by_size)
		fprintf(g, "set logscale x 2\nset format x '%%.0b%%B'\n"
			"set xlabel 'transfer size (bytes)'\n");
	else
		fprintf(g, "set logscale x 2\nset xlabel 'queue depth'\n");
	for (int panel = 0; panel < 2; panel++) {
		/* a log axis once values span 30x: a 32m sweep's handful of
		 * IOPS stays readable next to 4k's thousands */
		fprintf(g, "%s\nset ylabel '%s'\nplot ", spread(rows, n, panel) >
			30 ? "set logscale y 10" : "unset logscale y",
			panel ? "MB/s" : "IOPS");
		plot_series(g, dir, names, npts, ns, panel + 2);
	}
	fprintf(g, "unset logscale x\nunset logscale y\nset format x '%%g'\n"
		"set logscale x 10\n"
		"set xlabel 'latency "
		"(us)'\nset ylabel 'percentile'\nplot ");
	for (int f = 0; f < nf; f++) {
		const struct row *r = &rows[first[f]];

		fprintf(g, "%s'%s/c%d.dat' using 1:2 with linespoints title "
			"'%s %s %s %.0f bytes QD %.0f'", f ? ", " : "", dir, f,
			r->label, r->workload, r->sync, r->size, r->qd);
		for (int k = 0; cdf_kinds(r) > 1 && k < SYNCGUARD_NCMD; k++)
			if (r->cmd_ncdf[k])
				fprintf(g, ", '%s/c%d-%d.dat' using 1:2 with "
					"lines dashtype 2 title '%s %s'", dir,
					f, k, r->label, syncguard_cmd_name[k]);
	}
	fprintf(g, "\nunset multiplot\n");
}

static int plot_load(const struct config *c, const struct row *rows, int n);

int syncguard_plot_files(const struct config *c)
{
	static struct row rows[MAX_ROWS];
	static char names[64][160];
	static int first[64], npts[64];
	char dir[] = "/tmp/syncbench-plot.XXXXXX", cmd[600];
	bool by_size = false;
	int n = load(c->files, c->nfiles, rows), ns, nf, ret = 1;
	FILE *g;

	if (n < 0)
		return 1;
	for (int i = 0; i < n; i++)
		if (rows[i].asked >= 0)
			return plot_load(c, rows, n);
	if (!mkdtemp(dir))
		return 1;
	if (!(g = fopen(c->plot, "w"))) {	/* gnuplot would say less */
		fprintf(stderr, PROG ": %s: %s\n", c->plot, strerror(errno));
		rmdir(dir);
		return 1;
	}
	fclose(g);
	for (int i = 1; i < n; i++)
		by_size |= rows[i].size != rows[0].size;
	ns = write_series(rows, n, by_size, dir, names, npts, 64);
	nf = write_cdfs(rows, n, dir, first, 64);
	if (ns == -2 || nf == -1) {	/* else the rest left out, silently */
		fprintf(stderr, PROG ": --plot draws at most 64 runs (label, "
			"workload and sync) and 64 files\n");
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd)) { /* a leftover temp dir is harmless */ }
		return 1;
	}
	snprintf(cmd, sizeof(cmd), "gnuplot 2>%s/err", dir);
	if (ns > 0 && nf >= 0 && (g = popen(cmd, "w")) != NULL) {
		gnuplot_script(g, c, by_size, dir, names, npts, ns, rows, n,
			       first, nf);
		ret = pclose(g) ? 1 : 0;
	}
	if (ret)
		fprintf(stderr, PROG ": gnuplot failed (is gnuplot installed? "
			"see %s/err)\n", dir);
	else {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd)) { /* a leftover temp dir is harmless */ }
		printf("plot: %s\n", c->plot);
	}
	return ret;
}

/*
 * --plot of open-loop results (--rate, --curve): latency against load,
 * p50 and p99 over the IOPS achieved, a line per run (label, workload,
 * sync, size, depth, in the files' order: a curve's rising steps), so
 * that a discipline's knee shows.  Closed-loop results (a curve's
 * maximum among them: its latency is a closed loop's, not comparable)
 * are left out, and said so.
 */
static int plot_load(const struct config *c, const struct row *rows, int n)
{
	static char names[64][200];
	char dir[] = "/tmp/syncbench-plot.XXXXXX", cmd[600], path[512];
	bool svg = strstr(c->plot, ".svg") != NULL;
	int ns = 0, closed = 0, ret = 1;
	FILE *g;

	if (!mkdtemp(dir))
		return 1;
	for (int i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		char key[200];
		int s;

		if (r->asked < 0 || r->p50 < 0 || r->p99 < 0) {
			closed++;	/* or no operation: no latency */
			continue;
		}
		snprintf(key, sizeof(key), "%.60s %.40s %.24s %.0f bytes "
			 "QD %.0f", r->label, r->workload, r->sync, r->size,
			 r->qd);
		for (s = 0; s < ns && strcmp(names[s], key); s++)
			;
		if (s == ns && ns == 64) {
			fprintf(stderr, PROG ": --plot draws at most 64 runs\n");
			goto out;
		}
		if (s == ns)
			snprintf(names[ns++], sizeof(names[0]), "%s", key);
		snprintf(path, sizeof(path), "%s/l%d.dat", dir, s);
		if (!(g = fopen(path, "a")))
			goto out;
		fprintf(g, "%g %g %g\n", r->iops, r->p50, r->p99);
		fclose(g);
	}
	if (closed)
		fprintf(stderr, PROG ": --plot: %d closed-loop result(s) left out "
			"of the latency against load (a --curve's maximum run "
			"among them)\n", closed);
	if (!ns) {
		fprintf(stderr, PROG ": --plot: no open-loop result with a "
			"latency to draw\n");
		goto out;
	}
	if (!(g = fopen(c->plot, "w"))) {
		fprintf(stderr, PROG ": %s: %s\n", c->plot, strerror(errno));
		goto out;
	}
	fclose(g);
	snprintf(cmd, sizeof(cmd), "gnuplot 2>%s/err", dir);
	if ((g = popen(cmd, "w")) != NULL) {
		fprintf(g, "set terminal %s noenhanced size 1200,700\n"
			"set output '%s'\nset grid\nset key outside right\n"
			"set xlabel 'achieved IOPS'\nset ylabel 'latency (us)'\n"
			"set logscale y 10\nset yrange [*:*]\nplot ",
			svg ? "svg" : "pngcairo", c->plot);
		for (int s = 0; s < ns; s++)
			fprintf(g, "%s'%s/l%d.dat' using 1:3 with linespoints lt "
				"%d title 'p99 %s', '%s/l%d.dat' using 1:2 with "
				"linespoints lt %d dt 2 title 'p50 %s'", s ? ", " :
				"", dir, s, s + 1, names[s], dir, s, s + 1,
				names[s]);
		fprintf(g, "\n");
		ret = pclose(g) ? 1 : 0;
	}
	if (ret) {	/* its err file kept */
		fprintf(stderr, PROG ": gnuplot failed (is gnuplot installed? "
			"see %s/err)\n", dir);
		return ret;
	}
	printf("plot: %s (latency against achieved IOPS, %d run(s))\n",
	       c->plot, ns);
out:
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd)) { /* a leftover temp dir is harmless */ }
	return ret;
}
