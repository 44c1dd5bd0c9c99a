// SPDX-License-Identifier: Apache-2.0
// spur::DataLoader in one process: batching, samplers, collation, workers (same batches, in order, errors
// re-thrown), streams, resuming, and the end-of-data signal the Accelerator acts on.
#include <QTest>

#include <atomic>
#include <map>

#include <torch/data/dataloader.h>
#include <torch/data/datasets/base.h>
#include <torch/data/datasets/map.h>
#include <torch/data/datasets/tensor.h>
#include <torch/data/transforms/stack.h>
#include <torch/data/transforms/tensor.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <spur/spur.h>

#include "test_main.h"

namespace {

// Sample i carries i as its target, so a test can read which samples a batch holds.
struct IndexDataset {
  int64_t n = 10;
  int64_t fail_at = -1;
  torch::data::Example<> get(size_t i) const {
    if (static_cast<int64_t>(i) == fail_at) throw std::runtime_error("sample " + std::to_string(i) + " is corrupt");
    return {torch::full({2}, static_cast<float>(i)), torch::tensor(static_cast<int64_t>(i))};
  }
  size_t size() const { return static_cast<size_t>(n); }
};

// Sample i plus noise drawn from the loader's per-batch generator (an augmentation); the training thread draws
// from torch's default generator meanwhile.
struct NoisyDataset {
  torch::data::Example<> get(size_t i) const {
    return {torch::full({3}, static_cast<float>(i)) + torch::randn({3}, spur::loader_generator()),
            torch::tensor(static_cast<int64_t>(i))};
  }
  size_t size() const { return 40; }
};

template <typename Loader>
std::vector<torch::Tensor> data_of(Loader& loader) {
  std::vector<torch::Tensor> out;
  for (auto& batch : loader) {
    out.push_back(batch.data);
    torch::rand({16});  // the training thread's own draws (dropout) must not change the data
  }
  return out;
}

template <typename Loader>
std::vector<std::vector<int64_t>> indices_of(Loader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& batch : loader) {
    auto t = batch.target.contiguous();
    out.emplace_back(t.template data_ptr<int64_t>(), t.template data_ptr<int64_t>() + t.numel());
  }
  return out;
}

class CountingStream : public spur::StreamDataset<torch::Tensor> {
 public:
  explicit CountingStream(int64_t n) : n_(n) {}
  void reset(int64_t epoch) override {
    next_ = 0;
    epochs_seen.push_back(epoch);
  }
  std::optional<torch::Tensor> next() override {
    if (next_ >= n_) return std::nullopt;
    return torch::tensor(next_++);
  }
  std::vector<int64_t> epochs_seen;

 private:
  int64_t n_;
  int64_t next_ = 0;
};

std::vector<std::vector<int64_t>> stream_indices(spur::DataLoader<torch::Tensor>& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& batch : loader) {
    auto t = batch.contiguous();
    out.emplace_back(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  }
  return out;
}

using Batches = std::vector<std::vector<int64_t>>;

class WrongSizeSampler : public spur::Sampler {
 public:
  std::vector<int64_t> indices(int64_t) override { return {0, 1, 2}; }
  int64_t size() const override { return 5; }
};

class EvensSampler : public spur::Sampler {
 public:
  std::vector<int64_t> indices(int64_t) override { return {0, 2, 4, 6, 8}; }
  int64_t size() const override { return 5; }
};

}  // namespace

// A torch::data dataset as LibTorch programs write them: sample i is (row i, label i % 3).
class RowsDataset : public torch::data::datasets::Dataset<RowsDataset> {
 public:
  torch::data::Example<> get(size_t index) override {
    return {torch::full({2}, static_cast<double>(index)), torch::tensor(static_cast<int64_t>(index % 3))};
  }
  torch::optional<size_t> size() const override { return 10; }
};

// The batches of an epoch, their data rows concatenated.
template <typename Loader>
torch::Tensor epoch_rows(Loader& loader) {
  std::vector<torch::Tensor> rows;
  for (auto& batch : loader) rows.push_back(batch.data.flatten(1).select(1, 0));
  return torch::cat(rows);
}

class DataLoaderTest : public QObject {
  Q_OBJECT

 private slots:
  void batches_in_order() {
    auto loader = spur::make_data_loader(IndexDataset{}, {.batch_size = 3});
    QVERIFY(indices_of(loader) == (Batches{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}}));
    QCOMPARE(loader.size(), int64_t(4));
    auto dropping = spur::make_data_loader(IndexDataset{}, {.batch_size = 3, .drop_last = true});
    QVERIFY(indices_of(dropping) == (Batches{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}}));
    for (auto& batch : loader) {
      QCOMPARE(batch.data.sizes(), (torch::IntArrayRef{3, 2}));  // stacked
      break;
    }
  }

  void shuffle_is_seeded_per_epoch() {
    auto a = spur::make_data_loader(IndexDataset{}, {.batch_size = 10, .shuffle = true, .seed = 7});
    auto b = spur::make_data_loader(IndexDataset{}, {.batch_size = 10, .shuffle = true, .seed = 7});
    const auto epoch0 = indices_of(a);
    const auto epoch1 = indices_of(a);  // the epoch advances after a full pass
    QVERIFY(epoch0 == indices_of(b));
    QVERIFY(epoch0 != epoch1);
    QCOMPARE(a.epoch(), int64_t(2));
    b.set_epoch(1);
    QVERIFY(indices_of(b) == epoch1);
    auto sorted = epoch0[0];
    std::sort(sorted.begin(), sorted.end());
    QVERIFY(sorted == (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }

  void samplers() {
    auto evens = spur::make_data_loader(IndexDataset{}, {.batch_size = 2}, std::make_shared<EvensSampler>());
    QVERIFY(indices_of(evens) == (Batches{{0, 2}, {4, 6}, {8}}));
    auto weighted = spur::make_data_loader(IndexDataset{}, {.batch_size = 4},
                                           std::make_shared<spur::WeightedRandomSampler>(
                                               torch::tensor({0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}), 8));
    QVERIFY(indices_of(weighted) == (Batches{{2, 2, 2, 2}, {2, 2, 2, 2}}));
    spur::RandomSampler random(5, 3);
    QVERIFY(random.indices(0) == spur::RandomSampler(5, 3).indices(0));
  }

  void sampler_of_the_wrong_size_is_an_error() {
    auto loader = spur::make_data_loader(IndexDataset{}, {.batch_size = 2}, std::make_shared<WrongSizeSampler>());
    try {
      indices_of(loader);
      QFAIL("no error");
    } catch (const spur::Error& e) {
      QVERIFY2(QString(e.what()).contains("the sampler gave 3 indices for epoch 0 but its size() says 5"), e.what());
    }
  }

  void empty_dataset_is_an_error() {
    auto loader = spur::make_data_loader(IndexDataset{.n = 0}, {.batch_size = 2});
    QVERIFY_THROWS_EXCEPTION(spur::Error, indices_of(loader));
  }

  void workers_give_the_same_batches_in_order_data() {
    QTest::addColumn<int>("workers");
    QTest::newRow("1 worker") << 1;
    QTest::newRow("2 workers") << 2;
    QTest::newRow("4 workers") << 4;
  }

  void workers_give_the_same_batches_in_order() {
    QFETCH(int, workers);
    auto inline_loader = spur::make_data_loader(IndexDataset{.n = 103}, {.batch_size = 4, .shuffle = true, .seed = 1});
    auto threaded = spur::make_data_loader(IndexDataset{.n = 103},
                                           {.batch_size = 4, .shuffle = true, .num_workers = workers, .seed = 1});
    QVERIFY(indices_of(inline_loader) == indices_of(threaded));
  }

  // Issue 19, defect 6: augmentation drawn from spur::loader_generator() gives the same batches with 0 or 3
  // worker threads, whatever the training thread draws, and a loader resumed at batch 4 gives the uninterrupted
  // run's batches 4.. exactly; each epoch draws anew.
  void augmentation_is_reproducible_with_workers() {
    std::vector<std::vector<torch::Tensor>> runs;
    for (const int64_t workers : {0, 3, 3}) {
      auto loader =
          spur::make_data_loader(NoisyDataset{}, {.batch_size = 4, .shuffle = true, .num_workers = workers, .seed = 5});
      auto first = data_of(loader);
      auto second = data_of(loader);
      QCOMPARE(first.size(), size_t{10});
      QVERIFY2(!first[0].equal(second[0]), "the second epoch repeated the first one's noise");
      first.insert(first.end(), second.begin(), second.end());
      runs.push_back(first);
    }
    for (size_t i = 0; i < runs[0].size(); ++i) {
      QVERIFY2(runs[1][i].equal(runs[0][i]) && runs[2][i].equal(runs[0][i]),
               qPrintable(QString("batch %1 differs between worker counts or runs").arg(i)));
    }
    auto resumed =
        spur::make_data_loader(NoisyDataset{}, {.batch_size = 4, .shuffle = true, .num_workers = 2, .seed = 5});
    resumed.skip_first_batches(4);
    const auto rest = data_of(resumed);
    QCOMPARE(rest.size(), size_t{6});
    for (size_t i = 0; i < rest.size(); ++i) QVERIFY(rest[i].equal(runs[0][4 + i]));
    // Outside a loader it is torch's default generator.
    torch::manual_seed(3);
    const auto a = torch::rand({2}, spur::loader_generator());
    torch::manual_seed(3);
    QVERIFY(a.equal(torch::rand({2})));
  }

  void worker_errors_reach_the_training_thread() {
    auto loader = spur::make_data_loader(IndexDataset{.n = 40, .fail_at = 21}, {.batch_size = 4, .num_workers = 2});
    int seen = 0;
    try {
      for (auto& batch : loader) {
        (void)batch;
        ++seen;
      }
      QFAIL("no error");
    } catch (const spur::Error& e) {
      QVERIFY2(QString(e.what()).contains("get(21) failed: sample 21 is corrupt"), e.what());
    }
    QCOMPARE(seen, 5);  // batches 0-4 came through, in order, before the one holding sample 21
  }

  void collates_torch_datasets_and_containers() {
    // torch::data's own datasets plug in.
    auto tensors = spur::make_data_loader(torch::data::datasets::TensorDataset(torch::arange(12).reshape({6, 2})),
                                          {.batch_size = 4});
    std::vector<int64_t> rows;
    for (auto& batch : tensors) rows.push_back(batch.data.size(0));
    QVERIFY(rows == (std::vector<int64_t>{4, 2}));

    spur::DefaultCollate collate;
    auto pair = collate(std::vector<std::pair<torch::Tensor, int64_t>>{{torch::ones(2), 1}, {torch::zeros(2), 2}});
    QCOMPARE(pair.first.sizes(), (torch::IntArrayRef{2, 2}));
    QVERIFY(pair.second.equal(torch::tensor({int64_t{1}, int64_t{2}})));
    auto tuple = collate(std::vector<std::tuple<torch::Tensor, double>>{{torch::ones(1), 0.5}, {torch::ones(1), 1.5}});
    QCOMPARE(std::get<1>(tuple).scalar_type(), torch::kDouble);
    auto map =
        collate(std::vector<std::map<std::string, torch::Tensor>>{{{"x", torch::ones(3)}}, {{"x", torch::ones(3)}}});
    QCOMPARE(map.at("x").sizes(), (torch::IntArrayRef{2, 3}));
    auto list = collate(
        std::vector<std::vector<torch::Tensor>>{{torch::ones(1), torch::ones(2)}, {torch::ones(1), torch::ones(2)}});
    QCOMPARE(list.size(), size_t(2));
    QCOMPARE(list[1].sizes(), (torch::IntArrayRef{2, 2}));
  }

  // Issue 34: torch::data's own forms (a .map(...) chain ending in Stack, a torch sampler, torch's options, a
  // unique_ptr) give the batches torch's loader gives, in the same order from the same seed, epoch after epoch.
  void torch_data_forms_give_torch_loaders_batches() {
    auto mapped = [] {
      return RowsDataset().map(torch::data::transforms::Normalize<>(0.5, 2.0)).map(torch::data::transforms::Stack<>());
    };
    torch::manual_seed(3);
    auto theirs = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(mapped(), 4);
    std::vector<torch::Tensor> expected;
    for (int epoch = 0; epoch < 2; ++epoch) expected.push_back(epoch_rows(*theirs));
    torch::manual_seed(3);
    auto ours = spur::make_data_loader<torch::data::samplers::RandomSampler>(mapped(), 4);
    QCOMPARE(ours->size(), int64_t{3});
    for (int epoch = 0; epoch < 2; ++epoch) QVERIFY(epoch_rows(*ours).equal(expected[epoch]));
    QVERIFY(!expected[0].equal(expected[1]));  // reshuffled every epoch, as torch's

    // Options and workers, and a sequential order; the targets come stacked, as Stack makes them.
    auto options = torch::data::DataLoaderOptions().batch_size(3).workers(2).drop_last(true);
    auto sequential = spur::make_data_loader<torch::data::samplers::SequentialSampler>(mapped(), options);
    std::vector<int64_t> sizes;
    for (auto& batch : *sequential) {
      sizes.push_back(batch.data.size(0));
      QCOMPARE(batch.target.dim(), int64_t{1});
    }
    QVERIFY(sizes == (std::vector<int64_t>{3, 3, 3}));
    QVERIFY(epoch_rows(*sequential).equal((torch::arange(9, torch::kFloat) - 0.5) / 2.0));

    // Spur's own form takes the chain too; a dataset without Stack gives vectors of examples, as torch's.
    auto spur_form = spur::make_data_loader(mapped(), {.batch_size = 5});
    QCOMPARE(spur_form.size(), int64_t{2});
    auto vectors = spur::make_data_loader<torch::data::samplers::SequentialSampler>(RowsDataset(), 4);
    for (auto& batch : *vectors) QVERIFY(batch.size() == 4 || batch.size() == 2);

    // prepare in place: the loader itself is prepared (one process: every batch), and a copy shares it.
    spur::Accelerator accelerator;
    auto prepared = accelerator.prepare(*sequential);
    QVERIFY(sequential->state()->prepared);
    QVERIFY(prepared.state() == sequential->state());
  }

  void streams_batch_like_pytorch_when_not_prepared() {
    auto stream = std::make_shared<CountingStream>(7);
    auto loader = spur::make_stream_loader(stream, {.batch_size = 3});
    QVERIFY(stream_indices(loader) == (Batches{{0, 1, 2}, {3, 4, 5}, {6}}));
    auto dropping = spur::make_stream_loader(std::make_shared<CountingStream>(7), {.batch_size = 3, .drop_last = true});
    QVERIFY(stream_indices(dropping) == (Batches{{0, 1, 2}, {3, 4, 5}}));
    auto threaded = spur::make_stream_loader(std::make_shared<CountingStream>(7), {.batch_size = 3, .num_workers = 1});
    QVERIFY(stream_indices(threaded) == (Batches{{0, 1, 2}, {3, 4, 5}, {6}}));
    stream_indices(loader);
    QVERIFY(stream->epochs_seen == (std::vector<int64_t>{0, 1}));
  }

  void skip_first_batches_resumes_mid_epoch() {
    spur::Accelerator accelerator;
    auto loader = accelerator.skip_first_batches(spur::make_data_loader(IndexDataset{}, {.batch_size = 3}), 2);
    QVERIFY(indices_of(loader) == (Batches{{6, 7, 8}, {9}}));
    QVERIFY(indices_of(loader) == (Batches{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}}));  // only once
  }

  void an_inner_evaluation_loop_does_not_end_the_training_epoch() {
    spur::Accelerator accelerator({.gradient_accumulation_steps = 2});
    auto net = torch::nn::Linear(2, 1);
    auto [model, train, eval] =
        accelerator.prepare(net, spur::make_data_loader(IndexDataset{.n = 8}, {.batch_size = 2}),
                            spur::make_data_loader(IndexDataset{.n = 4}, {.batch_size = 2}));
    QString pattern;
    for (auto& batch : train) {
      (void)batch;
      auto scope = accelerator.accumulate(model);
      pattern += accelerator.sync_gradients() ? 'S' : '-';
      for (auto& inner : eval) (void)inner;  // a whole evaluation pass inside the training step
    }
    QCOMPARE(pattern, QString("-S-S"));
  }

  void gather_for_metrics_cuts_only_during_the_last_batch() {
    spur::Accelerator accelerator;
    // A prepared stream pads its last block even on one process: 7 samples, batch 3 -> [6, 0, 1], 1 real.
    auto loader = accelerator.prepare(spur::make_stream_loader(std::make_shared<CountingStream>(7), {.batch_size = 3}));
    std::vector<int64_t> kept;
    for (auto& batch : loader) {
      auto g = accelerator.gather_for_metrics(batch);
      kept.insert(kept.end(), g.data_ptr<int64_t>(), g.data_ptr<int64_t>() + g.numel());
    }
    QVERIFY(kept == (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
    QCOMPARE(accelerator.gather_for_metrics(torch::zeros({3})).size(0), int64_t(3));  // after the loop: no cut
  }

  void leaving_a_loop_early_restarts_the_epoch() {
    auto loader = spur::make_data_loader(IndexDataset{.n = 40}, {.batch_size = 4, .num_workers = 2});
    int seen = 0;
    for (auto& batch : loader) {
      (void)batch;
      if (++seen == 2) break;  // workers still loading ahead
    }
    QCOMPARE(loader.epoch(), int64_t(0));
    QCOMPARE(indices_of(loader).front(), (std::vector<int64_t>{0, 1, 2, 3}));
    QCOMPARE(loader.epoch(), int64_t(1));
  }

  void prepared_loader_signals_its_last_batch() {
    spur::Accelerator accelerator({.gradient_accumulation_steps = 3});
    auto net = torch::nn::Linear(2, 1);
    torch::optim::SGD sgd(net->parameters(), 0.1);
    auto [model, optimizer, loader] =
        accelerator.prepare(net, sgd, spur::make_data_loader(IndexDataset{}, {.batch_size = 2}));
    QString pattern;
    for (auto& batch : loader) {
      auto scope = accelerator.accumulate(model);
      pattern += accelerator.sync_gradients() ? 'S' : '-';
      // One process: gather_for_metrics keeps everything.
      QCOMPARE(accelerator.gather_for_metrics(batch.target).size(0), batch.target.size(0));
    }
    QCOMPARE(pattern, QString("--S-S"));  // 5 batches: every 3rd, and the last one
  }
};

SPUR_TEST_CLASS(DataLoaderTest)
#include "data_loader_test.moc"
