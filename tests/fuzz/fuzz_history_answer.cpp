// SPDX-License-Identifier: Apache-2.0
// Fuzz target: what a remote history's serve sends (app/runs/history_protocol.h), as the client decodes it: the
// hello, then an answer whose result is read as each of the protocol's values (runs, a run, metric briefs, events,
// console lines, a filter). A serve on another machine may be broken or hostile: whatever it sends, the client
// must throw ProtocolError or give values in range, never crash; a run it accepts has a positive id and a known
// status; an answer it accepts says the same when encoded again.
#include <cstddef>
#include <cstdint>

#include "runs/history_protocol.h"
#include "runs/run_service.h"

namespace protocol = spur::app::protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const QByteArray line(reinterpret_cast<const char*>(data), static_cast<qsizetype>(size));
  try {
    const auto hello = protocol::decode_hello(line);
    if (hello.protocol < -1 || hello.protocol > (1 << 20)) __builtin_trap();
  } catch (const protocol::ProtocolError&) {
  }
  protocol::Answer answer;
  try {
    answer = protocol::decode_answer(line);
  } catch (const protocol::ProtocolError&) {
    return 0;
  }
  const QByteArray again = answer.error_kind.isEmpty()
                               ? protocol::encode_result(answer.id, answer.result)
                               : protocol::encode_error(answer.id, answer.error_kind, answer.error_message);
  if (protocol::decode_answer(again.trimmed()).id != answer.id) __builtin_trap();
  try {
    for (const auto& run : protocol::decode_runs(answer.result)) {
      if (run.id <= 0 || !spur::history::valid_status(run.status)) __builtin_trap();
    }
  } catch (const protocol::ProtocolError&) {
  }
  try {
    const auto run = protocol::decode_run(answer.result);
    if (run.id <= 0 || run.params.empty()) __builtin_trap();
  } catch (const protocol::ProtocolError&) {
  }
  try {
    protocol::decode_briefs(answer.result);
  } catch (const protocol::ProtocolError&) {
  }
  try {
    protocol::decode_events(answer.result);
  } catch (const protocol::ProtocolError&) {
  }
  try {
    for (const auto& console_line : protocol::decode_console(answer.result)) {
      if (console_line.rank < -1) __builtin_trap();
    }
  } catch (const protocol::ProtocolError&) {
  }
  try {
    const auto filter = protocol::decode_filter(answer.result);
    if (filter.limit < -1 || filter.offset < 0) __builtin_trap();
  } catch (const protocol::ProtocolError&) {
  }
  return 0;
}
