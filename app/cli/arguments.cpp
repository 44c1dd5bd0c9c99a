// SPDX-License-Identifier: Apache-2.0
// Flag parsing for the `spur` sub-commands; see arguments.h.
#include "cli/arguments.h"

namespace spur::cli {

Arguments::Arguments(const QStringList& arguments, const QSet<QString>& valued, const QSet<QString>& switches,
                     bool stop_at_positional) {
  for (int i = 0; i < arguments.size(); ++i) {
    const QString& argument = arguments[i];
    if (argument == "--" || (stop_at_positional && !argument.startsWith("--"))) {
      positional_ << arguments.mid(argument == "--" ? i + 1 : i);
      return;
    }
    if (!argument.startsWith("--")) {
      positional_ << argument;
      continue;
    }
    QString name = argument.mid(2);
    std::optional<QString> inline_value;
    if (const int eq = name.indexOf('='); eq >= 0) {
      inline_value = name.mid(eq + 1);
      name = name.left(eq);
    }
    name.replace('-', '_');
    if (switches.contains(name)) {
      if (inline_value) throw UsageError("--" + name + " takes no value");
      switches_.insert(name);
    } else if (valued.contains(name)) {
      if (inline_value) {
        values_[name] = *inline_value;
      } else if (i + 1 < arguments.size()) {
        values_[name] = arguments[++i];
      } else {
        throw UsageError("--" + name + " needs a value");
      }
      all_values_[name] << values_[name];
    } else {
      throw UsageError("unknown flag --" + name);
    }
  }
}

std::optional<QString> Arguments::value(const QString& name) const {
  if (!values_.contains(name)) return std::nullopt;
  return values_.value(name);
}

std::optional<qint64> Arguments::integer(const QString& name, qint64 minimum, qint64 maximum) const {
  const auto text = value(name);
  if (!text) return std::nullopt;
  bool ok = false;
  const qint64 number = text->toLongLong(&ok);
  if (!ok) throw UsageError("--" + name + " needs an integer, not '" + *text + "'");
  if (number < minimum || number > maximum) {
    throw UsageError(QString("--%1 must be between %2 and %3, not %4").arg(name).arg(minimum).arg(maximum).arg(number));
  }
  return number;
}

std::optional<bool> Arguments::boolean(const QString& name) const {
  const auto text = value(name);
  if (!text) return std::nullopt;
  const QString lower = text->toLower();
  if (lower == "true" || lower == "yes" || lower == "1") return true;
  if (lower == "false" || lower == "no" || lower == "0") return false;
  throw UsageError("--" + name + " needs true or false, not '" + *text + "'");
}

}  // namespace spur::cli
