#!/usr/bin/env bash
# A short tour of art's store: push a workspace, change it, push again,
# then look at the history, rewind, and write a past state back out.
set -euo pipefail
art=$(realpath "${1:-bin/art}")
dir=$(mktemp -d /tmp/art-demo.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir"

say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

mkdir -p ws/src
echo 'print("hello")' > ws/main.py
printf 'def add(a, b):\n    return a + b\n' > ws/src/calc.py
echo '# demo workspace' > ws/README.md

say "$art" push -m ws -d ws.db
echo 'print("hello, art")' > ws/main.py
printf 'def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n' > ws/src/calc.py
rm ws/README.md
say "$art" push -m ws -d ws.db -q
say "$art" log -d ws.db
say "$art" diff -d ws.db main~1 main
say "$art" diff -d ws.db main~1 main --patch
say "$art" checkout -d ws.db main~1
say "$art" pull -m ws -d ws.db -q
say cat ws/main.py
say "$art" undo -d ws.db

# An agent session: the command runs in the bwrap sandbox, /home/agent is
# the FUSE overlay of the branch, every change is journaled, and the run
# ends with a snapshot. (Needs /dev/fuse and bwrap; make deps installs bwrap.)
if [ -w /dev/fuse ] && command -v bwrap >/dev/null; then
	say "$art" run -m ws -d ws.db -i=false -- sh -c 'echo "print(add(2, 3))" >> main.py && mkdir -p tests && echo "assert True" > tests/test_calc.py && id -un && ls -la'
	say "$art" run -m ws -d ws.db -i=false --branch try-b -- sh -c 'rm -rf tests && echo "# try b" >> main.py'
	say "$art" log -d ws.db -n 4
	say "$art" diff -d ws.db main try-b
	say cat ws/main.py
	say "$art" pull -m ws -d ws.db --branch try-b -q
	say cat ws/main.py
fi
say "$art" verify -d ws.db
echo
echo "demo done: the store was $dir/ws.db (removed now)"
