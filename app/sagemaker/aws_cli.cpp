// SPDX-License-Identifier: Apache-2.0
// The AWS CLI as a subprocess; see aws_cli.h. Each call runs in its own process group so that Ctrl-C at the
// terminal reaches `spur` (which then stops the job cleanly) and not the call in flight.
#include "sagemaker/aws_cli.h"

#include <unistd.h>

#include <QFileInfo>
#include <QJsonDocument>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>

namespace spur::app {

QString find_aws_cli(const QProcessEnvironment& environment) {
  QString chosen = environment.value("SPUR_AWS_CLI");
  if (!chosen.isEmpty()) return chosen;
  if (QFileInfo("/usr/bin/aws").isExecutable()) return "/usr/bin/aws";
  return QStandardPaths::findExecutable("aws");
}

AwsCli::AwsCli(AwsOptions options) : options_(std::move(options)) {
  if (options_.program.isEmpty()) options_.program = find_aws_cli();
}

QStringList AwsCli::command(const QString& service, const QString& operation, const QStringList& arguments) const {
  QStringList command{options_.program.isEmpty() ? QString("aws") : options_.program};
  if (!options_.endpoint_url.isEmpty()) command << "--endpoint-url" << options_.endpoint_url;
  if (!options_.region.isEmpty()) command << "--region" << options_.region;
  if (!options_.profile.isEmpty()) command << "--profile" << options_.profile;
  command << service << operation << arguments << "--output"
          << "json";
  return command;
}

QJsonObject AwsCli::call(const QString& service, const QString& operation, const QStringList& arguments) const {
  if (options_.program.isEmpty()) {
    throw AwsError("the AWS CLI is not installed (Debian: apt install awscli; or set SPUR_AWS_CLI to its path)", 127,
                   {});
  }
  const QStringList line = command(service, operation, arguments);
  QProcess process;
  auto environment = QProcessEnvironment::systemEnvironment();
  environment.insert("AWS_PAGER", "");  // never page JSON through `less`
  process.setProcessEnvironment(environment);
  process.setChildProcessModifier([] { ::setpgid(0, 0); });
  // No prompt can be answered from here (an MFA code, SSO): it must fail at once rather than hang.
  process.setStandardInputFile(QProcess::nullDevice());
  process.start(line.front(), line.mid(1));
  if (!process.waitForStarted(10000)) {
    throw AwsError("cannot run " + line.front() + ": " + process.errorString(), 127, {});
  }
  if (!process.waitForFinished(options_.timeout_seconds * 1000)) {
    process.kill();
    process.waitForFinished(2000);
    throw AwsError(QString("aws %1 %2 gave no answer within %3 s (if your credentials need a prompt, such as an MFA "
                           "code, sign in first: aws sts get-caller-identity)")
                       .arg(service, operation)
                       .arg(options_.timeout_seconds),
                   124, {});
  }
  const QByteArray output = process.readAllStandardOutput();
  const QString errors = QString::fromLocal8Bit(process.readAllStandardError()).trimmed();
  const int code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : 128;
  if (code != 0) {
    // "An error occurred (ResourceInUse) when calling the CreateTrainingJob operation: ..."
    static const QRegularExpression service_error(R"(An error occurred \(([^)]+)\) when calling)");
    const auto match = service_error.match(errors);
    QString message = errors.isEmpty() ? QString("exit code %1").arg(code) : errors.split('\n').last();
    if (code == 253) message = "AWS credentials or configuration: " + message;
    throw AwsError(QString("aws %1 %2: %3").arg(service, operation, message), code,
                   match.hasMatch() ? match.captured(1) : QString());
  }
  if (output.trimmed().isEmpty()) return {};
  QJsonParseError parse{};
  const auto document = QJsonDocument::fromJson(output, &parse);
  if (parse.error != QJsonParseError::NoError || !document.isObject()) {
    throw AwsError(QString("aws %1 %2 answered something that is not JSON: %3")
                       .arg(service, operation, QString::fromLocal8Bit(output.left(200))),
                   0, {});
  }
  return document.object();
}

}  // namespace spur::app
