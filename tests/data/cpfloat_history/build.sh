#!/bin/bash
# Build CPFloat's MEX interface for GNU Octave at each dated state and run driver.m with it.
#
#   CPFLOAT_GIT=<git dir of CPFloat>  OCTAVE_DEV=<root of Debian's octave-dev, unpacked>  \
#   PCG=<pcg-c source tree with src/libpcg_random.a built>  WORK=<scratch dir>  ./build.sh
#
# then: python make_corpus.py collect $WORK $WORK/runs   (writes index.json.gz and outputs.npz here)
#
# Commits: the last commit of each day that touched mex/cpfloat.c or src/*.h, from CPFloat's first
# release (v0.1.0, 2021-01-27).  Each is built without PCG as in the reference corpus (the
# deterministic modes never draw); where the sources do not compile without it (2022-02-28 to
# 2025-12-09), with deps/pcg-c as mex/cpfloat_compile.m does.  No OpenMP, no -march=native.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
MKOCT="$OCTAVE_DEV/usr/bin/mkoctfile --mex -I$OCTAVE_DEV/usr/include/octave-7.3.0/octave \
  -I$OCTAVE_DEV/usr/include/octave-7.3.0 -I../src -L/usr/lib/x86_64-linux-gnu/octave/7.3.0"
mkdir -p "$WORK/runs"
git --git-dir="$CPFLOAT_GIT" log --reverse --format='%h %ad' --date=short -- mex/cpfloat.c 'src/*.h' \
  | awk '{last[$2] = $1; if (!($2 in seen)) {order[++n] = $2; seen[$2] = 1}}
         END {for (i = 1; i <= n; i++) print last[order[i]], order[i]}' > "$WORK/days.txt"
python3 "$HERE/make_corpus.py" calls "$WORK/runs"
while read -r commit day; do
  [[ "$day" < "2021-01-27" ]] && continue
  build="$WORK/s_$commit"
  rm -rf "$build" && mkdir -p "$build"
  git --git-dir="$CPFLOAT_GIT" archive "$commit" mex src | tar -x -C "$build"
  cd "$build/mex" || exit 1
  if ! CFLAGS="-std=gnu99 -O2" $MKOCT cpfloat.c -o cpfloat.mex > build.log 2>&1; then
    touch with_pcg
    CFLAGS="-std=gnu99 -O2 -include $PCG/include/pcg_variants.h" \
      $MKOCT cpfloat.c "$PCG/src/libpcg_random.a" -o cpfloat.mex > build_pcg.log 2>&1 \
      || { echo "$day $commit: does not compile"; continue; }
  fi
  layout=$(python3 -c "import sys; sys.path.insert(0, '$HERE'); import make_corpus as m; \
print(m.layout_of('$commit').replace(',', '_'))")
  mkdir -p "$WORK/runs/$commit"
  octave-cli --no-gui -q --eval "addpath('$HERE'); driver('$WORK/runs/calls_$layout.txt', \
'$WORK/runs/inputs.bin', '$WORK/runs/$commit')" > "$WORK/runs/$commit/octave.out" 2>&1
  echo "$day $commit $layout $(wc -l < "$WORK/runs/$commit/log.txt") calls"
done < "$WORK/days.txt"
