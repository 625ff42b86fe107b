#!/bin/bash
# The reference solution: the sum of the numbers.
set -euo pipefail
awk '{ s += $1 } END { print s }' /app/input/numbers.txt > /app/out/sum.txt
cat /app/out/sum.txt
