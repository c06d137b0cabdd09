#!/bin/bash
# conf.sh: conf/targets.conf.example loads into a private tgtd with
# tgt-admin and reads back with tgtadm (and syncguard-stat): every target,
# every LUN on its path with bstype syncguard and the mode its bsopts
# asked for, including a bsopts value with two keys quoted for the shell
# as the example says.  Exit 0 when it all matches.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
tp=$top/scripts/tgtd-private
work=$(mktemp -d "$top/build/conf.XXXXXX") || exit 1
trap '"$tp" stop "$work/tgtd"; rm -rf "$work"' EXIT
fail=0
say() { printf 'conf: %s\n' "$*" >&2; }

for f in zvol file plp two colon; do
	dd if=/dev/zero of="$work/$f.img" bs=1M count=8 conv=fsync status=none
done
# the example with its device paths pointed at files here, plus two LUNs
# whose bsopts have two keys: quoted twice with ";", and unquoted with
# ":" (the mode last: a separator the shell ate would lose it)
# the run's pid in the targets' names: two runs on one host would publish
# their counters under one name and read none (/run/syncguard/TARGET)
p=iqn.2026-11.org.example:c$$-
sed -e "s|/dev/zvol/tank/iscsi0|$work/zvol.img|" \
    -e "s|iqn.2026-11.org.example:|$p|" \
    -e "s|/srv/iscsi/lun0.img|$work/file.img|" \
    -e "s|/dev/disk/by-id/nvme-EXAMPLE-PLP-SSD|$work/plp.img|" \
    "$top/conf/targets.conf.example" >"$work/targets.conf"
cat >>"$work/targets.conf" <<CONF
<target ${p}two-keys>
    <backing-store $work/two.img>
        bs-type syncguard
        bsopts "'mode=write-through;write_sync=dsync'"
        lun 1
    </backing-store>
</target>
<target ${p}colon>
    <backing-store $work/colon.img>
        bs-type syncguard
        bsopts write_sync=group:mode=write-through
        lun 1
    </backing-store>
</target>
CONF

"$tp" start "$work/tgtd" "$top/bs_syncguard.so" >/dev/null || exit 1
ctl=$(cat "$work/tgtd/ctl")
tgt-admin -C "$ctl" --execute -c "$work/targets.conf" >"$work/tgt-admin.log" 2>&1 ||
	{ say "tgt-admin failed:"; cat "$work/tgt-admin.log" >&2; exit 1; }
show=$(tgtadm -C "$ctl" --lld iscsi --op show --mode target)

# expected: target, backing file, mode, write_sync (from syncguard-stat's
# JSON, which jq must parse)
while read -r iqn file mode ws; do
	block=$(awk -v t="$iqn" '/^Target [0-9]+:/ { on = ($3 == t) } on' <<<"$show")
	if ! grep -q "Backing store path: $work/$file.img" <<<"$block" ||
	   ! grep -q "Backing store type: syncguard" <<<"$block"; then
		say "$iqn: no syncguard LUN on $file.img"; fail=1; continue
	fi
	got=$("$top/tools/syncguard-stat" --json "$iqn" 1 | jq -r '.[0] | .mode + " " + .write_sync')
	[ "$got" = "$mode $ws" ] || { say "$iqn: $got, expected $mode $ws"; fail=1; }
done <<EXPECT
${p}zvol zvol write-back auto
${p}file file write-through auto
${p}plp plp plp auto
${p}two-keys two write-through dsync
${p}colon colon write-through group
EXPECT
# syncguard-stat(1) documents exactly the JSON fields it prints
keys=$("$top/tools/syncguard-stat" --json "${p}zvol" 1 | jq -r '.[0] | keys[]' | sort)
documented=$("$top/tools/syncguard-stat" --man |
	awk '/^\.SH JSON FIELDS/ { on = 1; next } /^\.SH/ { on = 0 }
	     on && prev == ".TP" { sub(/^\.B /, ""); gsub(/\\/, ""); print }
	     { prev = $0 }' | sort)
if [ -z "$keys" ] || [ "$keys" != "$documented" ]; then
	say "syncguard-stat --json and its manual page differ:"
	diff <(echo "$keys") <(echo "$documented") >&2
	fail=1
fi
# --prometheus: the text format, parsed back: every sample a
# syncguard_ name with target and lun labels and a number, one HELP and
# TYPE per family before its samples, the mode of each LUN in
# syncguard_info, and each flush histogram's +Inf bucket its count
"$top/tools/syncguard-stat" --prometheus "$work/sg.prom" || { say "--prometheus failed"; fail=1; }
bad=$(awk '
	/^# HELP / { help[$3] = 1; next }
	/^# TYPE / { if (!help[$3] || type[$3]) { print "TYPE " $3; }; type[$3] = $4; next }
	/^#/ { next }
	!/^syncguard_[a-z_]+\{target="[^"]*",lun="[0-9]+"(,[a-z_]+="[^"]*")*\} [0-9.e+-]+$/ { print "line " NR; next }
	{ fam = $1; sub(/\{.*/, "", fam); base = fam; sub(/_(bucket|sum|count)$/, "", base)
	  if (!type[fam] && !type[base]) print "no TYPE before " fam
	  if (fam ~ /_bucket$/ && $1 ~ /le="\+Inf"/) { k = $1; sub(/,le=.*/, "", k); sub(/^[a-z_]*_bucket/, "", k); inf[k] = $2 }
	  if (fam ~ /_seconds_count$/) { k = $1; sub(/^[a-z_]*_count/, "", k); sub(/\}$/, "", k); cnt[k] = $2 } }
	END { for (k in cnt) if (inf[k] != cnt[k]) print "+Inf " k }' "$work/sg.prom")
for t in zvol:write-back file:write-through plp:plp; do
	grep -q "^syncguard_info{target=\"${p}${t%%:*}\",lun=\"1\",mode=\"${t#*:}\"" "$work/sg.prom" ||
		bad="$bad; no syncguard_info for ${t%%:*}"
done
if [ -n "$bad" ] || ! grep -q '^syncguard_device_flushes_total{' "$work/sg.prom"; then
	say "--prometheus output does not parse back: $bad"
	fail=1
fi

grep -q "Block size: 4096" <<<"$(awk -v t="${p}plp" '/^Target [0-9]+:/ { on = ($3 == t) } on' <<<"$show")" ||
	{ say "plp LUN: block-size 4096 not applied"; fail=1; }
[ "$fail" -eq 0 ] && say "ok: 5 targets loaded by tgt-admin and read back" || say FAILED
exit "$fail"
