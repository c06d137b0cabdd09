#!/bin/bash
# bench.sh: what a sync write costs through syncguard, next to tgt's own
# backing stores, in one run, same files, same tester, interleaved.
#
# Devices: "disk" (files on the machine's own disk) and "slow" (the FUSE
# device model with a volatile cache whose flush takes --flush-ms, 2 ms
# by default, and which merges flushes that arrive while one runs, as
# the block layer does).  Configurations: syncguard write-through,
# write-back (page cache, the default, and direct=yes: O_DIRECT) and plp;
# tgt's rdwr with WCE=1 and with WCE=0; tgt's aio
# (which never flushes: the ceiling for anything that includes a flush).
# Disciplines (iscsi-syncbench --sync): none, fua, flush, flush-only;
# queue depths 1 and 32; 4 KiB and 64 KiB writes (flush-only carries no
# data: 4 KiB only).  The cells of one (device, size, depth, discipline)
# run back to back across the configurations, so they share the
# machine's mood, and that is repeated --rounds times (--qd1-rounds at
# QD 1; every other round in the reverse order); each cell reports
# its best round.  This machine's noise (other guests' CPU and I/O) only
# ever slows a cell down, for a second or more at a time, so a burst
# that hits one round of one configuration is dropped instead of
# deciding its ratio; the worst round is kept beside it in the CSV
# (iops_worst_round) and every round in build/bench-rounds.csv.
#
# Also: a "limit" line, 1 / (iSCSI round trip at QD1 + local O_DSYNC 4 KiB
# write latency, each the least of three readings; the O_DSYNC ones taken
# before each round of the QD1 FUA cells it judges), and tgtd's resident
# memory with 8 syncguard LUNs vs 8 rdwr LUNs under load.  Writes
# build/bench.csv, build/bench.json and build/bench.png (and the rounds
# and the plp series beside them).  It reports; it
# does not pass or fail (exit 1 only if it could not run).
#
# usage: bench.sh [--seconds S] [--rounds N] [--qd1-rounds N]
#                 [--series-rounds N] [--flush-ms MS] [--variants] [--quick]
#   --seconds   measured seconds per cell and round (default 0.6)
#   --rounds    rounds per cell, the best reported (default 2)
#   --qd1-rounds  the same for the QD 1 cells (default 3: a stall of the
#               disk costs a latency-bound cell all its IOs, and one
#               stall can span two rounds of a cell)
#   --series-rounds  rounds of the plp series (default 5): plp's
#               disciplines side by side at 4 KiB QD32, with tgt's null
#               store's none and flush, which the plp target is judged
#               on, round by round (see plp_series)
#   --variants  also syncguard write_sync=group and =dsync (the choice
#               behind write_sync=auto)
#   --quick     disk only, 4 KiB, QD 32 (a smoke run)
set -u
# it starts more than one private tgtd (the memory step): ports chosen by
# hand for scripts/tgtd-private would clash, so tgtd-private picks free ones
unset TGTD_PRIVATE_CTL TGTD_PRIVATE_PORT

top=$(cd "$(dirname "$0")/.." && pwd)
secs=0.6
rounds=2
qd1_rounds=3
series_rounds=5
warmup=0.4	# not counted: lets syncguard's running trials settle on
		# the new load (every cell changes it; after a pause they try
		# both ways for 200 ms each), as fio's ramp_time
flush_ms=2
devices="disk slow"
sizes="4k 64k"
qds="1 32"
discs="none fua flush flush-only"
configs="sg-wt sg-wb sg-wbd sg-plp rdwr-wce1 rdwr-wce0 aio"
usage() {
	echo "usage: bench.sh [--seconds S] [--rounds N] [--qd1-rounds N] [--series-rounds N] [--flush-ms MS] [--variants] [--quick]" >&2
	exit 2
}
help() {
	cat <<EOF
usage: bench.sh [--seconds S] [--rounds N] [--qd1-rounds N] [--series-rounds N] [--flush-ms MS] [--variants] [--quick]

syncguard in each mode against tgt's rdwr (WCE=1, WCE=0) and aio, on the
machine's disk and on a slow-flush FUSE model; writes build/bench.csv,
build/bench-rounds.csv, build/bench-plp-series.csv, build/bench.json and
build/bench.png.

  --seconds S    measured seconds per cell and round (default $secs; each
                 round is preceded by ${warmup}s unmeasured)
  --rounds N     rounds per cell, interleaved across configurations; the
                 best is reported (default $rounds)
  --qd1-rounds N the same for the QD 1 cells (default $qd1_rounds)
  --series-rounds N  rounds of plp's disciplines side by side, 4 KiB
                 QD32 on the disk, with tgt's null store's none and
                 flush; the plp target is judged on the median of the
                 rounds' own ratios (default $series_rounds)
  --flush-ms MS  the model's flush time (default $flush_ms)
  --variants     also write_sync=group and =dsync for write-through and
                 write-back
  --quick        the disk's 4 KiB QD32 cells only
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
while [ $# -gt 0 ]; do
	case $1 in
	--seconds|--rounds|--qd1-rounds|--series-rounds|--flush-ms)
		[ $# -ge 2 ] || { echo "bench: $1 wants a value" >&2; usage; } ;;
	esac
	case $1 in
	--seconds) secs=$(number "" "$1" "$2") || exit 2; shift 2 ;;
	--rounds) rounds=$(number whole "$1" "$2") || exit 2; shift 2 ;;
	--qd1-rounds) qd1_rounds=$(number whole "$1" "$2") || exit 2; shift 2 ;;
	--series-rounds) series_rounds=$(number whole "$1" "$2") || exit 2; shift 2 ;;
	--flush-ms) flush_ms=$(number "" "$1" "$2") || exit 2; shift 2 ;;
	--variants) configs="$configs sg-wt-group sg-wb-group sg-wt-dsync sg-wb-dsync"; shift ;;
	--quick) devices=disk sizes=4k qds=32; shift ;;
	-h|--help) help ;;
	*) usage ;;
	esac
done

bench=$top/tools/iscsi-syncbench
model=$top/tools/syncguard-devmodel
tp=$top/scripts/tgtd-private
module=$top/bs_syncguard.so
out=$top/build
csv=$out/bench.csv
rounds_csv=$out/bench-rounds.csv
series_csv=$out/bench-plp-series.csv
header="device,config,label,sync,block_size,queue_depth,sessions,read_pct,random_pct,wce,dpofua,seconds,ops,errors,iops,mb_per_s,lat_mean_us,lat_p50_us,lat_p99_us,lat_p99_9_us,lat_max_us,device_flushes_per_op,workload,interrupted,unanswered,verify_checked,verify_mismatches,verify_complete,read_ops,read_lat_mean_us,read_lat_p99_us,write_ops,write_lat_mean_us,write_lat_p99_us,write_fua_ops,write_fua_lat_mean_us,write_fua_lat_p99_us,synchronize_cache_ops,synchronize_cache_lat_mean_us,synchronize_cache_lat_p99_us,asked_iops,arrivals,rate_sustained,unsent,curve_step,curve_pct"
[ -x "$bench" ] && [ -x "$model" ] && [ -f "$module" ] || { echo "bench: run make first" >&2; exit 1; }
work=$(mktemp -d "$top/build/bench.XXXXXX") || exit 1
cleanup() {
	trap - EXIT INT TERM
	for d in main mem-sg mem-rdwr; do "$tp" stop "$work/$d" 2>/dev/null; done
	for m in "$work"/slow-*.mnt; do	# the models exit when unmounted
		mountpoint -q "$m" 2>/dev/null && fusermount3 -u -z "$m" 2>/dev/null
	done
	pkill -f "syncguard-devmodel --image $work" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "bench: interrupted" >&2; exit 130' INT TERM
say() { printf 'bench: %s\n' "$*" >&2; }

# bstype, bsopts and WCE for a configuration
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
	rdwr-wce1|rdwr-wce0) echo "rdwr|" ;;
	aio) echo "aio|" ;;
	esac
}

# the backing file of (device, config); slow ones behind a FUSE model
prepare_file() {
	local dev=$1 config=$2 img
	if [ "$dev" = disk ]; then
		img=$work/disk-$config.img
		dd if=/dev/zero of="$img" bs=1M count=128 conv=fsync status=none
		echo "$img"
		return
	fi
	mkdir -p "$work/slow-$config.mnt"
	truncate -s 64M "$work/slow-$config.stable"
	"$model" --image "$work/slow-$config.stable" --flush-ms "$flush_ms" \
		--max-versions 1 "$work/slow-$config.mnt" -f \
		>>"$work/model.log" 2>&1 &
	for _ in $(seq 100); do
		[ -e "$work/slow-$config.mnt/disk.img" ] && break
		sleep 0.02
	done
	echo "$work/slow-$config.mnt/disk.img"
}

iqn_of() { echo "iqn.2026-11.org.syncguard:bench-$1"; }

# Does configuration $2 run on device $1?  Not write-back direct=yes on
# the model: it reports no O_DIRECT alignment (4 KiB is taken), so
# direct=yes is refused for 512-byte blocks there.
runs_on() { [ "$1" != slow ] || [ "$2" != sg-wbd ]; }

# Is discipline $1 measured at size $2?  SYNCHRONIZE CACHE alone moves
# no data: flush-only at one size is enough.
measured_at() { [ "$1" != flush-only ] || [ "$2" = 4k ]; }

setup_luns() {
	local tid=0 dev config lun spec bsopts
	declare -gA URL
	declare -A PATHS
	for dev in $devices; do		# mount models before tgtd starts
		for config in $configs; do
			runs_on "$dev" "$config" || continue
			PATHS[$dev,$config]=$(prepare_file "$dev" "$config")
		done
	done
	# the limit line's O_DSYNC writes overwrite blocks written here, as
	# the cells' writes do (else the first reading would allocate them)
	dd if=/dev/zero of="$(dsync_file disk)" bs=4k count=500 conv=fsync \
		status=none || return 1
	"$tp" start "$work/main" "$module" >/dev/null || return 1
	for dev in $devices; do
		tid=$((tid + 1)) lun=0
		"$tp" target "$work/main" "$tid" "$(iqn_of "$dev")" || return 1
		for config in $configs; do
			lun=$((lun + 1))
			runs_on "$dev" "$config" || continue
			spec=$(lun_spec "$config")
			bsopts=${spec#*|}
			[ "$dev" = slow ] && [ "$config" = sg-plp ] && bsopts="$bsopts;alloc_check=no"
			"$tp" lun "$work/main" "$tid" "$lun" "${PATHS[$dev,$config]}" \
				"$bsopts" "" "${spec%|*}" || { say "LUN $dev/$config failed"; return 1; }
			[ "$config" = rdwr-wce0 ] && "$tp" adm "$work/main" --lld iscsi --op update \
				--mode logicalunit --tid "$tid" --lun "$lun" --params \
				mode_page=8:0:18:0x10:0:0xff:0xff:0:0:0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0
			URL[$dev,$config]=$("$tp" url "$work/main" "$(iqn_of "$dev")" "$lun")
		done
	done
	tid=$((tid + 1))
	"$tp" target "$work/main" "$tid" "$(iqn_of null)" &&
	"$tp" lun "$work/main" "$tid" 1 /dev/null "" "" null || return 1
	URL[null]=$("$tp" url "$work/main" "$(iqn_of null)" 1)
	URL[null,null]=${URL[null]}
}

# one cell: prints the syncbench CSV row (empty on failure).  Every cell
# starts with nothing dirty anywhere (sync): otherwise the background
# writeback of a write-back cell before it would slow whichever follows.
cell() {
	sync
	"$bench" --csv --no-header --no-progress --timeout 10 -t "$secs" \
		--warmup "$warmup" \
		-q "$4" -b "$3" -s "$5" --label "$2" "${URL[$1,$2]}" \
		2>>"$work/bench.err"
}

# the cells of one (device, size, depth, discipline) that will run
group_cells() {
	local config n=0
	for config in $configs; do
		[ -n "${URL[$1,$config]:-}" ] && n=$((n + 1))
	done
	echo "$n"
}

# From one group's rounds (rows ending in ",round"), each configuration's
# best round by IOPS, with the number of rounds and the worst round's
# IOPS appended; configurations in the order they ran.
best_rounds() {
	awk -F, -v OFS=, '
	{
		key = $2; r = $NF; iops = $15 + 0; NF--
		if (!(key in n)) order[++k] = key
		n[key]++
		if (!(key in best) || iops > best[key]) { best[key] = iops; row[key] = $0 }
		if (!(key in worst) || iops < worst[key]) worst[key] = iops
	}
	END { for (i = 1; i <= k; i++) print row[order[i]], n[order[i]], worst[order[i]] }' "$1"
}

# The configurations in round $1's order: every other round reversed,
# so no configuration always runs first after a change of cell (a slow
# spell of the disk that outlasts one cell hits the first ones of the
# next, which would always be syncguard's)
round_order() {
	if (( $1 % 2 )); then echo $configs
	else tr ' ' '\n' <<<"$configs" | tac | paste -sd' '; fi
}

# Rounds of a cell at QD $1
rounds_at() {
	if [ "$1" = 1 ]; then echo "$qd1_rounds"; else echo "$rounds"; fi
}

run_cells() {
	local n=0 total=0 dev bs qd disc config row r
	for dev in $devices; do for bs in $sizes; do for qd in $qds; do
	for disc in $discs; do
		measured_at "$disc" "$bs" || continue
		total=$((total + $(group_cells "$dev") * $(rounds_at "$qd")))
	done; done; done; done
	echo "$header,rounds,iops_worst_round" >"$csv.tmp"
	echo "$header,round" >"$rounds_csv"
	for dev in $devices; do for bs in $sizes; do for qd in $qds; do
	for disc in $discs; do
		measured_at "$disc" "$bs" || continue
		: >"$work/group.csv"
		for r in $(seq "$(rounds_at "$qd")"); do
		limit_reading "$dev" "$bs" "$qd" "$disc"
		for config in $(round_order "$r"); do
			[ -n "${URL[$dev,$config]:-}" ] || continue
			n=$((n + 1))
			printf 'bench: [%3d/%d] %-4s %-3s QD %-2s %-10s %-11s round %d%b' \
				"$n" "$total" "$dev" "$bs" "$qd" "$disc" "$config" "$r" "$eol" >&2
			row=$(cell "$dev" "$config" "$bs" "$qd" "$disc")
			[ -n "$row" ] && echo "$dev,$config,$row,$r" >>"$work/group.csv"
		done; done
		cat "$work/group.csv" >>"$rounds_csv"
		best_rounds "$work/group.csv" >>"$csv.tmp"
	done; done; done; done
	[ -t 2 ] && echo >&2
}

# The plp target compares disciplines of one configuration, which the
# cells measure minutes apart: the machine's mood between them can
# decide it (plp none's IOPS can change by a large margin with whether
# its cell comes first or second, although plp does the same O_DIRECT
# write for none and fua).  So plp's disciplines also take
# turns side by side, 4 KiB QD32 on the disk, --series-rounds times,
# each round in another order, and the target is judged on each round's
# own ratios (the median over the rounds): a discipline's best round
# alone would let one fast spell of none decide (one round can run at
# twice the others' rate).  tgt's null store (no I/O at all)
# runs none and flush in the same rounds: its flush/none is what a
# second command per operation costs in tgt and the initiator alone,
# the most any backing store can reach.  Rows in $series_csv.
plp_series() {
	local r i run lun row
	# device,config:discipline
	local -a runs=(disk,sg-plp:none null,null:none disk,sg-plp:fua
		       null,null:flush disk,sg-plp:flush)
	[ -n "${URL[disk,sg-plp]:-}" ] || return 0
	echo "$header,round" >"$series_csv"
	for r in $(seq "$series_rounds"); do
		for i in "${!runs[@]}"; do	# round r starts r - 1 further on
			run=${runs[$(( (i + r - 1) % ${#runs[@]} ))]}
			printf 'bench: plp series round %d of %d: %-17s%b' "$r" \
				"$series_rounds" "$run" "$eol" >&2
			lun=${run%:*}		# device,config
			row=$(cell "${lun%,*}" "${lun#*,}" 4k 32 "${run#*:}")
			[ -n "$row" ] && echo "$lun,$row,$r" >>"$series_csv"
		done
	done
	[ -t 2 ] && echo >&2
	return 0
}

# The smallest of three readings of a command that prints a number: this
# machine's noise only ever slows a run down (as the cells' best round).
# Fails if a reading fails or is not a number.
least_of_3() {
	local v best= i
	for i in 1 2 3; do
		v=$("$@") && [[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] || return 1
		best=$(awk -v a="$best" -v b="$v" 'BEGIN { print (a == "" || b + 0 < a + 0) ? b : a }')
	done
	echo "$best"
}

# mean iSCSI round trip at QD1 (microseconds), 4 KiB, to the null LUN
rtt_us() {
	local out
	out=$("$bench" --csv --no-header --no-progress -t 1 -q 1 -b 4k "${URL[null]}") &&
		cut -d, -f15 <<<"$out"
}

# mean latency (microseconds) of 500 O_DSYNC 4 KiB writes to file $1,
# timed in nanoseconds (time(1) has 10 ms steps, a tenth of the run)
dsync_us() {
	local t0 t1
	t0=$(date +%s%N)
	dd if=/dev/zero of="$1" bs=4k count=500 oflag=dsync conv=notrunc status=none || return 1
	t1=$(date +%s%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e3 / 500 }'
}

# The file the limit line's O_DSYNC writes go to on device $1
dsync_file() {
	if [ "$1" = disk ]; then echo "$work/dsync.img"
	else echo "$work/slow-rdwr-wce1.mnt/disk.img"; fi
}

# Before each round of a device's 4 KiB QD1 FUA cells, one reading of the
# local O_DSYNC write, appended to $work/dsync-DEV.txt: the limit line
# takes the least of them, so it comes from the same spells of the
# machine as the cells it judges.  Read once, after the cells, it would
# come out of another spell: it can read well under half what the rdwr
# WCE=0 FUA cells' own write and fdatasync take, and the QD1 FUA target
# would then be judged against a limit no configuration reaches.
limit_reading() {
	[ "$2" = 4k ] && [ "$3" = 1 ] && [ "$4" = fua ] || return 0
	local us
	if us=$(dsync_us "$(dsync_file "$1")" 2>/dev/null); then
		echo "$us" >>"$work/dsync-$1.txt"
	else say "limit ($1): an O_DSYNC reading failed"; fi
}

# The least reading in file $1 (the limit_reading ones), or fails
least_in() {
	[ -s "$1" ] && sort -n "$1" | head -n 1 | grep -E '^[0-9]+(\.[0-9]+)?$'
}

# 1 / (iSCSI round trip at QD1 + local O_DSYNC 4 KiB write), per device
# (a device whose readings failed is left out, and said so); the O_DSYNC
# write the least of the readings taken beside the QD1 FUA cells, or of
# three now where those did not run (--quick)
limit_line() {
	local rtt dev us
	rtt=$(least_of_3 rtt_us) || { say "limit: the iSCSI round trip could not be measured"; return; }
	for dev in $devices; do
		if us=$(least_in "$work/dsync-$dev.txt") ||
		   us=$(least_of_3 dsync_us "$(dsync_file "$dev")"); then
			echo "$dev,$rtt,$us"
		else say "limit ($dev): the O_DSYNC write could not be measured"; fi
	done
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

# the comparison table, from the CSV
report_table() {
	awk -F, -v configs="$configs" '
	NR == 1 { next }
	{
		key = $1 " " $5 " " $6 " " $4
		if (!(key in seen)) { seen[key] = 1; order[++n] = key }
		iops[key, $2] = $15; p99[key, $2] = $19
	}
	function r(a, b) { return a > 0 && b > 0 ? sprintf("%6.2f", a / b) : "     -" }
	END {
		nc = split(configs, c, " ")
		printf "%-4s %-4s %3s %-10s |", "dev", "size", "QD", "sync"
		for (i = 1; i <= nc; i++) printf " %11s", c[i]
		printf " | wt/r0  wb/r1  wb/aio wbd/r1 wbd/aio plp/r0 | p99 us"
		for (i = 1; i <= 4; i++) printf " %7s", c[i]
		printf " %7s\n", "rdwr1"
		for (k = 1; k <= n; k++) {
			key = order[k]; split(key, f, " ")
			printf "%-4s %-4s %3s %-10s |", f[1], f[2], f[3], f[4]
			for (i = 1; i <= nc; i++)
				if ((key, c[i]) in iops) printf " %11.0f", iops[key, c[i]]
				else printf " %11s", "-"
			printf " | %s %s %s %s  %s %s |       ",
				r(iops[key, "sg-wt"], iops[key, "rdwr-wce0"]),
				r(iops[key, "sg-wb"], iops[key, "rdwr-wce1"]),
				r(iops[key, "sg-wb"], iops[key, "aio"]),
				r(iops[key, "sg-wbd"], iops[key, "rdwr-wce1"]),
				r(iops[key, "sg-wbd"], iops[key, "aio"]),
				r(iops[key, "sg-plp"], iops[key, "rdwr-wce0"])
			for (i = 1; i <= 4; i++)
				if ((key, c[i]) in p99) printf " %7.0f", p99[key, c[i]]
				else printf " %7s", "-"
			printf " %7.0f\n", p99[key, "rdwr-wce1"]
		}
	}' "$csv"
}

# the issue's targets, each: what was measured, met or missed
report_targets() {
	awk -F, -v limits="$1" -v mem_sg="$2" -v mem_rdwr="$3" -v jf="$4" '
	FNR == 1 { next }
	FILENAME != ARGV[1] {	# the plp series: IOPS by (LUN:discipline, round)
		ser[$1 ":" $4, $NF] = $15 + 0; sr[$NF] = 1
		next
	}
	{ iops[$1, $5, $6, $4, $2] = $15; fpo[$1, $5, $6, $4, $2] = $22 }
	# the IOPS of a cell; one that did not run (--quick, a failed cell) marks
	# the target it is asked for as not run (say)
	function v(d, b, q, s, c) {
		if (!((d, b, q, s, c) in iops)) { missing = 1; return 0 }
		return iops[d, b, q, s, c] + 0
	}
	function say(what, got, ok) {
		if (missing) {
			printf "%-66s %-42s %s\n", what, "-", "not run"
			verdicts = verdicts sprintf("{\"target\":\"%s\",\"measured\":null,\"met\":null},", what)
			missing = 0
			return
		}
		printf "%-66s %-42s %s\n", what, got, ok ? "met" : "MISSED"
		verdicts = verdicts sprintf("{\"target\":\"%s\",\"measured\":\"%s\",\"met\":%s},", what, got, ok ? "true" : "false")
	}
	function ratio(a, b) { return b > 0 ? a / b : 0 }
	# the median over the series'"'"' rounds of IOPS(x) / IOPS(y) in one
	# round ("" if no round has both)
	function series_median(x, y,   r, n, i, j, t, q) {
		n = 0
		for (r in sr)
			if (ser[x, r] > 0 && ser[y, r] > 0) q[++n] = ser[x, r] / ser[y, r]
		if (!n) return ""
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && q[j - 1] > q[j]; j--) { t = q[j]; q[j] = q[j - 1]; q[j - 1] = t }
		return n % 2 ? q[(n + 1) / 2] : (q[n / 2] + q[n / 2 + 1]) / 2
	}
	BEGIN { worst = 99; nworst = 99 }
	END {
		x = ratio(v("disk","4096",32,"flush","sg-wb"), v("disk","4096",32,"flush","rdwr-wce1"))
		y = ratio(v("disk","4096",32,"flush","sg-wb"), v("disk","4096",32,"flush","aio"))
		say("write-back WRITE+SYNC CACHE QD32 4K disk: >=1.4x rdwr, >=0.85x aio",
		    sprintf("%.2fx, %.2fx", x, y), x >= 1.4 && y >= 0.85)
		x = ratio(v("disk","4096",32,"flush","sg-wbd"), v("disk","4096",32,"flush","rdwr-wce1"))
		y = ratio(v("disk","4096",32,"flush","sg-wbd"), v("disk","4096",32,"flush","aio"))
		say("  the same, write-back direct=yes",
		    sprintf("%.2fx, %.2fx", x, y), x >= 1.4 && y >= 0.85)
		x = ratio(v("disk","4096",32,"flush-only","sg-wb"), v("disk","4096",32,"flush-only","rdwr-wce1"))
		y = ratio(v("disk","4096",32,"flush-only","sg-wb"), v("disk","4096",32,"flush-only","aio"))
		say("SYNC CACHE on a clean cache QD32 4K disk: >=2x rdwr, >=0.9x aio",
		    sprintf("%.2fx, %.2fx", x, y), x >= 2 && y >= 0.9)
		x = ratio(v("disk","4096",32,"none","sg-wt"), v("disk","4096",32,"none","rdwr-wce0"))
		say("write-through QD32 4K disk: >=1.5x rdwr WCE=0", sprintf("%.2fx", x), x >= 1.5)
		worst = 99; wc = ""; both = 0
		for (k in iops) {
			split(k, f, SUBSEP)
			both = both || f[1] == "slow"	# --quick: the disk alone
			# the defaults; sg-wbd (direct=yes) is an option beside them
			if (f[5] !~ /^sg-(wt|wb|plp)$/) continue
			# the peer makes the same promise: the WCE it reports
			peer = f[5] ~ /^sg-wb/ ? "rdwr-wce1" : "rdwr-wce0"
			if (!((f[1], f[2], f[3], f[4], peer) in iops)) continue
			q = ratio(iops[k], iops[f[1], f[2], f[3], f[4], peer])
			if (f[3] == 1 && q < worst) { worst = q; wc = f[1] " " f[2] " " f[4] " " f[5] }
			if (f[4] == "none" && q < nworst) { nworst = q; nc = f[1] " " f[2] " QD" f[3] " " f[5] }
		}
		# both judged over QD1 and QD32 cells of both devices, or not run
		missing = wc == "" || !both
		say("no QD1 cell below 0.95x rdwr (same WCE)", sprintf("worst %.2fx (%s)", worst, wc), worst >= 0.95)
		missing = nc == "" || wc == "" || !both
		say("none discipline never below rdwr (same WCE)", sprintf("worst %.2fx (%s)", nworst, nc), nworst >= 1)
		a = ratio(v("disk","4096",32,"fua","sg-plp"), v("disk","4096",32,"none","sg-plp"))
		b = ratio(v("disk","4096",32,"flush","sg-plp"), v("disk","4096",32,"none","sg-plp"))
		say("plp QD32 4K disk: fua and flush >= 0.9x none (cells)",
		    sprintf("%.2f, %.2f of none", a, b), a >= 0.9 && b >= 0.9)
		# judged on the series: each round'"'"'s own ratios, their median
		a = series_median("disk:fua", "disk:none")
		b = series_median("disk:flush", "disk:none")
		c = series_median("null:flush", "null:none")
		missing = a == "" || b == ""
		say("  the same side by side (plp series, median round): the target",
		    sprintf("%.2f, %.2f of none (%s)", a, b, (c == "" ? "null store: not run" : \
			    sprintf("tgt null store flush %.2f", c))), a >= 0.9 && b >= 0.9)
		x = ratio(v("slow","4096",32,"flush","sg-wb"), v("slow","4096",32,"flush","rdwr-wce1"))
		fl = fpo["slow","4096",32,"flush","sg-wb"]
		say("slow-flush model, write-back WRITE+SYNC CACHE QD32: >=8x rdwr, <=0.1 flushes/op",
		    sprintf("%.2fx, %s flushes/op", x, fl == "" ? "unknown" : sprintf("%.3f", fl)),
		    x >= 8 && fl != "" && fl <= 0.1)
		split(limits, L, ";")
		for (i in L) { split(L[i], g, ","); if (g[1] == "disk") lim = 1e6 / (g[2] + g[3]) }
		missing = !lim
		x = ratio(v("disk","4096",1,"fua","sg-wb"), lim)
		say("QD1 FUA IOPS >= 90% of the limit line (disk)",
		    sprintf("%.0f of %.0f = %.0f%%", v("disk","4096",1,"fua","sg-wb"), lim, 100 * x), x >= 0.9)
		missing = !mem_sg || !mem_rdwr
		d = (mem_sg - mem_rdwr) / 1024
		say("tgtd RSS with 8 syncguard LUNs within 16 MiB of 8 rdwr LUNs",
		    sprintf("%+.1f MiB (%.1f vs %.1f)", d, mem_sg / 1024, mem_rdwr / 1024), d <= 16)
		print "[" substr(verdicts, 1, length(verdicts) - 1) "]" > jf
	}' "$csv" "$series_csv"
}

csv_to_json() {		# the cells as a JSON array
	awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[i] = $i; next }
	{
		printf "%s{", (NR > 2 ? "," : "")
		for (i = 1; i <= NF; i++)
			printf "%s\"%s\":%s", (i > 1 ? "," : ""), h[i],
				($i == "" ? "null" : $i ~ /^-?[0-9.]+$/ ? $i : "\"" $i "\"")
		printf "}"
	}' "$csv"
}

plot() {		# IOPS at QD32, 4 KiB: one panel per device
	local dev data
	command -v gnuplot >/dev/null || { say "gnuplot missing: no plot"; return; }
	for dev in $devices; do
		data=$work/plot-$dev.dat
		awk -F, -v dev="$dev" -v configs="$configs" '
		NR > 1 && $1 == dev && $5 == 4096 && $6 == 32 { v[$4, $2] = $15; s[$4] = 1 }
		END {
			nc = split(configs, c, " ")
			printf "sync"; for (i = 1; i <= nc; i++) printf " %s", c[i]; print ""
			ns = split("none fua flush flush-only", d, " ")
			for (j = 1; j <= ns; j++) {
				if (!(d[j] in s)) continue
				printf "%s", d[j]
				for (i = 1; i <= nc; i++) printf " %s", v[d[j], c[i]] + 0
				print ""
			}
		}' "$csv" >"$data"
	done
	gnuplot <<GP 2>>"$work/gnuplot.err"
set terminal pngcairo size 1200,$(( 420 * $(wc -w <<<"$devices") )) font ",10"
set output "$out/bench.png"
set multiplot layout $(wc -w <<<"$devices"),1
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right
set ylabel "IOPS"
set grid ytics
$(for dev in $devices; do
	echo "set title \"$dev: 4 KiB writes, queue depth 32 (flush = WRITE + SYNCHRONIZE CACHE)\""
	echo "plot for [i=2:$(( $(wc -w <<<"$configs") + 1 ))] '$work/plot-$dev.dat' using i:xtic(1) title columnheader(i)"
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
	sys_cpus=$(nproc)
	sys_disk=$(findmnt -no SOURCE -T "$work" 2>/dev/null | head -n 1)
	sys_disk=${sys_disk:-unknown} sys_cache=unknown dev=${sys_disk#/dev/}
	for q in "/sys/class/block/$dev/queue/write_cache" \
		 "/sys/class/block/$dev/../queue/write_cache"; do
		[ -r "$q" ] && { sys_cache=$(cat "$q"); break; }
	done
}

eol='\n'; [ -t 2 ] && eol='\r'
system_probe
say "system: commit $sys_commit$([ "$sys_changed" = true ] && echo " (with changes)"), kernel $sys_kernel, tgt $sys_tgt, $sys_cpus CPUs, disk $sys_disk (write cache: $sys_cache)"
say "setting up: $(wc -w <<<"$configs") configurations on $(wc -w <<<"$devices") device(s)"
setup_luns || { say "set-up failed"; exit 1; }
say "$(wc -w <<<"$devices") devices x sizes ($sizes) x QD ($qds) x ($discs) x $(wc -w <<<"$configs") configurations, $rounds rounds (QD 1: $qd1_rounds) of ${warmup}s + ${secs}s each"
run_cells
: >"$series_csv"
plp_series
[ "$(wc -l <"$csv.tmp")" -gt 1 ] || { say "no cell ran (see $work/bench.err)"; cat "$work/bench.err" >&2; exit 1; }
mv "$csv.tmp" "$csv" || exit 1
limits=$(limit_line | paste -sd';')
say "memory: 8 syncguard LUNs, then 8 rdwr LUNs, under load"
mem_sg=$(memory_of sg) mem_rdwr=$(memory_of rdwr)
echo
report_table
echo
for l in ${limits//;/ }; do
	IFS=, read -r dev rtt us <<<"$l"
	awk -v d="$dev" -v r="$rtt" -v u="$us" 'BEGIN {
		printf "limit (%s): 1 / (iSCSI round trip %.0f us + local O_DSYNC 4 KiB write %.0f us) = %.0f IOPS\n", d, r, u, 1e6 / (r + u) }'
done
echo
report_targets "$limits" "$mem_sg" "$mem_rdwr" "$work/targets.json"
{
	printf '{"system":{"commit":"%s","tree_changed":%s,"kernel":"%s","tgt":"%s","cpus":%s,"disk_device":"%s","disk_write_cache":"%s"},' \
		"$sys_commit" "$sys_changed" "$sys_kernel" "$sys_tgt" "$sys_cpus" "$sys_disk" "$sys_cache"
	printf '"seconds_per_cell":%s,"warmup_seconds":%s,"rounds":%s,"qd1_rounds":%s,"flush_ms":%s,"limit":[' \
		"$secs" "$warmup" "$rounds" "$qd1_rounds" "$flush_ms"
	sep=
	for l in ${limits//;/ }; do
		IFS=, read -r dev rtt us <<<"$l"
		printf '%s{"device":"%s","iscsi_rtt_us":%s,"dsync_4k_us":%s}' "$sep" "$dev" "$rtt" "$us"
		sep=,
	done
	printf '],"memory_kib":{"syncguard_8_luns":%s,"rdwr_8_luns":%s},"targets":%s,"cells":[' \
		"${mem_sg:-0}" "${mem_rdwr:-0}" "$(cat "$work/targets.json")"
	csv_to_json
	echo "]}"
} >"$out/bench.json"
plot
say "results: $csv (every round: $rounds_csv; the plp series: $series_csv), $out/bench.json, $out/bench.png"
