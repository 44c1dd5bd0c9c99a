// SPDX-License-Identifier: Apache-2.0
// The engine's JSON (engine/core/src/json.cpp) against nlohmann-json (Debian's nlohmann-json3-dev), which issue 12
// proposed in its place: the same documents parsed and written by both, in one run. Documents: a safetensors
// header of 1,000 tensors (a large model's shard) and 100,000 "@spur" stream records (a long run's metrics).
// Prints times and ratios (Spur / nlohmann: below 1 is faster); asserts only that both read the same values.
//   build/tests/bench/json_bench [--repeats N]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spur/json.h>

#include "bench_support.h"

namespace {

std::string safetensors_header(int tensors) {
  std::string text = R"({"__metadata__": {"format": "pt"})";
  int64_t offset = 0;
  for (int i = 0; i < tensors; ++i) {
    const int64_t rows = 64 + i % 7, columns = 768, bytes = rows * columns * 4;
    text += ", \"model.layers." + std::to_string(i / 12) + ".weight_" + std::to_string(i) +
            R"(": {"dtype": "F32", "shape": [)" + std::to_string(rows) + ", " + std::to_string(columns) +
            R"(], "data_offsets": [)" + std::to_string(offset) + ", " + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  return text + "}";
}

std::vector<std::string> stream_records(int count) {
  std::vector<std::string> records;
  records.reserve(count);
  for (int i = 0; i < count; ++i) {
    records.push_back(R"({"kind": "scalars", "step": )" + std::to_string(i) + R"(, "wall": )" +
                      std::to_string(1796047370.25 + i * 0.125) + R"(, "values": {"train/loss": )" +
                      std::to_string(2.5 / (1 + i * 0.001)) + R"(, "lr": 0.0003, "epoch": )" +
                      std::to_string(i / 1000) + "}}");
  }
  return records;
}

template <typename F>
double best_ms(int repeats, F&& work) {
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const double start = spur::bench::now_ms();
    work();
    times.push_back(spur::bench::now_ms() - start);
  }
  return spur::bench::median(times);
}

void report(const char* what, double spur_ms, double nlohmann_ms) {
  std::printf("%-40s spur %9.2f ms   nlohmann %9.2f ms   ratio %.2f\n", what, spur_ms, nlohmann_ms,
              spur_ms / nlohmann_ms);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--repeats") repeats = std::max(1, std::atoi(argv[i + 1]));
  }
  const std::string header = safetensors_header(1000);
  const auto records = stream_records(100000);

  // Both must read the same values, or the comparison means nothing.
  const auto ours = spur::json::parse(header);
  const auto theirs = nlohmann::ordered_json::parse(header);
  const auto& last = ours.as_object().back();
  if (ours.as_object().size() != theirs.size() ||
      last.second.at("data_offsets").as_array()[1].as_int() != theirs[last.first]["data_offsets"][1].get<int64_t>()) {
    std::fprintf(stderr, "json_bench: the two readers disagree\n");
    return 1;
  }

  double sink = 0;
  const double spur_header = best_ms(repeats, [&] {
    for (int k = 0; k < 20; ++k) sink += spur::json::parse(header).as_object().size();
  });
  const double nlohmann_header = best_ms(repeats, [&] {
    for (int k = 0; k < 20; ++k) sink += nlohmann::ordered_json::parse(header).size();
  });
  report("parse a 1,000-tensor header x20", spur_header, nlohmann_header);

  const double spur_records = best_ms(repeats, [&] {
    for (const auto& record : records) sink += spur::json::parse(record).at("values").at("train/loss").as_double();
  });
  const double nlohmann_records = best_ms(repeats, [&] {
    for (const auto& record : records) {
      sink += nlohmann::ordered_json::parse(record)["values"]["train/loss"].get<double>();
    }
  });
  report("parse 100,000 stream records", spur_records, nlohmann_records);

  const double spur_write = best_ms(repeats, [&] {
    for (int k = 0; k < 20; ++k) sink += spur::json::write(ours).size();
  });
  const double nlohmann_write = best_ms(repeats, [&] {
    for (int k = 0; k < 20; ++k) sink += theirs.dump().size();
  });
  report("write a 1,000-tensor header x20", spur_write, nlohmann_write);
  std::printf("(checksum %.1f)\n", sink);
  return 0;
}
