# Sourced by the test scripts: a configuration that cannot run here is
# left out out loud (tests/leftout.h says the same for the C tests).
#
#   left_out WHAT dependency|machine REASON
#
# prints "WHAT: left out: REASON" on stderr, appends it to the file
# $SYNCGUARD_LEFT_OUT names (if set), and for a missing dependency (a
# package or tool) with SYNCGUARD_REQUIRE_DEPS=1 (.ci/run) exits 1.
left_out() {
	echo "$1: left out: $3" >&2
	if [ "$2" = dependency ] && [ "${SYNCGUARD_REQUIRE_DEPS:-}" = 1 ]; then
		echo "$1: a missing dependency with SYNCGUARD_REQUIRE_DEPS=1: failing" >&2
		exit 1
	fi
	if [ -n "${SYNCGUARD_LEFT_OUT:-}" ]; then
		printf '%s\t%s\n' "$1" "$3" >>"$SYNCGUARD_LEFT_OUT"
	fi
	return 0
}
