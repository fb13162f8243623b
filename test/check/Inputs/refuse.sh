#!/bin/sh
# refuse.sh DIR CALL: writes DIR/in.et, a valid program whose
# framework call is CALL, runs `eintup check` on it and prints its stderr.
# Fails (exit 1, with the reason) unless
#   - the exit code is 2,
#   - no Python was started: EINTUP_PYTHON points at a stand-in that only
#     leaves DIR/python-started behind, so a refusal must come from eintup
#     itself, before any framework code could run,
#   - nothing was created or deleted: DIR/pwned does not exist, and the
#     directory DIR/keep and the file DIR/keep/file are still there.
# Calls name DIR/pwned and DIR/keep as their targets.
set -u
dir=$1
call=$2
rm -rf "$dir" && mkdir -p "$dir/keep" && touch "$dir/keep/file"
printf '#!/bin/sh\ntouch "%s/python-started"\nexit 1\n' "$dir" > "$dir/python"
chmod +x "$dir/python"
printf 'x[i] = RANDOM(0, 1, FLOAT)\ny[i] = x[i]\n\n%s\n\ny\n' "$call" > "$dir/in.et"
EINTUP_PYTHON="$dir/python" eintup check "$dir/in.et" > "$dir/stdout" 2> "$dir/stderr"
code=$?
cat "$dir/stderr"
fail=0
[ "$code" -eq 2 ] || { echo "refuse.sh: exit code $code, expected 2"; fail=1; }
[ ! -e "$dir/python-started" ] || { echo "refuse.sh: Python was started"; fail=1; }
[ ! -e "$dir/pwned" ] || { echo "refuse.sh: $dir/pwned was created"; fail=1; }
[ -f "$dir/keep/file" ] || { echo "refuse.sh: $dir/keep/file was deleted"; fail=1; }
[ ! -s "$dir/stdout" ] || { echo "refuse.sh: unexpected output on stdout"; fail=1; }
exit $fail
