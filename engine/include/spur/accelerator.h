// SPDX-License-Identifier: Apache-2.0
// spur::Accelerator: the few calls that make one LibTorch training loop run unchanged on 1..N processes, with
// mixed precision and gradient accumulation (Hugging Face Accelerate's API, in C++). Use from one thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string_view>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <spur/collectives.h>
#include <spur/data.h>
#include <spur/model.h>
#include <spur/optimizer.h>
#include <spur/options.h>
#include <spur/checkpoint.h>
#include <spur/precision.h>
#include <spur/scheduler.h>
#include <spur/scope.h>
#include <spur/state.h>
#include <spur/tracking.h>

namespace spur {

/// A value for Accelerator::log: any number, or a one-element tensor (read with .item()).
struct LogValue {
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  LogValue(T v) : value(static_cast<double>(v)) {}  // NOLINT: implicit, so {"loss", 0.5} reads naturally
  LogValue(const torch::Tensor& tensor);            // NOLINT
  double value;
};

namespace detail {
class AcceleratorCore;
template <typename T>
struct is_prepared_model : std::false_type {};
template <typename M>
struct is_prepared_model<PreparedModel<M>> : std::true_type {};
}  // namespace detail

class Accelerator {
 public:
  /// Reads the launcher's environment and, when the run has more than one process, joins the process group
  /// (TCPStore rendezvous; Gloo on CPU, NCCL on CUDA). Throws spur::Error naming host, port and timeout when
  /// the other ranks do not arrive in time. Accelerators in one process share the process group.
  explicit Accelerator(AcceleratorOptions options = {});
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  // --- who and where -------------------------------------------------------------------------------------
  const ProcessState& state() const;
  int64_t process_index() const;
  int64_t local_process_index() const;
  int64_t num_processes() const;
  bool is_main_process() const;
  bool is_local_main_process() const;
  bool distributed() const;
  /// How gradients are summed across ranks: "none" (one process), "shared memory" (every rank on this machine,
  /// CPU), "gloo" or "nccl".
  std::string gradient_transport() const;
  torch::Device device() const;
  Precision mixed_precision() const;
  int64_t gradient_accumulation_steps() const;

  /// Blocks until every rank gets here.
  void wait_for_everyone();
  /// Prints its arguments separated by spaces, as Python's print, on the main process only.
  template <typename... Args>
  void print(const Args&... args) const {
    if (!is_main_process()) return;
    std::ostringstream line;
    const char* separator = "";
    ((line << separator << args, separator = " "), ...);
    print_line(line.str());
  }
  /// The main process runs the scope's body first; the others wait, then run it (e.g. to download data once).
  Scope main_process_first();
  Scope local_main_process_first();
  /// Seeds torch's generators (CPU and CUDA); with device_specific, adds the process index to the seed.
  void set_seed(uint64_t seed, bool device_specific = false);

  // --- prepare -------------------------------------------------------------------------------------------
  /// Prepares each argument: a module (holder or shared_ptr) becomes a PreparedModel, an optimizer a
  /// PreparedOptimizer, a DataLoader a copy sharded for this process (Accelerate's rules, see sharding.h). One argument
  /// returns it alone; several return a tuple for structured bindings:
  ///   auto [model, optimizer] = accelerator.prepare(net, adam);
  /// An optimizer or scheduler passed as an lvalue must outlive the Accelerator and every copy of its prepared
  /// wrapper. A prepared DataLoader must be iterated on every rank (it yields this rank's share).
  template <typename... Objects>
  auto prepare(Objects&&... objects) {
    static_assert(sizeof...(Objects) > 0, "prepare needs at least one model or optimizer");
    if constexpr (sizeof...(Objects) == 1) {
      return prepare_one(std::forward<Objects>(objects)...);
    } else {
      // Braced initialisation: prepared left to right, as Accelerate does.
      return std::tuple<decltype(prepare_one(std::forward<Objects>(objects)))...>{
          prepare_one(std::forward<Objects>(objects))...};
    }
  }

  /// The user's module inside a PreparedModel.
  template <typename M>
  std::shared_ptr<M> unwrap_model(const PreparedModel<M>& model) const {
    return model.ptr();
  }

  /// The loader, starting its next epoch at batch n (to resume mid-epoch by hand; load_state does it itself).
  template <typename B>
  DataLoader<B> skip_first_batches(DataLoader<B> loader, int64_t n) const {
    loader.skip_first_batches(n);
    return loader;
  }

  // --- training step -------------------------------------------------------------------------------------
  /// loss / gradient_accumulation_steps, scaled for fp16, then backward.
  void backward(const torch::Tensor& loss, bool retain_graph = false);
  /// Runs code under autocast for this run's precision (the prepared model's forward already does).
  AutocastScope autocast() const;
  /// Counts a micro-step: gradients are synchronised (and the prepared optimizers step) on every
  /// gradient_accumulation_steps-th call only; in between the models' gradients accumulate locally.
  template <typename... Models>
  Scope accumulate(Models&... models) {
    begin_accumulation_step();
    if (sync_gradients()) return Scope{};
    return no_sync(models...);
  }
  /// While the scope lives, backward passes of these models accumulate gradients without synchronising.
  template <typename... Models>
  Scope no_sync(Models&... models) {
    static_assert((detail::is_prepared_model<Models>::value && ...), "no_sync takes prepared models");
    return no_sync_models({&models.sync()...});
  }
  /// True when the current micro-step synchronises gradients and steps the optimizer.
  bool sync_gradients() const;
  /// Marks the end of the data: accumulate() synchronises while it is set (on a partial accumulation at the
  /// end of an epoch). Set it on the last batch and clear it when a new epoch starts.
  void set_end_of_dataloader(bool end);
  /// Unscales (fp16) then clips the gradients' total norm; returns the norm before clipping.
  torch::Tensor clip_grad_norm_(const std::vector<torch::Tensor>& parameters, double max_norm, double norm_type = 2.0);
  template <typename M>
  torch::Tensor clip_grad_norm_(const PreparedModel<M>& model, double max_norm, double norm_type = 2.0) {
    return clip_grad_norm_(model->parameters(), max_norm, norm_type);
  }
  /// Unscales (fp16) then clamps every gradient to [-clip_value, clip_value].
  void clip_grad_value_(const std::vector<torch::Tensor>& parameters, double clip_value);
  /// Divides the prepared optimizers' gradients by the fp16 loss scale (once per step; no-op otherwise).
  void unscale_gradients();
  /// True when the last optimizer step was skipped because fp16 gradients overflowed.
  bool optimizer_step_was_skipped() const;
  /// The fp16 loss scaler; nullptr unless mixed_precision is fp16.
  GradScaler* scaler();

  // --- checkpoints ----------------------------------------------------------------------------------------
  /// Saves everything prepared (models as safetensors, optimizers, schedulers, the loss scaler, data-loader
  /// epochs and positions), every rank's RNG state and registered objects into `dir`, replacing it atomically:
  /// a crash mid-save leaves the previous checkpoint whole. Every rank calls it. On several machines `dir`
  /// must be on storage they share.
  void save_state(const std::string& dir);
  /// Restores what save_state saved into the same prepared objects; data loaders resume at the saved batch.
  /// A missing or corrupt file, or a checkpoint of another world size, is a spur::Error naming it.
  void load_state(const std::string& dir);
  /// Also saves and restores `object` in save_state/load_state: anything with save(OutputArchive&) and
  /// load(InputArchive&), as LibTorch's modules and optimizers (e.g. an EMA model).
  template <typename T>
  void register_for_checkpointing(T& object) {
    register_for_checkpointing([&object](torch::serialize::OutputArchive& a) { object.save(a); },
                               [&object](torch::serialize::InputArchive& a) { object.load(a); });
  }
  void register_for_checkpointing(std::function<void(torch::serialize::OutputArchive&)> save,
                                  std::function<void(torch::serialize::InputArchive&)> load);
  /// The model's weights as safetensors in `dir` (model.safetensors, or shards plus
  /// model.safetensors.index.json above max_shard_size). Main process writes; every rank calls it.
  template <typename M>
  void save_model(const PreparedModel<M>& model, const std::string& dir, const SaveModelOptions& options = {}) {
    save_module(*model.ptr(), dir, options);
  }
  void save_module(torch::nn::Module& module, const std::string& dir, const SaveModelOptions& options = {});

  // --- tracking (spur/tracking.h) ----------------------------------------------------------------------------
  /// Starts recording this run's metrics: `project` and `config` (the program's parameters) are stored with it.
  /// Only the main process records unless options.all_processes.
  void init_trackers(const std::string& project, json::Object config = {}, TrackingOptions options = {});
  /// Records values at `step` (default: one more than the last log call's). Returns at once: the values are
  /// written in the background. A no-op on processes that do not record, and before init_trackers.
  void log(std::initializer_list<std::pair<std::string_view, LogValue>> values,
           std::optional<int64_t> step = std::nullopt);
  void log(const std::vector<std::pair<std::string, double>>& values, std::optional<int64_t> step = std::nullopt);
  /// Declares the run's length, for progress and ETA in `spur runs` and the Studio.
  void set_total_steps(int64_t total_steps);
  /// Writes out everything logged and ends the run's record (also done when the Accelerator goes).
  void end_training();

  // --- collectives (every rank must call them in the same order) --------------------------------------------
  /// Concatenates every rank's tensors along dim 0, in rank order, on every rank. The first dimension may
  /// differ between ranks; 0-d tensors count as one element.
  template <typename T>
  T gather(const T& data) const {
    return detail::map_tensors(data, [c = comm()](const torch::Tensor& t) { return detail::gather_tensor(c, t); });
  }
  /// gather() for evaluation: on the last batch of a prepared data loader the samples that padding duplicated
  /// are dropped, so every sample of the dataset is counted once (reduce to a scalar after, not before).
  template <typename T>
  T gather_for_metrics(const T& data) const {
    auto gathered = gather(data);
    const int64_t keep = metrics_keep();
    if (keep <= 0) return gathered;
    return detail::map_tensors(gathered, [keep](const torch::Tensor& t) {
      return t.dim() > 0 && t.size(0) > keep ? t.narrow(0, 0, keep) : t;
    });
  }
  /// Sum or mean over ranks, on every rank.
  template <typename T>
  T reduce(const T& data, Reduction reduction = Reduction::sum) const {
    return detail::map_tensors(
        data, [c = comm(), reduction](const torch::Tensor& t) { return detail::reduce_tensor(c, t, reduction); });
  }
  /// Rank `from_process`'s data on every rank; other ranks' inputs may have any shape (or be undefined).
  template <typename T>
  T broadcast(const T& data, int64_t from_process = 0) const {
    return detail::map_tensors(data, [c = comm(), from_process](const torch::Tensor& t) {
      return detail::broadcast_tensor(c, t, from_process);
    });
  }
  /// Pads dimension `dim` to the largest size over the ranks with `pad_index` (at the end, or the start).
  template <typename T>
  T pad_across_processes(const T& data, int64_t dim = 0, int64_t pad_index = 0, bool pad_first = false) const {
    return detail::map_tensors(
        data, [=, c = comm()](const torch::Tensor& t) { return detail::pad_tensor(c, t, dim, pad_index, pad_first); });
  }

 private:
  template <typename M>
  PreparedModel<M> prepare_one(const torch::nn::ModuleHolder<M>& holder) {
    return prepare_module(holder.ptr());
  }
  template <typename M, typename = std::enable_if_t<std::is_base_of_v<torch::nn::Module, M>>>
  PreparedModel<M> prepare_one(const std::shared_ptr<M>& module) {
    return prepare_module(module);
  }
  template <typename M>
  PreparedModel<M> prepare_one(const PreparedModel<M>& model) {
    return model;
  }
  template <typename O, typename = std::enable_if_t<std::is_base_of_v<torch::optim::Optimizer, O>>>
  PreparedOptimizer prepare_one(O& optimizer) {
    // Not owned: the caller's optimizer outlives the training loop.
    return prepare_optimizer(std::shared_ptr<torch::optim::Optimizer>(&optimizer, [](auto*) {}));
  }
  template <typename O, typename = std::enable_if_t<std::is_base_of_v<torch::optim::Optimizer, O>>>
  PreparedOptimizer prepare_one(const std::shared_ptr<O>& optimizer) {
    return prepare_optimizer(optimizer);
  }
  // Not owned, as optimizers: the scheduler must outlive the Accelerator (save_state reads it).
  template <typename S, typename = std::enable_if_t<std::is_base_of_v<torch::optim::LRScheduler, S>>, typename = void>
  PreparedScheduler prepare_one(S& scheduler) {
    return prepare_scheduler(std::shared_ptr<torch::optim::LRScheduler>(&scheduler, [](auto*) {}));
  }
  template <typename B>
  DataLoader<B> prepare_one(const DataLoader<B>& loader) {
    auto prepared = loader.sharded(data_layout(), process_index());
    register_loader(prepared.state());
    return prepared;
  }

  template <typename M>
  PreparedModel<M> prepare_module(const std::shared_ptr<M>& module) {
    return PreparedModel<M>(module, make_model_sync(module));
  }
  std::shared_ptr<detail::ModelSync> make_model_sync(std::shared_ptr<torch::nn::Module> module);
  PreparedOptimizer prepare_optimizer(std::shared_ptr<torch::optim::Optimizer> optimizer);
  PreparedScheduler prepare_scheduler(std::shared_ptr<torch::optim::LRScheduler> scheduler);
  Scope no_sync_models(std::vector<detail::ModelSync*> models);
  sharding::Layout data_layout() const;
  void register_loader(const std::shared_ptr<detail::LoaderState>& loader);
  int64_t metrics_keep() const;
  void begin_accumulation_step();
  void print_line(const std::string& line) const;
  detail::Communicator* comm() const;

  std::shared_ptr<detail::AcceleratorCore> core_;
};

}  // namespace spur
