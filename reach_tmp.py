import time
from hypothesis.stateful import run_state_machine_as_test
from remora.testing.profiles import register_profiles
from hypothesis import settings
register_profiles(); settings.load_profile("ci")
from tests.stateful.job_machines import JOB_MACHINES
from tests.stateful.test_job_machines import missing_reach
for m in JOB_MACHINES:
    t=time.perf_counter()
    m.reach.clear(); run_state_machine_as_test(m)
    print(m.__name__, round(time.perf_counter()-t,1), "missing:", missing_reach(m), flush=True)
    print(sorted(m.reach), flush=True)
