#!/usr/bin/env bash
# Bounded load/soak run on loopback: CONNECTIONS handshaken connections with mixed traffic for
# SECONDS (defaults 1000 and 30, the CI run; the documented local soak is 1000 600). Prints one
# JSON line and exits non-zero on any lost, duplicated or reordered frame or any error.
#   usage: channels/examples/soak.sh [CONNECTIONS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
CONNECTIONS=${1:-1000}
SECONDS_=${2:-30}
# Two fds per connection (client and server side) plus headroom.
need=$(( CONNECTIONS * 2 + 256 ))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
  ulimit -n "$need" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fi
cargo build --release --quiet --example soak
exec timeout $(( SECONDS_ + 180 )) target/release/examples/soak "$CONNECTIONS" "$SECONDS_"
