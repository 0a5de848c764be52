# Exit statuses: set -e, && and ||, until, break, and the script's own.
false && echo no || echo "or ran"
true && echo "and ran"
until [ "${k:-0}" -ge 3 ]; do k=$((${k:-0} + 1)); done; echo "k=$k"
for i in 1 2 3 4; do [ $i = 3 ] && break; echo "i=$i"; done
(set -e; echo before; false; echo never); echo "set -e subshell: $?"
command -v nosuchcommand >/dev/null; echo "missing command: $?"
nosuchcommand 2>/dev/null; echo "not found: $?"
test 2 -gt 1; echo "test: $?"
[ -e /nonexistent ]; echo "no file: $?"
exit 42
