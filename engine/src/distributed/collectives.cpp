// SPDX-License-Identifier: Apache-2.0
// gather / reduce / broadcast / pad_across_processes. Each first exchanges a small shape record, so every rank
// learns the others' shapes: uneven first dimensions just work, and a real mismatch raises the same error on
// every rank instead of leaving some of them blocked in a collective.
#include <spur/collectives.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include <torch/types.h>

#include <spur/error.h>

#include "distributed/communicator.h"

namespace spur::detail {
namespace {

constexpr int64_t kMaxDims = 16;
constexpr int64_t kUndefined = -1;
constexpr int64_t kTooManyDims = -2;  // sent instead of a shape, so every rank raises, not only this one

struct Shape {
  int64_t dtype = kUndefined;  // c10::ScalarType, or kUndefined for an undefined tensor
  std::vector<int64_t> sizes;

  std::string str() const {
    if (dtype == kUndefined) return "no tensor";
    std::ostringstream out;
    out << "[";
    for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
    out << "] " << c10::toString(static_cast<c10::ScalarType>(dtype));
    return out.str();
  }
  bool operator==(const Shape& other) const { return dtype == other.dtype && sizes == other.sizes; }
};

torch::Tensor encode(Communicator& comm, const torch::Tensor& tensor, const char* operation) {
  auto record = torch::zeros({2 + kMaxDims}, torch::kLong);
  auto data = record.data_ptr<int64_t>();
  data[0] = kUndefined;
  if (tensor.defined()) {
    if (tensor.dim() > kMaxDims) {
      data[0] = kTooManyDims;
      return record.to(comm.device());
    }
    data[0] = static_cast<int64_t>(tensor.scalar_type());
    data[1] = tensor.dim();
    for (int64_t d = 0; d < tensor.dim(); ++d) data[2 + d] = tensor.size(d);
  }
  return record.to(comm.device());
}

Shape decode(const torch::Tensor& record) {
  auto host = record.to(torch::kCPU);
  auto data = host.data_ptr<int64_t>();
  Shape shape;
  shape.dtype = data[0];
  if (shape.dtype >= 0) shape.sizes.assign(data + 2, data + 2 + data[1]);
  return shape;
}

void check_dims(const char* operation, const Shape& shape, int64_t rank) {
  if (shape.dtype == kTooManyDims) {
    throw Error(std::string(operation) + ": rank " + std::to_string(rank) + " passed a tensor of more than " +
                std::to_string(kMaxDims) + " dimensions, which collectives do not support");
  }
}

std::vector<Shape> exchange_shapes(Communicator& comm, const torch::Tensor& tensor, const char* operation) {
  std::vector<Shape> shapes;
  for (const auto& record : comm.allgather(encode(comm, tensor, operation))) shapes.push_back(decode(record));
  for (size_t r = 0; r < shapes.size(); ++r) check_dims(operation, shapes[r], static_cast<int64_t>(r));
  return shapes;
}

std::string describe_shapes(const std::vector<Shape>& shapes) {
  std::string text;
  for (size_t r = 0; r < shapes.size(); ++r) {
    text += (r ? "; " : "") + std::string("rank ") + std::to_string(r) + " " + shapes[r].str();
  }
  return text;
}

[[noreturn]] void shape_error(const char* operation, const std::string& rule, const std::vector<Shape>& shapes) {
  throw Error(std::string(operation) + ": " + rule + " (" + describe_shapes(shapes) + ")");
}

void require_defined(const char* operation, const std::vector<Shape>& shapes) {
  for (const auto& shape : shapes) {
    if (shape.dtype == kUndefined) shape_error(operation, "every rank must pass a defined tensor", shapes);
  }
}

// Types every backend carries: bool and bfloat16 travel widened and come back as themselves.
torch::Tensor to_wire(const torch::Tensor& tensor, torch::Device device) {
  auto wire = tensor;
  if (tensor.scalar_type() == torch::kBool) {
    wire = tensor.to(torch::kInt);
  } else if (tensor.scalar_type() == torch::kBFloat16) {
    wire = tensor.to(torch::kFloat);
  }
  return wire.to(device).contiguous();
}

c10::ScalarType wire_type(c10::ScalarType type) {
  if (type == torch::kBool) return torch::kInt;
  if (type == torch::kBFloat16) return torch::kFloat;
  return type;
}

}  // namespace

torch::Tensor gather_tensor(Communicator* comm, const torch::Tensor& tensor) {
  if (!comm) return tensor;
  constexpr const char* op = "gather";
  const auto local = tensor.defined() && tensor.dim() == 0 ? tensor.reshape({1}) : tensor;
  const auto shapes = exchange_shapes(*comm, local, op);
  require_defined(op, shapes);
  for (const auto& shape : shapes) {
    const auto& first = shapes.front();
    if (shape.dtype != first.dtype) shape_error(op, "every rank must pass the same dtype", shapes);
    if (shape.sizes.size() != first.sizes.size() ||
        !std::equal(shape.sizes.begin() + 1, shape.sizes.end(), first.sizes.begin() + 1)) {
      shape_error(op, "all dimensions but the first must match (pad_across_processes pads others)", shapes);
    }
  }
  int64_t longest = 0;
  for (const auto& shape : shapes) longest = std::max(longest, shape.sizes[0]);

  auto wire = to_wire(local, comm->device());
  if (wire.size(0) < longest) {
    auto sizes = wire.sizes().vec();
    sizes[0] = longest - wire.size(0);
    wire = torch::cat({wire, torch::zeros(sizes, wire.options())});
  }
  auto parts = comm->allgather(wire);
  for (size_t r = 0; r < parts.size(); ++r) parts[r] = parts[r].narrow(0, 0, shapes[r].sizes[0]);
  return torch::cat(parts).to(local.device(), local.scalar_type());
}

torch::Tensor reduce_tensor(Communicator* comm, const torch::Tensor& tensor, Reduction reduction) {
  if (!comm) return tensor;
  const char* op = reduction == Reduction::sum ? "reduce(sum)" : "reduce(mean)";
  const auto shapes = exchange_shapes(*comm, tensor, op);
  require_defined(op, shapes);
  for (const auto& shape : shapes) {
    if (!(shape == shapes.front())) shape_error(op, "every rank must pass the same shape and dtype", shapes);
  }
  auto wire = to_wire(tensor, comm->device());
  if (wire.data_ptr() == tensor.data_ptr()) wire = wire.clone();  // never modify the caller's tensor
  comm->allreduce_(wire);
  if (reduction == Reduction::mean) {
    auto mean = wire / static_cast<double>(comm->size());
    return tensor.is_floating_point() ? mean.to(tensor.device(), tensor.scalar_type()) : mean.to(tensor.device());
  }
  // A sum of booleans is a count.
  return tensor.scalar_type() == torch::kBool ? wire.to(tensor.device())
                                              : wire.to(tensor.device(), tensor.scalar_type());
}

torch::Tensor broadcast_tensor(Communicator* comm, const torch::Tensor& tensor, int64_t from_process) {
  const int64_t size = comm ? comm->size() : 1;
  if (from_process < 0 || from_process >= size) {
    throw Error("broadcast: from_process " + std::to_string(from_process) + " is not a rank of this run (0.." +
                std::to_string(size - 1) + ")");
  }
  if (!comm) return tensor;
  const int root = static_cast<int>(from_process);
  auto record = encode(*comm, comm->rank() == root ? tensor : torch::Tensor(), "broadcast");
  comm->broadcast_(record, root);
  const auto shape = decode(record);
  check_dims("broadcast", shape, root);
  if (shape.dtype == kUndefined) {
    throw Error("broadcast: the source rank " + std::to_string(root) + " passed no tensor");
  }
  const auto type = static_cast<c10::ScalarType>(shape.dtype);
  auto wire = comm->rank() == root ? to_wire(tensor, comm->device())
                                   : torch::empty(shape.sizes, torch::dtype(wire_type(type)).device(comm->device()));
  if (comm->rank() == root && wire.data_ptr() == tensor.data_ptr()) wire = wire.clone();
  comm->broadcast_(wire, root);
  const auto device = tensor.defined() ? tensor.device() : comm->device();
  return wire.to(device, type);
}

torch::Tensor pad_tensor(Communicator* comm, const torch::Tensor& tensor, int64_t dim, int64_t pad_index,
                         bool pad_first) {
  if (!comm) return tensor;
  constexpr const char* op = "pad_across_processes";
  const auto shapes = exchange_shapes(*comm, tensor, op);
  require_defined(op, shapes);
  const int64_t ndim = static_cast<int64_t>(shapes.front().sizes.size());
  for (const auto& shape : shapes) {
    if (static_cast<int64_t>(shape.sizes.size()) != ndim) {
      shape_error(op, "every rank must pass a tensor of the same number of dimensions", shapes);
    }
  }
  if (dim < 0) dim += ndim;
  if (dim < 0 || dim >= ndim) return tensor;  // as Accelerate: nothing to pad along a missing dimension
  int64_t longest = 0;
  for (const auto& shape : shapes) longest = std::max(longest, shape.sizes[dim]);
  if (tensor.size(dim) == longest) return tensor;

  auto sizes = tensor.sizes().vec();
  sizes[dim] = longest;
  auto padded = torch::full(sizes, pad_index, tensor.options());
  const int64_t start = pad_first ? longest - tensor.size(dim) : 0;
  padded.narrow(dim, start, tensor.size(dim)).copy_(tensor);
  return padded;
}

// Lengths first (one int64 per rank), then the bytes as one uint8 tensor, cut back into each rank's part.
std::vector<std::string> gather_bytes(Communicator* comm, const std::string& bytes) {
  if (!comm) return {bytes};
  const auto lengths = gather_tensor(comm, torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kLong));
  auto local = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kByte);
  if (!bytes.empty()) std::memcpy(local.data_ptr(), bytes.data(), bytes.size());
  const auto all = gather_tensor(comm, local).contiguous();
  const auto* data = static_cast<const char*>(all.data_ptr());
  std::vector<std::string> out;
  int64_t offset = 0;
  for (int64_t r = 0; r < lengths.size(0); ++r) {
    const int64_t n = lengths[r].item<int64_t>();
    out.push_back(n > 0 ? std::string(data + offset, static_cast<std::size_t>(n)) : std::string());
    offset += n;
  }
  return out;
}

std::string broadcast_bytes(Communicator* comm, const std::string& bytes, int64_t from_process) {
  auto local = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kByte);
  if (!bytes.empty()) std::memcpy(local.data_ptr(), bytes.data(), bytes.size());
  const auto received = broadcast_tensor(comm, local, from_process).contiguous();
  if (received.numel() == 0) return {};
  return std::string(static_cast<const char*>(received.data_ptr()), static_cast<std::size_t>(received.numel()));
}

}  // namespace spur::detail
