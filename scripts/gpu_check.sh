#!/usr/bin/env bash
# Every GPU measurement of issues 33 and 50 in one run, for a lent GPU machine (it cannot reach the
# network, and `../shared` does not travel with the working tree):
#
#   bash scripts/gpu_check.sh prepare          # here: copies the slices' data and SmolLM2's tokenizer
#                                              # into .device/ (git-ignored: .gitignore)
#   bash scripts/gpu_check.sh measure --cpu-smoke   # here: the same steps at one layer (a few minutes)
#   device run, carry [".device"], command:    bash scripts/gpu_check.sh measure
#
# `measure` runs on the device's own torch / transformers (nothing is installed there), these steps,
# each to the end even when one before it failed (the exit status says whether all passed):
#   1. env.txt: date, nvidia-smi, versions;
#   2. tests.txt: the CUDA tests of the statistics, the FLOP count and the packed attention paths;
#   3. bench.txt: bench_prefix.py on random Qwen2.5-3B + 0.5B shapes in bfloat16, both slices
#      (SummEval, MQM), every pass (paper loop, per-source loop, plain forward, unshared, shared,
#      and the packed-row paths: dense mask, packed_attention, flex_attention with a block mask):
#      samples/s, peak memory, TFLOP/s and MFU of every pass;
#   4. shards.txt, only where `nvidia-smi -L` lists more than one GPU: the same pair saved to disk
#      and bench_shards.py --many-batches, 1 shard against 2 workers on cuda:0 and cuda:1 (bit-identical
#      scores, wall ratio, MFU).
# About 6 minutes on one H100 (steps 1-3; step 4 comes last, so a command cut off at a time limit
# has written the others already). `--cpu-smoke` runs the very same steps on this CPU at
# one layer, a 49,152-token vocabulary, bfloat16, 1 SummEval document and 1 MQM segment cut to 192
# tokens, and step 4 on two CPU workers, so a script error shows here, not on a GPU machine's short
# lease. Output goes to $OUT, else .device/out; everything else of a run (the package link on
# PYTHONPATH, the statistics cache, the saved models) to a fresh `mktemp -d`, removed at the end, so
# two checkouts never share a path.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd)

if [[ "${1:-}" == "prepare" ]]; then
    src=$(python -c "from cscore.data.paths import shared_data_dir; print(shared_data_dir() or '')")
    [[ -n "$src" ]] || { echo "no shared data folder found (CSCORE_SHARED_DATA)"; exit 2; }
    mkdir -p .device/data
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
[[ -d .device/tokenizer && -d .device/data ]] || { echo "no .device/: run 'bash $0 prepare' first"; exit 2; }
smoke=false
[[ "${2:-}" == "--cpu-smoke" ]] && smoke=true
out=${OUT:-$here/.device/out}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")  # this run's own: nothing at a fixed path
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/pp"
ln -s "$here" "$work/pp/cscore"  # the repository root is the package
export PYTHONPATH="$work/pp" CSCORE_SHARED_DATA="$here/.device/data" CSCORE_CACHE="$work/cache"

if $smoke; then
    arch=(--arch qwen_3b_0.5b --arch-layers 1 --arch-vocab 49152 --device cpu --dtype bfloat16 --tokenizer .device/tokenizer)
    sizes=(--summeval-docs 1 --mqm-segments 1 --max-length 192 --batch-size 4 --repeats 1)
    tests=(-n 0) test_limit=900 bench_limit=900
    shard_devices=cpu,cpu shard_sizes=(--docs 1 --per-doc 4 --repeats 1 --threads 1)
else
    arch=(--arch qwen_3b_0.5b --device cuda --dtype bfloat16 --tokenizer .device/tokenizer)
    sizes=(--token-budget auto --summeval-docs 10 --mqm-segments 60 --repeats 3)
    tests=() test_limit=150 bench_limit=400
    shard_devices="" shard_sizes=(--many-batches --repeats 1 --threads 0)
    if (( $(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true) > 1 )); then shard_devices=cuda:0,cuda:1; fi
fi
status=0
step() {  # step NAME FILE COMMAND...: run it, output to $out/FILE and the console; a failure noted, not fatal
    local name=$1 file=$2 rc
    shift 2
    echo "== $name" | tee -a "$out/steps.txt"
    set +e
    "$@" 2>&1 | { grep --line-buffered -v "^Loading" || true; } | tee "$out/$file"
    rc=${PIPESTATUS[0]}
    set -e
    (( rc == 0 )) || { echo "== $name FAILED (exit $rc)" | tee -a "$out/steps.txt"; status=1; }
}
: > "$out/steps.txt"
env_info() {
    date -u; nvidia-smi || true
    python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())"
}
step "environment" env.txt env_info
step "tests" tests.txt timeout "$test_limit" python -m pytest -q -p no:cacheprovider "${tests[@]}" -m "not slow" \
    tests/unit/scorers/engine/test_head_stats.py tests/unit/scorers/engine/test_flops.py \
    tests/unit/scorers/engine/test_prefix_sharing.py tests/unit/scorers/engine/test_engine.py
step "bench_prefix, both slices, every pass" bench.txt timeout "$bench_limit" python scripts/bench_prefix.py \
    "${arch[@]}" "${sizes[@]}" --dense-too --sparse-too --flex-too
if [[ -n "$shard_devices" ]]; then
    shards() {
        python scripts/bench_prefix.py "${arch[@]}" --save-arch "$work/models" &&
        timeout 300 python scripts/bench_shards.py --devices "$shard_devices" "${shard_sizes[@]}" \
            --set "pair.expert.path=$work/models/expert" --set "pair.amateur.path=$work/models/amateur" \
            --set runtime.dtype=bfloat16
    }
    step "sharded pass, 1 shard vs 2 workers on $shard_devices" shards.txt shards
else
    echo "== sharded pass: skipped (one GPU visible)" | tee -a "$out/steps.txt"
fi
echo "output in $out: $(ls "$out" | tr '\n' ' ')"
exit $status
