// SPDX-License-Identifier: Apache-2.0
// The GPT example's model (decoder-only, byte-level: causal self-attention, pre-norm blocks, learned positions,
// GPT-2's initialisation), shared with its benchmark (tests/bench/workload_bench.cpp); the Accelerate peer
// (tests/bench/workload_peer.py) builds the same layers. Its blocks are spur::fully_shard units: under ZeRO stage 3
// (FSDP's FULL_SHARD) each is gathered around its own forward and backward; otherwise the wrapper only calls them.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <torch/nn/functional/activation.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <spur/fully_shard.h>

struct CausalSelfAttentionImpl : torch::nn::Module {
  CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout) : n_head(n_head) {
    qkv = register_module("qkv", torch::nn::Linear(n_embd, 3 * n_embd));
    proj = register_module("proj", torch::nn::Linear(n_embd, n_embd));
    drop = register_module("drop", torch::nn::Dropout(dropout));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto b = x.size(0), t = x.size(1), c = x.size(2);
    auto parts = qkv(x).split(c, 2);
    auto heads = [&](const torch::Tensor& y) { return y.view({b, t, n_head, c / n_head}).transpose(1, 2); };
    auto q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(c / n_head));
    auto future = torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
    auto attention = drop(torch::softmax(scores.masked_fill(future, -std::numeric_limits<float>::infinity()), -1));
    return drop(proj(torch::matmul(attention, v).transpose(1, 2).contiguous().view({b, t, c})));
  }
  int64_t n_head;
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t n_embd, int64_t n_head, double dropout) {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd})));
    attn = register_module("attn", CausalSelfAttention(n_embd, n_head, dropout));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd})));
    fc = register_module("fc", torch::nn::Linear(n_embd, 4 * n_embd));
    out = register_module("out", torch::nn::Linear(4 * n_embd, n_embd));
    drop = register_module("drop", torch::nn::Dropout(dropout));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = x + attn(ln1(x));
    return x + drop(out(torch::gelu(fc(ln2(x)))));
  }
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::Linear fc{nullptr}, out{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(Block);

struct GptImpl : torch::nn::Module {
  GptImpl(int64_t block_size, int64_t n_layer, int64_t n_head, int64_t n_embd, double dropout)
      : block_size(block_size) {
    tokens = register_module("tokens", torch::nn::Embedding(256, n_embd));
    positions = register_module("positions", torch::nn::Embedding(block_size, n_embd));
    drop = register_module("drop", torch::nn::Dropout(dropout));
    for (int64_t i = 0; i < n_layer; ++i)
      blocks.push_back(spur::fully_shard(register_module("block" + std::to_string(i), Block(n_embd, n_head, dropout))));
    ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd})));
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(n_embd, 256).bias(false)));
    // GPT-2's initialisation: normal(0, 0.02) for weights, zero biases; residual projections scaled by depth.
    torch::NoGradGuard no_grad;
    for (auto& item : named_parameters()) {
      const std::string& name = item.key();
      auto& p = item.value();
      if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
        p.zero_();
      } else if (p.dim() >= 2) {
        const bool residual =
            name.find("proj.weight") != std::string::npos || name.find("out.weight") != std::string::npos;
        torch::nn::init::normal_(p, 0.0, residual ? 0.02 / std::sqrt(2.0 * static_cast<double>(n_layer)) : 0.02);
      }
    }
  }
  torch::Tensor forward(const torch::Tensor& idx) {
    const auto t = idx.size(1);
    auto x = drop(tokens(idx) +
                  positions(torch::arange(t, torch::TensorOptions().dtype(torch::kLong).device(idx.device()))));
    for (auto& block : blocks) x = block(x);
    return head(ln(x));
  }
  int64_t block_size;
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  torch::nn::Dropout drop{nullptr};
  std::vector<spur::FullyShard<Block>> blocks;
  torch::nn::LayerNorm ln{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Gpt);
