# Sourced by the benchmark scripts: busy_pct N prints the percent of all CPU time that was
# busy during the next N seconds (other work on the machine disturbs timings).
busy_pct() {
  local a b
  read -r -a a </proc/stat
  sleep "$1"
  read -r -a b </proc/stat
  local tot=0 idle=$((b[4] + b[5] - a[4] - a[5]))
  for i in 1 2 3 4 5 6 7 8; do tot=$((tot + b[i] - a[i])); done
  echo $((100 * (tot - idle) / (tot > 0 ? tot : 1)))
}
