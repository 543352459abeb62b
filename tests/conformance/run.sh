#!/usr/bin/env bash
# Conformance: schemathesis (pinned, in a venv of its own) against a fresh `shopcell serve` on a
# temporary data directory, as a seeded owner with known ids. Fails on any check's failure, or
# when under 80 % of the tested operations answered a 2xx at least once. See docs/contract.md,
# "Conformance run". Usage: tests/conformance/run.sh  (from anywhere; builds the debug binary)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."

SCHEMATHESIS_VERSION="4.32.5"
venv="${TMPDIR:-/tmp}/shopcell-conformance-venv-$SCHEMATHESIS_VERSION"
if [ ! -x "$venv/bin/st" ]; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi

cargo build -q
bin="${CARGO_TARGET_DIR:-target}/debug/shopcell"

work="$(mktemp -d)"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
# Sign-in and sign-up limits raised: schemathesis calls login, refresh and register thousands of
# times from one address. Webhooks may point at 127.0.0.1 (nothing listens: deliveries fail).
"$bin" serve --data "$work/data" --listen "127.0.0.1:$port" --log-format json \
  --rate-per-account 1000000 --rate-per-address 1000000 --rate-register 1000000 \
  --outbound-allow 127.0.0.1 >"$work/serve.log" 2>&1 &
serve_pid=$!
cleanup() {
  kill "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 100); do
  python3 -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1], timeout=2)" "$base/readyz" \
    >/dev/null 2>&1 && break
  kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.log"; echo "conformance: serve exited" >&2; exit 1; }
  sleep 0.1
done

python3 "$here/seed.py" "$base" "$work"
export SHOPCELL_OWNER_TOKEN="$(cat "$work/owner.token")"
export SHOPCELL_PUBLISHABLE_KEY="$(cat "$work/publishable.key")"
export SHOPCELL_SERVICE_KEY="$(cat "$work/data/account/service.key")"
cat "$here/schemathesis.toml" "$work/schemathesis.toml" >"$work/config.toml"

# 10 minutes at most; the run itself is bounded by examples per operation, not by this cap.
# Failures already known are listed in baseline.json (docs/contract.md, "Conformance run"): a new
# one fails the run. CONFORMANCE_BASELINE_UPDATE=1 rewrites it: this run's failures merged in,
# entries it did not reproduce (a hole since fixed) dropped.
baseline=(--baseline "$here/baseline.json")
if [ "${CONFORMANCE_BASELINE_UPDATE:-}" = 1 ]; then baseline+=(--baseline-update --baseline-prune); fi
# hooks.py makes each valid Idempotency-Key unique (why: its docstring).
export SCHEMATHESIS_HOOKS="$here/hooks.py"
status=0
timeout 600 "$venv/bin/st" --config-file "$work/config.toml" run "$base/api/v1/openapi.json" \
  --url "$base" --report ndjson --report-ndjson-path "$work/report.ndjson" --no-color "${baseline[@]}" \
  || status=$?
if [ "$status" -eq 124 ]; then
  echo "conformance: schemathesis ran past its 10-minute cap" >&2
  exit 1
fi
python3 "$here/coverage.py" "$work/report.ndjson" 0.80 || status=1
if [ "$status" -ne 0 ]; then
  grep -E '"level":"(ERROR|WARN)"' "$work/serve.log" | tail -20 >&2 || true
fi
exit "$status"
