// SPDX-License-Identifier: Apache-2.0
// AwsCli: runs the system AWS CLI (`aws SERVICE OPERATION ... --output json`) and returns its JSON answer.
// Credentials stay in the user's AWS configuration: Spur passes only the profile, region and endpoint.
#pragma once

#include <QJsonObject>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

#include <stdexcept>

namespace spur::app {

/// A failed AWS call; the message quotes the CLI's own explanation.
class AwsError : public std::runtime_error {
 public:
  AwsError(const QString& message, int exit_code, QString error_code)
      : std::runtime_error(message.toStdString()), exit_code_(exit_code), error_code_(std::move(error_code)) {}
  /// The CLI's exit status: 253 credentials or configuration, 254 the service refused, 255 other.
  int exit_code() const { return exit_code_; }
  /// The service's error code ("ResourceInUse", "ValidationException"...), empty when there is none.
  const QString& error_code() const { return error_code_; }

 private:
  int exit_code_;
  QString error_code_;
};

struct AwsOptions {
  /// The `aws` program; empty: find_aws_cli().
  QString program;
  QString region;
  QString profile;
  /// --endpoint-url for every call (a VPC endpoint, or a test's loopback server).
  QString endpoint_url;
  int timeout_seconds = 120;
};

/// $SPUR_AWS_CLI, else Debian's /usr/bin/aws, else `aws` on PATH (another `aws`, such as a pyenv shim, may
/// shadow Debian's on PATH); empty when none is found.
QString find_aws_cli(const QProcessEnvironment& environment = QProcessEnvironment::systemEnvironment());

class AwsCli {
 public:
  explicit AwsCli(AwsOptions options);

  /// Runs `aws SERVICE OPERATION ARGUMENTS... --output json` and parses its answer. Throws AwsError.
  QJsonObject call(const QString& service, const QString& operation, const QStringList& arguments) const;
  /// The command line call() runs, for --dry_run.
  QStringList command(const QString& service, const QString& operation, const QStringList& arguments) const;
  const AwsOptions& options() const { return options_; }

 private:
  AwsOptions options_;
};

}  // namespace spur::app
