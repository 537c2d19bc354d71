#!/usr/bin/env bash
# `make demo`: a booking run killed with SIGKILL at the worst moments, and carried on.
#
# Scenario 1 kills the worker right after the booking tool was dispatched; the resume carries it
# on and the airline shows one seat. Scenario 2 kills it while a text message without an
# idempotency key is in flight; the resume refuses (exit 4) naming the call, a person answers
# with `agentrun resolve`, and the run finishes without texting twice.
# Scenario 3 runs the same booking as a declared agent (a model endpoint and an MCP server, no
# Python): the fake OpenAI-compatible model server and the MCP booking server on loopback, no
# network. A worker killed in the destructive charge_card call is refused as indeterminate; one
# killed in the read-only search_flights call simply searches again.
set -uo pipefail
cd "$(dirname "$0")/.."
# the project's own virtualenv (made by `make deps`), so `agentrun` and `python3` are the checkout's
export PATH="$PWD/${VENV:-.venv}/bin:$PATH"

work=$(mktemp -d "${TMPDIR:-/tmp}/agentrun-demo.XXXXXX")
export AGENTRUN_STORE="sqlite:///$work/state.db"
export AGENTRUN_DEMO_LINGER_SECONDS=60
TTL=4
# shellcheck source=hack/demo-lib.sh
source hack/demo-lib.sh
services() { python3 -m agentrun.demo "$1"; }

start_and_kill() {  # run-id, linger step, what to wait for
  local run_id=$1 linger=$2 counter=$3
  AGENTRUN_DEMO_LINGER=$linger \
    agentrun run booking --input "Book Ada on the morning flight from Munich to Lisbon" \
    --tenant acme --run-id "$run_id" --lease-ttl "$TTL" --holder "worker-$run_id-a" &
  local pid=$!
  for _ in $(seq 100); do
    [ "$(services "$counter" 2>/dev/null)" = "1" ] && break
    sleep 0.1
  done
  [ "$(services "$counter")" = "1" ] || fail "the worker never reached $linger"
  printf -- '-- the %s tool acted; kill -9 %d\n' "$linger" "$pid"
  kill -9 "$pid"; wait "$pid" 2>/dev/null
}

wait_for_lease() {  # run-id
  printf -- '-- waiting for the dead worker'"'"'s lease to lapse (ttl %ss)\n' "$TTL"
  for _ in $(seq 100); do
    agentrun inspect "$1" --tenant acme --json | python3 -c \
      'import json,sys; sys.exit(0 if json.load(sys.stdin)["lease"] is None else 1)' && return
    sleep 0.2
  done
  fail "the lease on $1 never lapsed"
}

step "Scenario 1: a worker is killed right after it booked a seat"
export AGENTRUN_DEMO_DIR="$work/scenario-1"
start_and_kill run_1 book count-bookings
step "What the frontier says (agentrun inspect takes no lease)"
cat <<'TXT'
The frontier is the run's last checkpoint: the conversation so far and the calls it has yet to
decide. "micros" are the run's cost in millionths of the price table's currency unit; "fence" is
the number of the lease its holder writes under (every takeover gets a higher one).
TXT
show agentrun inspect run_1 --tenant acme
step "Resuming at once: the dead worker's lease has not lapsed yet"
show agentrun run --resume run_1 --tenant acme --holder worker-run_1-b
[ $? -eq 3 ] || fail "expected exit 3 while the dead worker's lease is live"
wait_for_lease run_1
step "Carrying the run on"
show agentrun run --resume run_1 --tenant acme --holder worker-run_1-b || fail "resume failed"
step "The airline's books"
services all
[ "$(services count-bookings)" = "1" ] || fail "the airline has more than one booking"
echo "one seat booked, not two: the resume re-sent the booking with the same Idempotency-Key"

step "Scenario 2: a worker is killed while a text without an idempotency key is in flight"
export AGENTRUN_DEMO_DIR="$work/scenario-2"
start_and_kill run_2 notify count-messages
wait_for_lease run_2
step "What the frontier says"
show agentrun inspect run_2 --tenant acme
step "Resuming refuses: nobody can say whether the text went out"
show agentrun run --resume run_2 --tenant acme --holder worker-run_2-b
[ $? -eq 4 ] || fail "expected exit 4 for an undecidable call"
step "A person checks the SMS gateway, sees the text went out, and says so"
services messages
call=$(agentrun inspect run_2 --tenant acme --json | python3 -c \
  'import json,sys; print([c["call_id"] for c in json.load(sys.stdin)["calls"] if c["disposition"]=="indeterminate"][0])')
show agentrun resolve run_2 --tenant acme --call "$call" --ran --result "message 1 sent" --by on-call \
  || fail "resolve failed"
step "Carrying the run on"
cat <<'TXT'
The fence is now 4: the refused resume took the lease with fence 2 and released it, and
`agentrun resolve` took it with fence 3 while it wrote the answer, so no worker could be
dispatching the call meanwhile.
TXT
show agentrun run --resume run_2 --tenant acme --holder worker-run_2-b || fail "resume failed"
services all
[ "$(services count-messages)" = "1" ] || fail "the passenger was texted twice"
echo "one text sent, not two: the kit refused to guess, and a person answered"

step "Scenario 3: a declared agent, killed while its MCP call is at the server"
cat <<'TXT'
The agent is data (agentrun.demo.declared): provider openai at the local fake model server, the
airline's MCP server, whose tool annotations decide what a resume may repeat.
TXT
python3 -m agentrun.demo.declared_crash "$work" || fail "the declared agent's resume did not do what its tools' annotations say"
step "Demo finished; state kept in $work"
