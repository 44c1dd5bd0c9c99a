// SPDX-License-Identifier: Apache-2.0
// The secret rule; see secrets.h.
#include "launch/secrets.h"

#include <QRegularExpression>

#include "launch/launch_request.h"

namespace spur::app {

bool is_secret_name(const QString& name) {
  static const QRegularExpression anywhere("PASSWORD|PASSWD|PASSPHRASE|SECRET|CREDENTIAL|TOKEN(?!IZER)",
                                           QRegularExpression::CaseInsensitiveOption);
  static const QRegularExpression word("(^|_)(KEY|APIKEY|PAT)($|_)|_PWD($|_)",
                                       QRegularExpression::CaseInsensitiveOption);
  return anywhere.match(name).hasMatch() || word.match(name).hasMatch();
}

bool has_url_password(const QString& value) {
  // scheme://[user]:password@host: a colon in the part before '@', with no '/' before either.
  static const QRegularExpression url("^[A-Za-z][A-Za-z0-9+.-]*://[^/@\\s]*:[^/@\\s]*@");
  return url.match(value).hasMatch();
}

bool is_secret(const QString& name, const QString& value) { return is_secret_name(name) || has_url_password(value); }

QString shown_value(const QString& name, const QString& value) {
  return is_secret(name, value) ? QString("<redacted>") : value;
}

QStringList redact_secrets(const QStringList& launch_arguments) {
  QStringList words = launch_arguments;
  const auto redact = [](const QString& assignment) {
    const auto eq = assignment.indexOf('=');
    return eq > 0 && is_secret(assignment.left(eq), assignment.mid(eq + 1)) ? assignment.left(eq) : assignment;
  };
  // Launch's own flags only: they end at "--" or at the program, whose arguments are its business.
  for (qsizetype i = 0; i < words.size(); ++i) {
    const QString& word = words[i];
    if (word == "--" || !word.startsWith("--")) break;
    const qsizetype eq = word.indexOf('=');
    const QString flag = word.mid(2, eq < 0 ? -1 : eq - 2).replace('-', '_');
    if (flag == "env") {
      if (eq >= 0) {
        words[i] = word.left(eq + 1) + redact(word.mid(eq + 1));
      } else if (i + 1 < words.size()) {
        words[i + 1] = redact(words[i + 1]);
        ++i;
      }
    } else if (eq < 0 && launch_valued_flags().contains(flag)) {
      ++i;  // its value
    }
  }
  return words;
}

QJsonObject redacted_variables(const QJsonObject& variables) {
  QJsonObject out;
  for (auto it = variables.begin(); it != variables.end(); ++it) {
    const QString value = it.value().toString();
    out.insert(it.key(), it.value().isString() && is_secret(it.key(), value) ? QJsonValue("<redacted>") : it.value());
  }
  return out;
}

}  // namespace spur::app
