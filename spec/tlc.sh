#!/usr/bin/env bash
# tlc.sh runs TLC on every Ledger*.cfg in this directory (or on the ones
# named as arguments, without .cfg) and records the results for the Go tests
# in spec/ to check:
#
#   tlc/<name>.out     TLC's complete output for <name>.cfg
#   tlc/<name>.sha256  SHA-256 (sha256sum format) of the modules TLC read,
#                      of <name>.cfg and of tlc/<name>.out
#
# Each configuration states what TLC must report for it in a line
#   \* TLC-EXPECT: <exit code> <line that must appear in the output>
# The hash file is written only when TLC reports exactly that, so a stale or
# failing result is never recorded as checked.
#
# Usage: TLA2TOOLS_JAR=/opt/tla/tla2tools.jar spec/tlc.sh [name...]
# TLC_WORKERS sets TLC's -workers (default auto: one per core); on a
# shared machine, TLC_WORKERS=1 nice spec/tlc.sh.
set -euo pipefail

: "${TLA2TOOLS_JAR:?set TLA2TOOLS_JAR to the path of tla2tools.jar}"
[[ -f $TLA2TOOLS_JAR ]] || { echo "tlc.sh: $TLA2TOOLS_JAR: no such file" >&2; exit 2; }

cd "$(dirname "$0")"
root=MCLedger.tla
# The modules TLC reads from this directory: the root and what it extends.
modules=(Ledger.tla MCLedger.tla)

if (($# > 0)); then
	names=("$@")
else
	names=()
	for cfg in Ledger*.cfg; do names+=("${cfg%.cfg}"); done
fi

meta=$(mktemp -d)
trap 'rm -rf "$meta"' EXIT
mkdir -p tlc

status=0
for name in "${names[@]}"; do
	cfg=$name.cfg
	[[ -f $cfg ]] || { echo "tlc.sh: $cfg: no such file" >&2; exit 2; }
	expect=$(grep -m1 '^\\\* TLC-EXPECT: ' "$cfg" | sed 's/^\\\* TLC-EXPECT: //') ||
		{ echo "tlc.sh: $cfg has no TLC-EXPECT line" >&2; exit 2; }
	want_exit=${expect%% *}
	want_line=${expect#* }

	echo "== $cfg (want exit $want_exit: $want_line)"
	rm -f "tlc/$name.sha256"
	set +e
	java -XX:+UseParallelGC -cp "$TLA2TOOLS_JAR" tlc2.TLC \
		-workers "${TLC_WORKERS:-auto}" -noGenerateSpecTE -metadir "$meta/$name" \
		-config "$cfg" "$root" >"tlc/$name.out" 2>&1
	got_exit=$?
	set -e

	if [[ $got_exit != "$want_exit" ]] || ! grep -qxF -- "$want_line" "tlc/$name.out"; then
		echo "tlc.sh: $cfg: TLC exited $got_exit; want exit $want_exit and the line: $want_line" >&2
		echo "tlc.sh: see spec/tlc/$name.out; no hash recorded" >&2
		status=1
		continue
	fi
	sha256sum "${modules[@]}" "$cfg" "tlc/$name.out" >"tlc/$name.sha256"
	grep -E '^[0-9]+ states generated|^The depth|^Finished in' "tlc/$name.out" | sed 's/^/   /'
done
exit $status
