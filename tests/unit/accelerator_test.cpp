// SPDX-License-Identifier: Apache-2.0
// The Accelerator in one process: defaults, options over the launcher's variables, a Spur step bit-identical to
// a hand-written LibTorch step, accumulation bookkeeping, clipping, printing, collectives as identities.
#include <QTest>

#include <torch/version.h>

#include <malloc.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <vector>

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/optim/schedulers/step_lr.h>

#include <spur/spur.h>

#include "test_main.h"

namespace {

torch::nn::Sequential make_net() {
  torch::manual_seed(11);
  return torch::nn::Sequential(torch::nn::Linear(6, 12), torch::nn::ReLU(), torch::nn::Linear(12, 3));
}

torch::Tensor flat(torch::nn::Module& module) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : module.parameters()) parts.push_back(p.detach().reshape({-1}));
  return torch::cat(parts);
}

// Sets an environment variable for the scope's lifetime.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name(name) { qputenv(name, value); }
  ~ScopedEnv() { qunsetenv(name); }
  const char* name;
};

}  // namespace

class AcceleratorTest : public QObject {
  Q_OBJECT

 private slots:
  // cpu_memory_cache (default on): a block of a step's size comes from the heap, not its own mmap, and freeing it
  // keeps it in the process for the next step instead of handing it back to the OS.
  void freed_step_memory_stays_in_the_process() {
    if (qEnvironmentVariableIsSet("SPUR_CPU_MEMORY_CACHE") || qEnvironmentVariableIsSet("GLIBC_TUNABLES")) {
      QSKIP("the environment chooses the allocator's settings");
    }
#ifdef __SANITIZE_ADDRESS__
    QSKIP("AddressSanitizer replaces glibc's malloc, whose settings this checks");
#endif
    spur::Accelerator accelerator;
    // 24 blocks of 16 MiB, untouched (no page is committed). glibc's own settings would map each one by itself or
    // trim the freed heap back to at most 64 MiB; kept, the heap holds all 384 MiB free for the next step.
    const auto before = mallinfo2();
    std::vector<void*> blocks;
    for (int i = 0; i < 24; ++i) {
      blocks.push_back(std::malloc(16 << 20));
      static_cast<volatile char*>(blocks.back())[0] = 1;
    }
    const auto held = mallinfo2();
    for (void* block : blocks) std::free(block);
    const auto after = mallinfo2();
    QCOMPARE(held.hblks, before.hblks);  // none was an mmap of its own
    QVERIFY2(after.fordblks >= before.fordblks + (300u << 20),
             qPrintable(QString("free heap %1 -> %2 bytes").arg(before.fordblks).arg(after.fordblks)));
  }

  void single_process_defaults() {
    spur::Accelerator accelerator;
    QCOMPARE(accelerator.num_processes(), int64_t(1));
    QCOMPARE(accelerator.process_index(), int64_t(0));
    QCOMPARE(accelerator.local_process_index(), int64_t(0));
    QVERIFY(accelerator.is_main_process());
    QVERIFY(accelerator.is_local_main_process());
    QVERIFY(!accelerator.distributed());
    QCOMPARE(accelerator.mixed_precision(), spur::Precision::no);
    QCOMPARE(accelerator.gradient_accumulation_steps(), int64_t(1));
    QVERIFY(accelerator.sync_gradients());
    QVERIFY(accelerator.scaler() == nullptr);
    accelerator.wait_for_everyone();
    auto scope = accelerator.main_process_first();
  }

  void options_win_over_the_environment() {
    ScopedEnv steps("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4");
    ScopedEnv precision("SPUR_MIXED_PRECISION", "bf16");
    spur::Accelerator from_env;
    QCOMPARE(from_env.gradient_accumulation_steps(), int64_t(4));
    QCOMPARE(from_env.mixed_precision(), spur::Precision::bf16);
    spur::Accelerator from_code({.mixed_precision = spur::Precision::no, .gradient_accumulation_steps = 2});
    QCOMPARE(from_code.gradient_accumulation_steps(), int64_t(2));
    QCOMPARE(from_code.mixed_precision(), spur::Precision::no);
  }

  void bad_accumulation_is_an_error() {
    QVERIFY_THROWS_EXCEPTION(spur::Error, spur::Accelerator({.gradient_accumulation_steps = 0}));
  }

  void prepare_keeps_the_users_objects() {
    spur::Accelerator accelerator;
    auto net = make_net();
    torch::optim::SGD sgd(net->parameters(), 0.1);
    auto [model, optimizer] = accelerator.prepare(net, sgd);
    QCOMPARE(accelerator.unwrap_model(model).get(), net.get());
    QCOMPARE(&optimizer.optimizer(), static_cast<torch::optim::Optimizer*>(&sgd));
    QVERIFY(model->parameters()[0].device() == accelerator.device());
    // A shared_ptr module and a single object prepare too.
    auto shared = std::make_shared<torch::nn::LinearImpl>(2, 2);
    auto prepared = accelerator.prepare(shared);
    QCOMPARE(prepared.ptr().get(), shared.get());
  }

  void step_is_bit_identical_to_plain_libtorch() {
    auto x = torch::randn({16, 6});
    auto y = torch::randint(0, 3, {16});

    auto plain = make_net();
    torch::optim::Adam plain_adam(plain->parameters(), 1e-2);
    for (int i = 0; i < 10; ++i) {
      plain_adam.zero_grad();
      torch::nn::functional::cross_entropy(plain->forward(x), y).backward();
      plain_adam.step();
    }

    spur::Accelerator accelerator;
    auto net = make_net();
    torch::optim::Adam adam(net->parameters(), 1e-2);
    auto [model, optimizer] = accelerator.prepare(net, adam);
    for (int i = 0; i < 10; ++i) {
      optimizer.zero_grad();
      accelerator.backward(torch::nn::functional::cross_entropy(model(x), y));
      optimizer.step();
    }
    QVERIFY(flat(*net).equal(flat(*plain)));
  }

  void accumulate_syncs_every_nth_micro_step() {
    spur::Accelerator accelerator({.gradient_accumulation_steps = 3});
    auto net = make_net();
    torch::optim::SGD sgd(net->parameters(), 0.1);
    auto [model, optimizer] = accelerator.prepare(net, sgd);
    QString pattern;
    for (int i = 0; i < 7; ++i) {
      auto scope = accelerator.accumulate(model);
      pattern += accelerator.sync_gradients() ? 'S' : '-';
    }
    QCOMPARE(pattern, QString("--S--S-"));
    // The end of the data forces a sync.
    accelerator.set_end_of_dataloader(true);
    auto scope = accelerator.accumulate(model);
    QVERIFY(accelerator.sync_gradients());
  }

  // Issue 15: a prepared scheduler steps with the optimizer (every 2nd micro-step here) unless
  // step_scheduler_with_optimizer is off, when it steps on every call as the plain scheduler does.
  void step_scheduler_with_optimizer_data() {
    QTest::addColumn<bool>("with_optimizer");
    QTest::addColumn<double>("lr");
    // LibTorch's StepLR decays from its second step on: 2 steps halve the rate once, 4 steps three times.
    QTest::newRow("with the optimizer (default)") << true << 0.1 * 0.5;
    QTest::newRow("every call") << false << 0.1 * 0.125;
  }

  void step_scheduler_with_optimizer() {
    QFETCH(bool, with_optimizer);
    QFETCH(double, lr);
    spur::Accelerator accelerator({.gradient_accumulation_steps = 2, .step_scheduler_with_optimizer = with_optimizer});
    auto net = make_net();
    torch::optim::SGD sgd(net->parameters(), 0.1);
    torch::optim::StepLR schedule(sgd, 1, 0.5);
    auto [model, optimizer, scheduler] = accelerator.prepare(net, sgd, schedule);
    for (int i = 0; i < 4; ++i) {
      auto scope = accelerator.accumulate(model);
      accelerator.backward(model(torch::ones({2, 6})).sum());
      optimizer.step();
      scheduler.step();
      optimizer.zero_grad();
    }
    QCOMPARE(sgd.param_groups()[0].options().get_lr(), lr);
  }

  // Issue 19, defect 3: the README's old loop (zero_grad before backward) wiped, on the synchronising
  // micro-step, what the earlier micro-steps accumulated. It is now an error that names the fix; zero_grad after
  // backward (discarding a bad step on purpose) and before any backward stay allowed.
  void zero_grad_before_backward_on_the_sync_step_is_an_error() {
    spur::Accelerator accelerator({.gradient_accumulation_steps = 2});
    auto net = make_net();
    torch::optim::SGD sgd(net->parameters(), 0.1);
    auto [model, optimizer] = accelerator.prepare(net, sgd);
    optimizer.zero_grad();  // before anything: fine
    {
      auto scope = accelerator.accumulate(model);
      optimizer.zero_grad();  // a micro-step: a no-op
      accelerator.backward(model(torch::ones({1, 6})).sum());
    }
    {
      auto scope = accelerator.accumulate(model);  // synchronises
      QString error;
      try {
        optimizer.zero_grad();
      } catch (const spur::Error& e) {
        error = e.what();
      }
      QVERIFY2(error.contains("would discard the gradients of the 1 micro-step(s)") &&
                   error.contains("backward, step, zero_grad"),
               qPrintable(error));
      accelerator.backward(model(torch::ones({1, 6})).sum());
      optimizer.zero_grad();  // after backward: a deliberate discard, allowed
    }
  }

  void backward_divides_by_accumulation_steps() {
    spur::Accelerator accelerator({.gradient_accumulation_steps = 4});
    auto w = torch::ones({1}, torch::requires_grad());
    accelerator.backward((w * 8.0).sum());
    QCOMPARE(w.grad().item<float>(), 2.0f);
  }

  void zero_grad_skips_micro_steps() {
    spur::Accelerator accelerator({.gradient_accumulation_steps = 2});
    auto net = make_net();
    torch::optim::SGD sgd(net->parameters(), 0.1);
    auto [model, optimizer] = accelerator.prepare(net, sgd);
    {
      auto scope = accelerator.accumulate(model);  // micro-step 1 of 2: no sync
      accelerator.backward(model(torch::ones({1, 6})).sum());
      optimizer.zero_grad();
      QVERIFY(net->parameters()[0].grad().defined());  // kept for accumulation
    }
    {
      auto scope = accelerator.accumulate(model);  // sync step
      accelerator.backward(model(torch::ones({1, 6})).sum());
      optimizer.step();
      const auto grad = net->parameters()[0].grad();
      optimizer.zero_grad(/*set_to_none=*/false);  // zeroed in place, the buffer kept
      QCOMPARE(net->parameters()[0].grad().data_ptr(), grad.data_ptr());
      QCOMPARE(grad.abs().sum().item<float>(), 0.0f);
      optimizer.zero_grad(/*set_to_none=*/true);
      QVERIFY(!net->parameters()[0].grad().defined());
      // The default: none on LibTorch 2.x (as PyTorch 2), zeroed in place on 1.13's CPU.
      accelerator.backward(model(torch::ones({1, 6})).sum());
      optimizer.zero_grad();
      QCOMPARE(net->parameters()[0].grad().defined(), TORCH_VERSION_MAJOR < 2);
    }
  }

  void clip_grad_norm_clips_and_returns_the_norm() {
    spur::Accelerator accelerator;
    auto a = torch::zeros({2}, torch::requires_grad());
    a.mutable_grad() = torch::tensor({3.0f, 4.0f});
    auto norm = accelerator.clip_grad_norm_({a}, 1.0);
    QCOMPARE(norm.item<double>(), 5.0);
    QVERIFY(torch::allclose(a.grad(), torch::tensor({0.6f, 0.8f}), 1e-5, 1e-5));
    a.mutable_grad() = torch::tensor({3.0f, -4.0f});
    accelerator.clip_grad_value_({a}, 2.0);
    QVERIFY(a.grad().equal(torch::tensor({2.0f, -2.0f})));
  }

  void clipping_waits_for_the_full_gradient() {
    spur::Accelerator accelerator({.gradient_accumulation_steps = 2});
    auto net = make_net();
    torch::optim::SGD sgd(net->parameters(), 0.1);
    auto [model, optimizer] = accelerator.prepare(net, sgd);
    auto a = net->parameters()[0];
    {
      auto scope = accelerator.accumulate(model);  // micro-step 1 of 2
      a.mutable_grad() = torch::full_like(a, 10.0f);
      accelerator.clip_grad_value_({a}, 1.0);
      QCOMPARE(a.grad().max().item<float>(), 10.0f);  // a partial sum is left alone
    }
    {
      auto scope = accelerator.accumulate(model);  // the sync step
      accelerator.clip_grad_value_({a}, 1.0);
      QCOMPARE(a.grad().max().item<float>(), 1.0f);
    }
  }

  void scope_skips_its_exit_while_an_exception_unwinds() {
    bool ran = false;
    try {
      spur::Scope scope([&] { ran = true; });
      throw std::runtime_error("body failed");
    } catch (const std::runtime_error&) {
    }
    QVERIFY2(!ran, "main_process_first would release the other ranks after a failed body");
    {
      spur::Scope scope([&] { ran = true; });
    }
    QVERIFY(ran);
  }

  void print_joins_arguments_like_python() {
    spur::Accelerator accelerator;
    std::ostringstream captured;
    auto* old = std::cout.rdbuf(captured.rdbuf());
    accelerator.print("loss", 0.5, "step", 3);
    std::cout.rdbuf(old);
    QCOMPARE(QString::fromStdString(captured.str()), QString("loss 0.5 step 3\n"));
  }

  void collectives_are_identities_on_one_process() {
    spur::Accelerator accelerator;
    auto t = torch::arange(4);
    QVERIFY(accelerator.gather(t).equal(t));
    QVERIFY(accelerator.reduce(t, spur::Reduction::mean).equal(t));
    QVERIFY(accelerator.broadcast(t).equal(t));
    QVERIFY(accelerator.pad_across_processes(t).equal(t));
    std::vector<torch::Tensor> nested{t, t * 2};
    QCOMPARE(accelerator.gather(nested).size(), size_t(2));
    QVERIFY_THROWS_EXCEPTION(spur::Error, accelerator.broadcast(t, 1));
  }

  void set_seed_is_reproducible() {
    spur::Accelerator accelerator;
    accelerator.set_seed(42);
    auto a = torch::randn({3});
    accelerator.set_seed(42, /*device_specific=*/true);  // rank 0: same seed
    QVERIFY(torch::randn({3}).equal(a));
  }

  void environment_summary_names_blas() {
    const auto summary = QString::fromStdString(spur::environment_summary());
    QVERIFY2(summary.contains("LibTorch") && summary.contains("BLAS"), qPrintable(summary));
    const auto blas = spur::blas_info();
    QVERIFY2(blas.name != "unknown", qPrintable(QString::fromStdString(blas.path)));
  }
};

SPUR_TEST_CLASS(AcceleratorTest)
#include "accelerator_test.moc"
