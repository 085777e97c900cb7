#!/bin/sh
# Mutation testing of one core module with cosmic-ray: bench/mutation/run.sh MODULE [STEP], where
# bench/mutation/MODULE.toml names the module and its fast test selection; STEP > 1 runs a
# reproducible sample of 1 in STEP mutants (sample.py). Run from the repository
# root on a clean tree (cosmic-ray edits the module in place, one mutant at a time, and restores it);
# needs `pip install -e '.[test,mutation]'`. Writes the session (MODULE.sqlite, not checked in) and
# the report of every mutant with the diff of each survivor (MODULE.log, checked in).
set -eu
module="$1"
step="${2:-1}"
here="bench/mutation"
session="$here/$module.sqlite"
rm -f "$session"
# the unmutated module must pass its test selection, or every mutant would count as killed
cosmic-ray baseline "$here/$module.toml"
cosmic-ray init "$here/$module.toml" "$session"
python "$here/sample.py" "$session" "$step"
cosmic-ray exec "$here/$module.toml" "$session"
# the mutants a sample left out are not listed (a rules run samples a few dozen of 8,000)
cr-report "$session" | awk '/^\[job-id\]/ { j = $0; getline m; getline o; if (o !~ /SKIPPED/) print j "\n" m "\n" o; next } { print }' > "$here/$module.log"
summary=$(tail -n 3 "$here/$module.log")
{ echo; echo "# surviving mutants, each with its diff"; cr-report --show-diff --surviving-only "$session"; } >> "$here/$module.log"
echo "$summary"
