#!/usr/bin/env bash
# Build time of programs that use kiln, against the same programs written with xtensor + xsimd
# and with Eigen (bench/build_time/): one fused expression (*_one.cpp), the includes and an
# empty main (*_empty.cpp), 20 different elementwise expressions (*_20.cpp). Then, unless
# --no-growth, how build time grows with the expression: generated chains of 8, 16, 32, 64 ops
# (kiln and xtensor) and kiln gradients of functions of 2, 4, 8 tensors.
#
# Each program is compiled and linked REPS times (default 3, round-robin over the programs so
# that load drift hits them alike) with $CXX -std=c++20 -O2 -march=native; the median wall
# time and the median CPU time (user + sys of the compiler processes: steadier when other work
# loads the machine) are printed as markdown tables. Each program is then run once: kiln's
# checksums must agree with xtensor's and Eigen's, and the gradients with their closed form.
#
# kiln programs: where the CMake project has a `kiln_runtime` target (the device runtime
# compiled once per program), it is built once in build/build_time-<compiler> (timed on its
# own line) and each program links it; without one, kiln programs are compiled header-only,
# as a user without CMake would. Override with KILN_RUNTIME=header-only, or
# =path/to/libkiln_runtime.a; KILN_FLAGS (default: kiln's include roots, and, with the
# runtime, -DKILN_COMPILED_CORE, plus, when it builds the runtime itself, the options
# kiln::kiln adds for the compiler) and KILN_LIBS (default: the runtime, -ldl -pthread)
# replace what kiln programs are compiled and linked with.
#
# --statements replaces all of the above with the many-statements case: a program of N blocks
# of kiln statements (views, broadcasts, where, math, reductions; each block in f64 on the
# host and in f32 on the host and on the first GPU device) written in ONE function, against
# the same blocks each in a function of its own, for N = 5, 10, 20, 40 (--sizes "..."), at
# -O2 and at -O3; and a file of 40 small random gradients of three tensors in one function
# (-O3), checked against finite differences, and the same without the checks (their
# checksums must agree). Each is compiled and linked once (the one-function and split
# programs of a size at the same time, one per core); CPU s (user + sys) and peak memory (GNU
# time's maximum resident set) are reported, with the ratio one function / split. Every program is run: the
# f32 results must agree with the f64 ones, the gradients with finite differences. About 15
# CPU minutes with g++ on the 2-core test machine (8 of wall time).
#
# Usage: bench/build_time.sh [--no-growth] [--reps N] [--statements [--sizes "5 10"]] [compiler = g++]
# Time, measured with kiln header-only (before issue 12): one round of the first table takes
# 71 CPU s, so --no-growth about 3.5 CPU minutes; the whole run 12.2 CPU minutes, 15 minutes of
# wall time on 2 cores loaded by other builds.
set -euo pipefail
reps=3 growth=yes cxx=g++ statements=no sizes="5 10 20 40"
while (($#)); do
  case $1 in
    --no-growth) growth=no ;;
    --statements) statements=yes ;;
    --sizes) sizes=${2:?--sizes needs a list} && shift ;;
    --reps) reps=${2:?--reps needs a count} && shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
    -*) echo "build_time.sh: unknown option $1 (see --help)" >&2 && exit 2 ;;
    *) cxx=$1 ;;
  esac
  shift
done
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
inputs="$here/build_time"
out=$(mktemp -d)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
trap 'rm -rf "$out"' EXIT

flags=(-std=c++20 -O2 -march=native -I"$inputs")
read -r -a eigen_flags <<<"$(pkg-config --cflags eigen3 2>/dev/null || echo -I/usr/include/eigen3)"

# --- kiln: the device runtime built once, or header-only -------------------------------------
runtime_line=
kiln_runtime=${KILN_RUNTIME:-auto}
if [[ $kiln_runtime == auto ]]; then
  bt="$repo/build/build_time-$(basename "$cxx")" # one per compiler: a CMake cache holds one
  cmake -S "$repo" -B "$bt" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF \
    -DKILN_BUILD_EXAMPLES=OFF -DCMAKE_CXX_COMPILER="$(command -v "$cxx")" \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$out/cmake.log" 2>&1 ||
    { cat "$out/cmake.log" >&2 && exit 1; }
  # The compiler options kiln::kiln adds for this compiler (clang<20's -mllvm workaround,
  # CMakeLists.txt), read off the runtime's compile command, which has them too.
  package_flags=$({ grep -o -e '-mllvm [^ "]*' "$bt/compile_commands.json" || true; } | sort -u | tr '\n' ' ')
  # Captured first: grep -q would stop reading, and ninja's SIGPIPE fail the pipeline.
  targets=$(ninja -C "$bt" -t targets all 2>/dev/null || true)
  if grep -q '^kiln_runtime:' <<<"$targets"; then
    # --clean-first: the one-off cost of the runtime, not an up-to-date no-op.
    t=$({ TIMEFORMAT='%R %U %S' && time cmake --build "$bt" --target kiln_runtime --clean-first \
      >"$out/runtime.log" 2>&1; } 2>&1) || { cat "$out/runtime.log" >&2 && exit 1; }
    kiln_runtime=$(find "$bt" -name libkiln_runtime.a | head -1)
    [[ -n $kiln_runtime ]] || { echo "build_time.sh: no libkiln_runtime.a in $bt" >&2 && exit 1; }
    runtime_line="kiln device runtime (libkiln_runtime.a, CMake Release), built once per program:"
    runtime_line+=$(awk '{ printf " %.2f s wall (%.2f s CPU), one build", $1, $2 + $3 }' <<<"$t")
  else
    kiln_runtime=header-only
  fi
fi
if [[ $kiln_runtime == header-only ]]; then
  runtime_line="kiln programs compiled header-only: no kiln_runtime target in this tree, so"
  runtime_line+=" every program compiles the device runtime itself"
  default_libs="-ldl -pthread"
else
  runtime_line=${runtime_line:-"kiln programs linked with $kiln_runtime"}
  default_libs="$kiln_runtime -ldl -pthread"
fi
default_flags="-I$repo/include -I$repo/jit -I$repo/kernels -I$repo/autodiff"
# Linked with the runtime, as kiln::kiln compiles a program: kiln's non-template functions
# are in the library too (include/kiln/linkage.hpp).
[[ $kiln_runtime == header-only ]] || default_flags+=" -DKILN_COMPILED_CORE ${package_flags:-}"
read -r -a kiln_flags <<<"${KILN_FLAGS:-$default_flags}"
read -r -a kiln_libs <<<"${KILN_LIBS:-$default_libs}"

# --- compiling and timing --------------------------------------------------------------------
declare -A src walls cpus
add() { src[$1]=$2; } # program name (kiln_*, xtensor_*, eigen_*), its source

compile_once() { # name: compiles and links it to $out/bin/name, appends its times
  local name=$1 pre=() post=() t
  case $name in
    kiln_*) pre=("${kiln_flags[@]}") && post=("${kiln_libs[@]}") ;;
    eigen_*) pre=("${eigen_flags[@]}") ;;
  esac
  t=$({ TIMEFORMAT='%R %U %S' && time "$cxx" "${flags[@]}" "${pre[@]}" "${src[$name]}" \
    -o "$out/bin/$name" "${post[@]}" 2>"$out/log"; } 2>&1) ||
    { echo "build_time.sh: $name did not build" >&2 && cat "$out/log" >&2 && exit 1; }
  walls[$name]+=" $(awk '{ print $1 }' <<<"$t")"
  cpus[$name]+=" $(awk '{ print $2 + $3 }' <<<"$t")"
}

measure() { # names...: REPS rounds, each compiling every one of them once
  local r name
  for ((r = 0; r < reps; ++r)); do
    for name in "$@"; do compile_once "$name"; done
  done
  for name in "$@"; do
    "$out/bin/$name" >"$out/$name.txt" || { echo "build_time.sh: $name failed" >&2 && exit 1; }
  done
}

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 }
  END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
wall() { median "${walls[$1]}"; }
cpu() { median "${cpus[$1]}"; }
cell() { echo "$(wall "$1") ($(cpu "$1"))"; } # "wall (CPU)"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
checksum() { sed -n 's/^checksum //p' "$out/$1.txt"; }

same_checksum() { # name1 name2 relative tolerance
  local a b
  a=$(checksum "$1") b=$(checksum "$2")
  awk -v a="$a" -v b="$b" -v tol="$3" 'BEGIN {
    d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a) > (b < 0 ? -b : b) ? (a < 0 ? -a : a) : (b < 0 ? -b : b)
    exit !(a == a && b == b && d <= tol * m) }' ||
    { echo "build_time.sh: checksums differ: $1 $a, $2 $b" >&2 && exit 1; }
}

mkdir -p "$out/bin" "$out/src"

header() { # the lines every report starts with
  echo "- compiler: $("$cxx" --version | head -1), $1, compile + link"
  echo "- machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo "- load average at the start: $load0, at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  if commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null); then
    git -C "$repo" diff --quiet HEAD -- include jit kernels autodiff || commit+=" + uncommitted changes"
  else
    commit="not a git checkout"
  fi
  echo "- kiln: $commit"
  echo "- $runtime_line"
  [[ -z ${package_flags:-} ]] || echo "- kiln::kiln's options for this compiler, used here too: $package_flags"
}

if [[ $statements == yes ]]; then
  [[ -x /usr/bin/time ]] || { echo "build_time.sh: --statements needs GNU time (apt-get install time)" >&2 && exit 1; }
  # shellcheck source=bench/build_time_statements.sh
  source "$here/build_time_statements.sh"
  # Compiles, links and runs one program; "CPU-seconds peak-MB" in $out/$name.t.
  build_one() { # name, -On
    local name=$1 opt=$2
    /usr/bin/time -f "%U %S %M" -o "$out/$name.time" "$cxx" -std=c++20 "$opt" -march=native \
      "${kiln_flags[@]}" "$out/src/$name.cpp" -o "$out/bin/$name" "${kiln_libs[@]}" 2>"$out/$name.log" ||
      { echo "build_time.sh: $name did not build" >&2 && cat "$out/$name.log" >&2 && return 1; }
    "$out/bin/$name" >"$out/$name.txt" 2>&1 || { echo "build_time.sh: $name failed" >&2 &&
      cat "$out/$name.txt" >&2 && return 1; }
    awk '{ printf "%.1f %.0f", $1 + $2, $3 / 1024 }' "$out/$name.time" >"$out/$name.t"
  }
  both() { # the names of two programs built at the same time, -On
    build_one "$1" "$3" & local p1=$!
    build_one "$2" "$3" & local p2=$!
    wait "$p1" && wait "$p2"
  }
  cpu_of() { cut -d' ' -f1 "$out/$1.t"; }
  mem_of() { cut -d' ' -f2 "$out/$1.t"; }
  for n in $sizes; do
    statements_program "$n" one >"$out/src/one_$n.cpp"
    statements_program "$n" split >"$out/src/split_$n.cpp"
  done
  grad_random_program 40 >"$out/src/grads_40.cpp"
  grad_random_program 40 plain >"$out/src/grads_plain_40.cpp"
  for opt in -O2 -O3; do
    for n in $sizes; do
      both "one_$n" "split_$n" "$opt" || exit 1
      mv "$out/one_$n.t" "$out/one_${n}$opt.t" && mv "$out/split_$n.t" "$out/split_${n}$opt.t"
    done
  done
  build_one grads_40 -O3 || exit 1
  build_one grads_plain_40 -O3 || exit 1
  cmp -s <(grep checksum "$out/grads_40.txt") <(grep checksum "$out/grads_plain_40.txt") ||
    { echo "build_time.sh: the gradients without checks give another checksum" >&2 && exit 1; }

  header "-std=c++20 -On -march=native"
  echo "- device the programs ran on: $(sed -n 's/^[0-9]* blocks, \(.*\), [0-9]* failures$/\1/p' \
    "$out/one_${sizes##* }.txt")"
  echo
  echo "Blocks of statements in ONE function against the same blocks each in a function of its"
  echo "own: CPU s (user + sys of the compiler and linker; peak memory in MB in parentheses), one"
  echo "build each."
  echo
  echo "| blocks | -O2 one function | -O2 split | -O2 one / split | -O3 one function | -O3 split | -O3 one / split |"
  echo "|---|---|---|---|---|---|---|"
  for n in $sizes; do
    line="| $n"
    for opt in -O2 -O3; do
      o="one_${n}$opt" sp="split_${n}$opt"
      line+=" | $(cpu_of "$o") ($(mem_of "$o")) | $(cpu_of "$sp") ($(mem_of "$sp")) |"
      line+=" $(ratio "$(cpu_of "$o")" "$(cpu_of "$sp")")"
    done
    echo "$line |"
  done
  echo
  echo "40 small random gradients of three tensors (trees of depth 2, kiln::grad, each gradient"
  echo "evaluated and checked against finite differences) in one function, -O3: $(cpu_of grads_40) s"
  echo "CPU ($(mem_of grads_40) MB); the same gradients without the checks (the issue's file:"
  echo "gradients only, the same checksum): $(cpu_of grads_plain_40) s CPU ($(mem_of grads_plain_40) MB)."
  exit 0
fi

for lib in kiln xtensor eigen; do
  for prog in one empty 20; do add "${lib}_$prog" "$inputs/${lib}_$prog.cpp"; done
done
measure kiln_one xtensor_one eigen_one kiln_empty xtensor_empty eigen_empty kiln_20 \
  xtensor_20 eigen_20
for prog in one 20; do
  same_checksum "kiln_$prog" "xtensor_$prog" 1e-4
  same_checksum "kiln_$prog" "eigen_$prog" 1e-4
done

if [[ $growth == yes ]]; then
  # shellcheck source=bench/build_time_growth.sh
  source "$here/build_time_growth.sh"
  for n in 8 16 32 64; do
    chain_program kiln "$n" >"$out/src/chain_kiln_$n.cpp"
    chain_program xt "$n" >"$out/src/chain_xtensor_$n.cpp"
    add "kiln_chain_$n" "$out/src/chain_kiln_$n.cpp"
    add "xtensor_chain_$n" "$out/src/chain_xtensor_$n.cpp"
  done
  for k in 2 4 8; do
    grad_program "$k" >"$out/src/grad_kiln_$k.cpp"
    add "kiln_grad_$k" "$out/src/grad_kiln_$k.cpp"
  done
  measure kiln_chain_{8,16,32,64} xtensor_chain_{8,16,32,64} kiln_grad_{2,4,8}
  for n in 8 16 32 64; do same_checksum "kiln_chain_$n" "xtensor_chain_$n" 1e-3; done
fi

# --- report ----------------------------------------------------------------------------------
header "-std=c++20 -O2 -march=native"
echo "- each cell: median of $reps builds, wall s (CPU s, user + sys of the compiler, in"
echo "  parentheses: steadier when other work loads the machine)"
echo
echo "| program | kiln | xtensor + xsimd | Eigen | kiln / xtensor, wall (CPU) |"
echo "|---|---|---|---|---|"
row() { # label, program suffix
  echo "| $1 | $(cell "kiln_$2") | $(cell "xtensor_$2") | $(cell "eigen_$2") |" \
    "$(ratio "$(wall "kiln_$2")" "$(wall "xtensor_$2")") ($(ratio "$(cpu "kiln_$2")" \
      "$(cpu "xtensor_$2")")) |"
}
row "one expression and its sum" one
row "empty main (the includes)" empty
row "20 expressions" 20
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }
d_cell() { echo "$(minus "$(wall "${1}_20")" "$(wall "${1}_empty")") ($(minus \
  "$(cpu "${1}_20")" "$(cpu "${1}_empty")"))"; }
echo "| 20 expressions - empty main | $(d_cell kiln) | $(d_cell xtensor) | $(d_cell eigen) |" \
  "$(ratio "$(minus "$(wall kiln_20)" "$(wall kiln_empty)")" "$(minus "$(wall xtensor_20)" \
    "$(wall xtensor_empty)")") ($(ratio "$(minus "$(cpu kiln_20)" "$(cpu kiln_empty)")" \
      "$(minus "$(cpu xtensor_20)" "$(cpu xtensor_empty)")")) |"
kb() { echo $(($(stat -c %s "$out/bin/$1") / 1024)); }
echo "| binary size, KB: one expression / empty / 20 |" \
  "$(kb kiln_one) / $(kb kiln_empty) / $(kb kiln_20) |" \
  "$(kb xtensor_one) / $(kb xtensor_empty) / $(kb xtensor_20) |" \
  "$(kb eigen_one) / $(kb eigen_empty) / $(kb eigen_20) | |"
echo
echo "Checksums agree: kiln's one-expression and 20-expression results match xtensor's and"
echo "Eigen's to 1e-4 (relative)."

if [[ $growth == yes ]]; then
  echo
  echo "Growth with the expression: one fused chain of N ops ((e * b), (e + c), sin(e), (e - d)"
  echo "in turn, starting from e = a); s per added op is the step from the row above (the first"
  echo "row: from the empty main). Checksums: kiln and xtensor agree to 1e-3 (relative)."
  echo
  echo "| ops | kiln | kiln, s per added op | xtensor + xsimd | xtensor, s per added op | kiln / xtensor, wall (CPU) |"
  echo "|---|---|---|---|---|---|"
  step() { # name, previous name, ops between them -> "wall (CPU)" per op
    awk -v w="$(wall "$1")" -v pw="$(wall "$2")" -v c="$(cpu "$1")" -v pc="$(cpu "$2")" -v n="$3" \
      'BEGIN { printf "%.3f (%.3f)", (w - pw) / n, (c - pc) / n }'
  }
  prev=0
  for n in 8 16 32 64; do
    pk=kiln_chain_$prev px=xtensor_chain_$prev
    ((prev)) || pk=kiln_empty px=xtensor_empty
    echo "| $n | $(cell "kiln_chain_$n") | $(step "kiln_chain_$n" "$pk" $((n - prev))) |" \
      "$(cell "xtensor_chain_$n") | $(step "xtensor_chain_$n" "$px" $((n - prev))) |" \
      "$(ratio "$(wall "kiln_chain_$n")" "$(wall "xtensor_chain_$n")") ($(ratio \
        "$(cpu "kiln_chain_$n")" "$(cpu "xtensor_chain_$n")")) |"
    prev=$n
  done
  echo
  echo "Gradients: kiln::grad(kiln::sum(f), x1, ..., xk) evaluated in one kiln::eval, with"
  echo "f = sum over i of x_i * sin(x_{i+1}) + exp(-x_i * x_i) * 0.5 (indices mod k: every"
  echo "input meets two others); every gradient is checked against its closed form."
  echo
  echo "| inputs k | ops in f | kiln | s per added input |"
  echo "|---|---|---|---|"
  prev=0
  for k in 2 4 8; do
    pk=kiln_grad_$prev
    ((prev)) || pk=kiln_empty
    echo "| $k | $((8 * k - 1)) | $(cell "kiln_grad_$k") | $(step "kiln_grad_$k" "$pk" $((k - prev))) |"
    prev=$k
  done
fi
