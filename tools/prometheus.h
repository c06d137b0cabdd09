/* syncguard-stat --prometheus: the counters for node_exporter's textfile
 * collector (tools/prometheus.c). */
#ifndef SYNCGUARD_PROMETHEUS_H
#define SYNCGUARD_PROMETHEUS_H

#include <stdbool.h>
#include <stddef.h>

#include "statsfile.h"

/* one LUN's counters, as syncguard-stat read them */
struct syncguard_prom_lun {
	char target[256];
	unsigned long lun;
	bool alive;			/* its tgtd runs */
	struct syncguard_stats st;
};

/* Write the @n LUNs of @l to @path in Prometheus's text format 0.0.4
 * ("-": standard output), whole or not at all (a temporary file renamed
 * over @path).  0, or -errno. */
int syncguard_prometheus_write(const char *path,
			       const struct syncguard_prom_lun *l, size_t n);

#endif
