"""A rank that exercises the core collectives (no framework): prints what it got as JSON lines."""
import json
import os
import sys
import time

from determined import core


def main() -> None:
    mode = sys.argv[1]
    with core.init(lengths=[3, 7]) as context:
        d = context.distributed
        env = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                              "DET_CROSS_SIZE", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")}
        out = {"rank": d.rank, "size": d.size, "local_rank": d.local_rank, "cross_size": d.get_num_machines(),
               "env": env, "allgather": d.allgather(d.rank * 10), "gather": d.gather({"r": d.rank}),
               "broadcast": d.broadcast(f"from {d.rank}"), "ops": []}
        for op in context.searcher.operations():
            out["ops"].append(op.length)
            op.report_completed(0.0)
        if mode == "die" and d.rank == 1:
            sys.exit(3)
        if mode == "die":
            time.sleep(60)  # the launcher must not wait for this
        print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
