// SPDX-License-Identifier: Apache-2.0
// `spur merge-weights CHECKPOINT_DIR OUTPUT_DIR`: one model.safetensors from a checkpoint that save_state wrote
// sharded (SHARDED_STATE_DICT under ZeRO stage 3), as `accelerate merge-weights` does for FSDP's.
#include <QDir>
#include <QTextStream>

#include <algorithm>
#include <filesystem>

#include <spur/error.h>

#include <spur/core/checkpoint_merge.h>

#include "cli/arguments.h"
#include "cli/commands.h"

namespace spur::cli {

int merge_weights_command(const QStringList& arguments) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  try {
    const Arguments args(arguments, {}, {"remove_checkpoint_dir", "help"});
    if (args.has("help")) {
      out << "usage: spur merge-weights CHECKPOINT_DIR OUTPUT_DIR [--remove_checkpoint_dir]\n\n"
             "Merges the weights of a checkpoint save_state wrote with SHARDED_STATE_DICT (ZeRO stage 3: one\n"
             "model_rank<r>.safetensors per rank) into OUTPUT_DIR/model.safetensors (model_1.safetensors... for\n"
             "further models): the file a FULL_STATE_DICT save writes, which spur::load_model and the safetensors\n"
             "library read at any number of processes. Every rank's file is checked against the checkpoint's\n"
             "spur_state.json first.\n\n"
             "  --remove_checkpoint_dir   remove CHECKPOINT_DIR once the merged weights are written\n";
      return 0;
    }
    if (args.positional().size() != 2) {
      throw UsageError("needs CHECKPOINT_DIR and OUTPUT_DIR (spur merge-weights --help)");
    }
    const std::string checkpoint = args.positional()[0].toStdString();
    const std::string output = args.positional()[1].toStdString();
    std::error_code error;
    if (std::filesystem::equivalent(checkpoint, output, error)) {
      throw UsageError("OUTPUT_DIR is the checkpoint itself: name another folder");
    }
    if (args.has("remove_checkpoint_dir")) {
      // The merged weights must not go where the checkpoint's removal would take them.
      const auto from = std::filesystem::weakly_canonical(checkpoint, error);
      if (error) throw Error("cannot resolve " + checkpoint + ": " + error.message());
      const auto to = std::filesystem::weakly_canonical(output, error);
      if (error) throw Error("cannot resolve " + output + ": " + error.message());
      if (std::mismatch(from.begin(), from.end(), to.begin(), to.end()).first == from.end()) {
        throw UsageError(
            "--remove_checkpoint_dir would remove OUTPUT_DIR too (it is inside the checkpoint): name a "
            "folder outside it");
      }
    }
    for (const auto& path : detail::merge_sharded_checkpoint(checkpoint, output)) {
      out << "spur merge-weights: wrote " << QString::fromStdString(path) << "\n";
    }
    if (args.has("remove_checkpoint_dir")) {
      std::filesystem::remove_all(checkpoint, error);
      if (error)
        throw Error("the merged weights are written, but " + checkpoint + " could not be removed: " + error.message());
      out << "spur merge-weights: removed " << QString::fromStdString(checkpoint) << "\n";
    }
    return 0;
  } catch (const UsageError& e) {
    err << "spur merge-weights: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {  // spur::Error, and the file system's own errors
    err << "spur merge-weights: " << e.what() << "\n";
  }
  return 1;
}

}  // namespace spur::cli
