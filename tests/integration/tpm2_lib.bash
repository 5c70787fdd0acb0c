# Kept for the scripts that source it: the helpers are in tests/testlib/lib.bash.
. "$(dirname "${BASH_SOURCE[0]}")/../testlib/lib.bash"
