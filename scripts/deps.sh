#!/usr/bin/env bash
# Installs what art needs on Debian/Ubuntu when it is missing. Idempotent.
set -euo pipefail

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v git >/dev/null 2>&1 || need+=(git)
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3) # overlay tests run a real WAL database
command -v make >/dev/null 2>&1 || need+=(make)
command -v curl >/dev/null 2>&1 || need+=(curl) # --net allow tests run curl inside the sandbox
command -v ssh-agent >/dev/null 2>&1 || need+=(openssh-client) # a real program serving on a socket in ~/

if ! command -v go >/dev/null 2>&1; then
	echo "deps: Go 1.26 or newer (go.mod) is required and not on PATH (https://go.dev/dl/)" >&2
	exit 1
fi

if [ ${#need[@]} -gt 0 ]; then
	echo "deps: installing ${need[*]}"
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null 2>&1; then sudo=sudo; else
			echo "deps: run as root, or install: apt-get install -y ${need[*]}" >&2
			exit 1
		fi
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq "${need[@]}"
fi
