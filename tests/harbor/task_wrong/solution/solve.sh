#!/bin/bash
# A wrong solution (counts the lines instead of adding them): the verifier gives reward 0.
set -euo pipefail
wc -l < /app/input/numbers.txt > /app/out/sum.txt
cat /app/out/sum.txt
