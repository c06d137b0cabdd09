/*
 * Small helpers the tools share: a monotonic clock and the xorshift64
 * generator their random offsets and CDBs come from (fast, seedable, and
 * the same sequence for the same seed on every machine).
 */
#ifndef SYNCGUARD_TOOLUTIL_H
#define SYNCGUARD_TOOLUTIL_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* the next value of the xorshift64 state *@state (never seed it with 0) */
static inline uint64_t xorshift64(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

#endif
