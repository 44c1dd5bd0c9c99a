// SPDX-License-Identifier: Apache-2.0
// How a run's record reads to a person: its status (a "running" run whose process here is gone has failed),
// progress with an ETA, times and durations. Shared by `spur runs` and the Studio's runs table.
#pragma once

#include <QString>

#include <spur/history/records.h>

#include "launch/run_recorder.h"  // local_host_name()

namespace spur::app {

/// Whether the run's process (pid on this machine) is still the one that created it: alive, and started no
/// later than the run was created (a reused pid is not).
bool owns_run(const history::Run& run);
/// The stored status, except that a queued or running run whose process on this machine no longer exists is
/// "failed" (it was killed without a chance to say so).
QString effective_status(const history::Run& run);
/// "120/500 24% eta 3m10s", "step 120" without a total, "-" before the first value.
QString progress_text(const history::Run& run);
/// 0..1, or -1 when the total is unknown.
double progress_fraction(const history::Run& run);
/// Whether seconds since the epoch are a time: finite, after 1970 and before year 10000 (an imported file's wall
/// times can be anything).
bool plausible_time(double seconds_since_epoch);
/// "2026-11-29 18:43:03"; "-" for 0, and for what is not a time (NaN, negative, past year 9999).
QString time_text(double seconds_since_epoch);
/// "12m05s", "3h04m"; "-" for what is not a duration (NaN, negative, longer than the calendar).
QString duration_text(double seconds);
/// "12.3 MB", "512 B": sizes as a file manager shows them (powers of 1000).
QString size_text(qint64 bytes);
/// Text from the history (a run's name, a tag, an imported folder's name) made safe to print on a terminal:
/// control characters (C0 but tab, DEL, C1) and the bidirectional overrides come out as \xHH or \u{HHHH}, so
/// that a name cannot move the cursor, change colours or retitle the window.
QString terminal_text(const QString& text);
/// Empty when the history file at path is private (or does not exist yet); else a warning that others can read it,
/// with its mode and the command that fixes it. Spur creates histories 0600 (consoles and configs can hold
/// secrets); one made by an older Spur, or loosened by hand, keeps its mode. `spur env` and the Studio show it.
QString history_permission_warning(const QString& path);
/// Seconds from start to end (or to now while running); -1 before it started.
double run_duration(const history::Run& run);

/// Asks the launcher of a running run to stop it (SIGTERM: it stops every rank, or the SageMaker job, and records
/// "stopped"). An error saying why not (finished already, launched on another machine) otherwise.
QString stop_run(const history::Run& run);

}  // namespace spur::app
