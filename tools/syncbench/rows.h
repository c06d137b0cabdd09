/*
 * One row of --compare and --plot: a result read from a saved run, of
 * this tool's --json or of fio's JSON (fioread.c).
 */
#ifndef SYNCGUARD_ROWS_H
#define SYNCGUARD_ROWS_H

#include <json-c/json.h>

#include "syncbench.h"

#define MAX_ROWS 4096
#define ROW_CDF 20		/* points of a latency CDF */

struct row {
	int file;			/* index in the files given */
	char label[64], workload[64], sync[24];
	double size, qd, sessions, read_pct, random_pct, iops, mbps, p99;
	double errors;
	/* open loop: IOPS asked (-1 closed loop), p50; --curve: the step
	 * (1 the closed-loop maximum; -1 none) and its percentage (-1) */
	double asked, p50, curve_step, curve_pct;
	double cdf[ROW_CDF][2];		/* [percentile, latency us] */
	int ncdf;
	/* per command (enum syncguard_cmd): p99, us (-1: none sent) and
	 * latency CDF */
	double cmd_p99[SYNCGUARD_NCMD];
	double cmd_cdf[SYNCGUARD_NCMD][ROW_CDF][2];
	int cmd_ncdf[SYNCGUARD_NCMD];
};

/* compare.c: @file's name without its directory and ".json", into
 * @out (@len bytes): a row's label when its run had no --label */
void syncguard_file_label(const char *file, char *out, size_t len);
/* compare.c: make @s safe inside gnuplot's single-quoted titles */
void syncguard_gnuplot_safe(char *s);

/* fioread.c: is @top fio's JSON (a "fio version" and "jobs")? */
bool syncguard_is_fio_json(json_object *top);

/* fioread.c: the jobs of fio's JSON @top, of file number @f (@file),
 * after the @n in @rows (at most MAX_ROWS): the new number, or -1 after
 * saying there are too many.  A job of another shape (no "job options",
 * no write or read section) is a usage error naming the file and the
 * field (exit 2). */
int syncguard_fio_rows(json_object *top, int f, const char *file,
		       struct row *rows, int n);

#endif
