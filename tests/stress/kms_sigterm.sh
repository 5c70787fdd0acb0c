#!/usr/bin/env bash
# SIGTERM races (make stress): 50 times, a fresh seclaunchd under a challenge
# load with idle connections held is sent SIGTERM at a random moment; every
# one must exit 0 with kms.stop and a closing checkpoint that
# `seclaunch audit verify --require-final-checkpoint` accepts (libmicrohttpd's
# MHD_quiesce_daemon used to abort about one stop in twenty here: "Failed to
# remove listen FD from epoll set", exit 134).
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/../integration/kms_lib.bash"
. "$(dirname "$0")/../integration/kms_dos_lib.bash"

cd "$T" || exit 1
N=${SL_STRESS_SIGTERMS:-50}
n=0
for ((i = 1; i <= N; i++)); do
	sigterm_during_load "SIGTERM #$i" && n=$((n + 1))
done
assert "$N SIGTERMs during requests: $n exited 0 with kms.stop and a closing checkpoint" test "$n" -eq "$N"
finish
