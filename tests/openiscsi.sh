#!/bin/bash
# openiscsi.sh: tools/openiscsi-syncbench in --dry-run (this machine has
# no kernel initiator): the commands come in the order open-iscsi needs
# (discovery, login, the by-path device, WCE read), one fio job per
# preset point with the right sync option, WCE restored and the session
# logged out last -- also when a step fails -- and usage errors exit 2.
# Exit 0 when all hold.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
ob=$top/tools/openiscsi-syncbench
fails=0 checks=0
say() { printf 'openiscsi: %s\n' "$*" >&2; }
expect() {
	checks=$((checks + 1))
	eval "$2" || { fails=$((fails + 1)); say "FAIL: $1"; }
}
dry() { "$ob" --dry-run --portal 192.0.2.7 --target iqn.2026-11.org.example:t "$@" 2>&1; }

out=$(dry --preset all --wce off); rc=$?
expect "a dry run exits 0" '[ $rc -eq 0 ]'
order=$(grep -o '^+ [a-z]* [^ ]*' <<<"$out" | awk '{print $2, $3}' | uniq | tr '\n' '|')
expect "discovery, login, device, WCE read and cleared once, fio, WCE restored, logout, node deleted" \
	'[ "$order" = "iscsiadm -m|readlink -f|sdparm --get=WCE|sdparm --clear=WCE|fio --name=initial-writers|fio --name=rewriters|fio --name=random-readers|fio --name=random-writers|$(printf "fio --name=%s|" DWR-{1,2,4,8,16,32,64,128}k ETL-{1,2,4,8,16,32,64,128}k OLTP-{1,2,4,8,16,32,64,128}k)$(printf "fio --name=seq-write-%s|" 16k 64k 128k 256k 1m 4m 8m 32m)sdparm --set=WCE|iscsiadm -m|" ]'
expect "discovery comes before login; logout, then the node record's deletion, come last" \
	'grep -n "iscsiadm" <<<"$out" | awk -F: "{print \$1}" | sort -n -c &&
	 grep "^+ iscsiadm" <<<"$out" | sed -n "1s/.*discovery.*/d/p;2s/.*--login$/l/p" | tr -d "\n" | grep -q dl &&
	 tail -2 <<<"$out" | head -1 | grep -q "^+ iscsiadm -m node -T iqn.2026-11.org.example:t -p 192.0.2.7:3260 --logout$" &&
	 tail -1 <<<"$out" | grep -q "^+ iscsiadm -m node -T iqn.2026-11.org.example:t -p 192.0.2.7:3260 -o delete$"'
expect "the device is found through /dev/disk/by-path" \
	'grep -q "^+ readlink -f /dev/disk/by-path/ip-192.0.2.7:3260-iscsi-iqn.2026-11.org.example:t-lun-1$" <<<"$out"'
expect "every fio job is --direct=1; iozone jobs --sync=1, 2 jobs on separate regions" \
	'[ "$(grep -c "^+ fio " <<<"$out")" = 36 ] && ! grep "^+ fio " <<<"$out" | grep -qv -- "--direct=1" &&
	 [ "$(grep -- "--numjobs=2 --offset_increment=128m" <<<"$out" | grep -c -- "--sync=1")" = 4 ]'

out=$(dry --preset vdbench --sync flush --lun 3)
expect "--sync flush gives every job --fsync=1; --lun picks the by-path LUN" \
	'[ "$(grep -c -- "^+ fio .*--fsync=1" <<<"$out")" = 24 ] && grep -q "lun-3$" <<<"$out"'
out=$(dry --chap alice:s3cret)
expect "--chap sets CHAP on the node before the login" \
	'grep -n "" <<<"$out" | grep -E "authmethod -v CHAP|username -v alice|password -v \*\*\*|--login" | cut -d: -f1 | tr "\n" " " | awk "{ exit !(\$1 < \$4 && \$2 < \$4 && \$3 < \$4) }"'
expect "--dry-run does not print the CHAP secret" '! grep -q s3cret <<<"$out"'

out=$(SYNCGUARD_DRYRUN_FAIL=--name=rewriters dry --preset iozone --wce on); rc=$?
expect "a failed fio job: exit 1, no later job, WCE restored, logged out" \
	'[ $rc -eq 1 ] && ! grep -q random-readers <<<"$out" &&
	 [ "$(tail -3 <<<"$out" | head -1)" = "+ sdparm --set=WCE /dev/sdX" ] && tail -2 <<<"$out" | head -1 | grep -q -- "--logout$"'
out=$(SYNCGUARD_DRYRUN_FAIL=--login dry); rc=$?
expect "a failed login: exit 1, no logout, the discovered node record deleted" \
	'[ $rc -eq 1 ] && ! grep -q -- --logout <<<"$out" && tail -1 <<<"$out" | grep -q -- "-o delete$"'

for args in "" "--target iqn.x:y" "--portal 192.0.2.7" "--portal 192.0.2.7 --target iqn.x:y --lun x" \
	    "--portal 192.0.2.7 --target iqn.x:y --preset bonnie" "--portal 192.0.2.7 --target iqn.x:y --sync maybe" \
	    "--portal 192.0.2.7 --target iqn.x:y --wce sometimes" "--portal 192.0.2.7 --target iqn.x:y --lun" \
	    "--portal 192.0.2.7 --target iqn.x:y --bogus" "--portal 192.0.2.7:99999 --target iqn.x:y" \
	    "--portal 192.0.2.7:0 --target iqn.x:y" "--portal [::1]:x --target iqn.x:y" \
	    "--portal 192.0.2.7 --target iqn.x:y --preset throughput --wce on"; do
	# shellcheck disable=SC2086
	err=$("$ob" --dry-run $args 2>&1 >/dev/null); rc=$?
	expect "usage error '$args': exit 2 with a message and the usage" \
		'[ $rc -eq 2 ] && head -1 <<<"$err" | grep -q "^openiscsi-syncbench: " && sed -n 2p <<<"$err" | grep -q "^usage:"'
done
help_opts=$("$ob" --help | grep -oE '^  (-[a-z], )?--[a-z-]*' | sed 's/.*--/--/' | sort | tr '\n' ' ')
parse_opts=$(sed -n '/^parse()/,/^}/p' "$ob" | grep -o '^\s*--[a-z-]*[|)]' | tr -d ' \t|)' | sort -u | tr '\n' ' ')
expect "--help lists exactly the options the script parses" '[ "$help_opts" = "$parse_opts" ]'

if [ "$fails" -eq 0 ]; then say "ok: $checks checks"; else say "$fails of $checks checks FAILED"; fi
[ "$fails" -eq 0 ]
