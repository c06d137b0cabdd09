/*
 * Latency histogram: log-linear buckets (64 per power of two, so any
 * reported percentile is within 1.6% of the true value) over
 * nanoseconds; constant memory whatever the run length.
 */
#ifndef SYNCGUARD_HISTOGRAM_H
#define SYNCGUARD_HISTOGRAM_H

#include <stdint.h>
#include <stdio.h>

#define HIST_SUB_BITS	6
#define HIST_SUB	(1u << HIST_SUB_BITS)
#define HIST_BUCKETS	((64 - HIST_SUB_BITS + 1) * HIST_SUB)

struct histogram {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t min_ns, max_ns;
	uint64_t bucket[HIST_BUCKETS];
};

/* Empty @h. */
void syncguard_hist_init(struct histogram *h);

/* Record one sample of @ns nanoseconds. */
void syncguard_hist_add(struct histogram *h, uint64_t ns);

/* The @pct percentile (0 < pct <= 100) in nanoseconds, 0 if empty. */
uint64_t syncguard_hist_percentile(const struct histogram *h, double pct);

/* Mean in nanoseconds, 0 if empty. */
double syncguard_hist_mean(const struct histogram *h);

/* Add @from's samples to @into, bucket by bucket: the percentiles of the
 * result are those of the union of the samples (never an average of
 * percentiles). */
void syncguard_hist_merge(struct histogram *into, const struct histogram *from);

/* Standard deviation in nanoseconds, from the buckets' middles (so
 * within the buckets' 1.6%), 0 if empty. */
double syncguard_hist_stddev(const struct histogram *h);

/* The value bucket @i (0 <= i < HIST_BUCKETS) stands for, ns: its
 * middle (fio's json+ "bins" keys, the same layout). */
uint64_t syncguard_hist_bucket_value(unsigned int i);

/* @h to @f as a JSON object: {"sub_bits":6,"count":N,"sum_ns":N,
 * "min_ns":N,"max_ns":N,"bins":[[index,count],...]}, the non-empty
 * buckets only (fio's layout: 64 per power of two); what --merge reads. */
void syncguard_hist_print_json(FILE *f, const struct histogram *h);

/* @h's summary to @f as the JSON members (no braces) "mean":..,"p50":..,
 * "p90":..,"p99":..,"p99_9":..,"max":.. in microseconds, each null when
 * @h is empty. */
void syncguard_hist_print_summary(FILE *f, const struct histogram *h);

#endif
