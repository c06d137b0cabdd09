#!/bin/sh
# fetch-tgt-src.sh DEST: unpack the Debian source of the *installed* tgt into DEST.
#
# The tgt backing-store ABI is tgt's internal structs (struct scsi_lu,
# struct backingstore_template, ...) with no version field, so the module
# must be compiled against exactly the installed version's headers.
#
# The system's apt configuration is not touched: a private apt directory
# gets deb-src entries derived from the machine's own deb entries (same
# URIs, suites, components and keyring), and apt-get runs with
# Dir::Etc::SourceParts / Dir::State::Lists / Dir::Cache pointing there.
set -eu

dest=${1:?usage: fetch-tgt-src.sh DEST}
mkdir -p "$(dirname "$dest")"
ver=$(dpkg-query -W -f '${Version}' tgt 2>/dev/null) || {
	echo "fetch-tgt-src: tgt is not installed (run 'make deps' first)" >&2
	exit 1
}
upstream=${ver#*:}; upstream=${upstream%%-*}

if [ -f "$dest/.syncguard-tgt-version" ] &&
   [ "$(cat "$dest/.syncguard-tgt-version")" = "$ver" ]; then
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/syncguard-apt.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/sources.list.d" "$work/lists/partial" "$work/cache/archives/partial" "$work/src"

# deb822 .sources files: keep enabled stanzas whose Types include "deb",
# rewrite Types to deb-src.
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	awk '
	function flush() {
		if (n && isdeb && enabled) {
			for (i = 1; i <= n; i++) print lines[i]
			print ""
		}
		n = 0; isdeb = 0; enabled = 1
	}
	BEGIN { n = 0; isdeb = 0; enabled = 1 }
	/^[ \t]*$/ { flush(); next }
	/^#/ { next }
	/^Types:/ { if ($0 ~ /[ \t]deb([ \t]|$)/) isdeb = 1; lines[++n] = "Types: deb-src"; next }
	/^Enabled:[ \t]*no/ { enabled = 0 }
	{ lines[++n] = $0 }
	END { flush() }' "$f" > "$work/sources.list.d/$(basename "$f")"
done

# one-line format: "deb [opts] URI suite comp..." -> "deb-src [opts] URI suite comp..."
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	[ -f "$f" ] || continue
	sed -n 's/^[ \t]*deb\([ \t]\)/deb-src\1/p' "$f"
done > "$work/sources.list.d/derived.list"

apt_opts="-o Dir::Etc::SourceList=/dev/null
 -o Dir::Etc::SourceParts=$work/sources.list.d
 -o Dir::State::Lists=$work/lists
 -o Dir::Cache=$work/cache
 -o Debug::NoLocking=1"

# An index that fails to download (a third-party repository without
# sources) is not fatal: apt-get source below fails clearly if tgt's is missing.
# shellcheck disable=SC2086
apt-get $apt_opts -q update >"$work/update.log" 2>&1 || true
# shellcheck disable=SC2086
if ! (cd "$work/src" && apt-get $apt_opts -q --download-only source "tgt=$ver" >"$work/source.log" 2>&1); then
	echo "fetch-tgt-src: could not download the source of tgt $ver:" >&2
	tail -n 5 "$work/source.log" >&2
	tail -n 5 "$work/update.log" >&2
	exit 1
fi
dsc=$(ls "$work"/src/tgt_*.dsc)
rm -rf "$dest.tmp"
dpkg-source --no-check --no-copy -x "$dsc" "$dest.tmp" >"$work/extract.log" 2>&1 || {
	echo "fetch-tgt-src: dpkg-source -x failed (is dpkg-dev installed?)" >&2
	tail -n 5 "$work/extract.log" >&2
	exit 1
}
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$ver" > "$dest/.syncguard-tgt-version"
echo "fetch-tgt-src: tgt $ver ($upstream) source in $dest"
