#!/usr/bin/env bash
# One real VERL SFT epoch of the Seen and of the Unseen variant on the tiny model, each merged with
# VERL's merger and scored with `pr1-eval run --engine hf`; one line per stage with time and loss.
# See bench/gpu_sft_check.py for the stages, the wheel list and why ray is a stub there.
#
# Here (network):      python bench/gpu_sft_check.py download      # fills .whl-sft/ (~7 MB, git-ignored)
# On the GPU machine:  bash bench/gpu_sft_check.sh                 # carry .whl-sft; results in $OUT
#
# Budget: a few minutes on one H200 (two 4-step epochs of a tiny model, two merges, two 8-sample runs).
set -euo pipefail
PY=${PYTHON:-python3}
OUT=${OUT:-gpu_sft_out}
mkdir -p "$OUT"
if [ ! -d .whl-sft ]; then
    echo "no .whl-sft/ here: run 'python bench/gpu_sft_check.py download' where PyPI is reachable, then carry .whl-sft"
    exit 2
fi
echo "== environment"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -c "import sys, torch, transformers; print('python', sys.version.split()[0], '| torch', torch.__version__, 'cuda', torch.cuda.is_available(), '| transformers', transformers.__version__)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYTHONUNBUFFERED=1 "$PY" bench/gpu_sft_check.py run --out "$OUT" 2>&1 | tee "$OUT/gpu_sft_check.log"
