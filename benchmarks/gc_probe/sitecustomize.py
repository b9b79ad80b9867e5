"""A probe of Python's garbage collector in every process that starts with this folder on PYTHONPATH:

    ATLAS_GC_PROBE_DIR=/tmp/gc PYTHONPATH=benchmarks/gc_probe:. python benchmarks/bench_room.py ...

Each process (the app servers a benchmark starts inherit the variables) writes, every 5 s, to
<dir>/gc.<pid>: its command's tail, how many objects the collector tracks and has frozen, and the
count, total and longest wall-clock time of its full (generation 2) and young collections. A
collection holds the GIL: no other thread of that server runs meanwhile. Wall-clock: on a busy
machine a collection also waits for the core. Nothing happens without ATLAS_GC_PROBE_DIR.
"""
import gc
import os
import sys
import threading
import time

FOLDER = os.environ.get("ATLAS_GC_PROBE_DIR")

if FOLDER:
    _started = [0.0]
    _totals = {"full": [0, 0.0, 0.0], "young": [0, 0.0, 0.0]}        # count, seconds, longest

    def _note(phase, info):
        if phase == "start":
            _started[0] = time.perf_counter()
            return
        took = time.perf_counter() - _started[0]
        total = _totals["full" if info["generation"] == 2 else "young"]
        total[0], total[1], total[2] = total[0] + 1, total[1] + took, max(total[2], took)

    def _write():
        path = os.path.join(FOLDER, f"gc.{os.getpid()}")
        while True:
            time.sleep(5)
            line = " ".join(f"{kind} {n} {seconds:.3f} s (longest {longest * 1e3:.0f} ms)"
                            for kind, (n, seconds, longest) in _totals.items())
            with open(path, "w") as handle:
                handle.write(f"{' '.join(sys.argv)[-60:]}: tracked {len(gc.get_objects())} "
                             f"frozen {gc.get_freeze_count()}; {line}\n")

    os.makedirs(FOLDER, exist_ok=True)
    gc.callbacks.append(_note)
    threading.Thread(target=_write, daemon=True, name="gc-probe").start()
