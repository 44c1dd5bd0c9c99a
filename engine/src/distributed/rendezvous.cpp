// SPDX-License-Identifier: Apache-2.0
// Rendezvous over c10d's TCPStore. Every rank checks in under its own key and waits for all the others with
// a deadline, so a missing rank is reported by number instead of surfacing as a hang inside Gloo's handshake.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <spur/error.h>

#include "compat/torch_compat.h"
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

// A listening socket on MASTER_ADDR itself (loopback for a run on one machine, the address the other machines use
// for several), for the store to take over, instead of c10d's own, which listens on every interface: anyone who
// could reach the machine could connect to a run's store. -1 when MASTER_ADDR is not an address of this machine
// (behind NAT, a name resolving elsewhere): c10d's own socket then. Throws when the port is taken.
int listen_on_master_address(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string name = host == "localhost" ? "127.0.0.1" : host;
  if (::getaddrinfo(name.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  int taken = 0;
  for (auto* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      if (errno == EADDRINUSE) taken = errno;
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0 && taken) throw std::runtime_error("the port is in use (" + std::string(std::strerror(taken)) + ")");
  return fd;
}

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
    if (host_store && compat::kStoreTakesListeningSocket) {
      const int fd = listen_on_master_address(state.master_addr, state.master_port);
      if (fd >= 0) compat::set_store_listening_socket(options, fd);  // the store owns it from here
    }
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
