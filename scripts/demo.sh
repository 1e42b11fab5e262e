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

# A session through the FUSE overlay: the branch as a filesystem, every
# change journaled. (Needs /dev/fuse; the sandbox around it comes next.)
if [ -w /dev/fuse ]; then
	mkdir -p mnt
	echo
	printf '\033[1m$ %s\033[0m\n' "$art mount -d ws.db -m ws mnt &"
	"$art" mount -d ws.db -m ws mnt 2>mount.log &
	mpid=$!
	for _ in $(seq 50); do grep -q '^serving' mount.log 2>/dev/null && break; sleep 0.1; done
	say sh -c 'cd mnt/ws && echo "print(add(2, 3))" >> main.py && mkdir -p tests && echo "assert True" > tests/test_calc.py && ls -la'
	kill -INT "$mpid"; wait "$mpid" || true
	cat mount.log
	say "$art" log -d ws.db -n 3
	say "$art" diff -d ws.db main~1 main --stat
fi
say "$art" verify -d ws.db
echo
echo "demo done: the store was $dir/ws.db (removed now)"
