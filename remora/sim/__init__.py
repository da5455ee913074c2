"""Both deterministic simulations, with no Hypothesis (a plain install runs them):

* the worker side — the ``worker-schedule-v1`` trace and its strict parser
  (:mod:`.trace`), the scheduler (:mod:`.scheduler`), the checker (:mod:`.checker`), the
  report (:mod:`.report`), the corpus (:mod:`.corpus`), the reducer (:mod:`.reduce`), the
  named mutations (:mod:`.mutations`), what a trace runs besides its schedule
  (:mod:`.runs`) and fresh stores of every kind (:mod:`.stores`, :mod:`.scratch`);
* the job side — :mod:`remora.sim.jobs`: the runtime over memory I/O, the refinement
  checker against ``Remora.tla``, the ``job-schedule-v1`` trace, its executor, its reducer
  and the named guard mutations;
* parallel runs on real threads — the scheduler of threads (PCT, replay: :mod:`.schedule`),
  the linearizability search (:mod:`.linearize`) and the worker side's parallel targets,
  store model and ``worker-parallel-v1`` examples (:mod:`.parallel`);
* shared — the scripted fault hook (:mod:`.faults`), the JSON text helpers
  (:mod:`.jsontext`), where artifacts go (:mod:`.artifacts`) and the picture of a run
  (:mod:`.timeline`).

See ``docs/simulation.md``, ``docs/jobs.md`` and ``docs/stateful.md`` (parallel machines).
"""

__all__: list[str] = []
