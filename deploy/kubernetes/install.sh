#!/bin/sh
# The students' and instructors' Python environment, as the single-user image has it (Dockerfile), into the
# virtual environment at $1, from the checkout this script lies in: PyTorch first ($TORCH, from
# $TORCH_INDEX when set: the image uses PyTorch's CPU index), then requirements.txt but its editable line,
# then the course's packages with every extra. Nothing of solutions/ is installed: only tfm_ref, tfm_lab,
# tfm_widgets, editions, autograde, notebook_sandbox, intake and class_report.
set -eu
venv=$1
checkout=$(cd "$(dirname "$0")/../.." && pwd)
"$venv/bin/pip" install -q ${TORCH_INDEX:+--index-url "$TORCH_INDEX"} "${TORCH:-torch==2.13.0}"
grep -v '^-e ' "$checkout/requirements.txt" | "$venv/bin/pip" install -q -r /dev/stdin
"$venv/bin/pip" install -q "$checkout[all]"
