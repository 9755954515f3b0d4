#!/usr/bin/env bash
# Runs every fuzz target of the repository's modules (MODULES, directories relative to the
# repository root; make fuzz passes its list) for FUZZTIME each (make fuzz). A target fails the
# run when it finds an input: go test writes it under the package's testdata/fuzz/<Target>/.
#
# Go's fuzzing coordinator up to go1.26 can end a healthy run with a bare "context
# deadline exceeded" when -fuzztime expires while a worker is busy (go.dev/issue/75804,
# fixed in go1.27). Such a run wrote no input: it is reported as a flake and the sweep
# goes on; a run that wrote an input, or failed any other way, fails the sweep.
set -u
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-20s}
MODULES=${MODULES:-.}
failed=0 flaked=0 passed=0
while read -r mod pkg dir; do
  for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "== $pkg $fn ($FUZZTIME)"
    corpus="$dir/testdata/fuzz/$fn"
    before=$(ls "$corpus" 2>/dev/null | sort)
    out=$(cd "$mod" && "$GO" test -run '^$' -fuzz "^$fn\$" -fuzztime "$FUZZTIME" ${FUZZFLAGS:-} "$pkg" 2>&1)
    rc=$?
    echo "$out" | tail -n 5
    after=$(ls "$corpus" 2>/dev/null | sort)
    if [ $rc -eq 0 ]; then
      passed=$((passed + 1))
    elif [ "$before" = "$after" ] && echo "$out" | grep -q '^    context deadline exceeded$' &&
         [ "$(echo "$out" | grep -c -- '--- FAIL')" -eq 1 ]; then
      echo "   flake: the fuzzing deadline race (go.dev/issue/75804), no input written"
      flaked=$((flaked + 1))
    else
      echo "   FAILED (a failing input, if one was found, is in $corpus)"
      failed=$((failed + 1))
    fi
  done
done < <(for mod in $MODULES; do (cd "$mod" && "$GO" list -f "$mod {{.ImportPath}} {{.Dir}}" ./...); done)
echo "fuzz: $passed passed, $failed failed, $flaked flaked (FUZZTIME=$FUZZTIME)"
[ $failed -eq 0 ]
