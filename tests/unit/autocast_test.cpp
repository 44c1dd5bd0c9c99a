// SPDX-License-Identifier: Apache-2.0
// Autocast: bf16 scopes on CPU (nesting, restoring), a prepared model's forward computing in bf16 and returning
// fp32, and fp16 on CPU refused with an error that says what to use instead.
#include <QTest>

#include <torch/nn/modules/linear.h>
#include <torch/types.h>
#include <torch/version.h>

#include <spur/accelerator.h>
#include <spur/error.h>
#include <spur/precision.h>

#include "test_main.h"

namespace {

// Records the dtype its inner linear layer computed in.
struct ProbeImpl : torch::nn::Module {
  ProbeImpl() : fc(register_module("fc", torch::nn::Linear(4, 3))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = fc(x);
    inner = y.scalar_type();
    return y;
  }
  torch::nn::Linear fc;
  c10::ScalarType inner = c10::ScalarType::Undefined;
};
TORCH_MODULE(Probe);

}  // namespace

class AutocastTest : public QObject {
  Q_OBJECT

 private slots:
  void bf16_scope_on_cpu() {
    auto a = torch::randn({4, 4});
    {
      spur::AutocastScope scope(torch::kCPU, spur::Precision::bf16);
      QCOMPARE(torch::mm(a, a).scalar_type(), torch::kBFloat16);
      {
        spur::AutocastScope inner(torch::kCPU, spur::Precision::bf16);
        QCOMPARE(torch::mm(a, a).scalar_type(), torch::kBFloat16);
      }
      QCOMPARE(torch::mm(a, a).scalar_type(), torch::kBFloat16);  // the inner scope restored, not disabled
    }
    QCOMPARE(torch::mm(a, a).scalar_type(), torch::kFloat);
  }

  void no_precision_scope_changes_nothing() {
    spur::AutocastScope scope(torch::kCPU, spur::Precision::no);
    auto a = torch::randn({2, 2});
    QCOMPARE(torch::mm(a, a).scalar_type(), torch::kFloat);
  }

  void prepared_model_runs_bf16_returns_fp32() {
    spur::Accelerator accelerator({.mixed_precision = spur::Precision::bf16});
    QCOMPARE(accelerator.mixed_precision(), spur::Precision::bf16);
    Probe probe;
    auto model = accelerator.prepare(probe);
    auto out = model(torch::randn({5, 4}));
    QCOMPARE(probe->inner, torch::kBFloat16);
    QCOMPARE(out.scalar_type(), torch::kFloat);
    accelerator.backward(out.sum());
    QCOMPARE(probe->fc->weight.grad().scalar_type(), torch::kFloat);
    // Outside the model's forward, autocast is off again.
    QCOMPARE(torch::mm(torch::ones({2, 2}), torch::ones({2, 2})).scalar_type(), torch::kFloat);
    // And the accelerator's own scope turns it on for other code.
    auto scope = accelerator.autocast();
    QCOMPARE(torch::mm(torch::ones({2, 2}), torch::ones({2, 2})).scalar_type(), torch::kBFloat16);
  }

  void fp16_on_cpu_is_refused_clearly() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    QSKIP("this LibTorch runs fp16 autocast on CPU");
#endif
    try {
      spur::Accelerator accelerator({.mixed_precision = spur::Precision::fp16, .cpu = true});
      QFAIL("fp16 on CPU was accepted");
    } catch (const spur::Error& e) {
      const QString what = e.what();
      QVERIFY2(what.contains("fp16") && what.contains("bf16"), e.what());
    }
  }

  void precision_names() {
    QCOMPARE(spur::parse_precision("BF16"), std::optional(spur::Precision::bf16));
    QCOMPARE(spur::parse_precision("no"), std::optional(spur::Precision::no));
    QVERIFY(!spur::parse_precision("fp8").has_value());
    QCOMPARE(QString::fromStdString(std::string(spur::to_string(spur::Precision::fp16))), QString("fp16"));
  }
};

SPUR_TEST_CLASS(AutocastTest)
#include "autocast_test.moc"
