#!/usr/bin/env bash
# Drives the built mcp-confirm binary with real third-party MCP clients,
# installed from npm at the exact versions in package-lock.json:
#   ts-client-v2.mjs   @modelcontextprotocol/client (both eras, stdio + HTTP)
#   ts-sdk-v1.mjs      @modelcontextprotocol/sdk v1 (older era, stdio + HTTP)
#   mcpdo.mjs          MCP Inspector's mcpdo CLI (both eras, stdio + HTTP)
#   one-address.mjs    all of them on one --http address at once
#   proxy-filesystem.mjs  @modelcontextprotocol/client through `mcp-confirm proxy`
#                      in front of @modelcontextprotocol/server-filesystem
#   conformance.mjs    @modelcontextprotocol/conformance server scenarios
#   controls.mjs       negative controls: the scripts must fail against liars
# Prints one line per scenario (PASS, XFAIL = failure listed in baseline.yml
# with its reason, FAIL) and exits non-zero if anything failed or could not
# run. Every script has its own hard timeout and is also run under timeout(1).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
start=$(date +%s)

die() { printf '*** clients: %s\n' "$*" >&2; exit 1; }
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || die "go is not installed"
command -v node >/dev/null || die "node is not installed"
command -v npm >/dev/null || die "npm is not installed"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 20 ? 1 : 0)' || die "node >= 20 is required, found $(node --version)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "--- building mcp-confirm (production, and -tags conformance)"
(cd "$repo" && go build -o "$work/mcp-confirm" ./cmd/mcp-confirm) || die "go build failed"
(cd "$repo" && go build -tags conformance -o "$work/mcp-confirm-conformance" ./cmd/mcp-confirm) || die "go build -tags conformance failed"
# go vet ./... in .ci/run does not see files behind the build tag.
(cd "$repo" && go vet -tags conformance ./cmd/mcp-confirm) || die "go vet -tags conformance failed"
# The fixture tools exist only under the build tag: no flag can reach them.
if grep -qa 'test_input_required_result_' "$work/mcp-confirm"; then
  die "the production binary contains the conformance fixture tool names"
fi
grep -qa 'test_input_required_result_request_state' "$work/mcp-confirm-conformance" \
  || die "the -tags conformance binary lacks its fixture tools"
export MCP_CONFIRM_BIN="$work/mcp-confirm"
export MCP_CONFIRM_CONFORMANCE_BIN="$work/mcp-confirm-conformance"

echo "--- npm ci ($(node --version), npm $(npm --version))"
(cd "$here" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"

total_pass=0
total_xfail=0
total_fail=0
failed_scripts=()
run_script() {
  local script=$1 limit=$2 log="$work/$1.log" status=0
  echo "--- $script"
  (cd "$here" && timeout --kill-after=10 "$limit" node "$script" </dev/null >"$log" 2>&1) || status=$?
  grep -E '^(PASS|XFAIL|FAIL|N/A) ' "$log" || true
  local p x f
  p=$(grep -cE '^PASS ' "$log" || true)
  x=$(grep -cE '^XFAIL ' "$log" || true)
  f=$(grep -cE '^FAIL ' "$log" || true)
  total_pass=$((total_pass + p)); total_xfail=$((total_xfail + x)); total_fail=$((total_fail + f))
  if [ "$status" -ne 0 ] || [ "$f" -ne 0 ] || [ $((p + x)) -eq 0 ]; then
    [ "$status" -eq 124 ] && echo "FAIL $script: killed by timeout after $limit s"
    [ $((p + x)) -eq 0 ] && echo "FAIL $script: ran no scenario"
    echo "    (exit $status; full output follows)"
    sed 's/^/    | /' "$log" | grep -vE '^    \| (PASS|XFAIL|N/A) ' | tail -80
    failed_scripts+=("$script")
    [ "$f" -eq 0 ] && total_fail=$((total_fail + 1))
  fi
  return 0
}

run_script ts-client-v2.mjs 300
run_script ts-sdk-v1.mjs 120
run_script mcpdo.mjs 300
run_script one-address.mjs 60
run_script proxy-filesystem.mjs 420
run_script conformance.mjs 330
run_script controls.mjs 180

elapsed=$(( $(date +%s) - start ))
echo "--- clients: $total_xfail of the passes are XFAIL (expected failures listed with reasons in .ci/clients/baseline.yml); ${elapsed}s"
if [ "${#failed_scripts[@]}" -ne 0 ]; then
  echo "*** clients: failed: ${failed_scripts[*]}" >&2
fi
echo "clients: $((total_pass + total_xfail)) passed, $total_fail failed"
[ "${#failed_scripts[@]}" -eq 0 ] && [ "$total_fail" -eq 0 ]
