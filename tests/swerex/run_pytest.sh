#!/usr/bin/env bash
# run_pytest.sh PYTHON FILE [NAME=VALUE...]: runs one pytest module with the SWE-ReX environment's
# Python, the NAME=VALUE pairs in its environment (paths of rex's executables). Exit code 77
# (CTest's skip) when that environment was never built.
set -euo pipefail
python=$1 file=$2
shift 2
if [[ ! -x $python ]]; then
  echo "skipped: no SWE-ReX environment at $(dirname "$(dirname "$python")");" \
    "./scripts/test.sh builds it (scripts/common.sh: rex_python_env)"
  exit 77
fi
for pair in "$@"; do
  export "${pair?}"
done
cd "$(dirname "$file")"
exec "$python" -m pytest -p no:cacheprovider -q -rs "$file"
