// SPDX-License-Identifier: Apache-2.0
// The sweep's record and controller (sweep_runner.h).
#include "sweep/sweep_runner.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <QDateTime>
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QLockFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QSysInfo>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>

#include <spur/history/reader.h>
#include <spur/history/records.h>
#include <spur/history/writer.h>

#include "config/run_config.h"
#include "launch/signals.h"
#include "sweep/hyperband.h"

namespace spur::app {
namespace {

// W&B's agent gives up when its first runs all fail (WANDB_AGENT_MAX_INITIAL_FAILURES, 3 by default).
constexpr int kMaxInitialFailures = 3;
constexpr int kTickMs = 100;
constexpr int kHyperbandEveryTicks = 5;

json::Value point_json(const SweepPoint& point) {
  json::Object fields;
  for (const auto& [name, value] : point) fields.emplace_back(name, value);
  return fields;
}

SweepPoint point_from(const json::Value& value) {
  SweepPoint point;
  for (const auto& [name, v] : value.as_object("point")) point.emplace_back(name, v);
  return point;
}

json::Value state_json(const SweepState& s) {
  json::Array runs;
  for (const auto& run : s.runs) {
    json::Object fields = {
        {"index", run.index}, {"point", point_json(run.point)}, {"status", run.status}, {"run_id", run.run_id}};
    if (run.exit_code) fields.emplace_back("exit_code", *run.exit_code);
    runs.emplace_back(std::move(fields));
  }
  json::Array flags;
  for (const auto& flag : s.launch_flags) flags.emplace_back(flag.toStdString());
  return json::Object{{"format", "spur-sweep-1"},
                      {"id", s.id},
                      {"name", s.name},
                      {"file", s.file},
                      {"text", s.text},
                      {"method", s.method},
                      {"seed", static_cast<int64_t>(s.seed)},
                      {"parallel", s.parallel},
                      {"launch_flags", flags},
                      {"status", s.status},
                      {"pid", s.pid},
                      {"pid_start", s.pid_start},
                      {"host", s.host},
                      {"created", s.created},
                      {"runs", runs}};
}

SweepState state_from(const json::Value& v, const std::string& path) {
  try {
    if (v.at("format").as_string() != "spur-sweep-1") throw SweepError(path + ": not a sweep record this Spur reads");
    SweepState s;
    s.id = v.at("id").as_string("id");
    s.name = v.at("name").as_string("name");
    s.file = v.at("file").as_string("file");
    s.text = v.at("text").as_string("text");
    s.method = v.at("method").as_string("method");
    s.seed = static_cast<uint64_t>(v.at("seed").as_int("seed"));
    s.parallel = static_cast<int>(v.at("parallel").as_int("parallel"));
    for (const auto& flag : v.at("launch_flags").as_array("launch_flags")) {
      s.launch_flags << QString::fromStdString(flag.as_string("launch flag"));
    }
    s.status = v.at("status").as_string("status");
    s.pid = v.at("pid").as_int("pid");
    if (const auto* start = v.find("pid_start")) s.pid_start = start->as_int("pid_start");
    s.host = v.at("host").as_string("host");
    s.created = v.at("created").as_double("created");
    for (const auto& r : v.at("runs").as_array("runs")) {
      SweepRunState run;
      run.index = static_cast<int>(r.at("index").as_int("index"));
      run.point = point_from(r.at("point"));
      run.status = r.at("status").as_string("status");
      run.run_id = r.at("run_id").as_int("run_id");
      if (const auto* code = r.find("exit_code")) run.exit_code = static_cast<int>(code->as_int("exit_code"));
      s.runs.push_back(std::move(run));
    }
    return s;
  } catch (const SweepError&) {
    throw;
  } catch (const std::exception& e) {
    throw SweepError(path + ": a damaged sweep record: " + e.what());
  }
}

std::string record_path(const std::string& id) { return sweeps_folder() + "/" + id + ".json"; }

std::string this_host() { return QSysInfo::machineHostName().toStdString(); }

// A process's start time in clock ticks since boot (/proc/PID/stat's 22nd field); 0 when it is gone.
int64_t process_start(int64_t pid) {
  QFile stat(QString("/proc/%1/stat").arg(pid));
  if (pid <= 0 || !stat.open(QIODevice::ReadOnly)) return 0;
  const QByteArray text = stat.readAll();
  const auto close = text.lastIndexOf(')');  // after the command's name, which may hold spaces
  if (close < 0) return 0;
  const QList<QByteArray> fields = text.mid(close + 2).split(' ');
  return fields.size() > 19 ? fields[19].toLongLong() : 0;  // field 22 is the 20th after the name
}

// The sweep's parameters in the run's recorded parameters, where the program did not record them itself.
void record_params(int64_t run_id, const SweepPoint& point) {
  try {
    history::HistoryReader reader;
    const auto run = reader.run(run_id);
    if (!run) return;
    json::Value params = json::parse(run->params.empty() ? "{}" : run->params);
    json::Object fields = params.is_object() ? params.as_object() : json::Object{};
    bool added = false;
    for (const auto& entry : point) {
      const std::string& name = entry.first;
      const bool present = std::any_of(fields.begin(), fields.end(), [&](const auto& f) { return f.first == name; });
      if (!present) {
        fields.emplace_back(name, entry.second);
        added = true;
      }
    }
    if (added) history::HistoryWriter().set_params(run_id, json::write(fields));
  } catch (const std::exception&) {
    // The history busy or gone: the run's own record stands; `spur sweep show` has the values.
  }
}

}  // namespace

int SweepState::count(const std::string& which) const {
  return static_cast<int>(std::count_if(runs.begin(), runs.end(), [&](const auto& r) { return r.status == which; }));
}

std::string sweeps_folder() {
  return QFileInfo(QString::fromStdString(history::default_history_path())).absolutePath().toStdString() + "/sweeps";
}

void save_sweep(const SweepState& state) {
  try {
    write_private_file(record_path(state.id), json::write(state_json(state)) + "\n");
  } catch (const std::exception& e) {
    throw SweepError(record_path(state.id) + ": cannot write the sweep's record: " + e.what());
  }
}

SweepState load_sweep(const std::string& id) {
  const QDir folder(QString::fromStdString(sweeps_folder()));
  QStringList matches;
  for (const QString& name : folder.entryList({"*.json"}, QDir::Files)) {
    if (name == QString::fromStdString(id) + ".json") {
      matches = {name};
      break;
    }
    if (name.startsWith(QString::fromStdString(id))) matches << name;
  }
  if (id.empty() || matches.isEmpty()) {
    throw SweepError("no sweep " + id + " in " + sweeps_folder() + " (spur sweep list shows them)");
  }
  if (matches.size() > 1)
    throw SweepError("sweep id " + id + " is the start of several: " + matches.join(", ").toStdString());
  const std::string path = folder.filePath(matches.front()).toStdString();
  std::string text;
  try {
    text = read_small_file(path, 64 << 20, "a sweep record");
    return state_from(json::parse(text), path);
  } catch (const ConfigError& e) {
    throw SweepError(e.what());
  } catch (const SweepError&) {
    throw;
  } catch (const std::exception& e) {
    throw SweepError(path + ": a damaged sweep record: " + e.what());
  }
}

std::vector<SweepState> list_sweeps(std::vector<std::string>* problems) {
  std::vector<SweepState> out;
  const QDir folder(QString::fromStdString(sweeps_folder()));
  for (const QString& name : folder.entryList({"*.json"}, QDir::Files)) {
    try {
      out.push_back(load_sweep(name.chopped(5).toStdString()));
    } catch (const SweepError& e) {
      if (problems) problems->emplace_back(e.what());
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.created > b.created; });
  return out;
}

std::string new_sweep_id() {
  static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device device;
  std::string id;
  for (int i = 0; i < 8; ++i) id += kAlphabet[device() % 36];
  return id;
}

bool controller_alive(const SweepState& state) {
  return state.pid > 0 && state.host == this_host() && ::kill(static_cast<pid_t>(state.pid), 0) == 0 &&
         (state.pid_start == 0 || process_start(state.pid) == state.pid_start);
}

int run_sweep(SweepState& state, const SweepSpec& spec, const QString& spur_program, QTextStream& out,
              QTextStream& err) {
  // One controller per sweep: two `resume`s at once would launch the same runs twice.
  QDir().mkpath(QString::fromStdString(sweeps_folder()));
  QLockFile lock(QString::fromStdString(sweeps_folder() + "/" + state.id + ".lock"));
  lock.setStaleLockTime(0);  // a lock whose process is gone is taken over
  if (!lock.tryLock(0)) {
    qint64 holder = 0;
    QString host, application;
    lock.getLockInfo(&holder, &host, &application);
    throw SweepError("sweep " + state.id + " is being run by another spur sweep (pid " + std::to_string(holder) +
                     "): stop it first (spur sweep stop " + state.id + ")");
  }
  SignalCounter counter;
  const int signals_before = SignalCounter::count();
  int signals_seen = signals_before;
  state.status = "running";
  state.pid = ::getpid();
  state.pid_start = process_start(state.pid);
  state.host = this_host();
  save_sweep(state);

  struct Active {
    std::unique_ptr<QProcess> process;
    size_t run = 0;
    qint64 pid = 0;
  };
  std::vector<Active> active;
  bool stopping = false, given_up = false;
  int finished_now = 0, failed_now = 0, early_now = 0;
  int ticks = 0;
  QEventLoop loop;
  std::function<void()> tick;

  auto pending = [&]() -> std::optional<size_t> {
    for (size_t i = 0; i < state.runs.size(); ++i) {
      if (state.runs[i].status == "pending") return i;
    }
    return std::nullopt;
  };

  auto launch = [&](size_t i) {
    SweepRunState& run = state.runs[i];
    const QString name = QString::fromStdString(state.name) + "-" + QString::number(run.index);
    QStringList words = {"launch",
                         "--run_name",
                         name,
                         "--tag",
                         QString::fromStdString("sweep:" + state.id),
                         "--tag",
                         QString::fromStdString("sweep_name:" + state.name)};
    // `--env NAME=VALUE` reaches each run as `--env NAME` with the value in its environment (spur launch reads it
    // there): a value, perhaps a token, is never in a child's argument list for other users to see.
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    for (qsizetype i = 0; i < state.launch_flags.size(); ++i) {
      QString flag = state.launch_flags[i], assignment;
      if (flag == "--env" && i + 1 < state.launch_flags.size()) {
        assignment = state.launch_flags[++i];
      } else if (flag.startsWith("--env=")) {
        assignment = flag.mid(6);
      } else {
        words << flag;
        continue;
      }
      const auto eq = assignment.indexOf('=');
      if (eq > 0) environment.insert(assignment.left(eq), assignment.mid(eq + 1));
      words << "--env" << (eq > 0 ? assignment.left(eq) : assignment);
    }
    for (const auto& word : spec.command_for(run.point)) words << QString::fromStdString(word);
    auto process = std::make_unique<QProcess>();
    process->setProgram(spur_program);
    process->setArguments(words);
    process->setProcessChannelMode(QProcess::ForwardedChannels);
    environment.insert("SPUR_SWEEP_ID", QString::fromStdString(state.id));
    environment.insert("SPUR_SWEEP_RUN", QString::number(run.index));
    process->setProcessEnvironment(environment);
    // Its own process group, so that a terminal's Ctrl-C reaches the controller alone (which stops each run once);
    // and a SIGINT when the controller dies, so that no run outlives it unseen.
    process->setChildProcessModifier([] {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGINT);
    });
    QString shown;
    for (const auto& word : spec.command_for(run.point)) shown += " " + QString::fromStdString(word);
    out << "spur sweep " << QString::fromStdString(state.id) << ": run " << run.index << "/" << state.runs.size() << ":"
        << shown << "\n";
    out.flush();
    process->start();
    if (!process->waitForStarted(10000)) {
      // Not the run's fault: it stays pending for `resume`, and the sweep stops launching.
      err << "spur sweep " << QString::fromStdString(state.id) << ": cannot start " << spur_program << ": "
          << process->errorString() << "; stopping (spur sweep resume " << QString::fromStdString(state.id)
          << " launches the rest)\n";
      given_up = true;
      return;
    }
    run.status = "running";
    run.run_id = 0;
    run.exit_code.reset();
    // A run's end is seen at once, not at the next tick (queued: the process is not deleted inside its signal).
    QObject::connect(
        process.get(), &QProcess::finished, &loop, [&tick] { tick(); }, Qt::QueuedConnection);
    active.push_back({std::move(process), i, 0});
    active.back().pid = active.back().process->processId();
    save_sweep(state);
  };

  // The history's runs of this sweep, matched to the processes by the launcher's pid.
  auto find_run_ids = [&] {
    bool missing = false;
    for (const auto& a : active) missing = missing || state.runs[a.run].run_id == 0;
    if (!missing) return;
    try {
      history::HistoryReader reader;
      history::RunFilter filter;
      filter.tag = "sweep:" + state.id;
      for (const auto& run : reader.runs(filter)) {
        for (const auto& a : active) {
          if (state.runs[a.run].run_id == 0 && run.pid == a.pid) state.runs[a.run].run_id = run.id;
        }
      }
    } catch (const std::exception&) {
      // No history yet (the first run is still starting): next time.
    }
  };

  auto hyperband = [&] {
    if (!spec.early_terminate || stopping) return;
    std::vector<HyperbandRun> runs;
    std::vector<size_t> which;
    try {
      history::HistoryReader reader;
      for (size_t i = 0; i < state.runs.size(); ++i) {
        const auto& run = state.runs[i];
        if (run.run_id == 0) continue;
        HyperbandRun h;
        for (const auto& p : reader.series(run.run_id, spec.metric_name)) {
          if (std::isfinite(p.value)) h.history.push_back(p.value);
        }
        h.running = run.status == "running";
        runs.push_back(std::move(h));
        which.push_back(i);
      }
    } catch (const std::exception&) {
      return;
    }
    for (const size_t k : hyperband_stop(runs, *spec.early_terminate, spec.metric_goal == "maximize")) {
      SweepRunState& run = state.runs[which[k]];
      for (const auto& a : active) {
        if (a.run != which[k]) continue;
        const auto& h = runs[k].history;
        out << "spur sweep " << QString::fromStdString(state.id) << ": run " << run.index << " stopped early by "
            << "Hyperband (" << QString::fromStdString(spec.metric_name) << " after " << h.size()
            << " values: " << QString::fromStdString(sweep_value_text(h.back())) << ")\n";
        out.flush();
        run.status = "early_terminated";
        ::kill(static_cast<pid_t>(a.pid), SIGINT);
        save_sweep(state);
      }
    }
  };

  auto reap = [&] {
    for (auto it = active.begin(); it != active.end();) {
      if (it->process->state() != QProcess::NotRunning) {
        ++it;
        continue;
      }
      SweepRunState& run = state.runs[it->run];
      const int code = it->process->exitStatus() == QProcess::NormalExit ? it->process->exitCode() : 128 + SIGKILL;
      run.exit_code = code;
      if (run.run_id == 0) find_run_ids();
      if (run.status == "early_terminated") {
        ++early_now;
      } else if (code == 0) {
        run.status = "finished";
        ++finished_now;
      } else if (stopping) {
        run.status = "stopped";
      } else {
        run.status = "failed";
        ++failed_now;
        err << "spur sweep " << QString::fromStdString(state.id) << ": run " << run.index << " failed (exit " << code
            << "); the sweep goes on\n";
      }
      if (run.run_id != 0) record_params(run.run_id, run.point);
      save_sweep(state);
      it = active.erase(it);
    }
  };

  auto step = [&] {
    // Runs that ended are reaped first: a signal sent below must not reach a pid that is free again.
    for (auto& a : active) a.process->waitForFinished(0);
    reap();
    if (stopping && SignalCounter::count() != signals_seen) {
      // A second Ctrl-C: the runs' launchers get SIGTERM (each stops its ranks at once).
      signals_seen = SignalCounter::count();
      err << "spur sweep " << QString::fromStdString(state.id) << ": stopping the runs now (SIGTERM)\n";
      for (const auto& a : active) ::kill(static_cast<pid_t>(a.pid), SIGTERM);
    }
    if (!stopping && SignalCounter::count() != signals_before) {
      signals_seen = SignalCounter::count();
      stopping = true;
      err << "spur sweep " << QString::fromStdString(state.id) << ": stopping (" << signal_name(SignalCounter::last())
          << "): the runs started are stopped, the rest wait for spur sweep resume " << QString::fromStdString(state.id)
          << "\n";
      err.flush();
      for (const auto& a : active) ::kill(static_cast<pid_t>(a.pid), SIGINT);
    }
    if (++ticks % kHyperbandEveryTicks == 0) {
      find_run_ids();
      hyperband();
    }
    if (!stopping && !given_up && failed_now >= kMaxInitialFailures && finished_now == 0 && early_now == 0 &&
        state.count("finished") == 0) {
      given_up = true;
      err << "spur sweep " << QString::fromStdString(state.id) << ": the first " << failed_now
          << " runs failed and none finished: stopping (is the program or a parameter at fault? spur runs logs "
             "shows a run's output)\n";
    }
    while (!stopping && !given_up && static_cast<int>(active.size()) < state.parallel) {
      const auto next = pending();
      if (!next) break;
      launch(*next);
    }
    if (active.empty() && (stopping || given_up || !pending())) loop.quit();
  };
  // Nothing may escape the event loop (Qt does not carry exceptions through it): a failure stops the sweep as a
  // signal does, and is said.
  tick = [&] {
    try {
      step();
    } catch (const std::exception& e) {
      err << "spur sweep " << QString::fromStdString(state.id) << ": " << e.what() << "; stopping\n";
      err.flush();
      if (!stopping) {
        stopping = true;
        for (const auto& a : active) ::kill(static_cast<pid_t>(a.pid), SIGINT);
      }
      if (active.empty()) loop.quit();
    }
  };

  QTimer timer;
  QObject::connect(&timer, &QTimer::timeout, &loop, tick);
  timer.start(kTickMs);
  QTimer::singleShot(0, &loop, tick);
  loop.exec();

  const int finished = state.count("finished"), failed = state.count("failed"), early = state.count("early_terminated");
  if (!stopping && finished + early == 0 && (given_up || failed > 0)) {
    state.status = "failed";
  } else if (!stopping && state.count("pending") == 0) {
    state.status = "finished";
  } else {
    state.status = "stopped";  // by a signal, or runs left
  }
  state.pid = 0;
  save_sweep(state);
  out << "spur sweep " << QString::fromStdString(state.id) << " " << QString::fromStdString(state.status) << ": "
      << finished << " finished, " << early << " stopped early, " << failed << " failed, "
      << state.count("pending") + state.count("stopped") << " not run (spur sweep show "
      << QString::fromStdString(state.id) << ")\n";
  out.flush();
  if (stopping) return 130;
  // Given up (its first runs all failed, or `spur` would not start), or nothing but failures: 1.
  return given_up || (finished + early == 0 && failed > 0) ? 1 : 0;
}

}  // namespace spur::app
