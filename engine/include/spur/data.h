// SPDX-License-Identifier: Apache-2.0
// spur::DataLoader: batches from a map-style dataset (get(index), size(): torch::data datasets plug in) or a
// stream, with PyTorch's options and background workers; Accelerator::prepare shards it with Accelerate's rules.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/data/dataloader_options.h>
#include <torch/data/example.h>
#include <torch/data/samplers/base.h>
#include <torch/data/samplers/random.h>
#include <torch/data/samplers/sequential.h>
#include <torch/types.h>

#include <spur/collate.h>
#include <spur/error.h>
#include <spur/sampler.h>
#include <spur/sharding.h>

namespace spur {

struct DataLoaderOptions {
  int64_t batch_size = 1;
  /// Reshuffle every epoch (RandomSampler seeded with seed + epoch); ignored when a sampler is given.
  bool shuffle = false;
  /// Drop the last incomplete batch (and, once sharded, the last incomplete round).
  bool drop_last = false;
  /// Background threads that load and collate batches; 0 loads on the training thread. Datasets read
  /// from several threads at once must allow it (torch::data's in-memory datasets do).
  int64_t num_workers = 0;
  /// Batches each worker may load ahead.
  int64_t prefetch_factor = 2;
  /// Copy batches into page-locked memory (CUDA builds with a GPU only) for faster host-to-device copies.
  bool pin_memory = false;
  /// Shuffling seed, also the seed of the per-batch generators (loader_generator()). Default: torch's current
  /// seed (set_seed); prepare() makes every rank use rank 0's, and save_state keeps it.
  std::optional<uint64_t> seed;
};

/// The random generator for data randomness (augmentation) inside a dataset's get(), a stream's next() or a
/// collate function: a fresh one per batch, seeded from (the loader's seed, epoch, rank, batch position). What a
/// batch holds therefore does not depend on num_workers, on the training thread's own draws (dropout), or on where
/// a resumed run starts. Draw from it explicitly: `torch::rand({1}, spur::loader_generator())`. Outside a loader
/// it is torch's default CPU generator. (PyTorch seeds each worker process instead, so its batches depend on the
/// worker count; Spur's workers are threads, which share torch's default generator: draws from it in get() with
/// num_workers > 0 interleave, as they would with the training thread.)
at::Generator loader_generator();

/// A stream (iterable) dataset: next() until std::nullopt; reset(epoch) starts the stream again.
template <typename Sample>
class StreamDataset {
 public:
  using sample_type = Sample;
  virtual ~StreamDataset() = default;
  virtual void reset(int64_t epoch) {}
  virtual std::optional<Sample> next() = 0;
};

/// Inputs and targets held in two tensors, sample i being row i of each.
class TensorDataset {
 public:
  TensorDataset(torch::Tensor inputs, torch::Tensor targets);
  torch::data::Example<> get(size_t index) const { return {inputs_[index], targets_[index]}; }
  size_t size() const { return static_cast<size_t>(inputs_.size(0)); }

 private:
  torch::Tensor inputs_, targets_;
};

namespace detail {

// Non-template state of a loader, shared by its copies. The Accelerator reads it for checkpoints and
// gather_for_metrics and installs its hooks when preparing. Training thread only.
class LoaderState {
 public:
  DataLoaderOptions options;
  std::shared_ptr<Sampler> sampler;  // map-style only
  int64_t dataset_size = -1;         // map-style only
  bool stream = false;
  bool user_sampler = false;
  bool prepared = false;    // set by Accelerator::prepare: shard (a stream pads its last block even on one process)
  sharding::Layout layout;  // num_processes 1 until prepared
  int64_t rank = 0;
  int64_t epoch = 0;
  int64_t position = 0;                 // batches handed out in the current epoch
  int64_t skip_next = 0;                // batches to skip when the next epoch starts (skip_first_batches, load_state)
  bool at_end = false;                  // the epoch's last batch has been handed out
  int64_t remainder = -1;               // then: real samples of the last gathered round (gather_for_metrics)
  std::optional<torch::Device> device;  // prepared on a GPU: batches are moved there, as Accelerate does

  // The sampler draws from torch's default generator (a torch::data sampler), which the ranks need not share:
  // every rank draws (so each generator moves as it would without Spur), and rank 0's order is used.
  bool order_from_rank0 = false;

  // Installed by Accelerator::prepare.
  std::function<void(const std::vector<int64_t>&)> check_order;  // collective: same order on every rank?
  std::function<void(std::vector<int64_t>&)> agree_order;        // collective: rank 0's order on every rank
  std::function<void(LoaderState*, bool)> on_active;             // an iteration starts (true) or ends (false)

  struct EpochPlan {
    std::vector<std::vector<int64_t>> batches;  // this rank's index batches; empty vector = zero-sample batch
    int64_t remainder = -1;
  };
  /// This epoch's batches for this rank (map-style); runs the order check.
  EpochPlan plan_epoch();
  /// How many batches an epoch gives this rank (map-style), without drawing an order.
  int64_t batches_per_epoch() const;
  void begin_epoch();
  void handed_out(bool last, int64_t remainder);
  /// The iteration ran to its end: the next one is the next epoch.
  void finish_epoch();
  /// The iteration was left early (break): the same epoch starts again next time.
  void abandon();
  /// A new seed (load_state restores the saved one): the built-in shuffling sampler follows it.
  void reseed(uint64_t seed);
};

// The generator of batch `position` of `epoch` on `rank` (see loader_generator()).
at::Generator batch_generator(uint64_t seed, int64_t epoch, int64_t rank, int64_t position);

// Makes `generator` this thread's loader_generator() while alive.
class LoaderGeneratorScope {
 public:
  explicit LoaderGeneratorScope(at::Generator generator);
  ~LoaderGeneratorScope();
  LoaderGeneratorScope(const LoaderGeneratorScope&) = delete;
  LoaderGeneratorScope& operator=(const LoaderGeneratorScope&) = delete;

 private:
  at::Generator generator_;
  at::Generator* previous_;
};

// Says once, on rank 0, that a stream resumes by reading and discarding its first batches (their next() runs
// again, with the same per-batch generators).
void note_stream_skip(int64_t rank, int64_t epoch, int64_t batches);

// Applies fn to every tensor of a batch (Tensor, torch::data::Example, pair, tuple, vector, map); other
// types pass through.
inline torch::Tensor transform_batch(torch::Tensor t, const std::function<torch::Tensor(torch::Tensor)>& fn) {
  return t.defined() ? fn(std::move(t)) : t;
}
template <typename D, typename T>
torch::data::Example<D, T> transform_batch(torch::data::Example<D, T> e,
                                           const std::function<torch::Tensor(torch::Tensor)>& fn);
template <typename A, typename B>
std::pair<A, B> transform_batch(std::pair<A, B> p, const std::function<torch::Tensor(torch::Tensor)>& fn) {
  return {transform_batch(std::move(p.first), fn), transform_batch(std::move(p.second), fn)};
}
template <typename... Ts>
std::tuple<Ts...> transform_batch(std::tuple<Ts...> t, const std::function<torch::Tensor(torch::Tensor)>& fn) {
  return std::apply([&](auto&&... items) { return std::tuple<Ts...>(transform_batch(std::move(items), fn)...); },
                    std::move(t));
}
template <typename T>
std::vector<T> transform_batch(std::vector<T> v, const std::function<torch::Tensor(torch::Tensor)>& fn) {
  for (auto& item : v) item = transform_batch(std::move(item), fn);
  return v;
}
template <typename K, typename T>
std::map<K, T> transform_batch(std::map<K, T> m, const std::function<torch::Tensor(torch::Tensor)>& fn) {
  for (auto& entry : m) entry.second = transform_batch(std::move(entry.second), fn);
  return m;
}
template <typename D>
torch::data::Example<D, torch::data::example::NoTarget> transform_batch(
    torch::data::Example<D, torch::data::example::NoTarget> e, const std::function<torch::Tensor(torch::Tensor)>& fn) {
  return torch::data::Example<D, torch::data::example::NoTarget>(transform_batch(std::move(e.data), fn));
}
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
T transform_batch(T value, const std::function<torch::Tensor(torch::Tensor)>&) {
  return value;
}
template <typename D, typename T>
torch::data::Example<D, T> transform_batch(torch::data::Example<D, T> e,
                                           const std::function<torch::Tensor(torch::Tensor)>& fn) {
  return {transform_batch(std::move(e.data), fn), transform_batch(std::move(e.target), fn)};
}

bool can_pin_memory();
torch::Tensor pin(torch::Tensor t);

// Loads positions [begin, end) of an epoch on `workers` threads, at most `window` ahead of the consumer, and
// hands them over in order; a worker's exception is rethrown to the consumer at that position.
template <typename Batch>
class Prefetcher {
 public:
  Prefetcher(std::function<Batch(int64_t)> produce, int64_t begin, int64_t end, int64_t workers, int64_t window)
      : produce_(std::move(produce)), next_(begin), wanted_(begin), end_(end), window_(std::max<int64_t>(1, window)) {
    try {
      for (int64_t i = 0; i < workers; ++i) threads_.emplace_back([this] { run(); });
    } catch (...) {
      stop();
      throw;
    }
  }
  ~Prefetcher() { stop(); }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  Batch get(int64_t position) {
    std::unique_lock<std::mutex> lock(mutex_);
    wanted_ = position;
    work_.notify_all();
    done_.wait(lock, [&] { return ready_.count(position) > 0; });
    auto result = std::move(ready_.at(position));
    ready_.erase(position);
    wanted_ = position + 1;
    work_.notify_all();
    lock.unlock();
    if (result.error) std::rethrow_exception(result.error);
    return std::move(*result.batch);
  }

 private:
  struct Result {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_.notify_all();
    for (auto& thread : threads_) thread.join();
  }

  void run() {
    for (;;) {
      int64_t position;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_.wait(lock, [&] { return stop_ || (next_ < end_ && next_ < wanted_ + window_); });
        if (stop_) return;
        position = next_++;
      }
      Result result;
      try {
        result.batch.emplace(produce_(position));
      } catch (...) {
        result.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.emplace(position, std::move(result));
      }
      done_.notify_all();
    }
  }

  std::function<Batch(int64_t)> produce_;
  std::mutex mutex_;
  std::condition_variable work_, done_;
  int64_t next_, wanted_, end_, window_;
  bool stop_ = false;
  std::map<int64_t, Result> ready_;
  std::vector<std::thread> threads_;
};

// A stream of batches for one epoch, sharded for this rank.
template <typename Batch>
class BatchStream {
 public:
  virtual ~BatchStream() = default;
  virtual std::optional<Batch> next() = 0;
  /// Real samples in the last gathered round (see sharding::StreamShard::remainder), once the stream ended.
  virtual int64_t remainder() const = 0;
};

// Runs a stream on one background thread, `window` batches ahead.
template <typename Batch>
class StreamPrefetcher {
 public:
  StreamPrefetcher(std::unique_ptr<BatchStream<Batch>> stream, int64_t window)
      : stream_(std::move(stream)), window_(std::max<int64_t>(1, window)), thread_([this] { run(); }) {}
  ~StreamPrefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    thread_.join();
  }
  std::optional<Batch> next() {
    std::unique_lock<std::mutex> lock(mutex_);
    items_.wait(lock, [&] { return !queue_.empty() || finished_; });
    if (queue_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return std::nullopt;
    }
    auto batch = std::move(queue_.front());
    queue_.pop_front();
    space_.notify_all();
    return batch;
  }
  /// Once next() returned std::nullopt: the stream's remainder.
  int64_t remainder() {
    std::lock_guard<std::mutex> lock(mutex_);
    return remainder_;
  }

 private:
  void run() {
    try {
      for (;;) {
        {
          std::unique_lock<std::mutex> lock(mutex_);
          space_.wait(lock, [&] { return stop_ || static_cast<int64_t>(queue_.size()) < window_; });
          if (stop_) break;
        }
        auto batch = stream_->next();
        std::lock_guard<std::mutex> lock(mutex_);
        if (!batch) break;
        queue_.push_back(std::move(*batch));
        items_.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    remainder_ = stream_->remainder();  // the worker is done with the stream: read it here, under the lock
    finished_ = true;
    items_.notify_all();
  }

  std::unique_ptr<BatchStream<Batch>> stream_;
  int64_t window_;
  std::mutex mutex_;
  std::condition_variable items_, space_;
  std::deque<Batch> queue_;
  bool stop_ = false;
  bool finished_ = false;
  int64_t remainder_ = -1;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace detail

template <typename Batch>
class DataLoader {
 public:
  using batch_type = Batch;
  /// Map-style: the collated batch of these dataset indices.
  using Fetch = std::function<Batch(const std::vector<int64_t>&)>;
  /// Stream: this rank's batches of an epoch.
  using OpenStream = std::function<std::unique_ptr<detail::BatchStream<Batch>>(int64_t epoch, const sharding::Layout&,
                                                                               int64_t rank, bool sharded)>;

  DataLoader(std::shared_ptr<detail::LoaderState> state, Fetch fetch, OpenStream open)
      : state_(std::move(state)), fetch_(std::move(fetch)), open_(std::move(open)) {}

  class Iterator;
  /// Starts an epoch (the next one, or the one set_epoch named). One iteration at a time.
  Iterator begin() { return Iterator(std::make_shared<Epoch>(*this)); }
  Iterator end() { return Iterator(); }

  /// Batches this rank gets per epoch (map-style; -1 for a stream), counting an even_batches=false padding batch.
  int64_t size() const { return state_->stream ? -1 : state_->batches_per_epoch(); }
  void set_epoch(int64_t epoch) { state_->epoch = epoch; }
  int64_t epoch() const { return state_->epoch; }
  /// The next epoch starts at batch n (Accelerate's skip_first_batches), e.g. to resume mid-epoch by hand.
  void skip_first_batches(int64_t n) { state_->skip_next = n; }
  const DataLoaderOptions& options() const { return state_->options; }

  /// A copy of this loader sharded for `rank` of `layout` (what Accelerator::prepare returns).
  DataLoader sharded(const sharding::Layout& layout, int64_t rank) const {
    DataLoader copy(std::make_shared<detail::LoaderState>(*state_), fetch_, open_);
    copy.shard_in_place(layout, rank);
    return copy;
  }
  /// Shards this loader itself (and every copy sharing it): what Accelerator::prepare does to a loader passed as
  /// an lvalue.
  void shard_in_place(const sharding::Layout& layout, int64_t rank) {
    auto& state = *state_;
    state.layout = layout;
    state.rank = rank;
    state.prepared = true;
    state.epoch = 0;
    state.position = 0;
    state.at_end = false;
    state.check_order = nullptr;  // the preparing Accelerator installs its own hooks
    state.agree_order = nullptr;
    state.on_active = nullptr;
  }
  const std::shared_ptr<detail::LoaderState>& state() const { return state_; }

 private:
  // One pass over the data: its plan, its workers, its position.
  class Epoch {
   public:
    Epoch(const Epoch&) = delete;
    Epoch& operator=(const Epoch&) = delete;
    ~Epoch() {
      if (!finished_) state_->abandon();
    }

    explicit Epoch(DataLoader& loader)
        : state_(loader.state_),
          fetch_(loader.fetch_),
          seed_(loader.state_->options.seed.value_or(0)),
          rank_(loader.state_->rank) {
      auto& state = *state_;
      const int64_t skip = std::exchange(state.skip_next, 0);
      state.begin_epoch();
      epoch_ = state.epoch;  // the workers read these copies, not the shared state
      const int64_t workers = state.options.num_workers;
      const int64_t window = workers * state.options.prefetch_factor;
      if (state.stream) {
        auto stream = std::make_unique<SeededStream>(
            loader.open_(state.epoch, state.layout, state.rank, state.prepared), seed_, state.epoch, state.rank);
        if (skip > 0) detail::note_stream_skip(state.rank, state.epoch, skip);
        for (int64_t i = 0; i < skip && stream->next(); ++i) state.position++;
        if (workers > 0) {
          stream_prefetcher_ = std::make_unique<detail::StreamPrefetcher<Batch>>(std::move(stream), window);
        } else {
          stream_ = std::move(stream);
        }
        lookahead_ = pull_stream();
      } else {
        plan_ = state.plan_epoch();
        next_ = std::min<int64_t>(skip, static_cast<int64_t>(plan_.batches.size()));
        state.position = next_;
        if (workers > 0 && next_ < static_cast<int64_t>(plan_.batches.size())) {
          prefetcher_ =
              std::make_unique<detail::Prefetcher<Batch>>([this](int64_t i) { return produce(i); }, next_,
                                                          static_cast<int64_t>(plan_.batches.size()), workers, window);
        }
      }
    }

    std::optional<Batch> next() {
      auto& state = *state_;
      if (state.stream) {
        if (pending_error_) std::rethrow_exception(std::exchange(pending_error_, nullptr));
        if (!lookahead_) return finish();
        auto batch = std::move(lookahead_);
        try {
          lookahead_ = pull_stream();  // one ahead, to know whether this batch is the last
        } catch (...) {
          // The batch in hand is good: hand it out, and the error at the position where it happened.
          lookahead_.reset();
          pending_error_ = std::current_exception();
          state.handed_out(false, -1);
          return place(std::move(*batch));
        }
        state.handed_out(!lookahead_, lookahead_ ? -1 : remainder());
        return place(std::move(*batch));
      }
      const int64_t count = static_cast<int64_t>(plan_.batches.size());
      if (next_ >= count) return finish();
      const int64_t i = next_++;
      auto batch = prefetcher_ ? prefetcher_->get(i) : produce(i);
      state.handed_out(i == count - 1, plan_.remainder);
      return place(std::move(batch));
    }

   private:
    // Batch i of this epoch, with its own generator (on whichever thread loads it).
    Batch produce(int64_t i) {
      detail::LoaderGeneratorScope generator(detail::batch_generator(seed_, epoch_, rank_, i));
      return fetch_(plan_.batches[i]);
    }
    // A stream whose batch n is produced under batch n's generator.
    class SeededStream final : public detail::BatchStream<Batch> {
     public:
      SeededStream(std::unique_ptr<detail::BatchStream<Batch>> inner, uint64_t seed, int64_t epoch, int64_t rank)
          : inner_(std::move(inner)), seed_(seed), epoch_(epoch), rank_(rank) {}
      std::optional<Batch> next() override {
        detail::LoaderGeneratorScope generator(detail::batch_generator(seed_, epoch_, rank_, position_++));
        return inner_->next();
      }
      int64_t remainder() const override { return inner_->remainder(); }

     private:
      std::unique_ptr<detail::BatchStream<Batch>> inner_;
      uint64_t seed_;
      int64_t epoch_, rank_, position_ = 0;
    };

    Batch place(Batch batch) const {
      const auto& device = state_->device;
      if (!device || device->is_cpu()) return batch;
      return detail::transform_batch(std::move(batch),
                                     [&](torch::Tensor t) { return t.to(*device, /*non_blocking=*/true); });
    }
    std::optional<Batch> pull_stream() { return stream_prefetcher_ ? stream_prefetcher_->next() : stream_->next(); }
    int64_t remainder() const { return stream_prefetcher_ ? stream_prefetcher_->remainder() : stream_->remainder(); }
    std::optional<Batch> finish() {
      if (!finished_) state_->finish_epoch();
      finished_ = true;
      return std::nullopt;
    }

    std::shared_ptr<detail::LoaderState> state_;
    Fetch fetch_;
    uint64_t seed_;
    int64_t rank_;
    int64_t epoch_ = 0;
    detail::LoaderState::EpochPlan plan_;
    int64_t next_ = 0;
    bool finished_ = false;
    std::unique_ptr<detail::Prefetcher<Batch>> prefetcher_;
    std::unique_ptr<detail::BatchStream<Batch>> stream_;
    std::unique_ptr<detail::StreamPrefetcher<Batch>> stream_prefetcher_;
    std::optional<Batch> lookahead_;
    std::exception_ptr pending_error_;
  };

 public:
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = Batch*;
    using reference = Batch&;

    Iterator() = default;
    explicit Iterator(std::shared_ptr<Epoch> epoch) : epoch_(std::move(epoch)) { current_ = epoch_->next(); }
    Batch& operator*() { return *current_; }
    Batch* operator->() { return &*current_; }
    Iterator& operator++() {
      current_ = epoch_->next();
      return *this;
    }
    bool operator==(const Iterator& other) const { return !current_ && !other.current_; }
    bool operator!=(const Iterator& other) const { return !(*this == other); }

   private:
    std::shared_ptr<Epoch> epoch_;
    std::optional<Batch> current_;
  };

 private:
  std::shared_ptr<detail::LoaderState> state_;
  Fetch fetch_;
  OpenStream open_;
};

namespace detail {

template <typename Dataset>
int64_t dataset_size(const Dataset& dataset) {
  const auto size = dataset.size();
  if constexpr (std::is_integral_v<std::decay_t<decltype(size)>>) {
    return static_cast<int64_t>(size);
  } else {
    if (!size) throw Error("the dataset has no size(): wrap it as a StreamDataset to load it as a stream");
    return static_cast<int64_t>(*size);
  }
}

template <typename D, typename = void>
struct has_get : std::false_type {};
template <typename D>
struct has_get<D, std::void_t<decltype(std::declval<D&>().get(size_t{0}))>> : std::true_type {};
template <typename D, typename = void>
struct has_get_batch : std::false_type {};
template <typename D>
struct has_get_batch<D, std::void_t<decltype(std::declval<D&>().get_batch(c10::ArrayRef<size_t>()))>> : std::true_type {
};
template <typename T>
struct is_std_vector : std::false_type {};
template <typename T, typename A>
struct is_std_vector<std::vector<T, A>> : std::true_type {};

// The indices of one batch as torch::data's get_batch takes them, checked against the dataset's size.
std::vector<size_t> batch_request(const std::vector<int64_t>& indices, int64_t size);

// The zero-sample batch a short rank gets with even_batches=false: `batch` (of one sample) cut to no rows, so it
// keeps the sample's shape.
template <typename Batch>
Batch no_rows(Batch batch) {
  return transform_batch(std::move(batch), [](torch::Tensor t) { return t.narrow(0, 0, 0); });
}

// The batch of `indices` from a torch::data batch dataset (`.map(Stack<>())`, or any get_batch), as torch's own
// loader makes it. The zero-sample batch (no indices) has sample 0's shape and no rows, or is an empty vector.
template <typename Dataset>
auto fetch_batch(Dataset& dataset, const std::vector<int64_t>& indices, int64_t size) {
  using Batch = std::decay_t<decltype(dataset.get_batch(c10::ArrayRef<size_t>()))>;
  if (indices.empty()) {
    if constexpr (is_std_vector<Batch>::value) {
      return Batch{};
    } else {
      const std::vector<size_t> first{0};
      return no_rows(dataset.get_batch(c10::ArrayRef<size_t>(first)));
    }
  } else {
    const auto request = batch_request(indices, size);
    try {
      return Batch(dataset.get_batch(c10::ArrayRef<size_t>(request)));
    } catch (const std::exception& e) {
      throw Error("data loader: the dataset's get_batch(" + std::to_string(request.size()) + " indices from " +
                  std::to_string(request.front()) + ") failed: " + e.what());
    }
  }
}

// A torch::data sampler (SequentialSampler, RandomSampler...) as a spur::Sampler: each epoch it is reset, then
// asked for indices until it has none, as torch's loader does at the start of an epoch (a RandomSampler draws its
// permutation from torch's default generator there, as it would in torch's loader).
template <typename TorchSampler>
class TorchSamplerOrder final : public Sampler {
 public:
  TorchSamplerOrder(TorchSampler sampler, int64_t size) : sampler_(std::move(sampler)), size_(size) {}
  std::vector<int64_t> indices(int64_t) override {
    sampler_.reset(static_cast<size_t>(size_));
    std::vector<int64_t> order;
    order.reserve(static_cast<size_t>(size_));
    while (auto chunk = sampler_.next(static_cast<size_t>(std::max<int64_t>(size_, 1)))) {
      if (chunk->empty()) break;
      for (const size_t index : *chunk) order.push_back(static_cast<int64_t>(index));
    }
    return order;
  }
  int64_t size() const override { return size_; }

 private:
  TorchSampler sampler_;
  int64_t size_;
};

DataLoaderOptions from_torch_options(const torch::data::DataLoaderOptions& options);

template <typename Sample, typename Collate>
auto collate_and_pin(std::vector<Sample>&& samples, const Collate& collate, bool pin_memory) {
  auto batch = collate(std::move(samples));
  if (pin_memory && can_pin_memory()) batch = transform_batch(std::move(batch), pin);
  return batch;
}

std::shared_ptr<LoaderState> make_state(const DataLoaderOptions& options, int64_t dataset_size,
                                        std::shared_ptr<Sampler> sampler);

}  // namespace detail

namespace detail {

template <typename Dataset, typename Collate>
auto make_sample_loader(std::shared_ptr<Dataset> shared, const DataLoaderOptions& options,
                        std::shared_ptr<Sampler> sampler, Collate collate) {
  using Sample = std::decay_t<decltype(shared->get(size_t{0}))>;
  using Batch = decltype(collate(std::vector<Sample>{}));
  const int64_t size = detail::dataset_size(*shared);
  auto state = detail::make_state(options, size, std::move(sampler));
  const bool pin_memory = options.pin_memory;
  typename DataLoader<Batch>::Fetch fetch = [shared, collate, pin_memory, size](const std::vector<int64_t>& indices) {
    std::vector<Sample> samples;
    if (indices.empty()) {
      samples.push_back(shared->get(size_t{0}));
      return detail::no_rows(detail::collate_and_pin(std::move(samples), collate, false));
    }
    const auto request = detail::batch_request(indices, size);
    samples.reserve(request.size());
    for (const size_t index : request) {
      try {
        samples.push_back(shared->get(index));
      } catch (const std::exception& e) {
        throw Error("data loader: the dataset's get(" + std::to_string(index) + ") failed: " + e.what());
      }
    }
    return detail::collate_and_pin(std::move(samples), collate, pin_memory);
  };
  return DataLoader<Batch>(std::move(state), std::move(fetch), nullptr);
}

// A loader over a torch::data batch dataset: its batches are what get_batch returns (fetch_batch).
template <typename Dataset>
auto make_batch_loader(std::shared_ptr<Dataset> shared, const DataLoaderOptions& options,
                       std::shared_ptr<Sampler> sampler) {
  using Batch = std::decay_t<decltype(shared->get_batch(c10::ArrayRef<size_t>()))>;
  const int64_t size = detail::dataset_size(*shared);
  typename DataLoader<Batch>::Fetch fetch = [shared, size](const std::vector<int64_t>& indices) {
    return detail::fetch_batch(*shared, indices, size);
  };
  return DataLoader<Batch>(detail::make_state(options, size, std::move(sampler)), std::move(fetch), nullptr);
}

}  // namespace detail

/// A loader over a map-style dataset: anything with get(index) and size() (integer or optional, as
/// torch::data's datasets), or a torch::data batch dataset (get_batch(indices), as `MNIST(root).map(
/// Normalize<>(0.1307, 0.3081)).map(Stack<>())`: then its batches are what get_batch returns, and `collate` is not
/// used). The dataset is moved into the loader. `sampler` replaces shuffle; `collate` turns a vector of samples
/// into a batch (the 4th argument: `make_data_loader(dataset, options, nullptr, my_collate)`).
template <typename Dataset, typename Collate = DefaultCollate>
auto make_data_loader(Dataset dataset, DataLoaderOptions options = {}, std::shared_ptr<Sampler> sampler = nullptr,
                      Collate collate = {}) {
  auto shared = std::make_shared<Dataset>(std::move(dataset));
  if constexpr (!detail::has_get<Dataset>::value && detail::has_get_batch<Dataset>::value) {
    static_assert(std::is_same_v<Collate, DefaultCollate>,
                  "make_data_loader: a batch dataset (get_batch, as `.map(Stack<>())`) makes its own batches: a "
                  "collate function is not used with it; drop it, or map the dataset with your transform instead");
    return detail::make_batch_loader(std::move(shared), options, std::move(sampler));
  } else {
    return detail::make_sample_loader(std::move(shared), options, std::move(sampler), std::move(collate));
  }
}

/// torch::data::make_data_loader's own forms, so a LibTorch program ports by changing `torch::data::` to `spur::`:
/// `make_data_loader<torch::data::samplers::SequentialSampler>(std::move(dataset), batch_size)`,
/// `make_data_loader(std::move(dataset), torch::data::DataLoaderOptions().batch_size(64).workers(2))`, or with a
/// sampler object. As torch's, they return a std::unique_ptr to the loader, whose batches are what the dataset's
/// get_batch returns; the torch sampler gives each epoch's order (a RandomSampler draws it from torch's default
/// generator at the start of the epoch, as in torch's loader; once prepared, every rank uses rank 0's order).
/// Options: batch_size, workers (threads), max_jobs and drop_last are used; timeout and enforce_ordering are not
/// (batches always come in order).
template <typename Dataset, typename TorchSampler,
          typename = std::enable_if_t<std::is_base_of_v<torch::data::samplers::Sampler<>, TorchSampler>>>
auto make_data_loader(Dataset dataset, TorchSampler sampler,
                      torch::data::DataLoaderOptions options = torch::data::DataLoaderOptions()) {
  const int64_t size = detail::dataset_size(dataset);
  auto order = std::make_shared<detail::TorchSamplerOrder<TorchSampler>>(std::move(sampler), size);
  const bool draws = !std::is_same_v<TorchSampler, torch::data::samplers::SequentialSampler>;
  auto shared = std::make_shared<Dataset>(std::move(dataset));
  const auto spur_options = detail::from_torch_options(options);
  auto loader = [&] {
    if constexpr (detail::has_get_batch<Dataset>::value) {
      return detail::make_batch_loader(std::move(shared), spur_options, std::move(order));
    } else {
      // A dataset of its own with get(index) only: batches are vectors of samples, as torch's Dataset::get_batch.
      return detail::make_sample_loader(std::move(shared), spur_options, std::move(order),
                                        [](auto&& samples) { return std::move(samples); });
    }
  }();
  loader.state()->order_from_rank0 = draws;
  return std::make_unique<decltype(loader)>(std::move(loader));
}
/// The form with the sampler's type named (`make_data_loader<torch::data::samplers::SequentialSampler>(std::move(
/// dataset), batch_size)`, default RandomSampler, as torch's): the sampler is made over the dataset's size.
template <typename TorchSampler = torch::data::samplers::RandomSampler, typename Dataset,
          typename = std::enable_if_t<std::is_constructible_v<TorchSampler, size_t>>>
auto make_data_loader(Dataset dataset, torch::data::DataLoaderOptions options) {
  const int64_t size = detail::dataset_size(dataset);
  return spur::make_data_loader(std::move(dataset), TorchSampler(static_cast<size_t>(size)), std::move(options));
}

/// A loader over a stream dataset (a StreamDataset subclass, or anything with next() and reset(epoch)).
template <typename Stream, typename Collate = DefaultCollate>
auto make_stream_loader(std::shared_ptr<Stream> stream, DataLoaderOptions options = {}, Collate collate = {}) {
  using Sample = typename std::decay_t<decltype(*stream->next())>;
  using Batch = decltype(collate(std::vector<Sample>{}));
  auto state = detail::make_state(options, -1, nullptr);
  state->stream = true;

  class Shard final : public detail::BatchStream<Batch> {
   public:
    Shard(std::shared_ptr<Stream> stream, Collate collate, const DataLoaderOptions& options,
          const sharding::Layout& layout, int64_t rank, bool sharded)
        : stream_(std::move(stream)),
          collate_(std::move(collate)),
          pin_(options.pin_memory),
          shard_(options.batch_size, options.drop_last, layout, rank),
          batch_size_(options.batch_size),
          drop_last_(options.drop_last),
          sharded_(sharded) {}
    std::optional<Batch> next() override {
      while (!done_) {
        std::optional<Sample> sample;
        try {
          sample = stream_->next();
        } catch (const std::exception& e) {
          throw Error(std::string("data loader: the stream dataset's next() failed: ") + e.what());
        }
        if (!sample) {
          done_ = true;
          if (!sharded_) {
            // Not prepared: PyTorch's behaviour, a short last batch unless drop_last.
            if (plain_.empty() || (drop_last_ && static_cast<int64_t>(plain_.size()) < batch_size_))
              return std::nullopt;
            return detail::collate_and_pin(std::exchange(plain_, {}), collate_, pin_);
          }
          if (auto last = shard_.finish()) return detail::collate_and_pin(std::move(*last), collate_, pin_);
          return std::nullopt;
        }
        if (!sharded_) {
          plain_.push_back(std::move(*sample));
          if (static_cast<int64_t>(plain_.size()) == batch_size_) {
            return detail::collate_and_pin(std::exchange(plain_, {}), collate_, pin_);
          }
          continue;
        }
        if (auto mine = shard_.push(std::move(*sample))) {
          return detail::collate_and_pin(std::move(*mine), collate_, pin_);
        }
      }
      return std::nullopt;
    }
    int64_t remainder() const override { return shard_.remainder(); }

   private:
    std::shared_ptr<Stream> stream_;
    Collate collate_;
    bool pin_;
    sharding::StreamShard<Sample> shard_;
    int64_t batch_size_;
    bool drop_last_;
    bool sharded_;
    std::vector<Sample> plain_;
    bool done_ = false;
  };

  typename DataLoader<Batch>::OpenStream open =
      [stream, collate, options](int64_t epoch, const sharding::Layout& layout, int64_t rank, bool sharded) {
        stream->reset(epoch);
        return std::unique_ptr<detail::BatchStream<Batch>>(new Shard(stream, collate, options, layout, rank, sharded));
      };
  return DataLoader<Batch>(std::move(state), nullptr, std::move(open));
}

}  // namespace spur
