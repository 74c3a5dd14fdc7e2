#!/usr/bin/env bash
# Train a head with DeepSpeed: one node with N GPUs, or several nodes listed in a hostfile.
#
#   scripts/train_deepspeed.sh RECIPE [dotted overrides...]
#
#   NUM_GPUS=8 scripts/train_deepspeed.sh recipes/llama-3.1-8b-instruct/medusa.yaml train.lr=1e-3
#   HOSTFILE=hosts.txt DS_CONFIG=scripts/ds_zero3.json scripts/train_deepspeed.sh RECIPE
#
# Environment:
#   DS_CONFIG    DeepSpeed config (default scripts/ds_zero2.json; also ds_zero2_offload.json,
#                ds_zero3.json, ds_zero3_offload.json). Its "auto" values come from the recipe's
#                train.* keys through the HF Trainer (batch_size, grad_accum, lr, max_grad_norm, bf16).
#   NUM_GPUS     processes on this node (default: every GPU nvidia-smi lists; 1 without one)
#   HOSTFILE     DeepSpeed hostfile ("host slots=8" per line) for several nodes; run this script on
#                the first node, which reaches the others by passwordless ssh. NUM_GPUS is ignored.
#   MASTER_PORT  rendezvous port (default 29500)
#   PYTHON       interpreter whose environment has headstart (default: .venv/bin/python, else python)
# The global batch is batch_size x grad_accum x processes: scale train.grad_accum down as you add GPUs.
# The same recipe also runs under `torchrun --nproc_per_node N -m headstart.cli train RECIPE` or plain
# `headstart train RECIPE`, with or without train.deepspeed=...
set -euo pipefail

if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
recipe="$1"; shift
ds_config="${DS_CONFIG:-$here/ds_zero2.json}"
[[ -f "$ds_config" ]] || { echo "train_deepspeed.sh: DeepSpeed config $ds_config not found" >&2; exit 2; }
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
    if [[ -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; else python="$(command -v python)"; fi
fi
launcher=("$python" -m deepspeed.launcher.runner --master_port "${MASTER_PORT:-29500}")
if [[ -n "${HOSTFILE:-}" ]]; then
    launcher+=(--hostfile "$HOSTFILE")
else
    gpus="${NUM_GPUS:-}"
    if [[ -z "$gpus" ]]; then
        gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
        [[ "$gpus" -gt 0 ]] || gpus=1
    fi
    launcher+=(--num_gpus "$gpus")
fi
set -x
exec "${launcher[@]}" --no_local_rank --module headstart.cli train "$recipe" "$@" "train.deepspeed=$ds_config"
