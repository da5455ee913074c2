import sys, time
from pathlib import Path
from remora.testing.job_mutations import MUTATIONS
from tests.stateful.job_campaign import hunt
from tests.stateful.job_machines import JOB_MACHINES
names = sys.argv[1:]
for m in MUTATIONS:
    if names and m.name not in names: continue
    for mach in JOB_MACHINES:
        t=time.perf_counter()
        o = hunt(m, mach, False, Path("/tmp/jc"))
        print(m.name, mach.__name__, o.killed, o.examples, o.seconds, round(time.perf_counter()-t,1), o.failure[:100], flush=True)
        if o.killed: break
