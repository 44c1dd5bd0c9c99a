// SPDX-License-Identifier: Apache-2.0
// Options of spur::Accelerator, with defaults. Fields left unset (std::nullopt) take the launcher's value
// from the environment (SPUR_* or Accelerate's ACCELERATE_* variables), then the default written beside them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spur {

/// Mixed precision, named as in Accelerate's `mixed_precision`.
enum class Precision { no, fp16, bf16 };

std::string_view to_string(Precision precision);
/// Parses "no", "fp16", "bf16" (case-insensitive); std::nullopt for anything else.
std::optional<Precision> parse_precision(std::string_view text);

/// torch.cuda.amp.GradScaler's algorithm and defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

/// The longest rendezvous or collective timeout accepted (about 23 days): longer ones overflow the clocks and
/// millisecond counts they are converted to.
inline constexpr int64_t kMaxTimeoutSeconds = 2'000'000;

/// Where a run keeps its checkpoints and logs, as Accelerate's ProjectConfiguration.
struct ProjectConfiguration {
  /// The project's directory: automatic checkpoints go to `project_dir/checkpoints/checkpoint_<N>`. Default: "" (the
  /// current directory).
  std::string project_dir;
  /// Where trackers that write files (tensorboard) write, under a folder named after init_trackers' project.
  /// Default: "" (project_dir when set, else "runs").
  std::string logging_dir;
  /// save_state() and load_state() without a directory save the next checkpoint_<iteration> and load the latest.
  /// Default: false.
  bool automatic_checkpoint_naming = false;
  /// With automatic naming, keep at most this many checkpoints: the oldest go once a new one is complete.
  /// Default: std::nullopt (keep all). 0 or less is an error.
  std::optional<int64_t> total_limit;
  /// The number of the next automatic checkpoint (load_state() of checkpoint_<N> sets it to N + 1). Default: 0.
  int64_t iteration = 0;
};

struct AcceleratorOptions {
  /// Default: the launcher's SPUR_MIXED_PRECISION / ACCELERATE_MIXED_PRECISION, else Precision::no.
  std::optional<Precision> mixed_precision;
  /// Force the CPU even where CUDA is available. Default: SPUR_USE_CPU / ACCELERATE_USE_CPU, else false.
  std::optional<bool> cpu;
  /// Micro-steps per optimizer step. Default: SPUR_GRADIENT_ACCUMULATION_STEPS /
  /// ACCELERATE_GRADIENT_ACCUMULATION_STEPS, else 1.
  std::optional<int64_t> gradient_accumulation_steps;
  /// Loss scaling for fp16.
  GradScalerOptions scaler = {};
  /// Synchronise gradients on every micro-step of an accumulation, not only the last (more communication, no
  /// accumulated unsynchronised gradients held per rank); the optimizer still steps every
  /// gradient_accumulation_steps. As Accelerate's GradientAccumulationPlugin(sync_each_batch). Default: false.
  bool sync_each_batch = false;
  /// A prepared scheduler steps only when the optimizers stepped (num_processes times unless split_batches); false:
  /// it steps on every call, as the plain scheduler. As Accelerate's step_scheduler_with_optimizer. Default: true.
  bool step_scheduler_with_optimizer = true;

  /// Checkpoint and logging layout (automatic checkpoint naming and rotation).
  ProjectConfiguration project_config = {};
  /// Trackers init_trackers starts besides Spur's own (the launcher's SPUR_TRACKERS, else the history):
  /// "tensorboard", "csv", or "all" for both. Default: none.
  std::vector<std::string> log_with;

  // Data loaders, as Accelerate's DataLoaderConfiguration.
  /// true: a prepared loader's batch_size is the global batch, split between the processes; false: every
  /// process gets whole batches of batch_size.
  bool split_batches = false;
  /// Pad the last round from the start of the epoch so every process gets as many full batches; false: the
  /// processes that run short get a zero-sample batch instead, so every rank loops as often and no collective
  /// waits for a rank that left its loop. Meant for evaluation: a mean loss over zero samples is NaN, and
  /// training on it would spread NaN to every rank's gradients.
  bool even_batches = true;

  /// How long ranks wait for each other to join. Default: SPUR_RENDEZVOUS_TIMEOUT (seconds), else 300 s. Both
  /// timeouts: 1 s to kMaxTimeoutSeconds.
  std::optional<std::chrono::seconds> rendezvous_timeout;
  /// How long one collective may take before the run fails. Default: SPUR_COLLECTIVE_TIMEOUT, else 1800 s.
  std::optional<std::chrono::seconds> collective_timeout;

  // Gradient synchronisation, as DistributedDataParallel's arguments.
  /// Gradients are all-reduced in buckets of this size, overlapped with the rest of backward.
  std::size_t bucket_cap_bytes = 25u << 20;
  /// The first bucket (the last layers' gradients, ready first). Default: 1 MiB on NCCL (as DDP), 4 MiB on
  /// Gloo, where each all-reduce costs ~0.7 ms before any byte moves: on the `small` benchmark a 1 MiB first
  /// bucket made the 2-rank step ~1.3x slower than one bucket, and 4 MiB left `large` as fast as DDP's split.
  std::optional<std::size_t> first_bucket_cap_bytes;
  /// Set when some parameters take no part in a forward pass (costs a graph traversal per step).
  bool find_unused_parameters = false;
  /// ZeRO sharding, as DeepSpeed's stages: 0 plain data parallel; 1 each rank keeps the optimizer state of its
  /// 1/N of the parameters only (steps it, then all-gathers the parameters); 2 the reduced gradients are sharded
  /// too (reduced in buckets during backward; parameters' .grad() stay undefined after a synchronising backward);
  /// 3 the parameters too, per spur::fully_shard block (spur/fully_shard.h, docs/zero.md). Results equal data
  /// parallel's; the optimizer must be prepared after (or with) its model. Default: the launcher's SPUR_ZERO_STAGE,
  /// or Accelerate's DeepSpeed / FSDP variables (ProcessState::zero_stage), else 0.
  std::optional<int64_t> zero_stage;
  /// How save_state writes the weights under ZeRO stage 3, as FSDP's state_dict_type: "FULL_STATE_DICT" (gathered,
  /// one model.safetensors, the bytes DDP writes) or "SHARDED_STATE_DICT" (each rank writes its own shard,
  /// model_rank<r>.safetensors, nothing gathered; load_state at the same world size reads them back, and
  /// `spur merge-weights` makes one model.safetensors of them). Stages 0-2 write whole weights either way, and so
  /// does a save with save_state pre-hooks on any rank (they see whole weights). Every rank must say the same (a
  /// difference is refused by name at save_state). save_model and get_state_dict always gather. Default: the launcher's
  /// FSDP_STATE_DICT_TYPE (ProcessState::state_dict_type), else FULL_STATE_DICT.
  std::optional<std::string> state_dict_type;
  /// DDP's gradient communication hook, as Accelerate's DistributedDataParallelKwargs(comm_hook=...): "no", "fp16"
  /// or "bf16" (torch's fp16_compress_hook and bf16_compress_hook: each bucket cast to the half type, divided by the
  /// world size there, summed in it and cast back; half the bytes on the wire; at 2 ranks the bits torch's DDP with
  /// the same hook gives, at more the order of the sum differs). bf16 over Gloo needs LibTorch 2.2 or later. ZeRO
  /// stages 2 and 3 reduce gradients without DDP's buckets and refuse a hook; every rank must say the same (refused
  /// at prepare). Default: the launcher's SPUR_DDP_COMM_HOOK (`spur launch --ddp_comm_hook`), else "no".
  std::optional<std::string> comm_hook;
  /// Copy rank 0's buffers (batch-norm statistics...) to every rank before each training forward.
  bool broadcast_buffers = true;
  /// Gradients live inside the all-reduce buckets, which saves copying every gradient in and out of them each
  /// step (~4% of a `large` 2-rank step). Set false if code holds gradients across steps or detaches them
  /// in place (LibTorch's raw Optimizer::zero_grad does: use the prepared optimizer's).
  bool gradient_as_bucket_view = true;
  /// Gloo only: connections each pair of ranks keeps; collectives in flight alternate between them
  /// (2 made the `large` 2-rank step ~3% faster than 1). GLOO_SOCKET_IFNAME=a,b uses one per interface instead.
  int gloo_channels = 2;
  /// When every rank is on this machine (CPU runs), gradients are summed through shared memory instead of Gloo's
  /// TCP loopback: the same sums in a fixed rank order, identical on every rank, several times faster for large
  /// buckets. Default: true (SPUR_SHM_ALLREDUCE=0 turns it off).
  bool shared_memory_allreduce = true;
  /// When the ranks share machines across several (2 machines x 2 ranks...), gradients are summed within each
  /// machine through shared memory, across machines among one leader per machine (Gloo), and handed back within
  /// each machine: one stream per machine crosses the link instead of one per rank. Taken only if every rank allows
  /// it; read when the process first joins the run (as shared_memory_allreduce). Default: true
  /// (SPUR_HIERARCHICAL_ALLREDUCE=0, or shared_memory_allreduce = false, keep Gloo's flat all-reduce).
  bool hierarchical_allreduce = true;
  /// Keep CPU memory freed during a step for the next one (glibc's allocator: blocks up to 32 MiB from the heap,
  /// up to 1 GiB kept at its top) instead of returning it to the OS and faulting it in again: ~10% of a CNN or
  /// transformer step on the CPU, at the cost of holding the step's peak memory. Set once per process, by the
  /// first Accelerator. Default: true (SPUR_CPU_MEMORY_CACHE=0, or your own MALLOC_* settings, turn it off).
  bool cpu_memory_cache = true;
};

}  // namespace spur
