// SPDX-License-Identifier: Apache-2.0
// The engine's differential test (issue 32): a generator of training set-ups, each trained through Spur on the ranks
// of this run and, on every rank, through the same computation in one process with LibTorch alone (every rank's
// micro-batches, no Spur, no process group), comparing every parameter after the last step.
//
//   test_worker differential [--seed S] [--cases N] [--case_seed C | --case NAME] [--override key=value,...]
//
// Run it on W ranks (the multi-process test's RankGroup, spur launch or torchrun). Case i's set-up comes from its
// own seed (derived from S and i, or C alone), the world size and the transport (shared memory, or Gloo with
// SPUR_SHM_ALLREDUCE=0), so a failure names everything needed to run it again alone. What a set-up varies: model
// shapes (a tied layer applied twice, a zero-element parameter, a frozen layer, a constant buffer, an output the
// loss ignores), SGD / SGD with momentum and weight decay / Adam / AdamW, one optimizer over all, two over parts, or
// one over the head only with the backbone still trained, StepLR schedulers, 1-4 accumulation micro-steps with
// sync_each_batch on or off, clipping by norm (2 or inf) or by value, fp32 / bf16 / fp16 with the loss scaler
// (initial scales that overflow, short growth intervals), ZeRO 0/1/2/3, the model's zero_grad or the optimizers', to
// none or in place, an exception thrown after a forward and caught outside the accumulate() scope, and (stages 0
// and 1) DDP's fp16 or bf16 compression hook (torch's arithmetic: cast, divided, summed in the half type).
//
// The reference follows what DistributedDataParallel defines: each rank's gradients accumulate locally (as
// AccumulateGrad does) until a synchronising backward replaces them on every rank by their average; the optimizer
// steps on that average; fp16 follows torch.amp.GradScaler (unscale, skip on inf/nan, update once per step, a
// float32 scale that never grows into inf); schedulers step world-size times after their own optimizer stepped
// (Accelerate's rule). Where Spur's arithmetic is the reference's (shared-memory sums in rank order, then the
// division; torch's own clipping) the parameters must be equal bit for bit; where it is not (Gloo's ring order,
// ZeRO's norm summed in double over shards, stage 2 keeping a reduced gradient across steps) the tolerance is said
// per case. Exit status 0 when every case passed on this rank; each failure is a "FAIL case ..." line with the
// command that runs it again.
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/schedulers/step_lr.h>
#include <torch/optim/sgd.h>

#include <spur/spur.h>

namespace spur_differential {
namespace {

#define SPUR_DIFF_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// CPU autocast runs float16 from LibTorch 2.2 on.
constexpr bool kCpuHalf = SPUR_DIFF_TORCH_AT_LEAST(2, 2);

// --- set-ups -----------------------------------------------------------------------------------------------------

struct Random {
  uint64_t state;
  uint64_t next() {  // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
  bool chance(int one_in) { return below(one_in) == 0; }
};

enum class Opt { sgd, momentum, adam, adamw };
enum class Clip { none, norm, value };
enum class Zeroing { optimizers, model };
// DDP's communication hook (stages 0 and 1): none, or torch's fp16 / bf16 compression.
enum class Hook { no, fp16, bf16 };
const char* name(Hook h) { return h == Hook::fp16 ? "fp16" : h == Hook::bf16 ? "bf16" : "no"; }

const char* name(Opt o) {
  switch (o) {
    case Opt::sgd:
      return "sgd";
    case Opt::momentum:
      return "sgd-momentum";
    case Opt::adam:
      return "adam";
    case Opt::adamw:
      break;
  }
  return "adamw";
}

struct Setup {
  uint64_t seed = 0;
  int world = 1;
  bool shm = true;  // gradients summed through shared memory (else Gloo)
  // model
  int64_t in = 4, hidden = 6, out = 2;
  bool tied = false, empty = false, frozen = false, buffer = false, unused_head = false;
  // optimizers: one over everything, two (fc2 and the rest), or one over the head only (backbone still trained)
  enum class Split { one, two, head_only } split = Split::one;
  Opt opt[2] = {Opt::sgd, Opt::sgd};
  bool schedulers = false;
  int64_t step_size = 1;
  // loop
  int steps = 2, accumulate = 1, rows = 2;
  bool sync_each_batch = false;
  Clip clip = Clip::none;
  double clip_to = 0, norm_type = 2;
  spur::Precision precision = spur::Precision::no;
  double init_scale = 65536;
  int64_t growth_interval = 2;
  int zero = 0;
  Zeroing zeroing = Zeroing::optimizers;
  bool set_to_none = true;
  Hook hook = Hook::no;
  int throw_micro = -1;      // global micro-step at which...
  uint32_t throw_ranks = 0;  // ...these ranks throw after their forward

  bool throws(int micro, int rank) const { return micro == throw_micro && ((throw_ranks >> rank) & 1u); }
  int optimizers() const { return split == Split::two ? 2 : 1; }

  std::string describe() const {
    std::ostringstream text;
    const char* precision_name = precision == spur::Precision::fp16   ? "fp16"
                                 : precision == spur::Precision::bf16 ? "bf16"
                                                                      : "fp32";
    text << "world " << world << (shm ? " shm" : " gloo") << ", zero " << zero << ", " << precision_name;
    if (precision == spur::Precision::fp16)
      text << " (scale " << init_scale << ", growth every " << growth_interval << ")";
    text << ", " << steps << " steps x " << accumulate << " micro-steps of " << rows << " rows";
    if (sync_each_batch) text << ", sync_each_batch";
    text << ", model " << in << "-" << hidden << "-" << out;
    if (tied) text << " tied";
    if (empty) text << " empty-param";
    if (frozen) text << " frozen";
    if (buffer) text << " buffer";
    if (unused_head) text << " unused-output";
    text << ", "
         << (split == Split::two         ? "two optimizers "
             : split == Split::head_only ? "head-only "
                                         : "")
         << name(opt[0]);
    if (split == Split::two) text << "+" << name(opt[1]);
    if (schedulers) text << ", StepLR(" << step_size << ")";
    if (clip == Clip::norm) text << ", clip norm " << clip_to << " (p=" << norm_type << ")";
    if (clip == Clip::value) text << ", clip value " << clip_to;
    text << ", " << (zeroing == Zeroing::model ? "model->zero_grad" : "optimizer.zero_grad")
         << (set_to_none ? "(none)" : "(in place)");
    if (hook != Hook::no) text << ", " << name(hook) << " comm hook";
    if (throw_micro >= 0) text << ", throws at micro-step " << throw_micro << " on ranks mask " << throw_ranks;
    return text.str();
  }
};

Setup generate(uint64_t seed, int world, bool shm) {
  Random random{seed};
  Setup s;
  s.seed = seed;
  s.world = world;
  s.shm = shm;
  s.in = 3 + random.below(5);
  s.hidden = 2 + random.below(9);
  s.out = 1 + random.below(4);
  s.tied = random.chance(2);
  s.empty = random.chance(4);
  s.frozen = random.chance(3);
  s.buffer = random.chance(3);
  s.unused_head = random.chance(4);
  const int split = random.below(6);
  s.split = split < 3 ? Setup::Split::one : split < 5 ? Setup::Split::two : Setup::Split::head_only;
  s.opt[0] = static_cast<Opt>(random.below(4));
  s.opt[1] = static_cast<Opt>(random.below(4));
  s.schedulers = random.chance(2);
  s.step_size = 1 + random.below(2);
  s.steps = 2 + random.below(3);
  s.accumulate = 1 + random.below(4);
  s.rows = 1 + random.below(3);
  s.sync_each_batch = s.accumulate > 1 && random.chance(3);
  const int clip = random.below(4);
  s.clip = clip < 2 ? Clip::none : clip == 2 ? Clip::norm : Clip::value;
  if (s.clip == Clip::norm) {
    s.clip_to = 0.02 * (1 + random.below(20));
    s.norm_type = random.chance(4) ? INFINITY : 2.0;
  } else if (s.clip == Clip::value) {
    s.clip_to = 0.005 * (1 + random.below(10));
  }
  const int precision = random.below(4);
  s.precision = precision < 2 ? spur::Precision::no : precision == 2 ? spur::Precision::bf16 : spur::Precision::fp16;
  // Gloo's sums are not the reference's to the bit: a skipped fp16 step could turn on the last bit there.
  if (s.precision == spur::Precision::fp16 && (!kCpuHalf || !shm)) s.precision = spur::Precision::bf16;
  static constexpr double kScales[] = {256.0, 65536.0, 16777216.0, 1099511627776.0};  // 2^8 .. 2^40
  s.init_scale = kScales[random.below(4)];
  s.growth_interval = 1 + random.below(3);
  s.zero = random.below(4);
  s.zeroing = random.chance(2) ? Zeroing::model : Zeroing::optimizers;
  s.set_to_none = random.chance(2);
  if (random.chance(4)) {
    const int micro_steps = s.steps * s.accumulate;
    // Where the run can survive it: on a local micro-step any ranks may throw (no collective is pending); on a
    // synchronising one (every micro-step of sync_each_batch, every one with no accumulation) all of them. Under
    // stage 3 every forward and backward gathers (a collective), so there too all of them (as under FSDP).
    std::vector<int> local;
    for (int m = 0; m < micro_steps; ++m) {
      if ((m + 1) % s.accumulate != 0) local.push_back(m);
    }
    const uint32_t all = (1u << world) - 1;
    if (!local.empty() && !s.sync_each_batch && s.zero < 3) {
      s.throw_micro = local[static_cast<size_t>(random.below(static_cast<int>(local.size())))];
      s.throw_ranks = 1u + static_cast<uint32_t>(random.below(static_cast<int>(all)));
    } else {
      s.throw_micro = random.below(micro_steps);
      s.throw_ranks = all;
    }
  }
  // Drawn last, so that the draws above stay what they were before hooks existed.
  if (world > 1 && s.zero <= 1) {
    const int hook = random.below(4);
    s.hook = hook == 2 ? Hook::fp16 : hook == 3 ? Hook::bf16 : Hook::no;
    // Gloo sums bfloat16 from LibTorch 2.2 (Spur refuses the bf16 hook over Gloo before).
    if (s.hook == Hook::bf16 && !shm && !SPUR_DIFF_TORCH_AT_LEAST(2, 2)) s.hook = Hook::fp16;
  }
  return s;
}

// --- the model -----------------------------------------------------------------------------------------------------

struct DiffNet : torch::nn::Module {
  DiffNet(const Setup& s, uint64_t init_seed) : tied(s.tied) {
    torch::manual_seed(init_seed);
    if (s.frozen) {
      frozen = register_module("frozen", torch::nn::Linear(s.in, s.in));
      for (auto& p : frozen->parameters()) p.set_requires_grad(false);
    }
    fc1 = register_module("fc1", torch::nn::Linear(s.in, s.hidden));
    fc2 = register_module("fc2", torch::nn::Linear(s.hidden, s.hidden));
    if (s.tied) register_module("fc2_tied", fc2);
    head = register_module("head", torch::nn::Linear(s.hidden, s.out));
    if (s.unused_head) spare = register_module("spare", torch::nn::Linear(s.hidden, 2));
    if (s.empty) empty = register_parameter("empty", torch::zeros({0, s.hidden}));
    if (s.buffer) offset = register_buffer("offset", torch::rand({s.in}) * 0.1);
  }
  std::tuple<torch::Tensor, torch::Tensor> forward(torch::Tensor x) {
    if (offset.defined()) x = x + offset;
    if (frozen) x = torch::tanh(frozen(x));
    auto h = torch::tanh(fc1(x));
    h = torch::tanh(fc2(h));
    if (tied) h = torch::tanh(fc2(h));
    if (empty.defined()) h = torch::cat({h, torch::matmul(h, empty.t())}, 1);
    return {head(h), spare ? spare(h) : torch::Tensor()};
  }
  bool tied;
  torch::nn::Linear frozen{nullptr}, fc1{nullptr}, fc2{nullptr}, head{nullptr}, spare{nullptr};
  torch::Tensor empty, offset;
};

// Each trained tensor once, in the order of named_parameters, with its name.
std::vector<std::pair<std::string, torch::Tensor>> trained(DiffNet& net) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : net.named_parameters(true)) {
    bool seen = false;
    for (const auto& [n, t] : out) seen = seen || t.is_same(item.value());
    if (!seen && item.value().requires_grad()) out.emplace_back(item.key(), item.value());
  }
  return out;
}

// The optimizers' parameter lists, by name, so that Spur's model and the reference split alike.
std::vector<std::vector<torch::Tensor>> groups(const Setup& s, DiffNet& net) {
  std::vector<std::vector<torch::Tensor>> lists(static_cast<size_t>(s.optimizers()));
  for (const auto& [n, t] : trained(net)) {
    const bool is_fc2 = n.rfind("fc2", 0) == 0 || n == "empty";
    const bool is_head = n.rfind("head", 0) == 0 || n.rfind("spare", 0) == 0;
    if (s.split == Setup::Split::two) {
      lists[is_fc2 ? 0 : 1].push_back(t);
    } else if (s.split == Setup::Split::head_only) {
      if (is_head) lists[0].push_back(t);
    } else {
      lists[0].push_back(t);
    }
  }
  return lists;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(Opt o, const std::vector<torch::Tensor>& params) {
  switch (o) {
    case Opt::sgd:
      return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0.1));
    case Opt::momentum:
      return std::make_unique<torch::optim::SGD>(params,
                                                 torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(0.01));
    case Opt::adam:
      return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(0.01));
    case Opt::adamw:
      break;
  }
  return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(0.01).weight_decay(0.1));
}

// Every rank's data, the same everywhere: inputs[micro][rank] and targets[micro][rank].
struct Data {
  std::vector<std::vector<torch::Tensor>> x, y;
};
Data make_data(const Setup& s) {
  torch::manual_seed(s.seed ^ 0x5eedda7aull);
  Data d;
  const int micro_steps = s.steps * s.accumulate;
  for (int m = 0; m < micro_steps; ++m) {
    d.x.emplace_back();
    d.y.emplace_back();
    for (int r = 0; r < s.world; ++r) {
      d.x.back().push_back(torch::randn({s.rows, s.in}));
      d.y.back().push_back(torch::randn({s.rows, s.out}));
    }
  }
  return d;
}

struct Injected : std::runtime_error {
  Injected() : std::runtime_error("injected failure (as an out-of-memory error would be)") {}
};

// --- Spur ---------------------------------------------------------------------------------------------------------

std::vector<std::pair<std::string, torch::Tensor>> train_with_spur(const Setup& s, const Data& data, int rank) {
  auto net = std::make_shared<DiffNet>(s, rank == 0 ? s.seed : s.seed + 7919 * static_cast<uint64_t>(rank));
  std::vector<std::unique_ptr<torch::optim::Optimizer>> base;
  const auto lists = groups(s, *net);
  for (size_t j = 0; j < lists.size(); ++j) base.push_back(make_optimizer(s.opt[j], lists[j]));
  std::vector<std::unique_ptr<torch::optim::StepLR>> schedules;
  if (s.schedulers) {
    for (auto& o : base) schedules.push_back(std::make_unique<torch::optim::StepLR>(*o, s.step_size, 0.5));
  }

  spur::AcceleratorOptions options;
  options.cpu = true;
  options.gradient_accumulation_steps = s.accumulate;
  options.sync_each_batch = s.sync_each_batch;
  options.mixed_precision = s.precision;
  options.zero_stage = s.zero;
  options.find_unused_parameters = s.unused_head;
  options.scaler.init_scale = s.init_scale;
  options.scaler.growth_interval = s.growth_interval;
  options.comm_hook = name(s.hook);  // the set-up's, whatever the launcher's SPUR_DDP_COMM_HOOK says
  spur::Accelerator accelerator(options);
  auto model = accelerator.prepare(net);
  std::vector<spur::PreparedOptimizer> optimizers;
  optimizers.reserve(base.size());
  for (auto& o : base) optimizers.push_back(accelerator.prepare(*o));
  std::vector<spur::PreparedScheduler> schedulers;
  schedulers.reserve(schedules.size());
  for (auto& sch : schedules) schedulers.push_back(accelerator.prepare(*sch));

  int micro = 0;
  for (int step = 0; step < s.steps; ++step) {
    for (int i = 0; i < s.accumulate; ++i, ++micro) {
      try {
        auto scope = accelerator.accumulate(model);
        auto [out, extra] = model(data.x[micro][rank]);
        if (s.throws(micro, rank)) throw Injected();
        accelerator.backward(torch::nn::functional::mse_loss(out, data.y[micro][rank]));
        if (accelerator.sync_gradients()) {
          if (s.clip == Clip::norm) accelerator.clip_grad_norm_(net->parameters(), s.clip_to, s.norm_type);
          if (s.clip == Clip::value) accelerator.clip_grad_value_(net->parameters(), s.clip_to);
        }
        for (size_t j = 0; j < optimizers.size(); ++j) {
          optimizers[j].step();
          if (!schedulers.empty()) schedulers[j].step();
        }
        if (s.zeroing == Zeroing::model) {
          if (accelerator.sync_gradients()) net->zero_grad(s.set_to_none);
        } else {
          for (auto& o : optimizers) o.zero_grad(s.set_to_none);
        }
      } catch (const Injected&) {
        // Recovered: the run goes on with the next micro-batch, as after an out-of-memory error.
      }
    }
  }
  // Stage 3 keeps 1/N of the parameters between uses: gathered (a no-op otherwise), and copied while whole.
  auto full = accelerator.summon_full_params(/*writeback=*/false);
  auto result = trained(*net);
  for (auto& item : result) item.second = item.second.detach().clone();
  return result;
}

// --- the reference: LibTorch alone ------------------------------------------------------------------------------

class RefAutocast {
 public:
  explicit RefAutocast(spur::Precision precision) : on_(precision != spur::Precision::no) {
    if (!on_) return;
    const auto dtype = precision == spur::Precision::fp16 ? at::kHalf : at::kBFloat16;
#if SPUR_DIFF_TORCH_AT_LEAST(2, 4)
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, dtype);
#else
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(dtype);
#endif
    at::autocast::increment_nesting();
  }
  ~RefAutocast() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if SPUR_DIFF_TORCH_AT_LEAST(2, 4)
    at::autocast::set_autocast_enabled(at::kCPU, false);
#else
    at::autocast::set_cpu_enabled(false);
#endif
  }
  RefAutocast(const RefAutocast&) = delete;
  RefAutocast& operator=(const RefAutocast&) = delete;

 private:
  bool on_;
};

// torch.amp.GradScaler's rule, written out here (not Spur's): a float32 scale, one update per step.
struct RefScaler {
  float scale;
  int64_t interval;
  int64_t tracker = 0;
  bool pending = false;
  std::vector<std::optional<bool>> found;  // per optimizer, this step
  void update() {
    if (!pending) return;
    pending = false;
    bool any = false, inf = false;
    for (const auto& f : found) {
      if (!f) continue;
      any = true;
      inf = inf || *f;
    }
    found.assign(found.size(), std::nullopt);
    if (!any) return;
    if (inf) {
      scale = static_cast<float>(static_cast<double>(scale) * 0.5);
      tracker = 0;
    } else if (++tracker == interval) {
      const auto grown = static_cast<float>(static_cast<double>(scale) * 2.0);
      if (std::isfinite(grown)) scale = grown;
      tracker = 0;
    }
  }
};

std::vector<std::pair<std::string, torch::Tensor>> train_reference(const Setup& s, const Data& data) {
  auto net = std::make_shared<DiffNet>(s, s.seed);
  const auto params = trained(*net);
  const auto lists = groups(s, *net);
  std::vector<std::unique_ptr<torch::optim::Optimizer>> optimizers;
  for (size_t j = 0; j < lists.size(); ++j) optimizers.push_back(make_optimizer(s.opt[j], lists[j]));
  std::vector<std::unique_ptr<torch::optim::StepLR>> schedules;
  if (s.schedulers) {
    for (auto& o : optimizers) schedules.push_back(std::make_unique<torch::optim::StepLR>(*o, s.step_size, 0.5));
  }
  auto owner = [&](const torch::Tensor& p) -> int {
    for (size_t j = 0; j < lists.size(); ++j) {
      for (const auto& q : lists[j]) {
        if (q.is_same(p)) return static_cast<int>(j);
      }
    }
    return -1;
  };
  const bool fp16 = s.precision == spur::Precision::fp16;
  RefScaler scaler{static_cast<float>(s.init_scale), s.growth_interval};
  scaler.found.resize(optimizers.size());
  const bool reduces = s.world > 1;

  // Each rank's .grad() of every trained parameter, as DDP keeps them.
  std::vector<std::vector<torch::Tensor>> grads(static_cast<size_t>(s.world),
                                                std::vector<torch::Tensor>(params.size()));
  std::vector<torch::Tensor> leaves;
  leaves.reserve(params.size());
  for (const auto& [n, p] : params) leaves.push_back(p);

  int accumulation_step = 0;
  int micro = 0;
  for (int step = 0; step < s.steps; ++step) {
    for (int i = 0; i < s.accumulate; ++i, ++micro) {
      accumulation_step += 1;
      const bool sync = accumulation_step % s.accumulate == 0;
      bool any_backward = false;
      for (int r = 0; r < s.world; ++r) {
        if (s.throws(micro, r)) continue;
        any_backward = true;
        scaler.update();  // the first backward after a step moves the scale
        torch::Tensor out;
        {
          RefAutocast autocast(s.precision);
          out = std::get<0>(net->forward(data.x[micro][r]));
        }
        if (out.scalar_type() != torch::kFloat) out = out.to(torch::kFloat);
        auto loss = torch::nn::functional::mse_loss(out, data.y[micro][r]);
        if (s.accumulate > 1) loss = loss / static_cast<double>(s.accumulate);
        if (fp16) loss = loss * static_cast<double>(scaler.scale);
        const auto g = torch::autograd::grad({loss}, leaves, {}, false, false, /*allow_unused=*/true);
        for (size_t k = 0; k < leaves.size(); ++k) {
          if (!g[k].defined()) continue;
          auto& acc = grads[static_cast<size_t>(r)][k];
          acc = acc.defined() ? acc + g[k] : g[k].clone();
        }
      }
      if (!any_backward) continue;  // every rank threw: no backward, no step
      if (reduces && (sync || s.sync_each_batch)) {
        for (size_t k = 0; k < leaves.size(); ++k) {
          bool defined = false;
          for (int r = 0; r < s.world; ++r) defined = defined || grads[static_cast<size_t>(r)][k].defined();
          if (!defined) continue;  // no rank used it (find_unused_parameters): it keeps no gradient
          auto part = [&](int r) {
            const auto& g = grads[static_cast<size_t>(r)][k];
            return g.defined() ? g : torch::zeros_like(leaves[k]);
          };
          torch::Tensor reduced;
          if (s.hook != Hook::no) {  // torch's compress hook: cast, divided there, summed there, cast back
            const auto type = s.hook == Hook::fp16 ? torch::kHalf : torch::kBFloat16;
            auto compressed = [&](int r) { return part(r).to(type).div_(s.world); };
            reduced = compressed(0) + compressed(1);
            for (int r = 2; r < s.world; ++r) reduced = reduced + compressed(r);
            reduced = reduced.to(torch::kFloat);
          } else if (s.shm) {  // shared memory: the sum in rank order, then the division
            reduced = part(0) + part(1);
            for (int r = 2; r < s.world; ++r) reduced = reduced + part(r);
            reduced = reduced / s.world;
          } else {  // Gloo (DDP's default hook): each divided first, summed in the ring's order
            reduced = part(0) / s.world;
            for (int r = 1; r < s.world; ++r) reduced = reduced + part(r) / s.world;
          }
          for (int r = 0; r < s.world; ++r) grads[static_cast<size_t>(r)][k] = reduced.clone();
        }
      }
      if (!sync || s.throws(micro, 0)) continue;
      // The optimizer step, on rank 0's (the shared) gradients.
      for (size_t k = 0; k < leaves.size(); ++k)
        leaves[k].mutable_grad() = grads[0][k].defined() ? grads[0][k].clone() : torch::Tensor();
      std::vector<bool> unscaled(optimizers.size(), false);
      auto unscale = [&](size_t j) {
        if (!fp16 || unscaled[j]) return;
        unscaled[j] = true;
        const auto inverse = static_cast<float>(1.0 / static_cast<double>(scaler.scale));
        std::optional<bool> inf;
        for (auto& p : lists[j]) {
          auto& g = p.mutable_grad();
          if (!g.defined()) continue;
          inf = inf.value_or(false) || !g.isfinite().all().item<bool>();
          g.mul_(inverse);
        }
        scaler.found[j] = inf;
      };
      if (s.clip != Clip::none) {
        for (size_t j = 0; j < optimizers.size(); ++j) unscale(j);
        if (s.clip == Clip::norm) {
          // LibTorch's infinity norm fails on an empty gradient (max() of nothing); it adds nothing to any norm.
          std::vector<torch::Tensor> counted;
          for (const auto& p : net->parameters()) {
            if (p.numel() > 0) counted.push_back(p);
          }
          torch::nn::utils::clip_grad_norm_(counted, s.clip_to, s.norm_type);
        }
        if (s.clip == Clip::value) torch::nn::utils::clip_grad_value_(net->parameters(), s.clip_to);
      }
      for (size_t j = 0; j < optimizers.size(); ++j) {
        bool skipped = false;
        if (fp16) {
          unscale(j);
          skipped = scaler.found[j].value_or(false);
        }
        if (!skipped) optimizers[j]->step();
        if (!skipped && !schedules.empty()) {
          for (int t = 0; t < s.world; ++t) schedules[j]->step();
        }
      }
      if (fp16) scaler.pending = true;
      // What the gradients are after the step: every rank's as the step left them, then the zero_grad.
      for (size_t k = 0; k < leaves.size(); ++k) {
        auto now = leaves[k].grad();
        const bool cleared = s.zeroing == Zeroing::model || owner(leaves[k]) >= 0;
        if (cleared) now = s.set_to_none || !now.defined() ? torch::Tensor() : torch::zeros_like(now);
        for (int r = 0; r < s.world; ++r) grads[static_cast<size_t>(r)][k] = now.defined() ? now.clone() : now;
        leaves[k].mutable_grad() = torch::Tensor();
      }
    }
  }
  return trained(*net);
}

// --- comparing --------------------------------------------------------------------------------------------------

// The largest difference Spur may show against the reference for this set-up; 0: bit for bit.
double tolerance(const Setup& s) {
  double allowed = 0;
  const bool half = s.precision != spur::Precision::no;
  if (s.world > 1) {
    // Gloo: divided first, summed in ring order (a compress hook's half sums: as coarse as half precision)
    if (!s.shm) allowed = std::max(allowed, half || s.hook != Hook::no ? 2e-3 : 2e-5);
    if (s.zero > 0 && s.clip == Clip::norm) allowed = std::max(allowed, half ? 2e-3 : 2e-5);  // norm in double
    // Stages 2 and 3 keep a reduced gradient that nothing cleared (a head-only optimizer leaves the backbone's) and
    // adds the next reduction to it, where DDP reduces the sum: the same value, not the same rounding. So does
    // sync_each_batch, whose every micro-step reduces what the last one kept.
    if (s.zero >= 2 && ((s.split == Setup::Split::head_only && s.zeroing == Zeroing::optimizers) ||
                        (s.sync_each_batch && s.accumulate > 1))) {
      allowed = std::max(allowed, half ? 2e-3 : 2e-5);
    }
  }
  return allowed * s.steps;
}

double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes()) return INFINITY;
  if (a.numel() == 0) return 0;
  const auto nan_a = a.isnan(), nan_b = b.isnan();
  if (!nan_a.equal(nan_b)) return INFINITY;
  const auto diff = (a.masked_fill(nan_a, 0) - b.masked_fill(nan_b, 0)).abs();
  return diff.max().item<double>();
}

struct Outcome {
  bool ok = true;
  double worst = 0;
  std::string detail;
};

Outcome run_case(const Setup& s, int rank) {
  Outcome outcome;
  const auto data = make_data(s);
  std::vector<std::pair<std::string, torch::Tensor>> mine;
  try {
    mine = train_with_spur(s, data, rank);
  } catch (const std::exception& e) {
    outcome.ok = false;
    outcome.detail = std::string("Spur threw: ") + e.what();
    return outcome;
  }
  const auto theirs = train_reference(s, data);
  const double allowed = tolerance(s);
  if (mine.size() != theirs.size()) {
    outcome.ok = false;
    outcome.detail = "parameter counts differ";
    return outcome;
  }
  for (size_t k = 0; k < mine.size(); ++k) {
    const double d = max_difference(mine[k].second.detach(), theirs[k].second.detach());
    outcome.worst = std::max(outcome.worst, d);
    if (!(d <= allowed)) {
      outcome.ok = false;
      std::ostringstream text;
      text << mine[k].first << " differs from the reference by " << d << " (allowed " << allowed << ")";
      outcome.detail = text.str();
      break;
    }
  }
  return outcome;
}

// `--override key=value,...` changes a drawn set-up, to narrow a failure down by hand: zero, precision (fp32,
// bf16, fp16), clip (none, norm, value), accumulate, sync_each_batch, zeroing (model, optimizers), set_to_none,
// throw (off), opt (sgd, sgd-momentum, adam, adamw: both optimizers), split (one, two, head_only), hook (no, fp16,
// bf16); shm is not one (it is the run's: SPUR_SHM_ALLREDUCE).
void apply_overrides(Setup& s, const std::string& overrides) {
  std::stringstream list(overrides);
  for (std::string item; std::getline(list, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw std::runtime_error("--override wants key=value, not " + item);
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "zero") {
      s.zero = std::stoi(value);
    } else if (key == "precision") {
      s.precision = value == "fp16"   ? spur::Precision::fp16
                    : value == "bf16" ? spur::Precision::bf16
                                      : spur::Precision::no;
    } else if (key == "clip") {
      s.clip = value == "norm" ? Clip::norm : value == "value" ? Clip::value : Clip::none;
      if (s.clip_to == 0) s.clip_to = 0.05;
    } else if (key == "accumulate") {
      s.accumulate = std::stoi(value);
    } else if (key == "sync_each_batch") {
      s.sync_each_batch = value == "1";
    } else if (key == "zeroing") {
      s.zeroing = value == "model" ? Zeroing::model : Zeroing::optimizers;
    } else if (key == "set_to_none") {
      s.set_to_none = value == "1";
    } else if (key == "throw") {
      s.throw_micro = -1;
    } else if (key == "opt") {
      for (auto o : {Opt::sgd, Opt::momentum, Opt::adam, Opt::adamw}) {
        if (value == name(o)) s.opt[0] = s.opt[1] = o;
      }
    } else if (key == "hook") {
      s.hook = value == "fp16" ? Hook::fp16 : value == "bf16" ? Hook::bf16 : Hook::no;
    } else if (key == "split") {
      s.split = value == "two" ? Setup::Split::two : value == "head_only" ? Setup::Split::head_only : Setup::Split::one;
    } else {
      throw std::runtime_error("--override: no key " + key);
    }
  }
}

// Set-ups that each caught a defect (issue 32), kept as they were found: named, not drawn.
std::optional<Setup> regression(const std::string& name, int world, bool shm) {
  Setup s;
  s.seed = 32;
  s.world = world;
  s.shm = shm;
  s.steps = 4;
  s.opt[0] = Opt::momentum;
  if (name == "zero1-model-zero-grad" || name == "zero2-model-zero-grad" || name == "zero2-model-zero-grad-in-place") {
    // 1: LibTorch's Module::zero_grad under ZeRO: stage 1 kept stepping on the first step's gradient, stage 2
    // summed every step's.
    s.zero = name[4] == '1' ? 1 : 2;
    s.zeroing = Zeroing::model;
    s.set_to_none = name.find("in-place") == std::string::npos;
  } else if (name == "exception-in-accumulate" || name == "exception-in-accumulate-zero2") {
    // 2: an error inside accumulate()'s local micro-step left gradient synchronisation off for good.
    s.zero = name.back() == '2' ? 2 : 0;
    s.accumulate = 2;
    s.throw_micro = 0;
    s.throw_ranks = (1u << world) - 1;
  } else if (name == "zero1-clip-head-only" || name == "zero2-clip-head-only") {
    // 3: ZeRO's clipping left out trained parameters that no prepared optimizer holds.
    s.zero = name[4] == '1' ? 1 : 2;
    s.split = Setup::Split::head_only;
    s.zeroing = Zeroing::model;
    s.clip = Clip::norm;
    s.clip_to = 0.05;
  } else if (name == "zero1-empty-parameter" || name == "zero2-empty-parameter") {
    // 4: a zero-element parameter failed every ZeRO step ("storage was replaced").
    s.zero = name[4] == '1' ? 1 : 2;
    s.empty = true;
    s.opt[0] = Opt::adamw;
  } else if (name == "fp16-hook" || name == "bf16-hook" || name == "zero1-bf16-hook") {
    // Issue 38 (not a defect): torch's compression hooks on DDP's buckets, with accumulation and clipping.
    s.hook = name.find("fp16") != std::string::npos ? Hook::fp16 : Hook::bf16;
    s.zero = name.rfind("zero1", 0) == 0 ? 1 : 0;
    s.opt[0] = Opt::adamw;
    s.accumulate = 2;
    s.clip = Clip::norm;
    s.clip_to = 0.05;
  } else {
    return std::nullopt;
  }
  return s;
}

uint64_t case_seed(uint64_t seed, int index) {
  Random random{seed * 1000003ull + static_cast<uint64_t>(index)};
  return random.next();
}

}  // namespace

int run(int argc, char** argv) {
  uint64_t seed = 1;
  int cases = 50;
  std::optional<uint64_t> only;
  std::string named, overrides;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--seed") {
      seed = std::stoull(value);
    } else if (key == "--cases") {
      cases = std::stoi(value);
    } else if (key == "--case_seed") {
      only = std::stoull(value);
    } else if (key == "--case") {
      named = value;
    } else if (key == "--override") {
      overrides = value;
    } else {
      std::cerr << "test_worker differential: unknown option " << key << "\n";
      return 2;
    }
  }
  // The process group, once for every case (each case makes an Accelerator of its own over it).
  int rank = 0, world = 1;
  std::string transport;
  {
    spur::AcceleratorOptions options;
    options.cpu = true;
    spur::Accelerator probe(options);
    rank = static_cast<int>(probe.process_index());
    world = static_cast<int>(probe.num_processes());
    transport = probe.gradient_transport();
  }
  if (world > 31) {
    std::cerr << "test_worker differential: at most 31 ranks\n";
    return 2;
  }
  // The reference sums in rank order where every rank shares one segment; across machines (Gloo's ring, or the
  // hierarchical sum: each machine's, then the machines') the order differs and the tolerance is Gloo's.
  const bool shm = world == 1 || transport == "shared memory";
  std::optional<Setup> pinned;
  if (!named.empty()) {
    pinned = regression(named, world, shm);
    if (!pinned) {
      std::cerr << "test_worker differential: no regression case named " << named << "\n";
      return 2;
    }
  }
  const int count = only || pinned ? 1 : cases;
  int failed = 0, exact = 0;
  std::map<std::string, int> covered;
  for (int index = 0; index < count; ++index) {
    const uint64_t this_seed = pinned ? pinned->seed : only ? *only : case_seed(seed, index);
    Setup s = pinned ? *pinned : generate(this_seed, world, shm);
    if (!overrides.empty()) apply_overrides(s, overrides);
    if (rank == 0) std::cout << "case " << index << " seed " << this_seed << ": " << s.describe() << std::endl;
    const auto outcome = run_case(s, rank);
    if (outcome.ok && outcome.worst == 0) ++exact;
    covered[std::string("zero ") + std::to_string(s.zero)] += 1;
    covered[s.precision == spur::Precision::fp16   ? "fp16"
            : s.precision == spur::Precision::bf16 ? "bf16"
                                                   : "fp32"] += 1;
    if (s.throw_micro >= 0) covered["exception"] += 1;
    if (s.zeroing == Zeroing::model) covered["model->zero_grad"] += 1;
    if (s.split == Setup::Split::two) covered["two optimizers"] += 1;
    if (s.split == Setup::Split::head_only) covered["head-only optimizer"] += 1;
    if (s.accumulate > 1) covered["accumulation"] += 1;
    if (s.clip != Clip::none) covered["clipping"] += 1;
    if (s.empty) covered["empty parameter"] += 1;
    if (s.unused_head) covered["unused output"] += 1;
    if (s.hook != Hook::no) covered[std::string(name(s.hook)) + " hook"] += 1;
    if (!outcome.ok) {
      ++failed;
      std::cout << "FAIL case seed " << this_seed << " on rank " << rank << " (" << s.describe()
                << "): " << outcome.detail << "\n  again: " << (transport == "gloo" ? "SPUR_SHM_ALLREDUCE=0 " : "")
                << "spur launch --num_processes " << world << " test_worker differential "
                << (pinned ? "--case " + named : "--case_seed " + std::to_string(this_seed))
                << (transport == "shared memory + gloo" ? " (across the same machines: the sum is hierarchical)" : "")
                << std::endl;
    }
  }
  if (rank == 0) {
    std::cout << "differential: " << count << " cases on " << world << " rank(s), "
              << (world == 1 ? "one process" : transport) << ": " << (count - failed) << " passed (" << exact
              << " bit for bit), " << failed << " failed; covered:";
    for (const auto& [what, n] : covered) std::cout << " " << what << "=" << n;
    std::cout << std::endl;
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace spur_differential
