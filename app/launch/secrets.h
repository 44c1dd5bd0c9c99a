// SPDX-License-Identifier: Apache-2.0
// The one rule for what is a secret in a run's environment, used wherever a value could be shown, stored or passed
// on a command line: dry runs, the recorded command, the SSH fan-out and the Slurm job's files.
//
// A name is a secret's when it says so: PASSWORD, PASSWD, PASSPHRASE, SECRET, CREDENTIAL or TOKEN anywhere in it
// (PGPASSWORD, HFTOKEN, GITHUB_TOKEN; not TOKENIZERS_PARALLELISM), a word KEY, APIKEY or PAT (WANDB_API_KEY,
// AWS_SECRET_ACCESS_KEY, GITHUB_PAT), or a word PWD after another (MYSQL_PWD; not PWD or OLDPWD, which are folders).
// A value is one when it is a URL with a password (DATABASE_URL=postgres://user:pass@host/db), whatever its name.
#pragma once

#include <QJsonObject>
#include <QString>
#include <QStringList>

namespace spur::app {

/// True when a variable of this name holds a secret (case does not matter).
bool is_secret_name(const QString& name);
/// True when `value` is a URL with a password in it (scheme://user:password@host...).
bool has_url_password(const QString& value);
/// is_secret_name(name) or has_url_password(value).
bool is_secret(const QString& name, const QString& value);
/// What may be shown of `value`: "<redacted>" for a secret, else the value.
QString shown_value(const QString& name, const QString& value);
/// `spur launch` arguments as the history stores them: `--env NAME=VALUE` of a secret becomes `--env NAME` (a
/// relaunch takes the value from its own environment).
QStringList redact_secrets(const QStringList& launch_arguments);
/// A JSON object of variables (a SageMaker job's Environment or HyperParameters) with secrets' values redacted.
QJsonObject redacted_variables(const QJsonObject& variables);

}  // namespace spur::app
