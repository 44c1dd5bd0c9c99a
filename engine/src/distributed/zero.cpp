// SPDX-License-Identifier: Apache-2.0
// ZeRO stages 1 and 2: the flat parameter layout, stage 2's bucketed gradient reduction during backward, and the
// optimizer's shard of the parameters. See zero.h.
#include "distributed/zero.h"

#include <malloc.h>

#include <algorithm>
#include <unordered_set>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/optim/lbfgs.h>

#include <spur/error.h>

#include "accelerator_core.h"

namespace spur::detail {
namespace {

struct SettleHook final : torch::autograd::FunctionPreHook {
  SettleHook(std::weak_ptr<ZeroLayout> layout, size_t entry) : layout_(std::move(layout)), entry_(entry) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
    if (auto layout = layout_.lock()) layout->settle(entry_);
    return grads;
  }

 private:
  std::weak_ptr<ZeroLayout> layout_;
  size_t entry_;
};

// Stage 3: a gathered unit's memory is freed and allocated again under the same storage, which the parameters and
// every view autograd saved of them share (as FSDP frees its unsharded parameters' storage). While freed, a tensor
// of that storage fails on use ("its data is not allocated yet") instead of reading freed memory. Returns the block.
at::DataPtr free_storage(const torch::Tensor& tensor) {
  auto* storage = tensor.storage().unsafeGetStorageImpl();
  auto block = storage->set_data_ptr(at::DataPtr(nullptr, tensor.device()));
  storage->set_nbytes(0);
  return block;
}

size_t storage_bytes(const torch::Tensor& tensor) {
  return static_cast<size_t>(tensor.numel()) * tensor.element_size();
}

std::string shape_text(const torch::Tensor& t) {
  std::string text = "[";
  for (int64_t d = 0; d < t.dim(); ++d) text += (d ? ", " : "") + std::to_string(t.size(d));
  return text + "]";
}

}  // namespace

ZeroLayout::ZeroLayout(const std::vector<torch::Tensor>& params, int world, int rank, int stage,
                       std::shared_ptr<StoragePool> pool)
    : stage_(stage), rank_(rank), pool_(std::move(pool)) {
  if (params.empty()) throw Error("ZeRO: a model without trained parameters has nothing to shard");
  const auto options = params.front().options();
  int64_t total = 0;
  for (const auto& p : params) {
    if (p.scalar_type() != options.dtype().toScalarType() || p.device() != options.device()) {
      throw Error("ZeRO stage " + std::to_string(stage) + ": the model's trained parameters must share one dtype " +
                  "and device; one is " + std::string(c10::toString(p.scalar_type())) + " on " + p.device().str() +
                  ", another " + std::string(c10::toString(options.dtype().toScalarType())) + " on " +
                  options.device().str());
    }
  }
  // Each parameter starts on a 64-byte boundary, as a tensor of its own would (c10's allocator aligns to 64): BLAS
  // kernels round differently on data that is not aligned, and ZeRO's forward and backward must be DDP's to the bit.
  const int64_t align = std::max<int64_t>(1, 64 / static_cast<int64_t>(params.front().element_size()));
  std::vector<int64_t> offsets;
  for (const auto& p : params) {
    total = (total + align - 1) / align * align;
    offsets.push_back(total);
    total += p.numel();
  }
  chunk_ = std::max<int64_t>(1, (total + world - 1) / world);
  torch::NoGradGuard no_grad;
  if (stage_ >= 3 && pool_) {
    flat_ = torch::empty({0}, options.requires_grad(false));
    auto* storage = flat_.storage().unsafeGetStorageImpl();
    const auto bytes = static_cast<size_t>(chunk_ * world) * flat_.element_size();
    storage->set_data_ptr_noswap(pool_->take(*storage, bytes));
    storage->set_nbytes(bytes);
    flat_.set_(flat_.storage(), 0, {chunk_ * world}, {1});
    flat_.zero_();
  } else {
    flat_ = torch::zeros({chunk_ * world}, options.requires_grad(false));
  }
  for (size_t k = 0; k < params.size(); ++k) {
    const auto& p = params[k];
    auto slot = flat_.narrow(0, offsets[k], p.numel());
    slot.copy_(p.detach().reshape({-1}));
    // The parameter keeps its identity (autograd leaf, optimizer key); only its storage moves into the buffer.
    p.set_data(slot.view(p.sizes()));
    index_.emplace(p.unsafeGetTensorImpl(), entries_.size());
    entries_.push_back({p, offsets[k], p.numel()});
  }
  if (stage_ >= 2) {
    grad_shard_ = torch::zeros({chunk_}, options.requires_grad(false));
    marker_ = torch::empty({0}, options.requires_grad(false));
  }
  if (stage_ >= 3) shard_ = flat_.narrow(0, owned_begin(), chunk_).clone();
  entry_has_grad.assign(entries_.size(), 0);
  marked_.assign(entries_.size(), 0);
}

void ZeroLayout::mark_reduced(size_t entry) {
  auto& e = entries_[entry];
  if (e.numel == 0) return;  // nothing to reduce: no marker (an empty gradient is its real gradient)
  e.param.mutable_grad() = marker_;
  marked_[entry] = 1;
}

void ZeroLayout::refresh(size_t entry) {
  auto& e = entries_[entry];
  auto& grad = e.param.mutable_grad();
  const bool marker_there = grad.defined() && grad.unsafeGetTensorImpl() == marker_.unsafeGetTensorImpl();
  if (marked_[entry] && !marker_there) {
    // Anything but the marker itself: Module::zero_grad (none, or a zeroed detached copy), or a gradient the
    // program set by hand. Either way the reduced gradient is gone, as DDP's .grad() would be.
    marked_[entry] = 0;
    clear_reduced(entry);
  }
  if (!marker_there && is_marker_of(entry, grad)) grad = torch::Tensor();  // what zero_grad left of it
}

void ZeroLayout::settle(size_t entry) {
  refresh(entry);
  if (!marked_[entry]) return;
  marked_[entry] = 0;
  entries_[entry].param.mutable_grad() = torch::Tensor();
}

std::pair<int64_t, int64_t> ZeroLayout::owned_range(const Entry& entry) const {
  return {std::max(entry.offset, owned_begin()), std::min(entry.offset + entry.numel, owned_end())};
}

void ZeroLayout::clear_reduced(size_t entry) {
  entry_has_grad[entry] = 0;
  const auto [lo, hi] = owned_range(entries_[entry]);
  if (lo < hi && grad_shard_.defined()) grad_shard_.narrow(0, lo - owned_begin(), hi - lo).zero_();
}

at::DataPtr StoragePool::take(c10::StorageImpl& storage, size_t bytes) {
  {
    std::lock_guard lock(mutex_);
    auto& blocks = free_[bytes];
    if (!blocks.empty()) {
      auto block = std::move(blocks.back());
      blocks.pop_back();
      return block;
    }
  }
  return storage.allocator()->allocate(bytes);
}

void StoragePool::give(at::DataPtr block, size_t bytes) {
  std::lock_guard lock(mutex_);
  auto& blocks = free_[bytes];
  if (blocks.size() < keep_) blocks.push_back(std::move(block));
}

void ZeroLayout::unshard(Communicator& comm) {
  if (gathered_) return;
  torch::NoGradGuard no_grad;
  auto* storage = flat_.storage().unsafeGetStorageImpl();
  const size_t bytes = storage_bytes(flat_);
  storage->set_data_ptr_noswap(pool_ ? pool_->take(*storage, bytes) : storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
  gathered_ = true;
  check_views();  // a parameter whose storage was replaced (torch::load after prepare) no longer lies in it
  regather(comm);
}

void ZeroLayout::regather(Communicator& comm) {
  torch::NoGradGuard no_grad;
  flat_.narrow(0, owned_begin(), chunk_).copy_(shard_);
  comm.allgather_chunks_(flat_);
}

void ZeroLayout::reshard() {
  if (stage_ < 3 || !gathered_ || pins_ > 0) return;
  auto block = free_storage(flat_);
  if (pool_) pool_->give(std::move(block), storage_bytes(flat_));
  gathered_ = false;
}

void ZeroLayout::write_back() {
  if (stage_ < 3 || !gathered_) return;
  torch::NoGradGuard no_grad;
  shard_.copy_(flat_.narrow(0, owned_begin(), chunk_));
}

torch::Tensor ZeroLayout::owned_values(int64_t lo, int64_t hi) {
  return stage_ >= 3 ? shard_.narrow(0, lo - owned_begin(), hi - lo) : flat_.narrow(0, lo, hi - lo);
}

void ZeroLayout::check_views() const {
  if (!gathered_) return;  // stage 3 between uses: the parameters' storage is the buffer's, freed
  const auto* base = static_cast<const char*>(flat_.data_ptr());
  const auto element = static_cast<int64_t>(flat_.element_size());
  for (const auto& entry : entries_) {
    const auto& data = entry.param;
    if (entry.numel == 0 && data.numel() == 0) continue;  // no storage to compare (an empty tensor's is null)
    if (data.data_ptr() != base + entry.offset * element || data.numel() != entry.numel) {
      throw Error("ZeRO stage " + std::to_string(stage_) + ": a parameter (shape " + shape_text(data) +
                  ") no longer lives in the sharded buffer prepare() made: its storage was replaced after prepare "
                  "(torch::load into the module, module->to(...)?). Load weights before prepare, or with "
                  "spur::load_model / load_state, which copy into the parameters");
    }
  }
}

const ZeroLayout::Entry* ZeroLayout::find(const torch::Tensor& param) const {
  const auto it = index_.find(param.unsafeGetTensorImpl());
  return it == index_.end() ? nullptr : &entries_[it->second];
}

// --- stage 2: gradients ---------------------------------------------------------------------------------------

ZeroGradients::ZeroGradients(std::shared_ptr<ZeroLayout> layout, std::shared_ptr<Communicator> comm, bool find_unused)
    : layout_(std::move(layout)), comm_(std::move(comm)), find_unused_(find_unused) {}

std::shared_ptr<ZeroGradients> ZeroGradients::create(std::shared_ptr<ZeroLayout> layout,
                                                     std::shared_ptr<Communicator> comm, std::size_t bucket_bytes,
                                                     std::size_t first_bucket_bytes, bool find_unused) {
  auto self = std::make_shared<ZeroGradients>(std::move(layout), std::move(comm), find_unused);
  const auto& entries = self->layout_->entries();
  const auto element = static_cast<std::size_t>(self->layout_->flat().element_size());
  // Buckets in reverse order of the parameters, which is about the order backward produces their gradients (as
  // DDP's first cut); each bucket is one contiguous range of the flat buffer.
  self->bucket_of_.assign(entries.size(), 0);
  std::size_t bytes = 0;
  for (size_t k = entries.size(); k-- > 0;) {
    const std::size_t size = static_cast<std::size_t>(entries[k].numel) * element;
    const std::size_t cap = self->buckets_.size() == 1 ? first_bucket_bytes : bucket_bytes;
    if (self->buckets_.empty() || (!self->buckets_.back().entries.empty() && bytes + size > cap)) {
      self->buckets_.emplace_back();
      bytes = 0;
    }
    auto& bucket = self->buckets_.back();
    if (bucket.entries.empty()) bucket.end = entries[k].offset + entries[k].numel;
    bucket.begin = entries[k].offset;
    bucket.entries.push_back(k);
    bytes += size;
    self->bucket_of_[k] = self->buckets_.size() - 1;
  }
  for (auto& bucket : self->buckets_) bucket.pending = bucket.entries.size();
  self->seen_.assign(entries.size(), false);
  self->had_grad_.assign(entries.size(), 0);

  std::weak_ptr<ZeroGradients> weak = self;
  std::weak_ptr<ZeroLayout> weak_layout = self->layout_;
  for (size_t k = 0; k < entries.size(); ++k) {
    auto accumulator = torch::autograd::impl::grad_accumulator(entries[k].param);
    // Before the gradient is accumulated into .grad() (in every backward, synchronising or not): the marker goes,
    // and whether the program cleared the gradient since its last reduction is settled.
    accumulator->add_pre_hook(std::make_unique<SettleHook>(weak_layout, k));
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [weak, k](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          if (auto gradients = weak.lock()) gradients->ready(k);
          return outputs;
        }));
    self->accumulators_.push_back(std::make_shared<decltype(accumulator)>(std::move(accumulator)));
  }
  return self;
}

void ZeroGradients::reset() {
  if (started_) prepare_for_backward();  // forgets the unfinished backward (below)
  armed_ = false;
}

void ZeroGradients::prepare_for_backward() {
  if (started_) {
    // The last backward stopped part-way (it threw: out of memory, a lost peer) and its end-of-backward callback
    // never ran. Start clean, as c10d's Reducer does; what it had reduced into the shard is dropped with it.
    for (auto& bucket : buckets_) {
      bucket.work = {};
      bucket.buffer = torch::Tensor();
      bucket.pending = bucket.entries.size();
    }
    std::fill(seen_.begin(), seen_.end(), false);
    std::fill(had_grad_.begin(), had_grad_.end(), 0);
    for (size_t k = 0; k < layout_->entries().size(); ++k) {
      layout_->settle(k);
      layout_->clear_reduced(k);
    }
    next_ = completed_ = 0;
    finish_queued_ = false;
    started_ = false;
  }
  armed_ = true;
}

void ZeroGradients::ready(size_t entry) {
  if (!armed_ || seen_[entry]) return;
  seen_[entry] = true;
  started_ = true;
  if (!finish_queued_ && !owner_finishes_) {
    finish_queued_ = true;
    std::weak_ptr<ZeroGradients> weak = shared_from_this();
    torch::autograd::Engine::get_default_engine().queue_callback([weak] {
      if (auto gradients = weak.lock()) gradients->finish();
    });
  }
  --buckets_[bucket_of_[entry]].pending;
  // Buckets go out in a fixed order on every rank (collectives must match), as soon as they and all before them
  // are complete; at most two stay in flight, which bounds the full-size gradient buffers held.
  while (next_ < buckets_.size() && buckets_[next_].pending == 0) {
    launch(buckets_[next_++]);
    while (next_ - completed_ > 2) complete(buckets_[completed_++]);
  }
}

void ZeroGradients::launch(Bucket& bucket) {
  torch::NoGradGuard no_grad;
  auto& flat = layout_->flat();
  // What the program did to .grad() since the last reduction is settled first (the marker is no gradient).
  for (const size_t k : bucket.entries) layout_->settle(k);
  if (bucket.entries.size() == 1) {
    // A parameter alone in its bucket (one larger than the bucket size) is reduced in its own gradient: no copy,
    // and no second buffer of its size (on `wide`, a 64 MiB weight: 1.2x the step of stage 1 before this).
    const auto& entry = layout_->entries()[bucket.entries.front()];
    auto& grad = entry.param.mutable_grad();
    had_grad_[bucket.entries.front()] = grad.defined() ? 1 : 0;
    if (grad.defined() && grad.is_contiguous() && grad.scalar_type() == flat.scalar_type() &&
        grad.device() == flat.device()) {
      bucket.buffer = grad.view({-1});
      grad = torch::Tensor();  // the bucket holds it now; freed once this rank's slice is kept (complete())
    }
  }
  if (!bucket.buffer.defined()) {
    // Zeros where no parameter lies (the alignment gaps between them), so that nothing undefined is summed.
    int64_t covered = 0;
    for (const size_t k : bucket.entries) covered += layout_->entries()[k].numel;
    bucket.buffer = covered == bucket.end - bucket.begin ? torch::empty({bucket.end - bucket.begin}, flat.options())
                                                         : torch::zeros({bucket.end - bucket.begin}, flat.options());
    for (const size_t k : bucket.entries) {
      const auto& entry = layout_->entries()[k];
      auto slot = bucket.buffer.narrow(0, entry.offset - bucket.begin, entry.numel);
      auto& grad = entry.param.mutable_grad();
      had_grad_[k] = grad.defined() ? 1 : 0;
      if (grad.defined()) {
        slot.copy_(grad.reshape({-1}));
        grad = torch::Tensor();  // the full gradient is not kept: only this rank's slice, below
      } else {
        slot.zero_();  // no gradient in this backward (an unused parameter): zeros, as DDP reduces
      }
    }
  }
  if (bucket.buffer.numel() == 0) return;  // empty parameters only: nothing to reduce (alike on every rank)
  if (auto* sum = comm_->gradient_sum()) {
    // As the DDP path's shared-memory hook (one machine, or hierarchical): sum, then divide, on every rank alike.
    sum->allreduce(bucket.buffer);
    bucket.buffer.div_(comm_->size());
  } else {
    // As DDP's default hook: divide, then sum.
    bucket.buffer.div_(comm_->size());
    bucket.work = comm_->allreduce_async(bucket.buffer);
  }
}

void ZeroGradients::complete(Bucket& bucket) {
  torch::NoGradGuard no_grad;
  if (bucket.work) {
    comm_->wait(bucket.work, "all-reduce (ZeRO gradients)");
    bucket.work.reset();
  }
  const int64_t lo = std::max(bucket.begin, layout_->owned_begin());
  const int64_t hi = std::min(bucket.end, layout_->owned_end());
  if (lo < hi) {
    layout_->grad_shard()
        .narrow(0, lo - layout_->owned_begin(), hi - lo)
        .add_(bucket.buffer.narrow(0, lo - bucket.begin, hi - lo));
  }
  bucket.buffer = torch::Tensor();
}

void ZeroGradients::drain() {
  while (completed_ < next_) complete(buckets_[completed_++]);
}

void ZeroGradients::finish() {
  if (!armed_) return;  // finished already (stage 3 finishes every unit's at the end of backward, in one order)
  // Parameters that got no gradient in this backward are reduced as zeros (the ranks that used them need the
  // sum). With find_unused_parameters, one small all-reduce tells which parameters no rank used: those get no
  // gradient at all, so the optimizer skips them, as under DDP (its Reducer leaves them untouched).
  while (next_ < buckets_.size()) launch(buckets_[next_++]);
  while (completed_ < buckets_.size()) complete(buckets_[completed_++]);
  std::vector<char> used(had_grad_.size(), 1);
  if (find_unused_) {
    std::vector<float> local(had_grad_.begin(), had_grad_.end());
    auto counts = torch::tensor(local, torch::kFloat).to(comm_->device());
    comm_->allreduce_(counts);
    counts = counts.cpu().contiguous();
    const float* sums = counts.data_ptr<float>();
    for (size_t k = 0; k < used.size(); ++k) used[k] = sums[k] > 0 ? 1 : 0;
  }
  for (size_t k = 0; k < used.size(); ++k) {
    if (used[k]) layout_->entry_has_grad[k] = 1;
    // Every kept reduced gradient is marked, also one no rank added to now, so that a zero_grad is seen.
    if (layout_->entry_has_grad[k]) layout_->mark_reduced(k);
  }
  for (auto& bucket : buckets_) bucket.pending = bucket.entries.size();
  std::fill(seen_.begin(), seen_.end(), false);
  std::fill(had_grad_.begin(), had_grad_.end(), 0);
  next_ = completed_ = 0;
  armed_ = false;
  finish_queued_ = false;
  started_ = false;
}

// --- the optimizer's shard -----------------------------------------------------------------------------------

ZeroShards::ZeroShards(torch::optim::Optimizer& optimizer, const std::vector<std::shared_ptr<ZeroLayout>>& layouts,
                       std::shared_ptr<Communicator> comm)
    : comm_(std::move(comm)) {
  const int stage = layouts.empty() ? 1 : layouts.front()->stage();
  if (dynamic_cast<torch::optim::LBFGS*>(&optimizer)) {
    throw Error("ZeRO stage " + std::to_string(stage) +
                ": LBFGS is not an element-wise optimizer (its line search and history span every parameter), so "
                "it cannot step a shard; use it without ZeRO");
  }
  if (!optimizer.state().empty()) {
    throw Error("ZeRO stage " + std::to_string(stage) +
                ": prepare the optimizer before it has state (its state is sharded as it is created); to resume, "
                "load_state() after prepare");
  }
  std::unordered_set<ZeroLayout*> seen_layouts;
  for (size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    auto& group = optimizer.param_groups()[g];
    std::vector<torch::Tensor> shards;
    for (size_t j = 0; j < group.params().size(); ++j) {
      const auto& param = group.params()[j];
      ZeroLayout* layout = nullptr;
      const ZeroLayout::Entry* entry = nullptr;
      for (const auto& candidate : layouts) {
        if ((entry = candidate->find(param))) {
          layout = candidate.get();
          break;
        }
      }
      if (!entry) {
        throw Error("ZeRO stage " + std::to_string(stage) + ": the optimizer's parameter " + std::to_string(j) +
                    " of group " + std::to_string(g) + " (shape " + shape_text(param) +
                    ") is not a trained parameter of a prepared model: prepare the model first (before the "
                    "optimizer, or listed before it in the same prepare call), with the parameter trainable");
      }
      params_.push_back(param);
      entries_.emplace_back(layout, static_cast<size_t>(entry - layout->entries().data()));
      if (seen_layouts.insert(layout).second) layouts_.push_back(layout);
      const auto [lo, hi] = layout->owned_range(*entry);
      if (lo >= hi) continue;  // none of this parameter is this rank's
      auto shard = layout->owned_values(lo, hi);
      shards.push_back(shard);
      slices_.push_back({shard, param, layout, entries_.back().second, lo, hi});
    }
    group.params() = std::move(shards);
  }
}

void ZeroShards::attach_gradients() {
  // Always from what holds the gradient now: the model's zero_grad may have replaced it since the last step.
  // Attached views share storage with it, so a second attach after unscaling or clipping sees their result.
  for (auto& slice : slices_) {
    auto& grad = slice.shard.mutable_grad();
    grad = torch::Tensor();
    auto* layout = slice.layout;
    if (layout->stage() >= 2) {
      layout->refresh(slice.entry);
      if (!layout->entry_has_grad[slice.entry]) continue;
      grad = layout->grad_shard().narrow(0, slice.begin - layout->owned_begin(), slice.end - slice.begin);
    } else {
      auto& full = slice.param.mutable_grad();
      if (!full.defined()) continue;
      if (!full.is_contiguous()) full = full.contiguous();  // so that the slice is a view, not a copy
      const int64_t offset = layout->entries()[slice.entry].offset;
      grad = full.view({-1}).narrow(0, slice.begin - offset, slice.end - slice.begin);
    }
  }
}

void ZeroShards::detach_gradients() {
  for (auto& slice : slices_) slice.shard.mutable_grad() = torch::Tensor();
}

void ZeroShards::all_gather() {
  torch::NoGradGuard no_grad;
  bool sharded_parameters = false;
  for (auto* layout : layouts_) {
    if (layout->stage() >= 3) {
      sharded_parameters = true;
      // Stage 3 gathers each unit when it is next used; one gathered now (the steps between a forward and its
      // backward, or inside summon_full_params) is gathered again from the stepped shards.
      if (layout->gathered()) layout->regather(*comm_);
      continue;
    }
    layout->check_views();
    comm_->allgather_chunks_(layout->flat());
  }
  // Stage 3 exists to keep a rank's memory down: what the step freed goes back to the system (glibc keeps up to
  // 1 GiB of it otherwise, as Spur asks for speed, and the step's same-size blocks, split and merged between its
  // other allocations, leave a heap that grows step after step). About 1% of a step; the next step faults in
  // only what it uses.
  if (sharded_parameters) malloc_trim(0);
}

void ZeroShards::zero_grad(bool set_to_none) {
  for (auto& param : params_) clear_gradient(param, set_to_none);
  detach_gradients();
  // Only this optimizer's ranges of the reduced gradients: another optimizer over the same model keeps its own.
  for (const auto& [layout, entry] : entries_) {
    if (layout->stage() < 2) continue;
    layout->refresh(entry);
    layout->clear_reduced(entry);
  }
}

}  // namespace spur::detail
