"""The job machines over the embedded default's file-backed stores, each step run on both
configurations.

``remora jobs`` without a DSN runs on an SQLite database file, a staging directory and a
vault directory beside it (:class:`~remora.jobs.target.DirectoryTarget`,
:class:`~remora.jobs.target.DirectoryVault`) — stores the machines' own run (SQLite
``:memory:``, :class:`~remora.jobs.target.MemoryTarget`/``MemoryVault``) never touches.
Here each suite machine gets a twin run on them (:class:`~tests.jobs.job_services.
FileBackends`, a fresh directory per example): the same steps, faults and drain, and after
every step the two runs must agree (:meth:`~remora.testing.job_machines.JobMachineBase.
differential`: result kinds, alpha, coordination, durable rows, staging, vault); the twin
is refinement-checked and judged on its own (its read models too: status and history read
the SQLite file, the staged progress the staging directory), and after the drain the
staged bytes and secrets of the files are judged (``contents``).

Budget: as the services' twins, a twentieth of the profile's examples per machine (``ci``:
10, ``nightly``: 200 — 20x); no service is needed.

Planted bugs of the file-backed stores (monkeypatched), each killed by ``RaceJobs`` with
the twin: ``DirectoryTarget.cleanup`` deleting the snapshots before it writes its
``cleaned`` mark (which then says progress 0), and ``DirectoryVault.destroy`` deleting a
secret without its tombstone (the intent reads as never written), and
``DirectoryTarget.fence`` writing no mark (a declared incarnation's stage writes go in),
and ``DirectoryVault.write`` writing a secret with the process's umask (readable by every
local user: the contents judgement checks a secret file's mode)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis.stateful import run_state_machine_as_test

from remora.jobs import target as target_module
from remora.jobs.io import Actor, JobOperation
from remora.jobs.model import AttemptId, IntentId, NotEnabled, SecretState
from remora.testing.job_machines import JobMachineBase
from tests.jobs.job_machines import EmbeddedJobs, LargerJobs, LoopJobs, RaceJobs, SpecSizedJobs
from tests.jobs.job_services import file_backends, killed, services_budget, twin_machine

MACHINES = {
    "spec-sized": SpecSizedJobs,
    "larger": LargerJobs,
    "race": RaceJobs,
    "loop": LoopJobs,
    "embedded": EmbeddedJobs,
}
"""The machines twinned on the files (``CutJobs`` left out: its kill points cost 19 s at
``ci`` alone, the four here 28 s together).  ``embedded`` is the product's default
configuration whole: an SQLite file, the directory target and vault, and the embedded
mode's private coordination (:class:`~tests.jobs.job_machines.EmbeddedJobs`)."""


@pytest.mark.parametrize("base", list(MACHINES.values()), ids=list(MACHINES))
def test_job_machine_on_the_file_stores(base: type[JobMachineBase], tmp_path: Path) -> None:
    with file_backends(tmp_path) as backends:
        run_state_machine_as_test(twin_machine(base, backends), settings=services_budget())
        assert backends.built > 0
    assert not list(tmp_path.iterdir())  # each example's directory removed


# -- planted bugs in the file-backed stores, killed by the machines' twin ------------------------


def cleanup_marks_after_deleting(mp: pytest.MonkeyPatch) -> None:
    """``DirectoryTarget.cleanup`` deletes the snapshots before it writes the ``cleaned``
    mark, whose progress it then reads from what is left: the mark says 0, not the
    progress the staging reached (and a crash between the two would leave neither)."""

    def cleanup(self: target_module.DirectoryTarget, actor: Actor, a: AttemptId) -> bool:
        def body() -> bool:
            with self._lock:
                d = self._dir(a)
                if (d / "cleaned").exists():
                    return False
                for p in d.glob("*.stage"):
                    p.unlink()
                progress = max(self._parts(a), default=0)
                target_module._atomic_write(d / "cleaned", str(progress).encode())
                return True

        return target_module._write_call(
            actor,
            JobOperation.TARGET_WRITE,
            a.job,
            body,
            lambda: target_module._gone(self, a),
            True,
        )

    mp.setattr(target_module.DirectoryTarget, "cleanup", cleanup)


def destroy_without_tombstone(mp: pytest.MonkeyPatch) -> None:
    """``DirectoryVault.destroy`` deletes the secret but leaves no ``destroyed`` tombstone:
    the intent reads as never written (absent), so a late write of it would succeed."""

    def destroy(self: target_module.DirectoryVault, actor: Actor, c: IntentId) -> None:
        def body() -> None:
            with self._lock:
                if self.state(None, c) is not SecretState.LIVE:
                    raise NotEnabled(f"no live secret {c}")
                self._path(c, "secret").unlink()

        target_module._write_call(
            actor,
            JobOperation.VAULT_WRITE,
            c.job,
            body,
            lambda: self.state(None, c) is not SecretState.LIVE,
            None,
        )

    mp.setattr(target_module.DirectoryVault, "destroy", destroy)


def fence_writes_nothing(mp: pytest.MonkeyPatch) -> None:
    """``DirectoryTarget.fence`` writes no mark: a declared incarnation's stage writes are
    not refused (the fence judgement compares the marks with the declarations)."""
    mp.setattr(target_module.DirectoryTarget, "fence", lambda self, actor, worker: None)


def secret_with_the_umask(mp: pytest.MonkeyPatch) -> None:
    """``DirectoryVault.write`` writes the secret as any other file, with the process's
    umask (``0644`` under the usual ``022``): every local user may read it.  Its bytes are
    right, so only a judgement of the file's mode sees it."""
    real = target_module._atomic_write

    def atomic_write(path: Path, data: bytes, mode: int = 0o666) -> None:
        real(path, data)  # planted: the mode dropped

    mp.setattr(target_module, "_atomic_write", atomic_write)


@pytest.mark.parametrize(
    "plant",
    [
        cleanup_marks_after_deleting,
        destroy_without_tombstone,
        fence_writes_nothing,
        secret_with_the_umask,
    ],
)
def test_a_planted_file_store_bug_is_killed(
    plant: Callable[[pytest.MonkeyPatch], None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    plant(monkeypatch)
    root = tmp_path / "stores"
    root.mkdir()
    with file_backends(root) as backends:
        failure = killed(RaceJobs, backends)
    # the twin's own refinement check, or the two runs disagreeing
    assert "on the twin's stores" in failure or failure.startswith("ERROR differential"), failure
