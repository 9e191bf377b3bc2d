#!/usr/bin/env bash
# The prerequisites of `make demo` beyond Go and Node: Yarn classic (for the console's build) and
# PostgreSQL's server binaries (initdb, pg_ctl). What is missing is installed when this can be done
# without asking anyone: Yarn through npm, PostgreSQL through apt-get when running as root.
# Otherwise it stops at once and prints the one command to run. Exit status 0: everything is there.
#
# PG_BIN names a folder holding initdb and pg_ctl (as for the tests); RXC_PG_LIB is where the
# versioned server folders are looked for (default Debian's /usr/lib/postgresql).
set -euo pipefail

YARN_VERSION=1.22.22
PG_LIB=${RXC_PG_LIB:-/usr/lib/postgresql}

say() { echo "demo: $*" >&2; }
stop() {
	say "$1"
	say "run:  $2"
	exit 1
}

is_root() { [ "$(id -u)" = 0 ]; }

have_pg() {
	local d
	if [ -n "${PG_BIN:-}" ] && [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_ctl" ]; then
		return 0
	fi
	for d in "$PG_LIB"/*/bin; do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			return 0
		fi
	done
	local initdb
	initdb=$(command -v initdb 2>/dev/null) || return 1
	[ -x "$(dirname "$initdb")/pg_ctl" ]
}

command -v go >/dev/null 2>&1 || stop "Go is missing (the demo builds the binaries)" "see https://go.dev/doc/install (Go 1.26 or newer)"

if ! command -v yarn >/dev/null 2>&1; then
	command -v npm >/dev/null 2>&1 || stop "Node.js with npm is missing (the console is built with Yarn)" "apt-get install nodejs npm   (Node 20 or newer)"
	say "Yarn is missing: npm i -g yarn@$YARN_VERSION"
	if ! npm i -g "yarn@$YARN_VERSION" >&2 || ! command -v yarn >/dev/null 2>&1; then
		stop "could not install Yarn with npm (no write access to npm's global folder?)" "sudo npm i -g yarn@$YARN_VERSION"
	fi
fi

if ! have_pg; then
	if is_root && command -v apt-get >/dev/null 2>&1; then
		say "PostgreSQL's server is missing: apt-get install postgresql"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update >&2 || stop "apt-get update failed" "apt-get update && apt-get install -y postgresql"
		apt-get install -y --no-install-recommends postgresql >&2 || stop "apt-get install postgresql failed" "apt-get install -y postgresql"
		have_pg || stop "postgresql is installed but initdb and pg_ctl were not found" "PG_BIN=/path/to/postgresql/bin make demo"
	elif command -v apt-get >/dev/null 2>&1; then
		stop "PostgreSQL's server (initdb, pg_ctl) is missing" "sudo apt-get install -y postgresql"
	else
		stop "PostgreSQL's server (initdb, pg_ctl) is missing; install it with your system's package manager and point PG_BIN at its bin folder" "PG_BIN=/path/to/postgresql/bin make demo"
	fi
fi
