// SPDX-License-Identifier: Apache-2.0
// The `spur` command as a user runs it: --version, env (text and JSON), and a clear error for a wrong command.
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

#include "rank_group.h"
#include "test_main.h"

namespace {

spur::test::RankResult spur_cli(const QStringList& arguments) {
  return spur::test::run_process(SPUR_CLI, arguments, QProcessEnvironment::systemEnvironment(), 30000);
}

}  // namespace

class CliTest : public QObject {
  Q_OBJECT

 private slots:
  void version() {
    const auto result = spur_cli({"--version"});
    QCOMPARE(result.exit_code, 0);
    QCOMPARE(result.output.trimmed(), QString("spur " SPUR_VERSION_STRING));
  }

  void env_names_versions_and_blas() {
    const auto result = spur_cli({"env"});
    QCOMPARE(result.exit_code, 0);
    for (const char* key : {"Spur: ", "LibTorch (built against): ", "Qt: ", "Compiler: ", "OS: ", "CPU: ", "GPUs: ",
                            "BLAS: "}) {
      QVERIFY2(result.output.contains(key), qPrintable(result.output));
    }
    // The set-up installs OpenBLAS: the report must find it, not the reference BLAS.
    QVERIFY2(result.output.contains("BLAS: OpenBLAS"), qPrintable(result.output));
  }

  void env_json() {
    const auto result = spur_cli({"env", "--json"});
    QCOMPARE(result.exit_code, 0);
    const auto object = QJsonDocument::fromJson(result.output.toUtf8()).object();
    QCOMPARE(object.value("Spur").toString(), QString(SPUR_VERSION_STRING));
    QVERIFY(!object.value("BLAS").toString().isEmpty());
  }

  void unknown_command_is_named() {
    const auto result = spur_cli({"lanch"});
    QCOMPARE(result.exit_code, 2);
    QVERIFY2(result.output.contains("unknown command 'lanch'"), qPrintable(result.output));
  }
};

SPUR_TEST_CLASS(CliTest)
#include "cli_test.moc"
