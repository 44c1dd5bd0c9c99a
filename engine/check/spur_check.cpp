// SPDX-License-Identifier: Apache-2.0
// spur-check: the rank program `spur test` launches. Each rank joins the run, then checks what a training
// program needs: rendezvous, all-reduce, gather (uneven), broadcast, and one synchronised training step, naming
// the step that went wrong. Exits 0 only when every check agrees on every rank. `spur-check --env` prints the
// LibTorch, CUDA, NCCL and BLAS this process loaded, for `spur env`.
#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>

#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <unistd.h>

#include <spur/spur.h>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? name : "?";
}

void expect(bool ok, const std::string& what, const std::string& detail) {
  if (!ok) throw spur::Error("check failed: " + what + ": " + detail);
}

std::string fixed(double value, int digits = 2) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc > 1 && std::string(argv[1]) == "--env") {
    // For `spur env` (which links no LibTorch): what this process loaded, as "key: value" lines.
    for (const auto& [key, value] : spur::runtime_report()) std::cout << key << ": " << value << "\n";
    return 0;
  }
  const auto start = Clock::now();
  spur::Accelerator accelerator;
  const double joined_ms = ms_since(start);
  const int64_t rank = accelerator.process_index();
  const int64_t world = accelerator.num_processes();
  const std::string me = "rank " + std::to_string(rank);
  const auto& state = accelerator.state();
  // Every rank says where it runs: the first thing to look at when ranks land on the wrong machine.
  std::cout << "rank " << rank << " of " << world << " (local " << state.local_rank << " of " << state.local_world_size
            << ", machine " << state.node_rank << ") on " << host_name() << ", device " << accelerator.device().str()
            << ", joined in " << fixed(joined_ms, 0) << " ms" << std::endl;

  const auto device = accelerator.device();
  const auto floats = torch::TensorOptions().dtype(torch::kFloat).device(device);

  // all-reduce: the sum of rank+1 over all ranks is world*(world+1)/2.
  auto t0 = Clock::now();
  const auto sum = accelerator.reduce(torch::full({}, static_cast<double>(rank + 1), floats)).item<double>();
  const double allreduce_ms = ms_since(t0);
  expect(sum == static_cast<double>(world * (world + 1)) / 2, "all-reduce (sum of rank+1)",
         me + " got " + fixed(sum, 1) + ", expected " + std::to_string(world * (world + 1) / 2));

  // gather with an uneven first dimension: rank r contributes r+1 copies of r.
  auto gathered = accelerator.gather(torch::full({rank + 1}, static_cast<double>(rank), floats)).cpu();
  int64_t at = 0;
  for (int64_t r = 0; r < world; ++r) {
    for (int64_t k = 0; k <= r; ++k, ++at) {
      expect(at < gathered.size(0) && gathered[at].item<double>() == static_cast<double>(r), "gather (uneven)",
             me + " got a wrong element at index " + std::to_string(at));
    }
  }
  expect(at == gathered.size(0), "gather (uneven)", me + " got " + std::to_string(gathered.size(0)) + " elements");

  // broadcast from the last rank, so a wrong "from" cannot pass by accident.
  const auto from = world - 1;
  const auto value =
      accelerator.broadcast(torch::full({3}, rank == from ? 42.0 : -1.0, floats), from).sum().item<double>();
  expect(value == 126.0, "broadcast", me + " got sum " + fixed(value, 1) + ", expected 126");

  // One training step on rank-specific data: after gradient synchronisation every rank holds the same weights.
  accelerator.set_seed(7);
  auto linear = torch::nn::Linear(8, 2);
  torch::optim::SGD sgd(linear->parameters(), torch::optim::SGDOptions(0.1));
  auto [model, optimizer] = accelerator.prepare(linear, sgd);
  torch::manual_seed(100 + static_cast<uint64_t>(rank));
  auto input = torch::randn({4, 8}).to(device);
  auto target = torch::randint(0, 2, {4}, torch::kLong).to(device);
  t0 = Clock::now();
  optimizer.zero_grad();
  {
    auto autocast = accelerator.autocast();
    auto loss = torch::nn::functional::cross_entropy(model(input), target);
    accelerator.backward(loss);
  }
  optimizer.step();
  const double step_ms = ms_since(t0);
  auto weights = accelerator.unwrap_model(model)->weight.detach().to(torch::kFloat).flatten();
  auto all = accelerator.gather(weights.unsqueeze(0)).cpu();
  for (int64_t r = 1; r < world; ++r) {
    expect(torch::equal(all[r], all[0]), "gradient synchronisation",
           "rank " + std::to_string(r) + "'s weights differ from rank 0's after one step");
  }

  accelerator.wait_for_everyone();
  const auto precision = spur::to_string(accelerator.mixed_precision());
  std::cout << "rank " << rank << ": all-reduce " << fixed(allreduce_ms)
            << " ms, gather, broadcast and a training step (" << (precision == "no" ? "fp32" : precision) << ", "
            << fixed(step_ms) << " ms) agree" << std::endl;
  if (accelerator.is_main_process()) {
    std::cout << "spur-check: OK: " << world << " process(es) over " << (world / state.local_world_size)
              << " machine(s)";
    if (accelerator.distributed()) {
      std::cout << " rendezvoused at " << state.master_addr << ":" << state.master_port;
    } else {
      std::cout << " (not distributed: one process needs no rendezvous)";
    }
    std::cout << "; all-reduce, gather, broadcast and gradient sync (via " << accelerator.gradient_transport()
              << ") agree" << std::endl;
  }
  return EXIT_SUCCESS;
} catch (const std::exception& e) {
  std::cerr << "spur-check: " << e.what() << std::endl;
  return EXIT_FAILURE;
}
