// SPDX-License-Identifier: Apache-2.0
// Rendezvous over c10d's TCPStore. Every rank checks in under its own key and waits for all the others with
// a deadline, so a missing rank is reported by number instead of surfacing as a hang inside Gloo's handshake.
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <spur/error.h>

#include "distributed/communicator.h"

namespace spur::detail {
namespace {

// c10d's messages end with a period; ours continue the sentence.
std::string cause(const std::exception& e) {
  std::string text = e.what();
  while (!text.empty() && (text.back() == '.' || text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string endpoint(const ProcessState& state) { return state.master_addr + ":" + std::to_string(state.master_port); }

std::string rank_key(int64_t rank) { return "rank/" + std::to_string(rank); }

}  // namespace

c10::intrusive_ptr<c10d::Store> rendezvous(const ProcessState& state, std::chrono::seconds timeout) {
  const bool host_store = state.rank == 0 && !state.use_agent_store;
  const std::string where = endpoint(state);
  const std::string seconds = std::to_string(timeout.count()) + " s";

  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(state.master_port);
  options.isServer = host_store;
  options.waitWorkers = false;  // we wait ourselves, below, to name the missing ranks
  options.timeout = timeout;

  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(state.master_addr, options);
  } catch (const std::exception& e) {
    if (host_store) {
      throw Error("rank 0 could not host the rendezvous store on " + where + " (MASTER_ADDR:MASTER_PORT): " + cause(e) +
                  ". Another run may hold the port: choose another MASTER_PORT");
    }
    throw Error("rank " + std::to_string(state.rank) + " could not reach the rendezvous store at " + where +
                " (MASTER_ADDR:MASTER_PORT) within " + seconds + ": " + cause(e) +
                ". Check that rank 0 is running and that " + state.master_addr + " is reachable from this machine");
  }

  // torchrun's agent store is shared by restarts; its own workers use this prefix, so do we.
  if (state.use_agent_store) {
    store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(state.restart_count), store);
  }
  auto spur_keys = c10::make_intrusive<c10d::PrefixStore>("spur/rendezvous", store);

  std::vector<std::string> keys;
  keys.reserve(state.world_size);
  for (int64_t rank = 0; rank < state.world_size; ++rank) keys.push_back(rank_key(rank));
  try {
    spur_keys->set(rank_key(state.rank), std::vector<uint8_t>{'1'});
    spur_keys->wait(keys, timeout);
  } catch (const std::exception& e) {
    std::string missing;
    int64_t arrived = 0;
    try {
      for (int64_t rank = 0; rank < state.world_size; ++rank) {
        if (spur_keys->check({rank_key(rank)})) {
          ++arrived;
        } else {
          missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
        }
      }
    } catch (const std::exception&) {
      throw Error("rendezvous at " + where + " failed on rank " + std::to_string(state.rank) +
                  ": the store went away (" + cause(e) + "); rank 0 probably stopped");
    }
    throw Error("rendezvous at " + where + " timed out after " + seconds + " on rank " + std::to_string(state.rank) +
                ": " + std::to_string(arrived) + " of " + std::to_string(state.world_size) +
                " ranks arrived; missing rank(s) " + missing +
                ". Start every rank with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE, or raise "
                "SPUR_RENDEZVOUS_TIMEOUT");
  }
  return c10::make_intrusive<c10d::PrefixStore>("spur/pg", store);
}

}  // namespace spur::detail
