"""Declaring dead incarnations down (the scenarios live in :mod:`tests.jobs.down_scenarios`,
shared with the contract suite)."""

from tests.jobs.down_scenarios import (
    test_a_fresh_heartbeat_is_not_declared_down,
    test_a_killed_incarnation_is_declared_down_after_its_heartbeat_expired,
    test_a_killed_owners_checkpoint_is_resumed_not_invalidated,
    test_a_live_incarnation_declared_down_is_fenced_everywhere,
    test_a_stop_after_a_wipe_asks_the_durable_store,
    test_a_wipe_does_not_let_a_declared_down_incarnation_reserve,
    test_an_embedded_worker_declares_the_earlier_incarnations_down_at_start,
    test_each_fence_catches_its_planted_bug,
    test_memory_coordination_refuses_a_marked_incarnation,
    test_no_declaration_without_other_capacity,
    test_planted_enqueue_without_the_marks_is_caught,
)

__all__ = [
    "test_a_killed_incarnation_is_declared_down_after_its_heartbeat_expired",
    "test_no_declaration_without_other_capacity",
    "test_a_fresh_heartbeat_is_not_declared_down",
    "test_a_live_incarnation_declared_down_is_fenced_everywhere",
    "test_each_fence_catches_its_planted_bug",
    "test_a_wipe_does_not_let_a_declared_down_incarnation_reserve",
    "test_planted_enqueue_without_the_marks_is_caught",
    "test_a_killed_owners_checkpoint_is_resumed_not_invalidated",
    "test_memory_coordination_refuses_a_marked_incarnation",
    "test_a_stop_after_a_wipe_asks_the_durable_store",
    "test_an_embedded_worker_declares_the_earlier_incarnations_down_at_start",
]
