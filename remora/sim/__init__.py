"""The deterministic simulation: the trace model and its strict parser, the scheduler, the
checker, the report, the corpus and the reducer (see ``docs/simulation.md``)."""
