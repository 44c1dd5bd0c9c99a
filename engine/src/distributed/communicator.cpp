// SPDX-License-Identifier: Apache-2.0
// Process-group creation (Gloo for CPU tensors, NCCL for CUDA ones) and blocking collectives whose failures
// name the operation and the rank, instead of c10d's bare socket errors.
#include "distributed/communicator.h"

#include <algorithm>
#include <iterator>
#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <spur/error.h>

#include "compat/torch_compat.h"
#include <spur/core/progress_file.h>
#include "cuda/cuda_support.h"

namespace spur::detail {
namespace {

std::mutex join_mutex;
// Joined once, kept for the life of the process, as torch's default process group: Accelerators come and go
// (one per phase of a program, say), re-forming the group each time would cost a rendezvous and race on the
// store's port. Never destroyed: at exit the OS closes the sockets, with no destructor-order hazards.
std::shared_ptr<Communicator>& joined() {
  static auto* communicator = new std::shared_ptr<Communicator>();
  return *communicator;
}

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

// One Gloo device per connection each pair of ranks keeps. Collectives alternate between the devices' contexts,
// so two buckets in flight use two TCP connections instead of queueing on one.
std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_devices(const ProcessState& state, int channels) {
  std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
  if (const char* ifnames = std::getenv("GLOO_SOCKET_IFNAME"); ifnames && *ifnames) {
    // As torch: one device per listed interface.
    std::string list(ifnames);
    for (size_t start = 0; start <= list.size();) {
      const size_t end = std::min(list.find(',', start), list.size());
      if (end > start)
        devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(list.substr(start, end - start)));
      start = end + 1;
    }
    return devices;
  }
  // Ranks that meet on a loopback address all run on this machine: keep their traffic on loopback too.
  auto device = is_loopback(state.master_addr) ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                               : c10d::ProcessGroupGloo::createDefaultDevice();
  devices.assign(static_cast<size_t>(std::max(1, channels)), device);
  return devices;
}

}  // namespace

std::shared_ptr<Communicator> Communicator::current() {
  std::lock_guard<std::mutex> lock(join_mutex);
  return joined();
}

std::shared_ptr<Communicator> Communicator::join(const Config& config) {
  std::lock_guard<std::mutex> lock(join_mutex);
  if (auto existing = joined()) {
    if (existing->device().type() != config.device.type()) {
      throw Error("this process already joined the run's process group on " + existing->device().str() +
                  "; an Accelerator on " + config.device.str() + " cannot share it (use the same cpu option)");
    }
    existing->mark_present();  // an Accelerator before this one may have marked this rank as left
    return existing;
  }

  const auto& state = config.state;
  progress::Scope joining("rendezvous");
  auto store = rendezvous(state, config.rendezvous_timeout);
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(config.collective_timeout);
  try {
    if (config.device.is_cuda()) {
      const auto* cuda = cuda_support();
      if (!cuda) {
        throw Error("a CUDA run across processes needs NCCL, from Spur's CUDA support, which is " +
                    cuda_support_status());
      }
      group = cuda->make_nccl_group(store, state.rank, state.world_size, timeout);
    } else {
      group = compat::make_gloo_group(store, state.rank, state.world_size, gloo_devices(state, config.gloo_channels),
                                      timeout);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(state.rank) + " could not connect to the other ranks after rendezvous at " +
                state.master_addr + ":" + std::to_string(state.master_port) + ": " + e.what() +
                " (on several machines, set GLOO_SOCKET_IFNAME to the interface the machines share)");
  }
  auto communicator = std::make_shared<Communicator>(config, store, group);
  if (!config.device.is_cuda()) communicator->join_shared_memory(config, store, timeout);
  joined() = std::move(communicator);
  return joined();
}

void Communicator::join_shared_memory(const Config& config, const c10::intrusive_ptr<c10d::Store>& store,
                                      std::chrono::milliseconds timeout) {
  // What each rank was told: the settings may differ between ranks (over SSH a variable exported on one machine
  // reaches that machine's ranks only), and the run takes a path only if every rank allows it, so that all take the
  // same one. Every rank says its own before any rank decides anything.
  auto allowed = [](bool option, const char* variable) {
    const char* value = std::getenv(variable);
    return option && !(value && std::string(value) == "0");
  };
  const bool shm_wanted = allowed(config.shared_memory_allreduce, "SPUR_SHM_ALLREDUCE");
  const bool hier_wanted = allowed(config.hierarchical_allreduce, "SPUR_HIERARCHICAL_ALLREDUCE");
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const std::string prefix = std::string("spur/hierarchy/") + (restart ? restart : "0") + "/";
  store->set(prefix + "wants/" + std::to_string(rank_),
             std::vector<uint8_t>{static_cast<uint8_t>(shm_wanted ? '1' : '0'),
                                  static_cast<uint8_t>(hier_wanted ? '1' : '0')});
  int shm_off = -1, hier_off = -1;  // the first rank that turned each off
  for (int r = 0; r < size_; ++r) {
    const auto wants = store->get(prefix + "wants/" + std::to_string(r));
    if (shm_off < 0 && (wants.size() != 2 || wants[0] != '1')) shm_off = r;
    if (hier_off < 0 && (wants.size() != 2 || wants[1] != '1')) hier_off = r;
  }
  auto where = [&](int r) { return r == rank_ ? std::string() : " on rank " + std::to_string(r); };
  if (shm_off >= 0) {
    shm_note_ = "off (shared_memory_allreduce = false or SPUR_SHM_ALLREDUCE=0" + where(shm_off) + ")";
    return;
  }
  // Mapping a segment is part of joining: its wait is the rendezvous's, not a collective's (30 minutes).
  const auto attach =
      std::min(std::chrono::duration_cast<std::chrono::milliseconds>(config.rendezvous_timeout), timeout);
  const auto machine = ShmAllreduce::machines(*store, rank_, size_);
  const int machines = *std::max_element(machine.begin(), machine.end()) + 1;
  std::vector<int> members;
  int index = 0;
  for (int r = 0; r < size_; ++r) {
    if (machine[static_cast<size_t>(r)] != machine[static_cast<size_t>(rank_)]) continue;
    if (r == rank_) index = static_cast<int>(members.size());
    members.push_back(r);
  }
  if (machines == 1) {
    shm_ = ShmAllreduce::create(*store, members, index, attach, timeout, &shm_note_);
    return;
  }
  shm_note_ = "the ranks are on several machines";
  std::vector<int> per_machine(static_cast<size_t>(machines), 0);
  for (const int m : machine) per_machine[static_cast<size_t>(m)] += 1;
  if (*std::max_element(per_machine.begin(), per_machine.end()) < 2) return;  // one rank per machine: Gloo's ring
  if (hier_off >= 0) {
    shm_note_ += " (hierarchical all-reduce off: hierarchical_allreduce = false or SPUR_HIERARCHICAL_ALLREDUCE=0" +
                 where(hier_off) + ")";
    return;
  }
  // Each machine's segment, then the verdict of every rank through the store: all go hierarchical or none does
  // (a machine whose segment failed would otherwise sum over Gloo while the others wait in shared memory).
  std::unique_ptr<ShmAllreduce> local;
  std::string why_not;
  bool ok = true;
  if (members.size() > 1) {
    local = ShmAllreduce::create(*store, members, index, attach, timeout, &why_not);
    ok = local != nullptr;
  }
  store->set(prefix + "ok/" + std::to_string(rank_), std::vector<uint8_t>{static_cast<uint8_t>(ok ? '1' : '0')});
  for (int r = 0; r < size_; ++r) {
    if (store->get(prefix + "ok/" + std::to_string(r)) != std::vector<uint8_t>{'1'}) {
      shm_note_ += " (no hierarchical all-reduce: rank " + std::to_string(r) +
                   " could not map its machine's shared memory" + (r == rank_ ? ": " + why_not : std::string()) + ")";
      return;
    }
  }
  c10::intrusive_ptr<c10d::ProcessGroup> leaders;
  if (index == 0) {
    // The machines' leaders (each machine's lowest rank) form a Gloo group of their own, numbered by machine.
    auto leader_store = c10::make_intrusive<c10d::PrefixStore>(prefix + "leaders", store);
    leaders = compat::make_gloo_group(leader_store, machine[static_cast<size_t>(rank_)], machines,
                                      gloo_devices(config.state, config.gloo_channels), timeout);
  }
  hier_ = std::make_unique<HierarchicalAllreduce>(std::move(local), std::move(leaders), size_);
}

Communicator::Communicator(const Config& config, c10::intrusive_ptr<c10d::Store> store,
                           c10::intrusive_ptr<c10d::ProcessGroup> group)
    : rank_(static_cast<int>(config.state.rank)),
      size_(static_cast<int>(config.state.world_size)),
      device_(config.device),
      endpoint_(config.state.master_addr + ":" + std::to_string(config.state.master_port)),
      backend_(config.device.is_cuda() ? "nccl" : "gloo"),
      store_(std::move(store)),
      group_(std::move(group)) {}

std::string Communicator::describe() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " (" + backend_ + ", store " + endpoint_ +
         ")";
}

bool Communicator::is_communication_error(const std::exception& error) {
  const std::string what = error.what();
  static constexpr const char* kMarks[] = {"gloo",   "Gloo", "NCCL",      "Connection", "connection", "Socket",
                                           "socket", "peer", "Timed out", "timed out",  "Timeout"};
  return std::any_of(std::begin(kMarks), std::end(kMarks),
                     [&](const char* mark) { return what.find(mark) != std::string::npos; });
}

std::string left_early_explanation() {
  return "left: its program ended normally (or its Accelerator went) while this rank was still in a collective. "
         "Every rank must run the same collectives: when one rank leaves the training loop on its own (`if (loss < "
         "x) break;` decided per rank), the others wait for it. Stop together: where the condition holds call "
         "accelerator.set_trigger(), and on every rank `if (accelerator.check_trigger()) break;`";
}

namespace {
std::string left_key(int rank) { return "spur/left/" + std::to_string(rank); }
}  // namespace

void Communicator::mark_left() {
  // After a failed collective the program may still end normally (it caught the error): it did not leave on
  // purpose, and the store's host may be out of reach (a cut link), where a set would wait for the store's timeout.
  if (failed_) return;
  if (shm_) shm_->mark_left();
  if (hier_) hier_->mark_left();
  const auto timeout = store_->getTimeout();
  try {
    store_->setTimeout(std::chrono::seconds(5));  // (for this mark only: a later Accelerator may join again)
    store_->set(left_key(rank_), std::vector<uint8_t>{'1'});
  } catch (const std::exception&) {
    // The store's host (rank 0) is gone already: nobody is left to tell.
  }
  store_->setTimeout(timeout);
}

void Communicator::mark_present() {
  failed_ = false;
  if (shm_) shm_->mark_present();
  if (hier_) hier_->mark_present();
  try {
    store_->deleteKey(left_key(rank_));
  } catch (const std::exception&) {
    // No store to tell: nothing was marked there either.
  }
}

void Communicator::fail(const std::string& operation, const std::exception& cause) const {
  failed_ = true;
  if (dynamic_cast<const Error*>(&cause)) throw Error(cause.what());
  std::string what = cause.what();
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&cause)) what = c10_error->what_without_backtrace();
  // A rank that left on purpose said so in the store (while its host, rank 0, still runs). Asked on a thread of
  // its own for at most 2 s: with the link to the store's host cut, the store's reads block without a timeout.
  auto answer = std::make_shared<std::promise<int>>();
  auto left = answer->get_future();
  std::thread([store = store_, size = size_, rank = rank_, answer] {
    int found = -1;
    try {
      for (int r = 0; r < size && found < 0; ++r) {
        if (r != rank && store->check({left_key(r)})) found = r;
      }
    } catch (const std::exception&) {
      found = -1;
    }
    answer->set_value(found);
  }).detach();
  if (left.wait_for(std::chrono::seconds(2)) == std::future_status::ready) {
    if (const int r = left.get(); r >= 0) {
      throw Error(operation + " failed on " + describe() + ": rank " + std::to_string(r) + " " +
                  left_early_explanation() + " (" + what + ")");
    }
  }
  throw Error(operation + " failed on " + describe() + ": " + what +
              " (another rank probably stopped, and its own output names the cause; or it left the training loop "
              "early: ranks must stop together, see accelerator.check_trigger())");
}

void Communicator::wait(const WorkPtr& work, const char* operation) {
  progress::Scope waiting(operation);  // what a hang report names (spur launch --hang_timeout)
  try {
    work->wait();
  } catch (const std::exception& e) {
    fail(operation, e);
  }
}

void Communicator::allreduce_(torch::Tensor& tensor) {
  std::vector<torch::Tensor> tensors{tensor};
  wait(group_->allreduce(tensors), "all-reduce");
}

std::vector<torch::Tensor> Communicator::allgather(const torch::Tensor& tensor) {
  std::vector<torch::Tensor> input{tensor.contiguous()};
  std::vector<std::vector<torch::Tensor>> output(1);
  output[0].reserve(size_);
  for (int i = 0; i < size_; ++i) output[0].push_back(torch::empty_like(input[0]));
  wait(group_->allgather(output, input), "all-gather");
  return output[0];
}

void Communicator::allgather_chunks_(torch::Tensor& flat) {
  const int64_t chunk = flat.numel() / size_;
  const auto element = flat.element_size();
  if (shm_ && flat.is_cpu() && flat.is_contiguous() && (element == 2 || element == 4 || element == 8)) {
    progress::Scope waiting("all-gather (ZeRO parameters)");
    // Through shared memory, as a sum of the bit patterns: every rank but the owner contributes zeros to a chunk,
    // so the integer sum is the owner's bits exactly (signed zeros and NaNs included), with no buffer beyond the
    // segment (Gloo's all-gather allocates a second whole buffer and copies it out).
    auto bits = flat.view(element == 2 ? torch::kShort : element == 4 ? torch::kInt : torch::kLong);
    bits.narrow(0, 0, rank_ * chunk).zero_();
    bits.narrow(0, (rank_ + 1) * chunk, (size_ - rank_ - 1) * chunk).zero_();
    shm_->allreduce(bits);
    return;
  }
  // The input is a copy: Gloo writes the outputs while it may still read the input.
  std::vector<torch::Tensor> input{flat.narrow(0, rank_ * chunk, chunk).clone()};
  std::vector<std::vector<torch::Tensor>> output(1);
  output[0].reserve(size_);
  for (int i = 0; i < size_; ++i) output[0].push_back(flat.narrow(0, i * chunk, chunk));
  wait(group_->allgather(output, input), "all-gather (ZeRO parameters)");
}

Communicator::WorkPtr Communicator::allreduce_async(torch::Tensor& tensor) {
  std::vector<torch::Tensor> tensors{tensor};
  try {
    return group_->allreduce(tensors);
  } catch (const std::exception& e) {
    fail("all-reduce", e);
  }
}

void Communicator::broadcast_(torch::Tensor& tensor, int root) {
  std::vector<torch::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  wait(group_->broadcast(tensors, options), "broadcast");
}

void Communicator::barrier() {
  c10d::BarrierOptions options;
  // NCCL's barrier is an all-reduce on a device: without one named it guesses from the rank, which is the wrong
  // GPU (and a hang) when a node runs fewer processes than it has GPUs, or CUDA_VISIBLE_DEVICES reorders them.
  if (device_.is_cuda() && device_.has_index()) options.device_ids = {static_cast<int64_t>(device_.index())};
  wait(group_->barrier(options), "barrier");
}

}  // namespace spur::detail
