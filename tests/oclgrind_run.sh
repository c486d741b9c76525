#!/bin/bash
# Runs a command under Oclgrind, an OpenCL simulator that presents itself as a GPU and checks
# every memory access, with data-race detection and API checking. The test fails when the
# command fails or when Oclgrind reports anything, since its exit status does not say: the
# kernel checks (races, invalid or unaligned accesses, divergence) write to a log of their own
# (--log), where any line is a finding; the runtime's API checks write to stderr, as
# "Oclgrind - OpenCL runtime error detected". Exits 77 (skipped) where oclgrind is missing.
#
# usage: oclgrind_run.sh COMMAND [ARGS...]
# OCLGRIND_FLAGS adds options (e.g. --num-threads 1).
set -uo pipefail
if ! command -v oclgrind >/dev/null 2>&1; then
    echo "oclgrind is not installed (Debian package oclgrind): skipped"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/oclgrind.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2086 # OCLGRIND_FLAGS is a list of options
oclgrind --data-races --check-api --log "$work/log" ${OCLGRIND_FLAGS:-} "$@" 2> >(tee "$work/stderr" >&2)
rc=$?
wait # for tee
reports=$(cat "$work/log" 2>/dev/null; grep -A4 '^Oclgrind' "$work/stderr")
if [ -n "$reports" ]; then
    echo "oclgrind_run: Oclgrind reported:"
    echo "$reports"
    [ "$rc" -ne 0 ] || rc=1
fi
[ "$rc" -eq 0 ] || echo "oclgrind_run: '$*' failed (exit status $rc)"
exit "$rc"
