// SPDX-License-Identifier: Apache-2.0
// spur::Accelerator: the few calls that make one LibTorch training loop run unchanged on 1..N processes, with
// mixed precision and gradient accumulation (Hugging Face Accelerate's API, in C++). Use from one thread.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <map>
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
#include <spur/objects.h>
#include <spur/optimizer.h>
#include <spur/options.h>
#include <spur/checkpoint.h>
#include <spur/precision.h>
#include <spur/scheduler.h>
#include <spur/scope.h>
#include <spur/state.h>
#include <spur/tracking.h>

namespace spur {

/// A value for Accelerator::log: any number, a one-element tensor (read with .item()), or a text (trackers that
/// keep text, as tensorboard, store it; the others skip it).
struct LogValue {
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  LogValue(T v) : value(static_cast<double>(v)) {}            // NOLINT: implicit, so {"loss", 0.5} reads naturally
  LogValue(const torch::Tensor& tensor);                      // NOLINT
  LogValue(const char* s) : text(s), is_text(true) {}         // NOLINT
  LogValue(std::string_view s) : text(s), is_text(true) {}    // NOLINT
  LogValue(const std::string& s) : text(s), is_text(true) {}  // NOLINT
  double value = 0;
  std::string_view text;  // valid for the log call only: the tracker copies it
  bool is_text = false;
};

/// What Accelerator::register_save_state_pre_hook and register_load_state_pre_hook return: remove() takes the
/// hook out again (also after the Accelerator is gone).
class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::function<void()> remove) : remove_(std::move(remove)) {}
  void remove() {
    if (auto fn = std::exchange(remove_, nullptr)) fn();
  }

 private:
  std::function<void()> remove_;
};

/// The modules save_state and load_state cover, in the order they were prepared.
using ModelList = std::vector<std::shared_ptr<torch::nn::Module>>;
/// Called by save_state before it writes: `weights[i]` (every parameter and buffer of models[i], on the CPU) is what
/// goes to model_<i>.safetensors; a hook may change them, or erase a model's entry from both lists to save it
/// itself. Accelerate's save_model_hook(models, weights, output_dir).
using SaveStatePreHook =
    std::function<void(ModelList& models, std::vector<NamedTensors>& weights, const std::string& dir)>;
/// Called by load_state before it reads: erase a model from `models` to load it yourself.
using LoadStatePreHook = std::function<void(ModelList& models, const std::string& dir)>;

/// Accelerator::save's options.
struct SaveOptions {
  /// true: a safetensors file; false: a dict of tensors in torch.save's format (torch.load reads it in Python,
  /// also with weights_only; torch::pickle_load in C++). Default: true.
  bool safe_serialization = true;
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
  explicit Accelerator(const AcceleratorOptions& options = {});
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
  /// CPU), "shared memory + gloo" (hierarchical: within machines, then across them), "gloo" or "nccl".
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
  bool is_last_process() const;
  /// Runs `fn` on the main process only and returns its result there (std::optional for non-void results;
  /// std::nullopt elsewhere). No collective: the other ranks return at once.
  template <typename F>
  auto on_main_process(F&& fn) const {
    return run_if(is_main_process(), std::forward<F>(fn));
  }
  /// On the first process of each machine.
  template <typename F>
  auto on_local_main_process(F&& fn) const {
    return run_if(is_local_main_process(), std::forward<F>(fn));
  }
  template <typename F>
  auto on_last_process(F&& fn) const {
    return run_if(is_last_process(), std::forward<F>(fn));
  }
  /// On the process of index `process_index` (over all machines).
  template <typename F>
  auto on_process(int64_t process_index, F&& fn) const {
    return run_if(process_index == this->process_index(), std::forward<F>(fn));
  }
  /// On the process of local index `local_process_index` on each machine.
  template <typename F>
  auto on_local_process(int64_t local_process_index, F&& fn) const {
    return run_if(local_process_index == this->local_process_index(), std::forward<F>(fn));
  }
  /// Raises this process's trigger (e.g. its loss went NaN); check_trigger() on every rank then sees it.
  void set_trigger();
  /// True on every rank when any rank called set_trigger() since the last check (then every trigger is
  /// lowered). A collective: every rank must call it, e.g. once per step, then `break` together.
  bool check_trigger();
  /// The main process runs the scope's body first; the others wait, then run it (e.g. to download data once).
  Scope main_process_first();
  Scope local_main_process_first();
  /// Seeds torch's generators (CPU and CUDA); with device_specific, adds the process index to the seed.
  void set_seed(uint64_t seed, bool device_specific = false);

  // --- prepare -------------------------------------------------------------------------------------------
  /// Prepares each argument, in place: the program's own objects keep their types and keep working.
  ///  - A module (held by value, `Net net;`, by holder or by shared_ptr): moved to this process's device, given rank
  ///    0's weights on every rank, and hooked so that every backward that reaches it synchronises its gradients
  ///    across the ranks, also when the program calls `net.forward(x)` itself or hands `net` to a function taking
  ///    `Net&`. Returned as a PreparedModel, whose call adds autocast (bf16/fp16) and find_unused_parameters.
  ///  - An optimizer: returned as a PreparedOptimizer that steps only on synchronising micro-steps and through the
  ///    fp16 loss scaler. Stepping the program's own optimizer is the same while every batch steps (no gradient
  ///    accumulation, no fp16, no ZeRO); with those, step the one prepare returns.
  ///  - A data loader (spur::make_data_loader, also its torch::data form): sharded for this process with
  ///    Accelerate's rules. A loader passed as a (non-const) lvalue is sharded in place: it and the returned copy are
  ///    one loader. A prepared loader must be iterated on every rank (it yields this rank's share).
  /// One argument returns it alone; several return a tuple for structured bindings:
  ///   auto [model, optimizer] = accelerator.prepare(net, adam);
  /// What is passed as an lvalue is not copied and not owned: a module, optimizer or scheduler must outlive the
  /// Accelerator and every copy of its prepared wrapper. Preparing an object again returns the same preparation.
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
  /// A module prepared in place is its own unwrapped model.
  template <typename M, typename = std::enable_if_t<std::is_base_of_v<torch::nn::Module, M>>>
  M& unwrap_model(M& module) const {
    return module;
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
  /// gradient_accumulation_steps-th call only; in between the models' gradients accumulate locally (or are
  /// synchronised too, with AcceleratorOptions::sync_each_batch).
  template <typename... Models>
  Scope accumulate(Models&... models) {
    begin_accumulation_step();
    if (sync_gradients() || sync_each_batch()) return Scope{};
    return no_sync(models...);
  }
  /// While the scope lives, backward passes of these models accumulate gradients without synchronising.
  /// Each model is what prepare returned, or the program's own prepared module (`net`, `*holder`, a holder).
  template <typename... Models>
  Scope no_sync(Models&... models) {
    return no_sync_models({&sync_of(models)...});
  }
  /// True when the current micro-step synchronises gradients and steps the optimizer.
  bool sync_gradients() const;
  /// AcceleratorOptions::sync_each_batch.
  bool sync_each_batch() const;
  /// Marks the end of the data: accumulate() synchronises while it is set (on a partial accumulation at the
  /// end of an epoch). Set it on the last batch and clear it when a new epoch starts.
  void set_end_of_dataloader(bool end);
  /// Unscales (fp16) then clips the gradients' total norm; returns the norm before clipping.
  torch::Tensor clip_grad_norm_(const std::vector<torch::Tensor>& parameters, double max_norm, double norm_type = 2.0);
  template <typename M>
  torch::Tensor clip_grad_norm_(const PreparedModel<M>& model, double max_norm, double norm_type = 2.0) {
    return clip_grad_norm_(model->parameters(), max_norm, norm_type);
  }
  torch::Tensor clip_grad_norm_(const torch::nn::Module& module, double max_norm, double norm_type = 2.0) {
    return clip_grad_norm_(module.parameters(), max_norm, norm_type);
  }
  /// Unscales (fp16) then clamps every gradient to [-clip_value, clip_value].
  void clip_grad_value_(const std::vector<torch::Tensor>& parameters, double clip_value);
  /// Divides the prepared optimizers' gradients by the fp16 loss scale (once per step; no-op otherwise).
  void unscale_gradients();
  /// True when the last optimizer step was skipped because fp16 gradients overflowed.
  bool optimizer_step_was_skipped() const;
  /// The fp16 loss scaler; nullptr unless mixed_precision is fp16.
  GradScaler* scaler();
  /// Calls fn(batch_size) from `starting_batch_size`, halving the size (or applying `reduce`) while fn runs out of
  /// memory (CUDA's or the CPU allocator's OutOfMemoryError, std::bad_alloc); returns fn's result. After each
  /// try the ranks agree: if any ran out of memory, all retry with the smaller size, so every rank ends on the
  /// same one; another error on one rank is rethrown there and a spur::Error on the others. Each rank must reach
  /// the agreement: keep collectives that one rank's failure could leave half-done (the first backward of a
  /// prepared model) inside fn's first steps, where every rank fails alike. Reaching 0 is a spur::Error.
  template <typename F>
  auto find_executable_batch_size(int64_t starting_batch_size, F&& fn,
                                  const std::function<int64_t(int64_t)>& reduce = nullptr) {
    using R = std::invoke_result_t<F&, int64_t>;
    int64_t batch_size = starting_batch_size;
    for (;;) {
      if (batch_size <= 0) throw Error("find_executable_batch_size: no batch size fits in memory (reached 0)");
      // Every rank reaches the agreement, whatever happened: ran (0), out of memory (1), another error (2).
      std::exception_ptr error;
      int outcome = 0;
      std::optional<std::conditional_t<std::is_void_v<R>, int, R>> result;
      try {
        if constexpr (std::is_void_v<R>) {
          fn(batch_size);
          result.emplace(0);
        } else {
          result.emplace(fn(batch_size));
        }
      } catch (...) {
        error = std::current_exception();
        outcome = is_out_of_memory(error, batch_size) ? 1 : 2;
      }
      const int agreed = agree_batch_size_outcome(outcome);
      if (outcome == 2) std::rethrow_exception(error);
      if (agreed == 2)
        throw Error("find_executable_batch_size: fn failed on another rank (its output names the cause)");
      if (agreed == 0) {
        if constexpr (std::is_void_v<R>) {
          return;
        } else {
          return std::move(*result);
        }
      }
      release_cached_memory();
      batch_size = reduce ? reduce(batch_size) : batch_size / 2;
    }
  }

  // --- checkpoints ----------------------------------------------------------------------------------------
  /// Saves everything prepared (models as safetensors, optimizers, schedulers, the loss scaler, data-loader
  /// epochs and positions), every rank's RNG state and registered objects into `output_dir`, replacing it
  /// atomically: a crash mid-save leaves the previous checkpoint whole. Every rank calls it. On several machines
  /// `output_dir` must be on storage they share. With no `output_dir` and
  /// ProjectConfiguration::automatic_checkpoint_naming, saves `project_dir/checkpoints/checkpoint_<iteration>`, then
  /// removes the oldest beyond total_limit and counts iteration up. The folder is listed with the run's files when
  /// this process records the run (the Studio's run overview, `spur runs show`). Returns the directory written.
  std::string save_state(const std::string& output_dir = "");
  /// Restores what save_state saved into the same prepared objects; data loaders resume at the saved batch.
  /// A missing or corrupt file, or a checkpoint of another world size, is a spur::Error naming it. With no
  /// `input_dir` and automatic checkpoint naming, loads the latest checkpoint_<N> (an error naming the folder when
  /// there is none) and sets the next iteration to N + 1. Returns the directory read.
  std::string load_state(const std::string& input_dir = "");
  /// The latest complete checkpoint under project_dir/checkpoints, or "" when there is none (to decide whether
  /// to resume: `if (!accelerator.latest_checkpoint().empty()) accelerator.load_state();`).
  std::string latest_checkpoint() const;
  /// The project layout in effect (project_dir, logging_dir, iteration as it stands now).
  const ProjectConfiguration& project_configuration() const;
  std::string project_dir() const;
  /// Where file-writing trackers write: ProjectConfiguration::logging_dir, else project_dir, else "runs".
  std::string logging_dir() const;
  /// The number the next automatic checkpoint gets.
  int64_t save_iteration() const;
  /// Sets it (0 or more), e.g. to number a fresh run's checkpoints after those already in project_dir, as
  /// Accelerate's error message asks ("override save_iteration").
  void set_save_iteration(int64_t iteration);
  HookHandle register_save_state_pre_hook(SaveStatePreHook hook);
  HookHandle register_load_state_pre_hook(LoadStatePreHook hook);
  /// ZeRO stage 3: every prepared model's parameters whole on every rank until the returned scope ends, as FSDP's
  /// summon_full_params: to read or change them outside a forward (print them, copy weights, evaluate by hand).
  /// Changes made to them are kept when `writeback` (Default: true). Every rank calls it; without stage 3 it
  /// does nothing. save_model and get_state_dict gather by themselves, and save_state and load_state with whole
  /// weights (FULL_STATE_DICT; with SHARDED_STATE_DICT each rank writes and reads its own shard, gathering only
  /// for save or load pre-hooks, which see whole weights).
  Scope summon_full_params(bool writeback = true);
  /// The module's parameters and buffers by name (tied tensors under each of their names), detached, on the CPU.
  /// Under ZeRO stage 3 it gathers them (copies): every rank calls it then.
  template <typename M>
  NamedTensors get_state_dict(const PreparedModel<M>& model) const {
    return get_state_dict(static_cast<const torch::nn::Module&>(*model.ptr()));
  }
  NamedTensors get_state_dict(const torch::nn::Module& module) const;
  /// Writes tensors to `path` on the main process only (others return at once), replacing it atomically.
  void save(const NamedTensors& tensors, const std::string& path, SaveOptions options = {}) const;
  void save(const std::map<std::string, torch::Tensor>& tensors, const std::string& path,
            SaveOptions options = {}) const;
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
  /// The same for a module prepared in place (`net`, `*holder`).
  void save_model(torch::nn::Module& module, const std::string& dir, const SaveModelOptions& options = {}) {
    save_module(module, dir, options);
  }
  void save_module(torch::nn::Module& module, const std::string& dir, const SaveModelOptions& options = {});

  // --- tracking (spur/tracking.h) ----------------------------------------------------------------------------
  /// Starts recording this run's metrics: `project` and `config` (the program's parameters) are stored with it.
  /// Only the main process records unless options.all_processes.
  void init_trackers(const std::string& project, json::Object config = {}, const TrackingOptions& options = {});
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
  /// Every rank's `object`, in rank order, on every rank (any type spur::ObjectCodec can send: numbers, strings,
  /// JSON values, vectors and maps of them). A vector is concatenated instead, as Accelerate does for lists.
  template <typename T>
  std::vector<T> gather_object(const T& object) const {
    std::vector<T> out;
    for (const auto& part : detail::gather_bytes(comm(), json::write(ObjectCodec<T>::encode(object)))) {
      out.push_back(ObjectCodec<T>::decode(parse_object(part)));
    }
    return out;
  }
  template <typename T, typename A>
  std::vector<T, A> gather_object(const std::vector<T, A>& objects) const {
    std::vector<T, A> out;
    for (const auto& part :
         detail::gather_bytes(comm(), json::write(ObjectCodec<std::vector<T, A>>::encode(objects)))) {
      for (auto&& item : ObjectCodec<std::vector<T, A>>::decode(parse_object(part))) out.push_back(std::move(item));
    }
    return out;
  }
  /// Replaces `objects` on every rank by rank `from_process`'s (sizes may differ); returns it.
  template <typename T, typename A>
  std::vector<T, A>& broadcast_object_list(std::vector<T, A>& objects, int64_t from_process = 0) const {
    const std::string bytes =
        process_index() == from_process ? json::write(ObjectCodec<std::vector<T, A>>::encode(objects)) : std::string();
    objects =
        ObjectCodec<std::vector<T, A>>::decode(parse_object(detail::broadcast_bytes(comm(), bytes, from_process)));
    return objects;
  }

  /// This process's contiguous share of `inputs` for inference: a vector or a tensor (along dim 0) or a map of
  /// them (every value the same length). Shares differ by at most one item, the first ranks taking the extra.
  /// With apply_padding, short shares repeat the input's last item so every rank has as many (drop the padding
  /// after gather()). With one process, `inputs` unchanged. No collective.
  template <typename T>
  T split_between_processes(const T& inputs, bool apply_padding = false) const {
    if (num_processes() == 1) return inputs;
    return split_values(inputs, split_length(inputs), apply_padding);
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
  // A module held by value or reference: not copied, not owned (aliased to its owner when it has one).
  template <typename M, typename = std::enable_if_t<std::is_base_of_v<torch::nn::Module, M>>, typename = void,
            typename = void>
  PreparedModel<M> prepare_one(M& module) {
    if (auto owner = module.weak_from_this().lock()) return prepare_module(std::shared_ptr<M>(owner, &module));
    return prepare_module(std::shared_ptr<M>(&module, [](M*) {}));
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
  template <typename B>
  DataLoader<B> prepare_one(DataLoader<B>& loader) {
    if (!loader.state()->prepared) {
      loader.shard_in_place(data_layout(), process_index());
      register_loader(loader.state());
    }
    return loader;
  }
  // The ModelSync behind what no_sync / accumulate are given.
  template <typename M>
  detail::ModelSync& sync_of(const PreparedModel<M>& model) const {
    return model.sync();
  }
  template <typename M>
  detail::ModelSync& sync_of(const torch::nn::ModuleHolder<M>& holder) const {
    return sync_of_module(*holder);
  }
  template <typename M, typename = std::enable_if_t<std::is_base_of_v<torch::nn::Module, M>>>
  detail::ModelSync& sync_of(const M& module) const {
    return sync_of_module(module);
  }
  detail::ModelSync& sync_of_module(const torch::nn::Module& module) const;

  template <typename M>
  PreparedModel<M> prepare_module(const std::shared_ptr<M>& module) {
    return PreparedModel<M>(module, make_model_sync(module));
  }
  std::shared_ptr<detail::ModelSync> make_model_sync(std::shared_ptr<torch::nn::Module> module);
  PreparedOptimizer prepare_optimizer(std::shared_ptr<torch::optim::Optimizer> optimizer);
  PreparedScheduler prepare_scheduler(std::shared_ptr<torch::optim::LRScheduler> scheduler);
  Scope no_sync_models(std::vector<detail::ModelSync*> models);
  torch::Tensor clip_sharded_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm, double norm_type);
  sharding::Layout data_layout() const;
  void register_loader(const std::shared_ptr<detail::LoaderState>& loader);
  int64_t metrics_keep() const;
  void begin_accumulation_step();
  void print_line(const std::string& line) const;
  detail::Communicator* comm() const;
  static json::Value parse_object(const std::string& bytes);
  // find_executable_batch_size: whether `error` is an out-of-memory error (then says so on stderr).
  bool is_out_of_memory(const std::exception_ptr& error, int64_t batch_size) const;
  // The largest outcome over the ranks (0 ran, 1 out of memory, 2 another error).
  int agree_batch_size_outcome(int mine);
  void release_cached_memory() const;

  template <typename F>
  static auto run_if(bool here, F&& fn) {
    using R = std::invoke_result_t<F&>;
    if constexpr (std::is_void_v<R>) {
      if (here) fn();
    } else {
      return here ? std::optional<R>(fn()) : std::optional<R>();
    }
  }

  // split_between_processes: the length every value shares, this rank's [begin, end) and the padded length.
  struct SplitRange {
    int64_t begin = 0, end = 0, padded = 0;
  };
  SplitRange split_range(int64_t length) const;
  template <typename T, typename A>
  static int64_t length_of(const std::vector<T, A>& v) {
    return static_cast<int64_t>(v.size());
  }
  static int64_t length_of(const torch::Tensor& t) { return t.dim() == 0 ? 1 : t.size(0); }
  template <typename T>
  SplitRange split_length(const T& inputs) const {
    return split_range(length_of(inputs));
  }
  template <typename K, typename V, typename C, typename A>
  SplitRange split_length(const std::map<K, V, C, A>& inputs) const {
    int64_t length = -1;
    for (const auto& [key, value] : inputs) {
      const int64_t n = length_of(value);
      if (length >= 0 && n != length) {
        throw Error("split_between_processes: every value of the map must have the same length (" +
                    std::to_string(length) + " and " + std::to_string(n) + ")");
      }
      length = n;
    }
    return split_range(std::max<int64_t>(length, 0));
  }
  template <typename T, typename A>
  static std::vector<T, A> split_values(const std::vector<T, A>& v, SplitRange range, bool pad) {
    std::vector<T, A> out(v.begin() + range.begin, v.begin() + range.end);
    if (pad && !v.empty()) out.resize(static_cast<std::size_t>(range.padded), v.back());
    return out;
  }
  static torch::Tensor split_values(const torch::Tensor& t, SplitRange range, bool pad);
  template <typename K, typename V, typename C, typename A>
  static std::map<K, V, C, A> split_values(const std::map<K, V, C, A>& inputs, SplitRange range, bool pad) {
    std::map<K, V, C, A> out;
    for (const auto& [key, value] : inputs) out.emplace(key, split_values(value, range, pad));
    return out;
  }

  std::shared_ptr<detail::AcceleratorCore> core_;
};

}  // namespace spur
