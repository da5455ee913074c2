"""The job runtime's deterministic simulation: the real runtime over memory I/O
(:mod:`.simulation`), the refinement checker that holds every step to ``Remora.tla``
(:mod:`.refinement`), the ``job-schedule-v1`` trace (:mod:`.trace`), its one executor
(:mod:`.run`), its reducer (:mod:`.reduce`) and the named guard mutations
(:mod:`.mutations`).  No Hypothesis: ``remora sim-jobs`` and ``remora reduce`` run it on a
plain install.
"""

__all__: list[str] = []
