#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""TensorBoard's own readers (the `tensorboard` package pinned in installer/python-requirements.txt) on a run folder.
  read_tensorboard.py DIR   prints {"files": N, "scalars": {tag: [[step, value, wall], ...]},
                            "texts": {tag: [[step, text], ...]}, "hparams": {name: value}, "session_end": status}
Scalars come from EventAccumulator (what TensorBoard's scalar dashboard and most scripts read); texts and hparams
from the plugin accumulator TensorBoard's server uses, hparams parsed with the hparams plugin's own metadata code."""
import glob
import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator, plugin_event_accumulator
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.util import tensor_util


def plugin_content(accumulator, plugin):
    try:
        return accumulator.PluginTagToContent(plugin)
    except KeyError:  # no summary of that plugin in the run
        return {}


def main(path):
    out = {"files": len(glob.glob(os.path.join(path, "*tfevents*"))), "scalars": {}, "texts": {}, "hparams": {},
           "session_end": None}
    scalars = event_accumulator.EventAccumulator(path, size_guidance={event_accumulator.SCALARS: 0})
    scalars.Reload()
    for tag in scalars.Tags()["scalars"]:
        out["scalars"][tag] = [[e.step, e.value, e.wall_time] for e in scalars.Scalars(tag)]

    plugins = plugin_event_accumulator.EventAccumulator(path, size_guidance={plugin_event_accumulator.TENSORS: 0})
    plugins.Reload()
    for tag in plugin_content(plugins, "text"):
        out["texts"][tag] = [[e.step, tensor_util.make_ndarray(e.tensor_proto).reshape(-1)[0].decode("utf-8")]
                             for e in plugins.Tensors(tag)]
    content = plugin_content(plugins, hparams_metadata.PLUGIN_NAME)
    if hparams_metadata.SESSION_START_INFO_TAG in content:
        info = hparams_metadata.parse_session_start_info_plugin_data(content[hparams_metadata.SESSION_START_INFO_TAG])
        for name, value in info.hparams.items():
            kind = value.WhichOneof("kind")
            out["hparams"][name] = getattr(value, kind)
        out["group_name"] = info.group_name
    if hparams_metadata.SESSION_END_INFO_TAG in content:
        info = hparams_metadata.parse_session_end_info_plugin_data(content[hparams_metadata.SESSION_END_INFO_TAG])
        out["session_end"] = info.status
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
