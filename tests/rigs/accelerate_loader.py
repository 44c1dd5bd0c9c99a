#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Accelerate 1.14's config loader plus its launch-time checks, re-stated from the reference facts
(shared/reference/accelerate-config.md), for checking files Spur writes without Accelerate installed (it is not in
Debian). Exit 0 and print "accepted" if Accelerate would launch with FILE, else exit 1 with the reason."""
import json
import sys

import yaml

LOCAL_KEYS = {"compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug",
              "enable_cpu_affinity", "num_processes", "num_machines", "machine_rank", "gpu_ids", "main_process_ip",
              "main_process_port", "rdzv_backend", "same_network", "main_training_function", "downcast_bf16",
              "fp8_config", "ipex_config", "mpirun_config", "deepspeed_config", "fsdp_config", "parallelism_config",
              "megatron_lm_config", "dynamo_config", "tpu_name", "tpu_zone", "tpu_vm", "tpu_env", "tpu_use_cluster",
              "tpu_use_sudo", "command_file", "commands"}
SAGEMAKER_KEYS = {"compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug",
                  "enable_cpu_affinity", "dynamo_config", "ec2_instance_type", "iam_role_name", "image_uri", "profile",
                  "region", "num_machines", "gpu_ids", "base_job_name", "pytorch_version", "transformers_version",
                  "py_version", "sagemaker_inputs_file", "sagemaker_metrics_file", "additional_args"}
LOCAL_TYPES = {"NO", "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_XPU",
               "MULTI_HPU", "MULTI_NEURON", "DEEPSPEED", "FSDP", "XLA", "MEGATRON_LM"}
SAGEMAKER_TYPES = {"NO", "DATA_PARALLEL", "MODEL_PARALLEL"}


def check(path):
    with open(path) as f:
        data = json.load(f) if path.endswith(".json") else yaml.safe_load(f)
    if not isinstance(data, dict):
        return "not a mapping"
    if data.pop("fp16", False):
        data["mixed_precision"] = "fp16"
    if "dynamo_backend" in data:
        data["dynamo_config"] = {"dynamo_backend": data.pop("dynamo_backend")}
    env = data.get("compute_environment", "LOCAL_MACHINE")
    if env not in ("LOCAL_MACHINE", "AMAZON_SAGEMAKER"):
        return f"compute_environment {env!r}"
    sagemaker = env == "AMAZON_SAGEMAKER"
    unknown = set(data) - (SAGEMAKER_KEYS if sagemaker else LOCAL_KEYS)
    if unknown:
        return f"had unknown keys {sorted(unknown)}"
    if "distributed_type" not in data:
        return "distributed_type missing"
    if data["distributed_type"] not in (SAGEMAKER_TYPES if sagemaker else LOCAL_TYPES):
        return f"distributed_type {data['distributed_type']!r}"
    if sagemaker:
        for key in ("ec2_instance_type", "iam_role_name", "mixed_precision"):
            if key not in data:
                return f"{key} missing"
    if data.get("mixed_precision", "no") not in ("no", "fp16", "bf16", "fp8"):
        return f"mixed_precision {data.get('mixed_precision')!r}"
    return None


if __name__ == "__main__":
    problem = check(sys.argv[1])
    print(problem or "accepted")
    sys.exit(1 if problem else 0)
