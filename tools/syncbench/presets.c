/*
 * The classic studies of the field reports this project grew from, as
 * presets, each with a short form (seconds, for the demo) and a full form
 * (--full: the study's own sizes and durations).
 */
#include <stdio.h>
#include <string.h>

#include "syncbench.h"

const char *syncguard_preset_help(void)
{
	return
"  iozone      8 KiB writes with O_SYNC semantics (FUA), 2 sessions on\n"
"              separate regions: initial writers, rewriters (sequential),\n"
"              random readers, random writers (iozone -o -I -l 2),\n"
"              each phase in each session's own file, which its initial\n"
"              writers write whole: short: 16 MiB files; full: 128 MiB\n"
"  vdbench     DWR (100% reads), ETL (100% writes), OLTP (70% reads),\n"
"              80% random, 8 in flight, transfer sizes 1k..128k;\n"
"              short: 1 s a point; full: 30 min a point, 30 s intervals\n"
"  throughput  sequential writes of 16k..32m at QD 1 with the write cache\n"
"              off (--cache-off): what fixed per-command costs do;\n"
"              short: 1 s a size; full: 10 s a size";
}

static unsigned int add(struct run_params *pts, unsigned int n,
			unsigned int max, struct run_params p)
{
	if (n < max)
		pts[n] = p;
	return n + 1;
}

static unsigned int iozone(const struct config *c, struct run_params *pts,
			   unsigned int max)
{
	static const struct { const char *label; unsigned int read, random; }
	phases[] = { { "initial-writers", 0, 0 }, { "rewriters", 0, 0 },
		     { "random-readers", 100, 100 }, { "random-writers", 0, 100 } };
	/* each session's file: the readers read only what the initial
	 * writers wrote (never holes, which a sparse LUN answers without
	 * touching the device), as iozone's stay inside their files */
	uint64_t file = c->full ? 128u << 20 : 16u << 20;
	unsigned int n = 0;

	for (int i = 0; i < 4; i++)
		n = add(pts, n, max, (struct run_params){ .label = phases[i].label,
			.xfer = 8192, .qd = 1,
			.sync = phases[i].read ? SYNC_NONE : SYNC_FUA,
			.read_pct = phases[i].read, .random_pct = phases[i].random,
			.bytes = file, .sessions = 2, .split = true,
			.span = 2 * file });
	return n;
}

static unsigned int vdbench(const struct config *c, struct run_params *pts,
			    unsigned int max)
{
	static const struct { const char *label; unsigned int read; }
	wl[] = { { "DWR", 100 }, { "ETL", 0 }, { "OLTP", 70 } };
	unsigned int n = 0;

	for (int w = 0; w < 3; w++)
		for (uint64_t size = 1024; size <= 128 * 1024; size *= 2)
			n = add(pts, n, max, (struct run_params){
				.label = wl[w].label, .xfer = size, .qd = 8,
				.sync = SYNC_NONE, .read_pct = wl[w].read,
				.random_pct = 80, .seconds = c->full ? 1800 : 1,
				.interval = c->full ? 30 : 0 });
	return n;
}

static unsigned int throughput(const struct config *c, struct run_params *pts,
			       unsigned int max)
{
	static const uint64_t sizes[] = { 16 << 10, 64 << 10, 128 << 10,
		256 << 10, 1 << 20, 4 << 20, 8 << 20, 32 << 20 };
	unsigned int n = 0;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		n = add(pts, n, max, (struct run_params){ .label = "seq-write-wce0",
			.xfer = sizes[i], .qd = 1, .sync = SYNC_NONE,
			.seconds = c->full ? 10 : 1 });
	return n;
}

unsigned int syncguard_preset_points(const struct config *c, struct run_params *pts,
				     unsigned int max)
{
	if (!strcmp(c->preset, "iozone"))
		return iozone(c, pts, max);
	if (!strcmp(c->preset, "vdbench"))
		return vdbench(c, pts, max);
	if (!strcmp(c->preset, "throughput"))
		return throughput(c, pts, max);
	syncguard_usage_error("--preset: '%s' is not iozone, vdbench or throughput",
			      c->preset);
	return 0;
}
