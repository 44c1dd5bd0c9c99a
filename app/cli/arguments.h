// SPDX-License-Identifier: Apache-2.0
// Command-line flags as Accelerate spells them: `--num_processes 2`, `--num-processes=2`, boolean `--cpu`.
// Each sub-command declares its flags; anything else is an error naming the flag.
#pragma once

#include <QHash>
#include <QSet>
#include <QString>
#include <QStringList>

#include <optional>
#include <stdexcept>

namespace spur::cli {

class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const QString& message) : std::runtime_error(message.toStdString()) {}
};

class Arguments {
 public:
  /// `valued`: flags that take a value; `switches`: boolean flags. Names without dashes, with underscores.
  /// With `stop_at_positional`, the first non-flag and everything after it are positional (a program and its
  /// own arguments, as `spur launch` takes them).
  Arguments(const QStringList& arguments, const QSet<QString>& valued, const QSet<QString>& switches,
            bool stop_at_positional = false);

  bool has(const QString& name) const { return values_.contains(name) || switches_.contains(name); }
  std::optional<QString> value(const QString& name) const;
  /// Every value a repeatable flag was given, in order (`value` is the last one).
  QStringList values(const QString& name) const { return all_values_.value(name); }
  /// The value as an integer in [minimum, maximum]; UsageError naming the flag otherwise.
  std::optional<qint64> integer(const QString& name, qint64 minimum, qint64 maximum) const;
  /// "true"/"false" (and yes/no, 1/0) for flags given a value.
  std::optional<bool> boolean(const QString& name) const;
  /// Arguments that are not flags, in order.
  const QStringList& positional() const { return positional_; }

 private:
  QHash<QString, QString> values_;
  QHash<QString, QStringList> all_values_;
  QSet<QString> switches_;
  QStringList positional_;
};

}  // namespace spur::cli
