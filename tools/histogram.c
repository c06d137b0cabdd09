/*
 * The latency histogram (tools/histogram.h): fio's bucket layout, 64
 * buckets per power of two of nanoseconds, added to, merged bucket by
 * bucket, read as percentiles and written as JSON.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "histogram.h"

void syncguard_hist_init(struct histogram *h)
{
	memset(h, 0, sizeof(*h));
	h->min_ns = UINT64_MAX;
}

static unsigned int bucket_of(uint64_t v)
{
	unsigned int e;

	if (v < HIST_SUB)
		return (unsigned int)v;
	e = 63u - (unsigned int)__builtin_clzll(v);	/* >= HIST_SUB_BITS */
	return (e - HIST_SUB_BITS + 1) * HIST_SUB +
	       (unsigned int)((v >> (e - HIST_SUB_BITS)) - HIST_SUB);
}

/* Middle of bucket @i's value range. */
static uint64_t bucket_mid(unsigned int i)
{
	unsigned int e;
	uint64_t lo, width;

	if (i < HIST_SUB)
		return i;
	e = i / HIST_SUB + HIST_SUB_BITS - 1;
	width = 1ull << (e - HIST_SUB_BITS);
	lo = (uint64_t)(HIST_SUB + i % HIST_SUB) << (e - HIST_SUB_BITS);
	return lo + width / 2;
}

void syncguard_hist_add(struct histogram *h, uint64_t ns)
{
	h->bucket[bucket_of(ns)]++;
	h->count++;
	h->sum_ns += ns;
	if (ns < h->min_ns)
		h->min_ns = ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

uint64_t syncguard_hist_percentile(const struct histogram *h, double pct)
{
	uint64_t want, seen = 0;

	if (!h->count)
		return 0;
	want = (uint64_t)(pct / 100.0 * (double)h->count + 0.999999);
	if (want < 1)
		want = 1;
	for (unsigned int i = 0; i < HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= want) {
			uint64_t v = bucket_mid(i);

			/* never report beyond what was seen */
			return v > h->max_ns ? h->max_ns :
			       v < h->min_ns ? h->min_ns : v;
		}
	}
	return h->max_ns;
}

void syncguard_hist_merge(struct histogram *into, const struct histogram *from)
{
	if (!from->count)
		return;
	for (unsigned int i = 0; i < HIST_BUCKETS; i++)
		into->bucket[i] += from->bucket[i];
	into->count += from->count;
	into->sum_ns += from->sum_ns;
	if (from->min_ns < into->min_ns)
		into->min_ns = from->min_ns;
	if (from->max_ns > into->max_ns)
		into->max_ns = from->max_ns;
}

double syncguard_hist_mean(const struct histogram *h)
{
	return h->count ? (double)h->sum_ns / (double)h->count : 0.0;
}

void syncguard_hist_print_json(FILE *f, const struct histogram *h)
{
	bool first = true;

	fprintf(f, "{\"sub_bits\":%d,\"count\":%" PRIu64 ",\"sum_ns\":%"
		PRIu64 ",\"min_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64
		",\"bins\":[", HIST_SUB_BITS, h->count, h->sum_ns,
		h->count ? h->min_ns : 0, h->max_ns);
	for (unsigned int i = 0; i < HIST_BUCKETS; i++) {
		if (!h->bucket[i])
			continue;
		fprintf(f, "%s[%u,%" PRIu64 "]", first ? "" : ",", i,
			h->bucket[i]);
		first = false;
	}
	fprintf(f, "]}");
}

void syncguard_hist_print_summary(FILE *f, const struct histogram *h)
{
	static const double pct[] = { 50, 90, 99, 99.9 };
	static const char *const key[] = { "p50", "p90", "p99", "p99_9" };

	if (!h->count) {
		fprintf(f, "\"mean\":null,\"p50\":null,\"p90\":null,"
			"\"p99\":null,\"p99_9\":null,\"max\":null");
		return;
	}
	fprintf(f, "\"mean\":%.1f", syncguard_hist_mean(h) / 1e3);
	for (size_t i = 0; i < sizeof(pct) / sizeof(pct[0]); i++)
		fprintf(f, ",\"%s\":%.1f", key[i],
			(double)syncguard_hist_percentile(h, pct[i]) / 1e3);
	fprintf(f, ",\"max\":%.1f", (double)h->max_ns / 1e3);
}

uint64_t syncguard_hist_bucket_value(unsigned int i)
{
	return bucket_mid(i);
}

double syncguard_hist_stddev(const struct histogram *h)
{
	double mean = syncguard_hist_mean(h), sq = 0;

	if (!h->count)
		return 0;
	for (unsigned int i = 0; i < HIST_BUCKETS; i++) {
		double d = (double)bucket_mid(i) - mean;

		if (h->bucket[i])
			sq += (double)h->bucket[i] * d * d;
	}
	return sqrt(sq / (double)h->count);
}
