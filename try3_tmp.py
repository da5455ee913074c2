import sys, time
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from tests.stateful.job_machines import SpecSizedJobs, LargerJobs
M = {"s": SpecSizedJobs, "l": LargerJobs}[sys.argv[1]]
t=time.perf_counter()
run_state_machine_as_test(M, settings=settings(max_examples=int(sys.argv[2]), deadline=None, derandomize=True, database=None, report_multiple_bugs=False))
print("secs", time.perf_counter()-t)
