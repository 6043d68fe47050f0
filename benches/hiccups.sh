#!/bin/bash
# benches/hiccups.sh — how long this machine takes a busy CPU away from its process.
#
# A process that never sleeps, pinned to one CPU, reads the monotonic clock in a loop; a gap
# between two reads is time the CPU was given to something else (the guest's kernel, or, in a
# virtual machine, the host running another vCPU or tenant). Run on CPU 0 alone, on CPU 1
# alone, then on both at once, SECS seconds each (default 10). The benchmarks that keep both
# CPUs busy (a transfer: the server on CPU 0, the client on CPU 1) meet what the third line
# shows; an idle server meets what the first does, at most.
#
#   benches/hiccups.sh          # SECS=10
#
# Prints one line per CPU and run: gaps over 0.2, 0.5 and 1 ms, the longest, the time lost.
set -eu
SECS=${SECS:-10}
meter() {
  taskset -c "$1" python3 - "$SECS" "$1" "$2" <<'EOF'
import sys, time
secs, cpu, label = float(sys.argv[1]), sys.argv[2], sys.argv[3]
now = time.monotonic_ns
end = now() + int(secs * 1e9)
prev = now()
over = {200_000: 0, 500_000: 0, 1_000_000: 0}
longest = lost = 0
while prev < end:
    t = now()
    gap = t - prev
    prev = t
    if gap > 200_000:
        lost += gap
        for bound in over:
            if gap > bound:
                over[bound] += 1
        longest = max(longest, gap)
print(f"{label:10} CPU {cpu}: gaps > 0.2 ms {over[200_000]:4}, > 0.5 ms {over[500_000]:4}, "
      f"> 1 ms {over[1_000_000]:4}; longest {longest / 1e3:7.0f} us; lost {lost / 1e6:6.1f} ms "
      f"of {secs:.0f} s")
EOF
}
meter 0 alone
meter 1 alone
# Both at once, each line printed whole once both are done.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
meter 0 both > "$out" & first=$!
second=$(meter 1 both)
wait "$first"
cat "$out"
echo "$second"
