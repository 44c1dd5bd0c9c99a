// SPDX-License-Identifier: Apache-2.0
// The Studio's sweep questions and the file they write; see sweep_form.h.
#include "sweep/sweep_form.h"

#include <QObject>
#include <QRegularExpression>

#include <charconv>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include <spur/json.h>

#include "launch/secrets.h"
#include "sweep/sweep_spec.h"

namespace spur::app {
namespace {

bool is_integer(const QString& text) {
  static const QRegularExpression integer(R"(^[-+]?\d{1,18}$)");
  return integer.match(text).hasMatch();
}

// A number as typed, or nothing.
std::optional<double> number(const QString& text) {
  std::string s = text.trimmed().toStdString();
  if (s.size() > 1 && s[0] == '+') s.erase(0, 1);  // from_chars takes no plus sign
  double value = 0;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, value);
  if (s.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) return std::nullopt;
  return value;
}

// One value as YAML that PyYAML (W&B's reader) and Spur read alike: integers as they are, other numbers with a
// point and a signed exponent (PyYAML reads 1e-5 as a string, 1.0e-05 as a float), true/false, anything else a
// quoted string.
std::string yaml_scalar(const QString& typed) {
  const QString text = typed.trimmed();
  if (is_integer(text)) return QString::number(text.toLongLong()).toStdString();  // at most 18 digits: exact
  if (const auto value = number(text)) {
    char buffer[64];
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, *value);
    std::string out(buffer, end);
    const auto e = out.find('e');
    const std::string mantissa = out.substr(0, e);
    std::string exponent = e == std::string::npos ? std::string() : out.substr(e + 1);
    std::string result = mantissa.find('.') == std::string::npos ? mantissa + ".0" : mantissa;
    if (!exponent.empty()) result += "e" + (exponent[0] == '-' || exponent[0] == '+' ? exponent : "+" + exponent);
    return result;
  }
  const QString lower = text.toLower();
  if (lower == "true" || lower == "false") return lower.toStdString();
  return json::write(json::Value(text.toStdString()));
}

std::string quoted(const QString& text) { return json::write(json::Value(text.toStdString())); }

}  // namespace

QString SweepLaunch::command_line(const QString& spur) const {
  QString line = working_directory.isEmpty() ? QString() : "cd " + shell_quote({working_directory}) + " && ";
  if (!history.isEmpty()) line += "SPUR_HISTORY=" + shell_quote({history}) + " ";
  return line + shell_quote({spur}) + " " + shell_quote(arguments);
}

DetachedLaunch sweep_detached(const SweepLaunch& sweep, const QString& log_file, QProcessEnvironment environment,
                              const QString& spur) {
  if (!sweep.history.isEmpty()) environment.insert("SPUR_HISTORY", sweep.history);
  return start_detached(sweep.arguments, sweep.working_directory, log_file, environment, spur, true);
}

SweepLaunch SweepLaunch::shown() const {
  SweepLaunch out = *this;
  if (const qsizetype dash = arguments.indexOf("--"); dash >= 0) {
    out.arguments = arguments.mid(0, dash + 1) + redact_secrets(arguments.mid(dash + 1));
  }
  return out;
}

std::vector<SweepForm::Parameter> SweepForm::parse_parameters(const QString& text) {
  static const QRegularExpression name_pattern(R"(^[A-Za-z_][A-Za-z0-9_.\-]*$)");
  static const QRegularExpression range(R"(^(\S+)\s*\.\.\s*(\S+?)(\s+log)?$)");
  std::vector<Parameter> out;
  const QStringList lines = text.split('\n');
  for (qsizetype i = 0; i < lines.size(); ++i) {
    const QString line = lines[i].trimmed();
    if (line.isEmpty() || line.startsWith('#')) continue;
    const auto fail = [&](const QString& what) {
      throw std::invalid_argument(QString("line %1: %2").arg(i + 1).arg(what).toStdString());
    };
    const qsizetype colon = line.indexOf(':');
    if (colon < 0) fail("\"" + line + "\" is not NAME: VALUES (lr: 0.001, 0.01 or lr: 1e-5 .. 1e-2 log)");
    Parameter p;
    p.line = static_cast<int>(i + 1);
    p.name = line.left(colon).trimmed();
    if (!name_pattern.match(p.name).hasMatch()) {
      fail("\"" + p.name + "\" is not a parameter name (letters, digits, _ . -, not starting with a digit)");
    }
    for (const auto& seen : out) {
      if (seen.name == p.name) fail(p.name + " is given twice (line " + QString::number(seen.line) + " too)");
    }
    const QString rest = line.mid(colon + 1).trimmed();
    if (rest.isEmpty()) fail(p.name + " has no values");
    // A range when a number comes before its ".." ("../data" and "v1..v2" are constants).
    const qsizetype dots = rest.indexOf("..");
    if (dots > 0 && !rest.contains(',') && number(rest.left(dots))) {
      const auto match = range.match(rest);
      if (!match.hasMatch() || !number(match.captured(2))) {
        fail(p.name + ": a range is MIN .. MAX, two numbers, optionally followed by log");
      }
      p.kind = match.captured(3).isEmpty() ? Parameter::Kind::Range : Parameter::Kind::LogRange;
      p.min = match.captured(1);
      p.max = match.captured(2);
    } else if (rest.contains(',')) {
      p.kind = Parameter::Kind::Values;
      for (const QString& value : rest.split(',')) {
        if (value.trimmed().isEmpty()) fail(p.name + ": an empty value between commas");
        p.values << value.trimmed();
      }
    } else {
      p.kind = Parameter::Kind::Constant;
      p.values << rest;
    }
    out.push_back(std::move(p));
  }
  return out;
}

QString SweepForm::parameters_text(const std::vector<Parameter>& parameters) {
  QStringList lines;
  for (const auto& p : parameters) {
    switch (p.kind) {
      case Parameter::Kind::Values:
      case Parameter::Kind::Constant:
        lines << p.name + ": " + p.values.join(", ");
        break;
      case Parameter::Kind::Range:
        lines << p.name + ": " + p.min + " .. " + p.max;
        break;
      case Parameter::Kind::LogRange:
        lines << p.name + ": " + p.min + " .. " + p.max + " log";
        break;
    }
  }
  return lines.join('\n');
}

QString SweepForm::sweep_name(const QString& program) const {
  if (!name.trimmed().isEmpty()) return name.trimmed();
  const QString base = program.trimmed().section('/', -1).section('.', 0, 0);
  return (base.isEmpty() ? QString("sweep") : base) + "-sweep";
}

QString SweepForm::to_yaml(const QString& program, const QStringList& arguments) const {
  std::string out = "# A W&B sweep file, written by Spur Studio: spur sweep run FILE (docs/sweeps.md)\n";
  out += "name: " + quoted(sweep_name(program)) + "\n";
  out += "program: " + quoted(program) + "\n";
  out += "method: " + method.toStdString() + "\n";
  if (!metric.trimmed().isEmpty()) {
    out += "metric:\n  name: " + quoted(metric.trimmed()) + "\n  goal: " + goal.toStdString() + "\n";
  }
  if (count > 0) out += "run_cap: " + std::to_string(count) + "\n";
  if (hyperband) {
    out += "early_terminate:\n  type: hyperband\n  min_iter: " + std::to_string(min_iter) + "\n";
  }
  if (!arguments.isEmpty()) {
    // The program's own arguments stay in every run, before the swept ones (W&B's agent's order).
    out += "command:\n  - ${env}\n  - ${interpreter}\n  - ${program}\n";
    for (const auto& word : arguments) out += "  - " + quoted(word) + "\n";
    out += "  - ${args}\n";
  }
  out += "parameters:\n";
  for (const auto& p : parameters) {
    out += "  " + quoted(p.name) + ":\n";
    switch (p.kind) {
      case Parameter::Kind::Constant:
        out += "    value: " + yaml_scalar(p.values.value(0)) + "\n";
        break;
      case Parameter::Kind::Values: {
        std::string list;
        for (const auto& value : p.values) list += (list.empty() ? "" : ", ") + yaml_scalar(value);
        out += "    values: [" + list + "]\n";
        break;
      }
      case Parameter::Kind::LogRange:
        out += "    distribution: log_uniform_values\n";
        [[fallthrough]];
      case Parameter::Kind::Range:
        out += "    min: " + yaml_scalar(p.min) + "\n    max: " + yaml_scalar(p.max) + "\n";
        break;
    }
  }
  return QString::fromStdString(out);
}

QString SweepForm::problem(const QString& program, const QStringList& arguments) const {
  if (program.trimmed().isEmpty()) return QObject::tr("choose the training program (on the page before)");
  if (parameters.empty()) return QObject::tr("at least one parameter to sweep");
  if (method == "random" && count <= 0) return QObject::tr("a random sweep needs a number of runs");
  const QString yaml = to_yaml(program, arguments);
  try {
    const auto spec = SweepSpec::parse(yaml.toStdString(), "sweep");
    (void)spec.points(count > 0 ? std::optional<int64_t>(count) : std::nullopt, seed);
    return {};
  } catch (const SweepError& e) {
    // "sweep:LINE: what": named by the parameter whose entry holds that line.
    static const QRegularExpression located(R"(^sweep:(\d+): (.*)$)", QRegularExpression::DotMatchesEverythingOption);
    const QString what = QString::fromUtf8(e.what());
    const auto match = located.match(what);
    if (!match.hasMatch()) return what.startsWith("sweep: ") ? what.mid(7) : what;
    const int line = match.captured(1).toInt();
    const QStringList lines = yaml.split('\n');
    // The parameter entry at or above the line ("  "name":" at two spaces' indent, under parameters:).
    for (int i = std::min<int>(line, static_cast<int>(lines.size())) - 1; i >= 0; --i) {
      if (lines[i] == "parameters:") break;
      if (lines[i].startsWith("  \"")) {
        const QString key = lines[i].trimmed().chopped(1);
        const std::string name = json::parse(key.toStdString()).as_string();
        for (const auto& p : parameters) {
          if (p.name.toStdString() == name) return QObject::tr("line %1: %2").arg(p.line).arg(match.captured(2));
        }
      }
    }
    return match.captured(2);
  }
}

int64_t SweepForm::run_count(const QString& program, const QStringList& arguments) const {
  if (!problem(program, arguments).isEmpty()) return 0;
  const auto spec = SweepSpec::parse(to_yaml(program, arguments).toStdString(), "sweep");
  return static_cast<int64_t>(spec.points(count > 0 ? std::optional<int64_t>(count) : std::nullopt, seed).size());
}

SweepLaunch SweepForm::launch(const QString& sweep_file, const LaunchRequest& request) const {
  SweepLaunch out;
  out.working_directory = request.working_directory;
  out.history = request.history;
  out.name = sweep_name(request.program);
  out.arguments << "sweep"
                << "run" << sweep_file << "--parallel" << QString::number(parallel);
  if (method == "random") out.arguments << "--seed" << QString::number(seed);
  out.arguments << "--";
  if (!request.config_file.isEmpty()) out.arguments << "--config_file" << request.config_file;
  for (const auto& flag : split_launch_flags(request.flags)) {
    if (flag.name != "run_name") out.arguments << flag.words;
  }
  return out;
}

}  // namespace spur::app
