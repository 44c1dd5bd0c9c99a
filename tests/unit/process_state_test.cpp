// SPDX-License-Identifier: Apache-2.0
// ProcessState::from_environment: torchrun's, Accelerate's, MPI's and Spur's variables, and an error naming
// the variable for every malformed one.
#include <QTest>

#include <map>
#include <string>

#include <spur/error.h>
#include <spur/state.h>

#include "test_main.h"

Q_DECLARE_METATYPE(std::string)

namespace {

using Env = std::map<std::string, std::string>;

// "A=1 B=2" -> {A: 1, B: 2}
Env env_of(const QString& text) {
  Env env;
  for (const auto& pair : text.split(' ', Qt::SkipEmptyParts)) {
    const auto at = pair.indexOf('=');
    env[pair.left(at).toStdString()] = pair.mid(at + 1).toStdString();
  }
  return env;
}

spur::ProcessState read(const Env& env) {
  return spur::ProcessState::from_environment([&](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

}  // namespace

class ProcessStateTest : public QObject {
  Q_OBJECT

 private slots:
  void no_variables_is_one_plain_process() {
    const auto state = read({});
    QCOMPARE(state.world_size, 1);
    QCOMPARE(state.rank, 0);
    QVERIFY(!state.distributed());
    QVERIFY(state.is_main_process());
    QVERIFY(state.is_local_main_process());
    QCOMPARE(state.launcher, std::string("none"));
    QVERIFY(!state.mixed_precision.has_value());
  }

  void torchrun_variables() {
    // What torchrun sets on node 1 of 2 x 2 (reference/launch.md).
    const auto state =
        read(env_of("RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 "
                    "MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 TORCHELASTIC_RUN_ID=none "
                    "TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RESTART_COUNT=2"));
    QCOMPARE(state.rank, 3);
    QCOMPARE(state.world_size, 4);
    QCOMPARE(state.local_rank, 1);
    QCOMPARE(state.local_world_size, 2);
    QCOMPARE(state.node_rank, 1);
    QCOMPARE(state.master_addr, std::string("10.0.0.1"));
    QCOMPARE(state.master_port, 29500);
    QVERIFY(state.use_agent_store);
    QCOMPARE(state.restart_count, 2);
    QCOMPARE(state.launcher, std::string("torchrun"));
    QVERIFY(!state.is_main_process());
    QVERIFY(!state.is_local_main_process());
  }

  void by_hand_defaults_local_values() {
    const auto state = read(env_of("RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1234"));
    QCOMPARE(state.local_rank, 1);
    QCOMPARE(state.local_world_size, 2);
    QCOMPARE(state.node_rank, 0);
    QCOMPARE(state.launcher, std::string("env"));
    QVERIFY(!state.use_agent_store);
  }

  void mpi_variables() {
    const auto state =
        read(env_of("OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=0 "
                    "OMPI_COMM_WORLD_LOCAL_SIZE=2 MASTER_ADDR=h MASTER_PORT=5"));
    QCOMPARE(state.rank, 2);
    QCOMPARE(state.world_size, 4);
    QCOMPARE(state.local_rank, 0);
    QCOMPARE(state.node_rank, 1);
    QCOMPARE(state.launcher, std::string("mpi"));
  }

  // Issue 16: a task of `srun my_program` takes its identity from Slurm; the store on the step's first node
  // (from the compressed host list), its port from the job id unless MASTER_PORT says otherwise.
  void slurm_variables_data() {
    QTest::addColumn<QString>("env");
    QTest::addColumn<QList<int>>("rank_world_local_localworld_node");
    QTest::addColumn<QString>("master");
    QTest::addColumn<int>("port");
    QTest::addColumn<int>("restarts");
    QTest::newRow("node 1 of 2 x 2") << "SLURM_PROCID=3 SLURM_STEP_NUM_TASKS=4 SLURM_NTASKS=4 SLURM_LOCALID=1 "
                                        "SLURM_NODEID=1 SLURM_STEP_TASKS_PER_NODE=2(x2) "
                                        "SLURM_STEP_NODELIST=node[07-08] SLURM_JOB_ID=123456 SLURM_STEP_ID=2"
                                     << QList<int>{3, 4, 1, 2, 1} << "node07"
                                     << 15000 + (123456 * 7919 + 2 * 104729) % 20000 << 0;
    QTest::newRow("uneven nodes, two bracket groups")
        << "SLURM_PROCID=4 SLURM_STEP_NUM_TASKS=5 SLURM_LOCALID=0 SLURM_NODEID=2 SLURM_STEP_TASKS_PER_NODE=2(x2),1 "
           "SLURM_JOB_NODELIST=rack[3,5]-n[10-12],gpu1 SLURM_JOB_ID=7"
        << QList<int>{4, 5, 0, 1, 2} << "rack3-n10" << 15000 + (7 * 7919) % 20000 << 0;
    QTest::newRow("MASTER_* and a restart win")
        << "SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2 SLURM_LOCALID=0 SLURM_NODEID=0 "
           "SLURM_STEP_TASKS_PER_NODE=2 SLURM_STEP_NODELIST=a,b "
           "SLURM_JOB_ID=9 MASTER_ADDR=10.1.1.1 MASTER_PORT=29400 "
           "SPUR_RESTART_COUNT=3"
        << QList<int>{0, 2, 0, 2, 0} << "10.1.1.1" << 29400 << 3;
  }
  void slurm_variables() {
    QFETCH(QString, env);
    QFETCH(QList<int>, rank_world_local_localworld_node);
    QFETCH(QString, master);
    QFETCH(int, port);
    QFETCH(int, restarts);
    const auto state = read(env_of(env));
    const auto& expected = rank_world_local_localworld_node;
    QCOMPARE(state.rank, expected[0]);
    QCOMPARE(state.world_size, expected[1]);
    QCOMPARE(state.local_rank, expected[2]);
    QCOMPARE(state.local_world_size, expected[3]);
    QCOMPARE(state.node_rank, expected[4]);
    QCOMPARE(QString::fromStdString(state.master_addr), master);
    QCOMPARE(state.master_port, port);
    QCOMPARE(state.restart_count, restarts);
    QCOMPARE(state.launcher, std::string("slurm"));
  }

  // A batch script's own process (SLURM_PROCID but no step) is one plain process; RANK beats Slurm's variables.
  void slurm_without_a_step_or_under_a_launcher() {
    const auto batch = read(env_of("SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_JOB_ID=5 SLURM_JOB_NODELIST=n[1-2]"));
    QVERIFY(!batch.distributed());
    QCOMPARE(batch.launcher, std::string("none"));
    const auto shell = read(env_of("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=1 SLURM_PTY_PORT=4242 SLURM_JOB_ID=5"));
    QVERIFY(!shell.distributed());
    // A step of several tasks with a terminal (`srun -n 2 --pty train`) is that many ranks, the one on the terminal
    // too: its task 0 must not train alone while task 1 waits for it (the first rule, SLURM_PTY_PORT = one plain
    // process, did that). A program typed into the shell of `srun -n 2 --pty bash` is rank 0 of 2 as well, and
    // ends with the rendezvous timeout naming the missing rank: such a shell wants one task.
    const auto pty_step =
        read(env_of("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2 SLURM_PTY_PORT=4242 SLURM_JOB_ID=5 "
                    "SLURM_STEP_NODELIST=n1 SLURM_LOCALID=0 SLURM_NODEID=0 "
                    "SLURM_STEP_TASKS_PER_NODE=2"));
    QVERIFY(pty_step.distributed());
    QCOMPARE(pty_step.world_size, int64_t(2));
    const auto mpi =
        read(env_of("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=1 OMPI_COMM_WORLD_RANK=3 "
                    "OMPI_COMM_WORLD_SIZE=4 MASTER_ADDR=h MASTER_PORT=5"));
    QCOMPARE(mpi.rank, 3);
    QCOMPARE(mpi.launcher, std::string("mpi"));
    const auto launched =
        read(env_of("RANK=1 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=5 SPUR_LAUNCHER=spur "
                    "SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=1 SLURM_NODEID=0"));
    QCOMPARE(launched.rank, 1);
    QCOMPARE(launched.launcher, std::string("spur"));
    QVERIFY_THROWS_EXCEPTION(spur::Error, read(env_of("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2 SLURM_NODEID=0 "
                                                      "SLURM_STEP_TASKS_PER_NODE=two SLURM_STEP_NODELIST=a "
                                                      "SLURM_JOB_ID=1")));
  }

  void launcher_requests_data() {
    QTest::addColumn<QString>("env");
    QTest::addColumn<int>("precision");  // -1: unset
    QTest::addColumn<int>("use_cpu");    // -1: unset
    QTest::addColumn<int>("accumulation");
    QTest::newRow("nothing") << "" << -1 << -1 << -1;
    QTest::newRow("spur names") << "SPUR_MIXED_PRECISION=bf16 SPUR_USE_CPU=true SPUR_GRADIENT_ACCUMULATION_STEPS=4"
                                << int(spur::Precision::bf16) << 1 << 4;
    QTest::newRow("accelerate names")
        << "ACCELERATE_MIXED_PRECISION=fp16 ACCELERATE_USE_CPU=False ACCELERATE_GRADIENT_ACCUMULATION_STEPS=2"
        << int(spur::Precision::fp16) << 0 << 2;
    QTest::newRow("spur wins over accelerate")
        << "SPUR_MIXED_PRECISION=no ACCELERATE_MIXED_PRECISION=bf16" << int(spur::Precision::no) << -1 << -1;
    QTest::newRow("case and yes") << "ACCELERATE_MIXED_PRECISION=BF16 SPUR_USE_CPU=yes" << int(spur::Precision::bf16)
                                  << 1 << -1;
  }

  void launcher_requests() {
    QFETCH(QString, env);
    QFETCH(int, precision);
    QFETCH(int, use_cpu);
    QFETCH(int, accumulation);
    const auto state = read(env_of(env));
    QCOMPARE(state.mixed_precision.has_value(), precision >= 0);
    if (precision >= 0) QCOMPARE(int(*state.mixed_precision), precision);
    QCOMPARE(state.use_cpu.has_value(), use_cpu >= 0);
    if (use_cpu >= 0) QCOMPARE(*state.use_cpu, use_cpu == 1);
    QCOMPARE(state.gradient_accumulation_steps.has_value(), accumulation >= 0);
    if (accumulation >= 0) QCOMPARE(*state.gradient_accumulation_steps, accumulation);
  }

  // Issue 17: the ZeRO stage from Spur's variable, or from what `accelerate launch` sets for DeepSpeed and FSDP.
  void zero_stage_from_launchers_data() {
    QTest::addColumn<QString>("env");
    QTest::addColumn<int>("stage");  // -1: unset
    QTest::addColumn<int>("ignored");
    QTest::newRow("nothing") << "" << -1 << 0;
    QTest::newRow("spur") << "SPUR_ZERO_STAGE=1" << 1 << 0;
    QTest::newRow("spur wins") << "SPUR_ZERO_STAGE=0 ACCELERATE_USE_DEEPSPEED=true ACCELERATE_DEEPSPEED_ZERO_STAGE=2"
                               << 0 << 0;
    QTest::newRow("deepspeed, default stage") << "ACCELERATE_USE_DEEPSPEED=true" << 2 << 0;
    QTest::newRow("deepspeed stage 1") << "ACCELERATE_USE_DEEPSPEED=true ACCELERATE_DEEPSPEED_ZERO_STAGE=1" << 1 << 0;
    QTest::newRow("deepspeed off") << "ACCELERATE_USE_DEEPSPEED=false ACCELERATE_DEEPSPEED_ZERO_STAGE=1" << -1 << 0;
    QTest::newRow("deepspeed offload")
        << "ACCELERATE_USE_DEEPSPEED=true ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE=cpu "
           "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE=none"
        << 2 << 1;
    QTest::newRow("fsdp shard_grad_op") << "ACCELERATE_USE_FSDP=true FSDP_SHARDING_STRATEGY=SHARD_GRAD_OP" << 2 << 0;
    QTest::newRow("fsdp by number") << "ACCELERATE_USE_FSDP=true FSDP_SHARDING_STRATEGY=2" << 2 << 0;
    QTest::newRow("fsdp no_shard") << "ACCELERATE_USE_FSDP=true FSDP_SHARDING_STRATEGY=NO_SHARD" << 0 << 0;
    QTest::newRow("fsdp default is full_shard") << "ACCELERATE_USE_FSDP=true" << 3 << 0;
    QTest::newRow("fsdp2 keeping parameters")
        << "ACCELERATE_USE_FSDP=true FSDP_VERSION=2 FSDP_RESHARD_AFTER_FORWARD=false" << 2 << 0;
    QTest::newRow("fsdp2 default reshards")
        << "ACCELERATE_USE_FSDP=true FSDP_VERSION=2 FSDP_SHARDING_STRATEGY=FULL_SHARD" << 3 << 0;
    QTest::newRow("fsdp offload")
        << "ACCELERATE_USE_FSDP=true FSDP_SHARDING_STRATEGY=shard_grad_op FSDP_OFFLOAD_PARAMS=true" << 2 << 1;
  }
  void zero_stage_from_launchers() {
    QFETCH(QString, env);
    QFETCH(int, stage);
    QFETCH(int, ignored);
    const auto state = read(env_of(env));
    QCOMPARE(state.zero_stage.has_value(), stage >= 0);
    if (stage >= 0) QCOMPARE(*state.zero_stage, stage);
    QCOMPARE(int(state.ignored_sharding_settings.size()), ignored);
  }

  // Issue 37: FSDP's state_dict_type, as `accelerate launch` sets it (FSDP_STATE_DICT_TYPE), or FSDP2's default.
  void state_dict_type_from_launchers_data() {
    QTest::addColumn<QString>("env");
    QTest::addColumn<QString>("type");  // empty: unset
    QTest::newRow("nothing") << ""
                             << "";
    QTest::newRow("fsdp1 default") << "ACCELERATE_USE_FSDP=true"
                                   << "";
    QTest::newRow("fsdp2 default") << "ACCELERATE_USE_FSDP=true FSDP_VERSION=2"
                                   << "SHARDED_STATE_DICT";
    QTest::newRow("set, any case") << "FSDP_STATE_DICT_TYPE=sharded_state_dict"
                                   << "SHARDED_STATE_DICT";
    QTest::newRow("by number") << "FSDP_STATE_DICT_TYPE=1"
                               << "FULL_STATE_DICT";
    QTest::newRow("set wins over fsdp2's default")
        << "ACCELERATE_USE_FSDP=true FSDP_VERSION=2 FSDP_STATE_DICT_TYPE=FULL_STATE_DICT"
        << "FULL_STATE_DICT";
  }
  void state_dict_type_from_launchers() {
    QFETCH(QString, env);
    QFETCH(QString, type);
    const auto state = read(env_of(env));
    QCOMPARE(QString::fromStdString(state.state_dict_type.value_or("")), type);
  }

  // Issue 38: DDP's communication hook, as `spur launch --ddp_comm_hook` sets it (SPUR_DDP_COMM_HOOK).
  void comm_hook_from_launchers_data() {
    QTest::addColumn<QString>("env");
    QTest::addColumn<QString>("hook");  // empty: unset
    QTest::newRow("nothing") << ""
                             << "";
    QTest::newRow("fp16") << "SPUR_DDP_COMM_HOOK=fp16"
                          << "fp16";
    QTest::newRow("any case") << "SPUR_DDP_COMM_HOOK=BF16"
                              << "bf16";
    QTest::newRow("no") << "SPUR_DDP_COMM_HOOK=no"
                        << "no";
  }
  void comm_hook_from_launchers() {
    QFETCH(QString, env);
    QFETCH(QString, hook);
    const auto state = read(env_of(env));
    QCOMPARE(QString::fromStdString(state.comm_hook.value_or("")), hook);
  }

  void errors_name_the_variable_data() {
    QTest::addColumn<QString>("env");
    QTest::addColumn<QString>("expected");
    const QString ok = " MASTER_ADDR=127.0.0.1 MASTER_PORT=29500";
    QTest::newRow("rank not a number") << "RANK=x WORLD_SIZE=2" + ok << "RANK='x' is not an integer";
    QTest::newRow("rank out of range") << "RANK=2 WORLD_SIZE=2" + ok << "RANK=2 is out of range [0, 1]";
    QTest::newRow("world size zero") << "RANK=0 WORLD_SIZE=0" + ok << "WORLD_SIZE=0 is out of range";
    QTest::newRow("rank without world size") << "RANK=0" + ok << "RANK is set but WORLD_SIZE is not";
    QTest::newRow("world size without rank") << "WORLD_SIZE=2" + ok << "WORLD_SIZE is set but RANK is not";
    QTest::newRow("no master address") << "RANK=0 WORLD_SIZE=2 MASTER_PORT=1"
                                       << "MASTER_ADDR is not set";
    QTest::newRow("no master port") << "RANK=0 WORLD_SIZE=2 MASTER_ADDR=h"
                                    << "MASTER_PORT is not set";
    QTest::newRow("port too large") << "RANK=0 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=70000"
                                    << "MASTER_PORT=70000 is out of range [1, 65535]";
    QTest::newRow("local rank too large") << "RANK=0 WORLD_SIZE=2 LOCAL_RANK=2" + ok << "LOCAL_RANK=2 is out of range";
    QTest::newRow("fp8") << "ACCELERATE_MIXED_PRECISION=fp8"
                         << "ACCELERATE_MIXED_PRECISION='fp8'";
    QTest::newRow("bad bool") << "ACCELERATE_USE_CPU=maybe"
                              << "ACCELERATE_USE_CPU='maybe' is not a boolean";
    QTest::newRow("zero accumulation") << "SPUR_GRADIENT_ACCUMULATION_STEPS=0"
                                       << "SPUR_GRADIENT_ACCUMULATION_STEPS=0 is out of range";
    QTest::newRow("timeout not a number") << "SPUR_RENDEZVOUS_TIMEOUT=5s"
                                          << "SPUR_RENDEZVOUS_TIMEOUT='5s'";
    // Issue 12, defect 7: a huge timeout overflowed into "-1s" instead of being refused by name.
    QTest::newRow("rendezvous timeout too long") << "SPUR_RENDEZVOUS_TIMEOUT=9300000000"
                                                 << "SPUR_RENDEZVOUS_TIMEOUT=9300000000 is out of range [1, 2000000]";
    QTest::newRow("collective timeout too long") << "SPUR_COLLECTIVE_TIMEOUT=2000001"
                                                 << "SPUR_COLLECTIVE_TIMEOUT=2000001 is out of range [1, 2000000]";
    QTest::newRow("zero stage 4") << "SPUR_ZERO_STAGE=4"
                                  << "SPUR_ZERO_STAGE=4 is out of range [0, 3]";
    QTest::newRow("deepspeed stage x") << "ACCELERATE_USE_DEEPSPEED=1 ACCELERATE_DEEPSPEED_ZERO_STAGE=x"
                                       << "ACCELERATE_DEEPSPEED_ZERO_STAGE='x' is not an integer";
    QTest::newRow("fsdp hybrid") << "ACCELERATE_USE_FSDP=1 FSDP_SHARDING_STRATEGY=HYBRID_SHARD"
                                 << "FSDP_SHARDING_STRATEGY=HYBRID_SHARD: hybrid sharding";
    QTest::newRow("unknown comm hook") << "SPUR_DDP_COMM_HOOK=fp8"
                                       << "SPUR_DDP_COMM_HOOK='fp8' is not a communication hook: no, fp16, bf16";
    QTest::newRow("PowerSGD") << "SPUR_DDP_COMM_HOOK=batched_power_sgd"
                              << "SPUR_DDP_COMM_HOOK='batched_power_sgd' (PowerSGD) is Accelerate's but Spur does not";
    QTest::newRow("local state dict") << "FSDP_STATE_DICT_TYPE=LOCAL_STATE_DICT"
                                      << "FSDP_STATE_DICT_TYPE='LOCAL_STATE_DICT': LOCAL_STATE_DICT";
    QTest::newRow("unknown state dict") << "FSDP_STATE_DICT_TYPE=HALF"
                                        << "FSDP_STATE_DICT_TYPE='HALF' is not a state dict type";
  }

  void errors_name_the_variable() {
    QFETCH(QString, env);
    QFETCH(QString, expected);
    try {
      read(env_of(env));
      QFAIL("no error");
    } catch (const spur::Error& e) {
      QVERIFY2(QString(e.what()).contains(expected), e.what());
    }
  }
};

SPUR_TEST_CLASS(ProcessStateTest)
#include "process_state_test.moc"
