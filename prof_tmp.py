import cProfile, pstats
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from tests.stateful.job_machines import SpecSizedJobs
cProfile.run("run_state_machine_as_test(SpecSizedJobs, settings=settings(max_examples=50, deadline=None, derandomize=True, database=None))", "/tmp/prof2")
p=pstats.Stats("/tmp/prof2"); p.sort_stats("tottime").print_stats(25)
