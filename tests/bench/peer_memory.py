# SPDX-License-Identifier: Apache-2.0
# The Python peers' memory figures, read as bench_support.h reads Spur's: peak RSS, PSS and private memory now (MiB),
# and the one-write JSON record the benchmark drivers parse. No import beyond the standard library, so using it
# adds nothing to a peer's memory.
import json
import os
import resource
import sys


def memory_mib():
    """{"peak_rss_mib", "pss_mib", "private_mib"} of this process now."""
    rollup = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                rollup[parts[0]] = int(parts[1]) / 1024
    return {"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "pss_mib": rollup["Pss:"],
            "private_mib": rollup["Private_Clean:"] + rollup["Private_Dirty:"]}


def write_record(record):
    """One write(2) per record: ranks may share their launcher's stdout."""
    sys.stdout.flush()
    os.write(1, (json.dumps(record) + "\n").encode())
