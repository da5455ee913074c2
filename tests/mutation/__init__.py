"""Mutation testing of the state machines (``python -m tests.mutation``, ``tox -e mutants``)."""
