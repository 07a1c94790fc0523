"""The GPU checklist (scripts/gpu_check.sh): lossless and cost-model checks on random-weight pairs of real shapes
(`gpu_check`), their summary and claims (`gpu_summary`) and the bf16 control measured on the CPU (`bf16_control`)."""
