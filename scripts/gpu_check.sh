#!/usr/bin/env bash
# Every GPU measurement of issue 33 in one run, for a lent GPU machine (it cannot reach the network,
# and `../shared` does not travel with the working tree):
#
#   bash scripts/gpu_check.sh prepare          # here: copies the slices' data and SmolLM2's tokenizer
#                                              # into .device/ (git-ignored through .git/info/exclude)
#   device run, carry [".device"], command:    bash scripts/gpu_check.sh measure
#
# `measure` runs on the device's own torch / transformers (nothing is installed there): the CUDA
# tests of the statistics and the packed attention paths, then bench_prefix.py on random Qwen2.5-3B
# + 0.5B shapes in bfloat16 with every packed-row path (dense mask, packed_attention, flex_attention
# with a block mask), which prints samples/s, useful TFLOP/s and MFU. Its output goes to $OUT
# (bench.txt, tests.txt, env.txt). About 6 minutes on an H100; test it here first with
# `bash scripts/gpu_check.sh measure --cpu-smoke`.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd)

if [[ "${1:-}" == "prepare" ]]; then
    src=$(python -c "from cscore.data.paths import shared_data_dir; print(shared_data_dir() or '')")
    [[ -n "$src" ]] || { echo "no shared data folder found (CSCORE_SHARED_DATA)"; exit 2; }
    mkdir -p .device/data
    grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >> .git/info/exclude
    cp -r "$src/summeval" "$src/mqm" .device/data/
    python - <<'EOF'
from cscore.scorers.models.models import load_model
lm = load_model("gguf:smollm2", lazy=True)  # its tokenizer and config: no weights are read
lm.tokenizer.save_pretrained(".device/tokenizer")
lm.config.save_pretrained(".device/tokenizer")
print("tokenizer saved to .device/tokenizer")
EOF
    du -sh .device
    exit 0
fi

[[ "${1:-}" == "measure" ]] || { echo "usage: $0 prepare | measure [--cpu-smoke]"; exit 2; }
out=${OUT:-/tmp/gpu_check_out}
mkdir -p "$out" /tmp/gpu_check_pp
ln -sfn "$here" /tmp/gpu_check_pp/cscore  # the repository root is the package
export PYTHONPATH=/tmp/gpu_check_pp CSCORE_SHARED_DATA="$here/.device/data" CSCORE_CACHE=/tmp/gpu_check_cache
{
    date -u; nvidia-smi || true
    python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())"
} > "$out/env.txt" 2>&1
if [[ "${2:-}" == "--cpu-smoke" ]]; then
    python scripts/bench_prefix.py --arch qwen_3b_0.5b --arch-layers 1 --device cpu --dtype float32 --threads 1 \
        --mqm-segments 1 --only mqm --skip-paper --flex-too --passes shared,flex --tokenizer .device/tokenizer 2>&1 \
        | grep -v "^Loading" | tee "$out/bench.txt"
    exit 0
fi
timeout 150 python -m pytest -q -p no:cacheprovider -m "not slow" tests/unit/scorers/engine/test_head_stats.py tests/unit/scorers/engine/test_flops.py \
    tests/unit/scorers/engine/test_prefix_sharing.py tests/unit/scorers/engine/test_engine.py > "$out/tests.txt" 2>&1 || true
tail -3 "$out/tests.txt"
timeout 400 python scripts/bench_prefix.py --arch qwen_3b_0.5b --device cuda --token-budget auto \
    --summeval-docs 10 --mqm-segments 60 --repeats 3 --dense-too --sparse-too --flex-too \
    --tokenizer .device/tokenizer 2>&1 | grep -v "^Loading" | tee "$out/bench.txt"
