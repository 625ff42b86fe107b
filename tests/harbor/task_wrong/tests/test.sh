#!/bin/bash
# Harbor's verifier: runs from the task's working directory (/app); writes 1 or 0 to
# /logs/verifier/reward.txt, which Harbor downloads with the rest of /logs/verifier.
mkdir -p /logs/verifier
expected=$(cat /tests/expected_sum.txt)
got=$(cat /app/out/sum.txt 2>/dev/null || true)
echo "expected=$expected got=$got build-marker=$(cat /app/build-marker 2>/dev/null) REX_TASK=${REX_TASK:-unset}"
# The template's steps must have run too: its RUN's marker, its ENV in the sandbox.
if [[ $got == "$expected" && $(cat /app/build-marker 2>/dev/null) == "built for sum" &&
  ${REX_TASK:-} == sum ]]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
