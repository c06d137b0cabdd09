#!/bin/bash
# bench.sh: how close each safe configuration of syncguard comes to what
# this machine can do, cell by cell, measured in one run.
#
# A cell is (device, size, queue depth, discipline, mode): devices
# "disk" (files on the machine's own disk) and "slow" (the FUSE device
# model with a volatile cache whose flush takes --flush-ms, 2 ms by
# default, merging flushes that arrive while one runs, as the block
# layer does); 4 KiB and 64 KiB writes; QD 1 and 32; disciplines
# (iscsi-syncbench --sync) none, fua, flush (WRITE then SYNCHRONIZE
# CACHE, one operation), flush-only (SYNCHRONIZE CACHE alone, 4 KiB
# only: it moves no data); modes write-through, write-back and plp.
#
# Each cell is printed with its limit line, measured in the same rounds:
#   - tgt's null store (bstype null: no I/O at all) running the same
#     iscsi-syncbench command line: what tgt, iSCSI and the initiator
#     cost alone;
#   - fio on the LUN's own backing file, random writes of the cell's
#     size with the durability semantics the cell's mode and discipline
#     promise (fio_args below; on the FUSE model, what group commit can
#     reach at best);
#   - QD 1: limit = 1 / (null store's mean latency + fio's mean latency);
#     QD 32 (and the 4-LUN line): the lesser of the two IOPS;
#     flush-only: the null store alone (a clean SYNCHRONIZE CACHE needs
#     no I/O).
# The ratio is the median over the rounds of each round's IOPS / limit;
# each round runs the cell, its fio and the null store side by side
# (every other round in the reverse order), so they share the machine's
# mood.  A cell should reach 0.85 of its limit, except where the null
# store is within 10% of it (null IOPS <= 1.1 x the cell's, the median
# of the rounds' own ratios): then tgt itself is the bound, and the cell
# is marked tgt-bound.  tgtd's CPU time per command answered (utime +
# stime from /proc/PID/stat over each measured window, summed over the
# rounds, divided by the commands answered in them) is printed beside
# the null store's own figure.  vs_series (bench.csv, and a line under
# the table): where the limit is the lesser of two, the cell against
# 1 / (1/null IOPS + 1/fio IOPS), the two parts one after the other, as
# a command at a fixed queue depth meets them; a figure to read, not a
# second rule.
#
# Also the 4-LUN line: 4 LUNs of a mode at QD 8 each, one iscsi-syncbench
# run (a process per LUN, merged), against the lesser of 4 null LUNs
# at QD 8 and fio on 4 files at iodepth 8; and tgtd's resident memory
# with 8 syncguard LUNs vs 8 rdwr LUNs under load.
#
# --freeze-probe also measures, in every run, how long the machine stood
# still as a SCHED_FIFO probe sees it (freezeprobe: a virtual machine's
# host stopping its CPUs), as a share of the cell's runs and of its limit
# lines' runs.
#
# --mechanisms adds each adaptive mechanism switched off (a bsopts value
# per mechanism) in the cells where it acts, and a table of each one's
# gain: IOPS with it over IOPS without, per cell the median of the
# rounds' own ratios (build/bench-mechanisms.csv).
#
# Writes build/bench.csv, build/bench.json, build/bench-rounds.csv
# (every run of every round) and build/bench.png.  It reports; it does
# not pass or fail (exit 1 only if it could not run).  --self-check runs
# the table's arithmetic on canned rounds and freezeprobe on a stopped
# process (and every run does, first; make check too).
set -u
# it starts more than one private tgtd (the memory step): ports chosen by
# hand for scripts/tgtd-private would clash, so tgtd-private picks free ones
unset TGTD_PRIVATE_CTL TGTD_PRIVATE_PORT

top=$(cd "$(dirname "$0")/.." && pwd)
secs=0.6
rounds=3
warmup=0.4	# not counted: lets syncguard's running trials settle on
		# the new load (every cell changes it; after a pause they try
		# both ways for 200 ms each), as fio's ramp_time
flush_ms=2
devices="disk slow"
sizes="4k 64k"
qds="1 32"
discs="none fua flush flush-only"
modes="sg-wt sg-wb sg-plp"
extra=""		# --mechanisms, --peers: rows beside the modes
mechanisms=
# --mechanisms: each a mode with one mechanism switched off (lun_spec,
# mechanism_of says which and against what)
mechanism_configs="sg-wt-nobatch sg-wb-nobatch sg-wb-noloop sg-wt-group sg-wb-group sg-wt-dsync sg-wb-dsync sg-wt-threads sg-wb-threads sg-plp-threads sg-wbd"
# For a mechanism's configuration $1: "NAME|WITH" (the mechanism, and
# the configuration that has it, against which the gain is taken).
mechanism_of() {
	case $1 in
	sg-w?-nobatch) echo "flush batching (flush_batch auto/off)|${1%-nobatch}" ;;
	sg-wb-noloop) echo "sync loop (sync_loop auto/off)|sg-wb" ;;
	sg-w?-group) echo "write_sync auto/group|${1%-group}" ;;
	sg-w?-dsync) echo "write_sync auto/dsync|${1%-dsync}" ;;
	sg-*-threads) echo "io_uring engine (engine auto/threads)|${1%-threads}" ;;
	sg-wbd) echo "write-back page cache (direct auto/yes)|sg-wb" ;;
	esac
}

# Does configuration $1 run in the cells of device $2, discipline $3,
# QD $4?  The modes and peers everywhere; a mechanism's only where it
# can act (batching: several callers of one flush; the sync loop:
# write-back WRITE+SYNCHRONIZE CACHE; write_sync: durable writes; the
# engine: where the file takes non-blocking I/O, not the FUSE model)
acts() {
	case $1 in sg-wt|sg-wb|sg-plp|rdwr-*|aio) return 0 ;; esac
	case $1:$3:$4 in
	sg-w?-nobatch:*:1) return 1 ;;
	sg-wt-nobatch:*|sg-wb-nobatch:f*) return 0 ;;
	sg-wb-noloop:flush:*) return 0 ;;
	sg-wt-group:*|sg-wt-dsync:*) return 0 ;;
	sg-wb-group:fua:*|sg-wb-dsync:fua:*) return 0 ;;
	sg-*-threads:*) [ "$2" != slow ] ;;
	sg-wbd:none:*|sg-wbd:flush:*) return 0 ;;
	sg-*-*) return 1 ;;
	esac
}
four_discs="none fua flush"
memory=yes
tgtd_args=""		# --tgtd-args: tgtd's own options for the cells' tgtd
USAGE="usage: bench.sh [--seconds S] [--rounds N] [--flush-ms MS] [--mechanisms] [--peers] [--tgtd-args ARGS] [--freeze-probe] [--quick] [--self-check]"
usage() { echo "$USAGE" >&2; exit 2; }
help() {
	cat <<EOF
$USAGE

Each syncguard mode, cell by cell, against its limit line measured in
the same rounds: tgt's null store with the same command mix, and fio on
the LUN's own file with the same durability semantics.  Writes
build/bench.csv, build/bench.json, build/bench-rounds.csv and
build/bench.png.

  --seconds S    measured seconds per run and round (default $secs; each
                 run is preceded by ${warmup}s unmeasured)
  --rounds N     rounds per cell, interleaved with its null store and
                 fio runs; the ratio is the median of the rounds' own
                 ratios (default $rounds)
  --flush-ms MS  the model's flush time (default $flush_ms)
  --mechanisms   also each adaptive mechanism switched off (bsopts
                 flush_batch=off, sync_loop=off,
                 write_sync=group and =dsync, engine=threads,
                 write-back direct=yes), in the cells where it acts
                 (4 KiB, none/fua/flush), and a table of each
                 mechanism's gain: the cell's IOPS with it over
                 without, the median of the rounds' own ratios
  --peers        also tgt's rdwr (WCE=1, WCE=0) and aio (rows with IOPS,
                 CPU and the null store's ratio, no limit)
  --tgtd-args ARGS
                 options for the tgtd that runs the cells, the null
                 store and the 4-LUN line (words split on blanks), e.g.
                 "--nr_iothreads 4" (tgt's worker threads per LUN)
  --freeze-probe also measure, in every run, how long the machine
                 stood still (a virtual machine's host can stop its
                 CPUs): a SCHED_FIFO thread's 2 ms sleeps that
                 end more than 4 ms late (build/freezeprobe, root).
                 Columns frz% (the cell's runs) and lim% (its null
                 store's and fio's runs), in % of the measured time.
                 The probe's 500 wake-ups a second may move the cells
                 it watches, so it is off by default
  --quick        the disk, 4 KiB, QD 1 and 32, the 4-LUN line for fua
                 only, no memory step (a few minutes)
  --self-check   check the table's arithmetic on canned rounds and that
                 freezeprobe sees a stop, and exit
EOF
	exit 0
}
# Print value $3 of option $2 if it is a number > 0 (decimal; whole, and
# without leading zeros' octal meaning, when $1 is "whole"); else the
# usage error.
number() {
	case $1:$3 in
	whole:*[!0-9]*|whole:|whole:???????*) ;;	# at most 6 digits
	whole:*) [ "$((10#$3))" -gt 0 ] && { echo "$((10#$3))"; return; } ;;
	*) awk -v v="$3" 'BEGIN { exit !(v ~ /^[0-9]*\.?[0-9]+$/ && v + 0 > 0) }' &&
	   { echo "$3"; return; } ;;
	esac
	echo "bench: $2 wants a ${1:+whole }number > 0, not '$3'" >&2
	usage
}
self_check_only=
freeze_probe=
while [ $# -gt 0 ]; do
	case $1 in
	--seconds|--rounds|--flush-ms|--tgtd-args)
		[ $# -ge 2 ] || { echo "bench: $1 wants a value" >&2; usage; } ;;
	esac
	case $1 in
	--seconds) secs=$(number "" "$1" "$2") || exit 2; shift 2 ;;
	--rounds) rounds=$(number whole "$1" "$2") || exit 2; shift 2 ;;
	--flush-ms) flush_ms=$(number "" "$1" "$2") || exit 2; shift 2 ;;
	--mechanisms|--variants)
		extra="$extra $mechanism_configs" sizes=4k discs="none fua flush"
		four_discs= memory= mechanisms=1; shift ;;
	--peers) extra="$extra rdwr-wce1 rdwr-wce0 aio"; shift ;;
	--tgtd-args) tgtd_args=$2; shift 2 ;;
	--freeze-probe) freeze_probe=1; shift ;;
	--quick) devices=disk sizes=4k four_discs=fua memory=; shift ;;
	--self-check) self_check_only=1; shift ;;
	-h|--help) help ;;
	*) usage ;;
	esac
done
configs="$modes$extra"

bench=$top/tools/iscsi-syncbench
model=$top/tools/syncguard-devmodel
probe=$top/build/freezeprobe
tp=$top/scripts/tgtd-private
module=$top/bs_syncguard.so
out=$top/build
csv=$out/bench.csv
rounds_csv=$out/bench-rounds.csv
say() { printf 'bench: %s\n' "$*" >&2; }

# ---- the table's arithmetic (bench_summary), and its self-check ----

# The rounds file's columns: one row per run of one round.  kind: lun (a
# configuration's cell), null (tgt's null store, config "null") or fio
# (the local figure on config's file, semantics named); luns 1, or 4 for
# the 4-LUN line.  cpu_us and commands are tgtd's over the measured
# window (empty for fio); syscalls, tgtd's system calls over it (perf's
# count of raw_syscalls:sys_enter; empty without perf).  frozen_ms: how
# long the probe's CPU stood still in the measured window (freezeprobe;
# empty without --freeze-probe or where it cannot run at SCHED_FIFO).
rounds_header="device,luns,config,sync,block_size,queue_depth,round,kind,semantics,iops,lat_mean_us,lat_p99_us,commands,cpu_us,errors,syscalls,frozen_ms"

# The median of the numbers in the blank-separated string s ("" for
# none), for the awk programs below.
median_awk='
function median(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	if (!n) return ""
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	return n % 2 ? a[(n + 1) / 2] + 0 : (a[n / 2] + a[n / 2 + 1]) / 2
}
'

# The cells' table (CSV) from a rounds file: per (device, luns, size, QD,
# discipline, configuration), medians over the rounds of IOPS, of the
# limit, of IOPS / limit and of IOPS / null IOPS, each ratio taken
# within one round (a round that lacks a figure is left out of that
# median); CPU and system calls per command as sums over the rounds.  Configurations
# whose rows have no semantics (peers) get no limit.  bound: "tgt" where
# the null store is within 10% of the cell (cell / null >= 1 / 1.1), else
# "limit"; meets: ratio >= 0.85 or tgt-bound.  frozen_pct: the share of
# the cell's measured windows (secs each) in which the machine was
# frozen; limit_frozen_pct, the same over its null store's and fio's
# runs (empty where the cell has no limit or freezeprobe measured none
# of them).  A fio run's window is the probe's guess: it starts the
# warm-up after fio is launched, so it leads fio's measured window by
# fio's own set-up time.  ratio_rounds: the rounds the ratio's median
# stands on (empty without a limit).
summary_awk="$median_awk"'
function add(arr, k, v) { arr[k] = (k in arr) ? arr[k] " " v : v }
function num(x, fmt) { return x == "" ? "" : sprintf(fmt, x) }
function pct(ms, runs) { return runs ? sprintf("%.1f", ms * 100 / (runs * secs * 1000)) : "" }
NR == 1 { next }
{
	g = $1 SUBSEP $2 SUBSEP $5 SUBSEP $6 SUBSEP $4	# the group
	r = $7
	if ($8 == "null") {
		if ($10 > 0) { niops[g, r] = $10; nlat[g, r] = $11; add(nall, g, $10); add(nlall, g, $11) }
		ncpu[g] += $14; ncmd[g] += $13
		if ($16 != "") { nsys[g] += $16; nscmd[g] += $13 }
		if ($17 != "") { nfz[g] += $17; nfzn[g]++ }
		next
	}
	if ($8 == "fio") {
		if ($10 > 0) { fiops[g, $3, r] = $10; flat[g, $3, r] = $11
			add(fall, g SUBSEP $3, $10); add(flall, g SUBSEP $3, $11) }
		if ($17 != "") { ffz[g, $3] += $17; ffzn[g, $3]++ }
		next
	}
	c = g SUBSEP $3
	if (!(c in seen)) { seen[c] = 1; order[++n] = c; sem[c] = $9 }
	err[c] += $15
	if ($10 > 0) { ciops[c, r] = $10; add(call, c, $10); rs[c] = rs[c] " " r }
	cpu[c] += $14; cmd[c] += $13
	if ($16 != "") { sys[c] += $16; scmd[c] += $13 }
	if ($17 != "") { fz[c] += $17; fzn[c]++ }
}
END {
	print "device,luns,config,sync,block_size,queue_depth,rounds,iops,semantics,local_iops,local_lat_us,null_iops,null_lat_us,limit,ratio,vs_null,bound,meets,cpu_us_per_cmd,null_cpu_us_per_cmd,errors,syscalls_per_cmd,null_syscalls_per_cmd,vs_series,frozen_pct,limit_frozen_pct,ratio_rounds"
	for (k = 1; k <= n; k++) {
		c = order[k]; split(c, f, SUBSEP)
		g = f[1] SUBSEP f[2] SUBSEP f[3] SUBSEP f[4] SUBSEP f[5]
		lims = ""; rats = ""; vsn = ""; sers = ""
		nr = split(substr(rs[c], 2), rr, " ")
		for (i = 1; i <= nr; i++) {
			r = rr[i]; lim = ""
			if (sem[c] != "" && ((g, r) in niops)) {
				if (f[5] == "flush-only" || sem[c] == "-")
					lim = f[4] == 1 && f[2] == 1 ? 1e6 / nlat[g, r] : niops[g, r]
				else if ((g, f[6], r) in fiops) {
					if (f[4] == 1 && f[2] == 1)
						lim = 1e6 / (nlat[g, r] + flat[g, f[6], r])
					else {
						lim = niops[g, r] < fiops[g, f[6], r] ? niops[g, r] : fiops[g, f[6], r]
						sers = sers " " ciops[c, r] * (1 / niops[g, r] + 1 / fiops[g, f[6], r])
					}
				}
			}
			if (lim != "") { lims = lims " " lim; rats = rats " " ciops[c, r] / lim }
			if ((g, r) in niops) vsn = vsn " " ciops[c, r] / niops[g, r]
		}
		limit = median(lims); ratio = median(rats); vs = median(vsn)
		nrat = rats == "" ? "" : split(substr(rats, 2), tmp, " ")
		bound = vs == "" || sem[c] == "" ? "" : vs >= 1 / 1.1 ? "tgt" : "limit"
		meets = ratio == "" ? "" : (ratio >= 0.85 || bound == "tgt") ? "yes" : "no"
		lfz = limit == "" ? "" : pct(nfz[g] + ffz[g, f[6]], nfzn[g] + ffzn[g, f[6]])
		printf "%s,%s,%s,%s,%s,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%d,%s,%s,%s,%s,%s,%s\n",
			f[1], f[2], f[6], f[5], f[3], f[4], nr, num(median(call[c]), "%.0f"),
			sem[c], num(median(fall[g, f[6]]), "%.0f"), num(median(flall[g, f[6]]), "%.1f"),
			num(median(nall[g]), "%.0f"), num(median(nlall[g]), "%.1f"),
			num(limit, "%.0f"), num(ratio, "%.3f"), num(vs, "%.3f"), bound, meets,
			(cmd[c] > 0 ? sprintf("%.1f", cpu[c] / cmd[c]) : ""),
			(ncmd[g] > 0 ? sprintf("%.1f", ncpu[g] / ncmd[g]) : ""), err[c],
			(scmd[c] > 0 ? sprintf("%.2f", sys[c] / scmd[c]) : ""),
			(nscmd[g] > 0 ? sprintf("%.2f", nsys[g] / nscmd[g]) : ""),
			num(median(sers), "%.3f"), pct(fz[c], fzn[c]), lfz, nrat
	}
}'
bench_summary() { awk -F, -v secs="$secs" "$summary_awk" "$1"; }

# Each mechanism's gain (CSV) from a rounds file $1, given the lines
# "CONFIG|NAME|WITH" on stdin (mechanism_of): per cell where both ran,
# the median over the rounds of IOPS(WITH) / IOPS(CONFIG), each ratio
# taken within one round; then a line per mechanism and device with the
# least, the median and the greatest of its cells' gains ("all").
mechanism_awk="$median_awk"'
FNR == NR { split($0, m, "|"); name[m[1]] = m[2]; with[m[1]] = m[3]; next }
FNR == 1 { next }
$8 == "lun" && $2 == 1 && $10 > 0 { iops[$1, $4, $5, $6, $3, $7] = $10; cell[$1, $4, $5, $6] = 1 }
END {
	print "mechanism,device,sync,block_size,queue_depth,config,with,gain,rounds"
	for (c in name) for (k in cell) {
		split(k, f, SUBSEP); rs = ""
		for (r = 1; r <= 99; r++)
			if (((f[1], f[2], f[3], f[4], c, r) in iops) &&
			    ((f[1], f[2], f[3], f[4], with[c], r) in iops))
				rs = rs " " iops[f[1], f[2], f[3], f[4], with[c], r] / iops[f[1], f[2], f[3], f[4], c, r]
		if (rs == "") continue
		g = median(rs)
		printf "%s,%s,%s,%s,%s,%s,%s,%.3f,%d\n", name[c], f[1], f[2], f[3], f[4], c, with[c], g, split(rs, x, " ")
		all[name[c], f[1]] = all[name[c], f[1]] " " g
	}
	for (k in all) {
		split(k, f, SUBSEP); n = split(all[k], a, " "); lo = hi = a[1]
		for (i = 2; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
		printf "%s,%s,all,,,%d cells,,%.3f,%.3f-%.3f\n", f[1], f[2], n, median(all[k]), lo, hi
	}
}'
mechanism_gains() {
	local c
	for c in $extra; do
		[ -n "$(mechanism_of "$c")" ] && echo "$c|$(mechanism_of "$c")"
	done | awk -F, "$mechanism_awk" - "$1"
}

# The mechanisms' table from the gains CSV $1: per mechanism and device
# its summary, then its cells.
mechanism_table() {
	{ head -1 "$1"; tail -n +2 "$1" | sort -t, -k1,1 -k2,2 -k5,5n -k3,3; } | awk -F, '
	NR == 1 { next }
	{ k = $1 SUBSEP $2; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
	$3 == "all" { head[k] = sprintf("%s, %s: gain %.2f, %s over %s", $1, $2, $8, $9, $6); next }
	{ cells[k] = cells[k] sprintf("    %-4s QD %-2s %-5s %-28s %.2f\n", $4 / 1024 "k", $5, $3, $6 " vs " $7, $8) }
	END { for (i = 1; i <= n; i++) printf "%s\n%s", head[order[i]], cells[order[i]] }'
}

# the table, from the cells' CSV
report_table() {
	awk -F, -v frz="$freeze_probe" -v want="$rounds" '
	NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
	function v(name) { return $h[name] }
	function sz(b) { return b % 1024 ? b : b / 1024 "k" }
	function mode(c) { sub(/^sg-/, "", c); return c }
	BEGIN {
		printf "%-4s %4s %4s %3s %-10s %-9s %-9s %8s %8s %8s %6s %8s %-9s %7s %7s %7s %6s%s\n",
			"dev", "LUNs", "size", "QD", "sync", "mode", "local as", "IOPS",
			"limit", "null", "ratio", "vs null", "bound", "cpu/cmd", "null",
			"sys/cmd", "null", frz ? sprintf(" %5s %5s", "frz%", "lim%") : ""
	}
	{
		if (v("device") != last) { if (NR > 2) print ""; last = v("device") }
		b = v("bound") == "tgt" ? "tgt-bound" : v("bound") == "" ? "-" : "limit"
		flag = v("meets") == "no" ? " <0.85" : ""
		# a round without a result (the cell run, the null store run or
		# the fio run failed) is left out of the medians: said, so that
		# one round is not read as three
		n = v("rounds")
		if (v("ratio_rounds") != "" && v("ratio_rounds") < n)
			n = v("ratio_rounds")
		if (n < want)
			flag = flag sprintf(" %d/%d rounds", n, want)
		printf "%-4s %4s %4s %3s %-10s %-9s %-9s %8s %8s %8s %6s %8s %-9s %7s %7s %7s %6s%s%s\n",
			v("device"), v("luns"), sz(v("block_size")), v("queue_depth"), v("sync"),
			mode(v("config")), v("semantics") == "" ? "-" : v("semantics") == "-" ? "null" : v("semantics"),
			v("iops"), v("limit") == "" ? "-" : v("limit"), v("null_iops"),
			v("ratio") == "" ? "-" : sprintf("%.2f", v("ratio")),
			v("vs_null") == "" ? "-" : sprintf("%.2f", v("vs_null")), b,
			v("cpu_us_per_cmd"), v("null_cpu_us_per_cmd"),
			v("syscalls_per_cmd") == "" ? "-" : v("syscalls_per_cmd"),
			v("null_syscalls_per_cmd") == "" ? "-" : v("null_syscalls_per_cmd"),
			frz ? sprintf(" %5s %5s", v("frozen_pct") == "" ? "-" : v("frozen_pct"),
				      v("limit_frozen_pct") == "" ? "-" : v("limit_frozen_pct")) : "", flag
	}' "$csv"
}

# The arithmetic on canned rounds, against figures worked out by hand.
self_check() {
	local tmp got want short
	tmp=$(mktemp) || return 1
	cat >"$tmp" <<EOF
$rounds_header
disk,1,null,fua,4096,1,1,null,,10000,100,,100,600,0,900,0
disk,1,null,fua,4096,1,2,null,,8000,120,,100,0,0,920,5
disk,1,null,fua,4096,1,3,null,,12000,80,,100,0,0
disk,1,sg-wt,fua,4096,1,1,fio,dsync,1111,900,,,,,,15
disk,1,sg-wt,fua,4096,1,2,fio,dsync,1136,880,,,,
disk,1,sg-wt,fua,4096,1,3,fio,dsync,1000,1000,,,,
disk,1,sg-wt,fua,4096,1,1,lun,dsync,1000,1000,,100,1000,0,1000,10
disk,1,sg-wt,fua,4096,1,2,lun,dsync,900,1100,,100,2000,1,1050,20
disk,1,sg-wt,fua,4096,1,3,lun,dsync,1100,900,,100,3000,0
disk,1,null,none,4096,32,1,null,,10000,3200,,10000,0,0
disk,1,null,none,4096,32,2,null,,10000,3200,,10000,0,0
disk,1,null,none,4096,32,3,null,,10000,3200,,10000,0,0
disk,1,sg-plp,none,4096,32,1,fio,direct,50000,600,,,,
disk,1,sg-plp,none,4096,32,2,fio,direct,50000,600,,,,
disk,1,sg-plp,none,4096,32,1,lun,direct,9500,3300,,100,0,0
disk,1,sg-plp,none,4096,32,2,lun,direct,9600,3300,,100,0,0
disk,1,sg-plp,none,4096,32,3,lun,direct,10000,3300,,100,0,0
disk,1,sg-wb,none,4096,32,1,fio,buffered,90000,300,,,,
disk,1,sg-wb,none,4096,32,1,lun,buffered,8800,3600,,100,0,0
disk,1,sg-wb,none,4096,32,2,lun,buffered,8000,4000,,100,0,0
disk,1,sg-wb,none,4096,32,3,lun,buffered,9200,3400,,100,0,0
disk,4,null,flush,4096,8,1,null,,20000,1600,,40000,0,0
disk,4,null,flush,4096,8,2,null,,20000,1600,,40000,0,0
disk,4,sg-wb,flush,4096,8,1,fio,fdatasync,3000,10000,,,,
disk,4,sg-wb,flush,4096,8,2,fio,fdatasync,2000,16000,,,,
disk,4,sg-wb,flush,4096,8,1,lun,fdatasync,1500,20000,,100,0,0
disk,4,sg-wb,flush,4096,8,2,lun,fdatasync,1500,20000,,100,0,0
slow,1,null,flush-only,4096,1,1,null,,20000,50,,100,0,0
slow,1,sg-wt,flush-only,4096,1,1,lun,-,10000,100,,100,0,0
disk,1,sg-wt-nobatch,fua,4096,1,1,lun,dsync,500,2000,,100,0,0
disk,1,sg-wt-nobatch,fua,4096,1,2,lun,dsync,1000,1000,,100,0,0
disk,1,sg-wt-nobatch,fua,4096,1,3,lun,dsync,1000,1000,,100,0,0
EOF
	secs=1 bench_summary "$tmp" >"$tmp.cells"
	got=$(grep -v nobatch "$tmp.cells" | cut -d, -f1-8,14-26)
	gains=$(extra="sg-wt-nobatch sg-plp-threads" mechanism_gains "$tmp")
	# the table marks the cells with fewer rounds than asked: sg-plp's
	# ratio of 2 (round 3 has no fio), sg-wb none's of 1, the 4-LUN
	# line's 2 and flush-only's 1 of 3
	short=$(csv=$tmp.cells rounds=3 freeze_probe= report_table |
		grep -o "[0-9]/3 rounds" | tr '\n' ' ')
	rm -f "$tmp" "$tmp.cells"
	if [ "$short" != "2/3 rounds 1/3 rounds 2/3 rounds 1/3 rounds " ]; then
		say "self-check: cells with fewer rounds are not marked ($short)"
		return 1
	fi
	# flush batching: sg-wt over sg-wt-nobatch per round: 2, 0.9, 1.1
	want_gains="mechanism,device,sync,block_size,queue_depth,config,with,gain,rounds
flush batching (flush_batch auto/off),disk,fua,4096,1,sg-wt-nobatch,sg-wt,1.100,3
flush batching (flush_batch auto/off),disk,all,,,1 cells,,1.100,1.100-1.100"
	# every mode runs in every cell, a mechanism's row only where it acts
	acts sg-wt disk flush-only 1 && acts sg-plp slow none 32 &&
	acts sg-wt-nobatch disk fua 32 && ! acts sg-wt-nobatch disk fua 1 &&
	! acts sg-plp-threads slow none 32 && ! acts sg-wb-noloop disk fua 1 ||
		gains="acts: wrong"
	if [ "$gains" != "$want_gains" ]; then
		say "self-check: the mechanisms' gains are wrong:"
		diff <(echo "$want_gains") <(echo "$gains") >&2
		return 1
	fi
	# sg-wt QD1 fua: limits 1e6/1000, 1e6/1000, 1e6/1080 (median 1000),
	# ratios 1, 0.9, 1.188 (median 1); vs null 0.1, 0.1125, 0.0917;
	# CPU 6000 us / 300 commands; the null's 600 / 300; system calls
	# from the rounds that counted them, 2050 / 200 and 1820 / 200
	# (none counted elsewhere: empty).  sg-plp: the
	# null store is the limit (fio 50000), ratios 0.95 0.96 (round 3
	# has no fio), vs null 0.95 0.96 1 (median 0.96 >= 1/1.1: tgt).
	# sg-wb none: limit from round 1 alone (8800 / 10000).  The 4-LUN
	# line: fio the lesser (3000, 2000: ratios 0.5 and 0.75, the median
	# of two their mean).  flush-only at QD1: 1 / the null's latency.
	# vs_series (QD > 1 with a fio line): IOPS x (1/null + 1/fio), per
	# round: sg-plp 9500 and 9600 x 1.2e-4 (1.140, 1.152), sg-wb 8800 x
	# 1.1111e-4 (0.978), the 4-LUN line 0.575 and 0.825.  Frozen, with
	# 1 s windows: sg-wt's 10 + 20 ms in 2 measured runs (1.5%); its
	# limit runs' 0 + 5 (null) and 15 (fio) ms in 3 (0.67%); none
	# measured elsewhere (empty).
	want="device,luns,config,sync,block_size,queue_depth,rounds,iops,limit,ratio,vs_null,bound,meets,cpu_us_per_cmd,null_cpu_us_per_cmd,errors,syscalls_per_cmd,null_syscalls_per_cmd,vs_series,frozen_pct,limit_frozen_pct
disk,1,sg-wt,fua,4096,1,3,1000,1000,1.000,0.100,limit,yes,20.0,2.0,1,10.25,9.10,,1.5,0.7
disk,1,sg-plp,none,4096,32,3,9600,10000,0.955,0.960,tgt,yes,0.0,0.0,0,,,1.146,,
disk,1,sg-wb,none,4096,32,3,8800,10000,0.880,0.880,limit,yes,0.0,0.0,0,,,0.978,,
disk,4,sg-wb,flush,4096,8,2,1500,2500,0.625,0.075,limit,no,0.0,0.0,0,,,0.700,,
slow,1,sg-wt,flush-only,4096,1,1,10000,20000,0.500,0.500,limit,no,0.0,0.0,0,,,,,"
	if [ "$got" != "$want" ]; then
		say "self-check: the table's arithmetic is wrong:"
		diff <(echo "$want") <(echo "$got") >&2
		return 1
	fi
	say "self-check: the table's arithmetic on canned rounds: ok"
	[ -z "$self_check_only$freeze_probe" ] || probe_check
}

# freezeprobe counts a stop it sat through: stopped (SIGSTOP) for 0.4 s
# of a 1.2 s window, it must report one freeze of 0.3-0.6 s in all.
probe_check() {
	local pid got tmp
	[ -x "$probe" ] || { say "self-check: build/freezeprobe missing (make build/freezeprobe)"; return 1; }
	tmp=$(mktemp) || return 1
	"$probe" 1.2 >"$tmp" &
	pid=$!
	sleep 0.3; kill -STOP "$pid"; sleep 0.4; kill -CONT "$pid"
	wait "$pid"
	got=$(cat "$tmp"); rm -f "$tmp"
	case $got in
	"- - -") say "self-check: freezeprobe cannot run at SCHED_FIFO here: the frozen columns stay empty"; return 0 ;;
	esac
	if ! awk -v g="$got" 'BEGIN { split(g, f, " "); exit !(f[2] >= 1 && f[3] >= 300 && f[1] >= f[3] && f[1] <= 600) }'; then
		say "self-check: freezeprobe missed a 0.4 s stop: \"$got\""
		return 1
	fi
	say "self-check: freezeprobe saw a 0.4 s stop (ms frozen, freezes, longest ms: $got): ok"
}
self_check || exit 1
[ -n "$self_check_only" ] && exit 0

# ---- setting up ----

[ -x "$bench" ] && [ -x "$model" ] && [ -f "$module" ] || { say "run make first"; exit 1; }
command -v fio >/dev/null && command -v jq >/dev/null ||
	{ say "fio and jq are needed (make deps)"; exit 1; }
mkdir -p "$out"
work=$(mktemp -d "$out/bench.XXXXXX") || exit 1
cleanup() {
	trap - EXIT INT TERM
	for d in main mem-sg mem-rdwr; do "$tp" stop "$work/$d" 2>/dev/null; done
	for m in "$work"/slow-*.mnt; do	# the models exit when unmounted
		mountpoint -q "$m" 2>/dev/null && fusermount3 -u -z "$m" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "bench: interrupted" >&2; exit 130' INT TERM

# bstype, bsopts for a configuration
lun_spec() {
	case $1 in
	sg-wt) echo "syncguard|mode=write-through" ;;
	sg-wb) echo "syncguard|mode=write-back" ;;
	sg-wbd) echo "syncguard|mode=write-back;direct=yes" ;;
	sg-plp) echo "syncguard|mode=plp" ;;
	sg-wt-dsync) echo "syncguard|mode=write-through;write_sync=dsync" ;;
	sg-wb-dsync) echo "syncguard|mode=write-back;write_sync=dsync" ;;
	sg-wt-group) echo "syncguard|mode=write-through;write_sync=group" ;;
	sg-wb-group) echo "syncguard|mode=write-back;write_sync=group" ;;
	sg-wt-threads) echo "syncguard|mode=write-through;engine=threads" ;;
	sg-wb-threads) echo "syncguard|mode=write-back;engine=threads" ;;
	sg-wt-nobatch) echo "syncguard|mode=write-through;flush_batch=off" ;;
	sg-wb-nobatch) echo "syncguard|mode=write-back;flush_batch=off" ;;
	sg-wb-noloop) echo "syncguard|mode=write-back;sync_loop=off" ;;
	sg-plp-threads) echo "syncguard|mode=plp;engine=threads" ;;
	rdwr-wce1|rdwr-wce0) echo "rdwr|" ;;
	aio) echo "aio|" ;;
	esac
}

# The durability semantics a cell of configuration $1 and discipline $2
# promises, as a local workload (fio_args): "dsync" (each write durable
# when answered), "buffered" (a write that reaches the page cache),
# "fdatasync" (a write, then a flush of the whole file: write-back's
# WRITE + SYNCHRONIZE CACHE), "direct" (a write that reaches the device,
# whose cache is protected: plp); "-" for flush-only (a clean
# SYNCHRONIZE CACHE: nothing local to do, the null store alone); empty
# for tgt's stores (no limit).  write-through's and plp's SYNCHRONIZE
# CACHE is free (every write already is as durable as it gets), so their
# flush is their none.
semantics() {
	[ "$2" = flush-only ] && { case $1 in sg-*) echo - ;; esac; return; }
	case $1:$2 in
	sg-wt*:*) echo dsync ;;
	sg-wb*:none) echo buffered ;;
	sg-wb*:fua) echo dsync ;;
	sg-wb*:flush) echo fdatasync ;;
	sg-plp*:*) echo direct ;;
	esac
}

# fio's options for semantics $1 at depth $2 on device $3.  On the FUSE
# model fio's figures for the disk's workloads are no ceiling: io_uring
# hands every FUSE request to io-wq, which runs them one at a time (an
# O_DIRECT write at iodepth 32: about 320 IOPS), an O_DSYNC write
# submitted so reaches the model with no fsync at all (its counters show
# none), and FUSE runs one fsync of a file at a time, so Q writers that
# each flush share nothing.  There the local figures are synchronous
# writers ($2 of them for plain writes), and a durable write at depth Q
# is what group commit can reach at best: Q writes made durable by one
# flush (one writer, a flush after every Q writes; at depth 1 a flush
# after each).
fio_args() {
	case $1:$3 in
	dsync:slow|fdatasync:slow) echo "--direct=0 --ioengine=psync --fdatasync=$2" ;;
	direct:slow) echo "--direct=1 --ioengine=psync --numjobs=$2" ;;
	dsync:*) echo "--direct=1 --sync=dsync --ioengine=io_uring --iodepth=$2" ;;
	buffered:*) echo "--direct=0 --ioengine=io_uring --iodepth=$2" ;;
	fdatasync:*) echo "--direct=0 --fdatasync=1 --ioengine=psync --numjobs=$2" ;;
	direct:*) echo "--direct=1 --ioengine=io_uring --iodepth=$2" ;;
	esac
}

# Backing file $3 (1: the single LUN's; 2..5: the 4-LUN line's, disk
# only) of (device $1, configuration $2),
# written whole first (fio and the LUN then see the same file state: no
# hole to allocate); slow ones behind a FUSE model of their own.
prepare_file() {
	local dev=$1 config=$2 n=$3 img m
	if [ "$dev" = disk ]; then
		img=$work/disk-$config-$n.img
		dd if=/dev/zero of="$img" bs=1M count=$((n == 1 ? 128 : 64)) \
			conv=fsync status=none
		echo "$img"
		return
	fi
	m=$work/slow-$config.mnt
	mkdir -p "$m"
	truncate -s 64M "$work/slow-$config.stable"
	"$model" --image "$work/slow-$config.stable" --flush-ms "$flush_ms" \
		--max-versions 1 "$m" -f >>"$work/model.log" 2>&1 &
	for _ in $(seq 100); do
		[ -e "$m/disk.img" ] && break
		sleep 0.02
	done
	dd if=/dev/zero of="$m/disk.img" bs=1M count=64 conv=notrunc,fsync \
		status=none
	echo "$m/disk.img"
}

iqn_of() { echo "iqn.2026-11.org.syncguard:bench-$1"; }

# Does configuration $2 run on device $1?  Not write-back direct=yes on
# the model: it reports no O_DIRECT alignment (4 KiB is taken), so
# direct=yes is refused for 512-byte blocks there; nor engine=threads,
# which is what engine=auto takes on FUSE (no RWF_NOWAIT).
runs_on() {
	case $1:$2 in slow:sg-wbd|slow:sg-*-threads) return 1 ;; esac
}



# Is discipline $1 measured at size $2?  SYNCHRONIZE CACHE alone moves
# no data: flush-only at one size is enough.
measured_at() { [ "$1" != flush-only ] || [ "$2" = 4k ]; }

# add LUN $3 of target $2 for configuration $4 on file $5; sets URL
# entry $1
add_lun() {
	local key=$1 tid=$2 lun=$3 config=$4 path=$5 spec bsopts iqn=$6
	spec=$(lun_spec "$config")
	bsopts=${spec#*|}
	case $path:$config in */slow-*:sg-plp*) bsopts="$bsopts;alloc_check=no" ;; esac
	"$tp" lun "$work/main" "$tid" "$lun" "$path" "$bsopts" "" "${spec%|*}" ||
		{ say "LUN $key failed"; return 1; }
	[ "$config" = rdwr-wce0 ] && "$tp" adm "$work/main" --lld iscsi --op update \
		--mode logicalunit --tid "$tid" --lun "$lun" --params \
		mode_page=8:0:18:0x10:0:0xff:0xff:0:0:0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0
	URL[$key]=$("$tp" url "$work/main" "$iqn" "$lun")
}

# targets: one per device (a LUN per configuration), "four" (4 LUNs per
# mode on the disk, and 4 null LUNs), "null" (one null LUN)
setup_luns() {
	local tid=0 dev config lun i iqn
	declare -gA URL FILE
	for dev in $devices; do		# mount models before tgtd starts
		for config in $configs; do
			runs_on "$dev" "$config" || continue
			FILE[$dev,$config]=$(prepare_file "$dev" "$config" 1) || return 1
		done
	done
	for config in $modes; do
		for i in 1 2 3 4; do	# a file is exported by one LUN only
			FILE[four,$config,$i]=$(prepare_file disk "$config" "$((i + 1))") || return 1
		done
	done
	TGTD_PRIVATE_ARGS=$tgtd_args "$tp" start "$work/main" "$module" >/dev/null ||
		{ say "tgtd did not start (--tgtd-args '$tgtd_args'?)"; return 1; }
	for dev in $devices; do
		tid=$((tid + 1)) lun=0 iqn=$(iqn_of "$dev")
		"$tp" target "$work/main" "$tid" "$iqn" || return 1
		for config in $configs; do
			lun=$((lun + 1))
			runs_on "$dev" "$config" || continue
			add_lun "$dev,$config" "$tid" "$lun" "$config" \
				"${FILE[$dev,$config]}" "$iqn" || return 1
		done
	done
	tid=$((tid + 1)) lun=0 iqn=$(iqn_of four)
	"$tp" target "$work/main" "$tid" "$iqn" || return 1
	for config in $modes null; do
		for i in 1 2 3 4; do
			lun=$((lun + 1))
			if [ "$config" = null ]; then
				"$tp" lun "$work/main" "$tid" "$lun" /dev/null "" "" null &&
				URL[four,null,$i]=$("$tp" url "$work/main" "$iqn" "$lun") || return 1
			else
				add_lun "four,$config,$i" "$tid" "$lun" "$config" \
					"${FILE[four,$config,$i]}" "$iqn" || return 1
			fi
		done
	done
	tid=$((tid + 1)) iqn=$(iqn_of null)
	"$tp" target "$work/main" "$tid" "$iqn" &&
	"$tp" lun "$work/main" "$tid" 1 /dev/null "" "" null || return 1
	URL[null]=$("$tp" url "$work/main" "$iqn" 1)
	tgtd_pid=$(cat "$work/main/pid")
	tick_us=$((1000000 / $(getconf CLK_TCK)))
	# system calls per command where perf can count tgtd's
	perf_ok=
	perf stat -e raw_syscalls:sys_enter -p "$tgtd_pid" -x, -o /dev/null \
		-- sleep 0.01 >/dev/null 2>&1 && perf_ok=1
	[ -n "$perf_ok" ] || say "perf cannot count tgtd's system calls: no sys/cmd column"
}

# tgtd's utime + stime in clock ticks (fields 14 and 15 of its stat,
# counted after the command name's closing parenthesis)
tgtd_ticks() {
	local f
	f=$(cat "/proc/$tgtd_pid/stat") || return 1
	f=${f##*) }
	awk '{ print $12 + $13 }' <<<"$f"
}

now_s() { date +%s.%N; }

# Sleep until UNIX time $1 (seconds, fractional)
sleep_until() {
	local left
	left=$(awk -v t="$1" -v n="$(now_s)" 'BEGIN { d = t - n; printf "%.3f", (d > 0 ? d : 0) }')
	sleep "$left"
}

# tgtd's system calls a second over the next $1 seconds (perf's count
# of raw_syscalls:sys_enter), or nothing without perf
tgtd_syscall_rate() {
	[ -n "$perf_ok" ] || return 0
	perf stat -e raw_syscalls:sys_enter -p "$tgtd_pid" -x, -o "$work/perf" \
		-- sleep "$1" >/dev/null 2>&1 &&
	awk -F, -v s="$1" '$3 == "raw_syscalls:sys_enter" && $1 ~ /^[0-9]+$/ {
		printf "%.0f", $1 / s }' "$work/perf"
}

# How long the machine was frozen in the next $1 seconds (freezeprobe's
# milliseconds), or nothing without --freeze-probe or where the probe
# cannot tell
frozen_ms() {
	local f
	[ -n "$freeze_probe" ] || return 0
	f=$("$probe" "$1" 2>/dev/null) || return 0
	f=${f%% *}
	[ "$f" = - ] || echo "$f"
}

# One iscsi-syncbench run of discipline $1, size $2, depth $3 on URLs
# $4...: prints "iops,lat_mean_us,lat_p99_us,commands,cpu_us,errors,
# syscalls,frozen_ms" (empty on failure; syscalls empty without perf: the rate
# over the middle 80% of the window, times its length, so perf's own
# start-up falls outside it).  It starts measuring at a set moment (--start-at,
# after its logins), so tgtd's CPU time is read at the start and the end
# of the measured window.  Every run starts with nothing dirty anywhere
# (sync): else the background writeback of a write-back run before it
# would slow whichever follows.
sb_run() {
	local disc=$1 size=$2 qd=$3 lead t0 a res
	shift 3
	sync
	for lead in $(( $# > 1 ? 1 : 0 )).3 2.5; do	# a slow start: once more, later
		t0=$(awk -v n="$(now_s)" -v l="$lead" 'BEGIN { printf "%.3f", n + l }')
		{
			sleep_until "$(awk -v t="$t0" -v w="$warmup" 'BEGIN { printf "%.3f", t + w }')"
			a=$(tgtd_ticks)
			frozen_ms "$secs" >"$work/frozen" &
			{ sleep "$(awk -v s="$secs" 'BEGIN { print s / 10 }')"
			  tgtd_syscall_rate "$(awk -v s="$secs" 'BEGIN { print s * 0.8 }')"
			} >"$work/rate" 2>/dev/null &
			sleep "$secs"
			echo $(( $(tgtd_ticks) - a ))
			wait
		} >"$work/ticks" 2>/dev/null &
		res=$("$bench" --csv --no-progress --timeout 10 -t "$secs" \
			--warmup "$warmup" --start-at "$t0" -q "$qd" -b "$size" \
			-s "$disc" "$@" 2>>"$work/bench.err")
		wait $!
		[ -n "$res" ] && break
	done
	[ -n "$res" ] || return 0
	awk -F, -v ticks="$(cat "$work/ticks")" -v tick="$tick_us" \
		-v rate="$(cat "$work/rate" 2>/dev/null)" -v secs="$secs" \
		-v frozen="$(cat "$work/frozen" 2>/dev/null)" '
	NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
	NR == 2 {
		n = $h["read_ops"] + $h["write_ops"] + $h["write_fua_ops"] + $h["synchronize_cache_ops"]
		printf "%s,%s,%s,%d,%d,%s,%s,%s\n", $h["iops"], $h["lat_mean_us"], $h["lat_p99_us"],
			n, ticks * tick, $h["errors"], rate == "" ? "" : sprintf("%.0f", rate * secs), frozen
	}' <<<"$res"
}

# One fio run of semantics $1, size $2, depth $3 on device $4's files
# $5...: random writes over each whole file, one job (or one group of
# writers) per file, reported together; prints "iops,lat_mean_us,p99,
# ,,,,frozen_ms" (a row of the rounds file without tgtd's columns; empty
# on failure).  The latency of a write-then-fdatasync pair is both
# together.
fio_run() {
	local sem=$1 size=$2 qd=$3 dev=$4 f args=()
	shift 4
	sync
	for f in "$@"; do
		args+=(--name="$(basename "$(dirname "$f")")-$(basename "$f")"
		       --filename="$f" --size="$(stat -c %s "$f")")
	done
	{ sleep "$warmup"; frozen_ms "$secs"; } >"$work/frozen" 2>/dev/null &
	# shellcheck disable=SC2046
	fio --output-format=json --rw=randwrite --bs="$size" --time_based \
		--runtime="$(awk -v s="$secs" 'BEGIN { printf "%d", s * 1000 }')ms" \
		--ramp_time="$(awk -v s="$warmup" 'BEGIN { printf "%d", s * 1000 }')ms" \
		--randrepeat=0 --norandommap --group_reporting \
		$(fio_args "$sem" "$qd" "$dev") "${args[@]}" \
		>"$work/fio.json" 2>>"$work/fio.err" || { wait; return 0; }
	wait
	jq -r --arg frozen "$(cat "$work/frozen")" '.jobs[0] | [.write.iops,
		((.write.lat_ns.mean + (.sync.lat_ns.mean // 0)) / 1000),
		((.write.clat_ns.percentile["99.000000"] // 0) / 1000),
		"", "", "", "", $frozen] | map(if . == null then "" else tostring end) | join(",")' \
		"$work/fio.json" 2>>"$work/fio.err"
}

# The runs of one group (device $1, LUNs $2, size $3, depth $4,
# discipline $5): each configuration's fio run next to its cell, the null
# store in the middle; every other round ($6 even) in the reverse order
group_runs() {
	local dev=$1 luns=$2 bs=$3 disc=$5 config list=() half n i
	local set=$configs
	[ "$luns" = 4 ] && set=$modes
	for config in $set; do
		if [ "$luns" = 1 ]; then
			[ -n "${URL[$dev,$config]:-}" ] || continue
			acts "$config" "$dev" "$disc" "$4" || continue
		fi
		# the limit line for the modes (a mechanism's row has its
		# mode's semantics, and is judged against its mode instead)
		[[ " $modes " == *" $config "* ]] &&
		[ -n "$(semantics "$config" "$disc")" ] &&
			[ "$(semantics "$config" "$disc")" != - ] && list+=("fio:$config")
		list+=("lun:$config")
	done
	n=${#list[@]} half=$(( (n + 1) / 2 ))
	list=("${list[@]:0:half}" null "${list[@]:half}")
	if (( $6 % 2 )); then printf '%s\n' "${list[@]}"
	else for ((i = ${#list[@]} - 1; i >= 0; i--)); do echo "${list[i]}"; done; fi
}

# The files (fio) or URLs of run $1 in group (device $2, LUNs $3)
run_targets() {
	local what=$1 dev=$2 luns=$3 config=${1#*:} i
	if [ "$luns" = 4 ]; then
		for i in 1 2 3 4; do
			case $what in
			fio:*) echo "${FILE[four,$config,$i]}" ;;
			lun:*) echo "${URL[four,$config,$i]}" ;;
			null) echo "${URL[four,null,$i]}" ;;
			esac
		done
		return
	fi
	case $what in
	fio:*) echo "${FILE[$dev,$config]}" ;;
	lun:*) echo "${URL[$dev,$config]}" ;;
	null) echo "${URL[null]}" ;;
	esac
}

# every group: "device luns size qd discipline"
groups() {
	local dev bs qd disc
	for dev in $devices; do for bs in $sizes; do for qd in $qds; do
	for disc in $discs; do
		measured_at "$disc" "$bs" && echo "$dev 1 $bs $qd $disc"
	done; done; done; done
	for disc in $four_discs; do echo "disk 4 4k 8 $disc"; done
}

bytes() { case $1 in *k) echo $(( ${1%k} * 1024 )) ;; *) echo "$1" ;; esac; }

run_all() {
	local total=0 n=0 dev luns bs qd disc r what config sem row kind
	local -a targets
	while read -r dev luns bs qd disc; do
		total=$((total + rounds * $(group_runs "$dev" "$luns" "$bs" "$qd" "$disc" 1 | wc -l)))
	done < <(groups)
	echo "$rounds_header" >"$rounds_csv"
	while read -r dev luns bs qd disc; do
		for r in $(seq "$rounds"); do
		for what in $(group_runs "$dev" "$luns" "$bs" "$qd" "$disc" "$r"); do
			n=$((n + 1))
			config=${what#*:} kind=${what%%:*}
			[ "$what" = null ] && config=null
			sem=$(semantics "$config" "$disc")
			printf 'bench: [%3d/%d] %-4s %s LUN(s) %-3s QD %-2s %-10s %-15s round %d%b' \
				"$n" "$total" "$dev" "$luns" "$bs" "$qd" "$disc" "$what" "$r" "$eol" >&2
			mapfile -t targets < <(run_targets "$what" "$dev" "$luns")
			if [ "$kind" = fio ]; then
				row=$(fio_run "$sem" "$bs" "$qd" "$dev" "${targets[@]}")
			else
				row=$(sb_run "$disc" "$bs" "$qd" "${targets[@]}" </dev/null)
			fi
			[ -n "$row" ] || { say "$dev $bs QD$qd $disc $what round $r: no result"; continue; }
			echo "$dev,$luns,$config,$disc,$(bytes "$bs"),$qd,$r,$kind,$sem,$row" >>"$rounds_csv"
		done; done
	done < <(groups)
	[ -t 2 ] && echo >&2
	return 0
}

# tgtd's resident memory with 8 LUNs of one kind under load (KiB)
memory_of() {
	local kind=$1 dir=$work/mem-$1 pids=() i
	"$tp" start "$dir" "$module" >/dev/null && "$tp" target "$dir" 1 "$(iqn_of mem)" || return 1
	for i in 1 2 3 4 5 6 7 8; do
		truncate -s 64M "$work/mem-$kind-$i.img"
		if [ "$kind" = sg ]; then "$tp" lun "$dir" 1 "$i" "$work/mem-$kind-$i.img" mode=write-back
		else "$tp" lun "$dir" 1 "$i" "$work/mem-$kind-$i.img" "" "" rdwr; fi
	done
	for i in 1 2 3 4 5 6 7 8; do
		"$bench" --no-progress -t 5 -q 8 -s flush "$("$tp" url "$dir" "$(iqn_of mem)" "$i")" \
			>/dev/null 2>&1 &
		pids+=($!)
	done
	sleep 4
	awk '/^VmRSS/ {print $2}' "/proc/$(cat "$dir/pid")/status"
	wait "${pids[@]}"
	"$tp" stop "$dir"
}

csv_to_json() {		# rows of CSV file $1 as a JSON array
	awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[i] = $i; printf "["; next }
	{
		printf "%s{", (NR > 2 ? "," : "")
		for (i = 1; i <= NF; i++)
			printf "%s\"%s\":%s", (i > 1 ? "," : ""), h[i],
				($i == "" ? "null" : $i ~ /^-?[0-9.]+$/ ? $i : "\"" $i "\"")
		printf "}"
	}
	END { print "]" }' "$1"
}

plot() {		# each cell's ratio to its limit, one panel per device
	local dev data ndev
	command -v gnuplot >/dev/null || { say "gnuplot missing: no plot"; return; }
	ndev=$(wc -w <<<"$devices")
	for dev in $devices; do
		awk -F, -v dev="$dev" -v modes="$modes" '
		NR > 1 && $1 == dev && $2 == 1 && $15 != "" {
			k = ($5 % 1024 ? $5 : $5 / 1024 "k") "/QD" $6 "/" $4
			if (!(k in seen)) { seen[k] = 1; order[++n] = k }
			v[k, $3] = $15
		}
		END {
			nm = split(modes, m, " ")
			printf "cell"; for (i = 1; i <= nm; i++) printf " %s", m[i]; print ""
			for (j = 1; j <= n; j++) {
				printf "%s", order[j]
				for (i = 1; i <= nm; i++) printf " %s", ((order[j], m[i]) in v) ? v[order[j], m[i]] : "NaN"
				print ""
			}
		}' "$csv" >"$work/plot-$dev.dat"
	done
	gnuplot <<GP 2>>"$work/gnuplot.err"
set terminal pngcairo size 1200,$(( 420 * ndev )) font ",10"
set output "$out/bench.png"
set multiplot layout $ndev,1
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right
set ylabel "IOPS / limit"
set yrange [0:*]
set grid ytics
set xtics rotate by -30
$(for dev in $devices; do
	echo "set title \"$dev: each cell's IOPS over its limit line (median of the rounds; 0.85 marked)\""
	echo "plot for [i=2:$(( $(wc -w <<<"$modes") + 1 ))] '$work/plot-$dev.dat' using i:xtic(1) title columnheader(i), 0.85 with lines lc rgb 'black' dt 2 notitle"
done)
unset multiplot
GP
}

# What the numbers were measured on, for bench.json and the report: the
# commit (and whether tracked files had changes), kernel, tgt, CPUs, and
# the block device under the disk cells' files with its write cache as
# Linux sees it (sysfs; a partition's is its disk's).  Sets sys_*.
system_probe() {
	local dev q
	sys_commit=$(git -C "$top" rev-parse --short HEAD 2>/dev/null) || sys_commit=unknown
	sys_changed=false
	[ -n "$(git -C "$top" status --porcelain --untracked-files=no 2>/dev/null)" ] &&
		sys_changed=true
	sys_kernel=$(uname -r)
	sys_tgt=$(dpkg-query -W -f '${Version}' tgt 2>/dev/null) || sys_tgt=unknown
	sys_fio=$(fio --version 2>/dev/null) || sys_fio=unknown
	sys_cpus=$(nproc)
	sys_disk=$(findmnt -no SOURCE -T "$work" 2>/dev/null | head -n 1)
	sys_disk=${sys_disk:-unknown} sys_cache=unknown dev=${sys_disk#/dev/}
	for q in "/sys/class/block/$dev/queue/write_cache" \
		 "/sys/class/block/$dev/../queue/write_cache"; do
		[ -r "$q" ] && { sys_cache=$(cat "$q"); break; }
	done
}

eol='\n'; [ -t 2 ] && eol='\r'
started=$(date +%s)
system_probe
say "system: commit $sys_commit$([ "$sys_changed" = true ] && echo " (with changes)"), kernel $sys_kernel, tgt $sys_tgt, $sys_fio, $sys_cpus CPUs, disk $sys_disk (write cache: $sys_cache)"
say "setting up: $(wc -w <<<"$configs") configurations on $(wc -w <<<"$devices") device(s), the 4-LUN line's LUNs, the null store's"
setup_luns || { say "set-up failed"; exit 1; }
say "cells: devices ($devices) x sizes ($sizes) x QD ($qds) x ($discs) x ($configs), and 4 LUNs x QD 8 ($four_discs); $rounds rounds of ${warmup}s + ${secs}s per run"
run_all
bench_summary "$rounds_csv" >"$csv.tmp"
[ "$(wc -l <"$csv.tmp")" -gt 1 ] || { say "no cell ran (see $work/bench.err)"; cat "$work/bench.err" >&2; exit 1; }
mv "$csv.tmp" "$csv" || exit 1
mem_sg= mem_rdwr=
if [ -n "$memory" ]; then
	say "memory: 8 syncguard LUNs, then 8 rdwr LUNs, under load"
	mem_sg=$(memory_of sg) mem_rdwr=$(memory_of rdwr)
fi
elapsed=$(( $(date +%s) - started ))
echo
report_table
echo
awk -F, 'NR > 1 && $18 != "" { n++; if ($17 == "tgt") t++; if ($18 == "no") b++ }
	END { printf "%d cells with a limit: %d at >= 0.85 of it, %d tgt-bound, %d below 0.85\n", n, n - b - t, t, b }' "$csv"
awk -F, -v want="$rounds" 'NR > 1 && ($7 < want || ($27 != "" && $27 < want)) { n++ }
	END { if (n) printf "%d cells with fewer rounds than %d (a run without a result): marked in the table\n", n, want }' "$csv"
# the deeper cells against their two parts taken one after the other
awk -F, "$median_awk"'
	NR > 1 && $24 != "" {
		v = $24 + 0; s = s " " v; m += v >= 0.85
		if (!n++ || v < lo) lo = v
		if (n == 1 || v > hi) hi = v
	}
	END {
		if (n) printf "QD > 1 against 1 / (1/null + 1/fio) (vs_series): %d cells, %.2f-%.2f, median %.2f, %d at >= 0.85\n",
			n, lo, hi, median(s), m }' "$csv"
# how much of the time the host stopped the machine, in the cells and in
# their limit lines' runs
[ -n "$freeze_probe" ] && awk -F, "$median_awk"'
	NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
	$h["meets"] != "" && $h["frozen_pct"] != "" {
		c = c " " $h["frozen_pct"]; if ($h["meets"] == "no") b = b " " $h["frozen_pct"]
		if ($h["limit_frozen_pct"] != "") l = l " " $h["limit_frozen_pct"]
		if ($h["frozen_pct"] + 0 > max) max = $h["frozen_pct"] + 0
		if ($h["limit_frozen_pct"] + 0 > lmax) lmax = $h["limit_frozen_pct"] + 0
	}
	END {
		if (c == "") { print "machine frozen: not measured (freezeprobe could not run at SCHED_FIFO)"; exit }
		printf "machine frozen (freezeprobe, %% of the measured time): cells median %.1f, at most %.1f; cells below 0.85 median %s; the limit lines'"'"' runs median %.1f, at most %.1f\n",
			median(c), max, b == "" ? "-" : sprintf("%.1f", median(b)), median(l), lmax }' "$csv"
[ -n "$mem_sg" ] && [ -n "$mem_rdwr" ] &&
	awk -v s="$mem_sg" -v r="$mem_rdwr" 'BEGIN {
		printf "tgtd RSS under load: 8 syncguard LUNs %.1f MiB, 8 rdwr LUNs %.1f MiB (%+.1f MiB)\n",
			s / 1024, r / 1024, (s - r) / 1024 }'
if [ -n "$mechanisms" ]; then
	mechanism_gains "$rounds_csv" >"$out/bench-mechanisms.csv"
	echo
	echo "Each mechanism's gain: IOPS with it over IOPS without (its mode with the"
	echo "mechanism switched off), per cell the median of the rounds' own ratios:"
	mechanism_table "$out/bench-mechanisms.csv"
fi
echo "run: $((elapsed / 60)) min $((elapsed % 60)) s"
{
	printf '{"system":{"commit":"%s","tree_changed":%s,"kernel":"%s","tgt":"%s","fio":"%s","cpus":%s,"disk_device":"%s","disk_write_cache":"%s"},' \
		"$sys_commit" "$sys_changed" "$sys_kernel" "$sys_tgt" "$sys_fio" "$sys_cpus" "$sys_disk" "$sys_cache"
	printf '"seconds_per_run":%s,"warmup_seconds":%s,"rounds":%s,"flush_ms":%s,"elapsed_seconds":%s,"tgtd_args":%s,"freeze_probe":%s,' \
		"$secs" "$warmup" "$rounds" "$flush_ms" "$elapsed" "$(jq -Rn --arg a "$tgtd_args" '$a')" \
		"$([ -n "$freeze_probe" ] && echo true || echo false)"
	printf '"memory_kib":{"syncguard_8_luns":%s,"rdwr_8_luns":%s},"cells":' \
		"${mem_sg:-null}" "${mem_rdwr:-null}"
	csv_to_json "$csv"
	printf ',"rounds_runs":'
	csv_to_json "$rounds_csv"
	if [ -n "$mechanisms" ]; then
		printf ',"mechanisms":'
		csv_to_json "$out/bench-mechanisms.csv"
	fi
	echo "}"
} >"$out/bench.json"
jq empty "$out/bench.json" 2>/dev/null || say "bench.json does not parse (a bug of this script)"
plot
say "results: $csv (every run of every round: $rounds_csv), $out/bench.json, $out/bench.png"
