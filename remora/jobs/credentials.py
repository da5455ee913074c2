"""Credential intents: a handler's secret written through the spec's five steps
(``PrepareCredentialIntent``, ``BeginCredentialWrite``, ``CompleteCredentialWrite`` — the
vault write —, ``RecordCredentialWrite``, ``CommitCredentialVersion``).

Why a module of its own: these steps are taken by any actor holding an executing attempt
(the worker's :meth:`~remora.jobs.worker.Worker.put_secret`, a simulation's client), each a
durable transaction of the job whose guard reads the vault under the job's lock; the
abandoned ones are finished by the reconciler (:meth:`Reconciler.clean_credentials`).
"""

from __future__ import annotations

from remora.errors import NotEnabled
from remora.jobs.actions import Action
from remora.jobs.guards import Change
from remora.jobs.io import Actor
from remora.jobs.model import AttemptId, IntentId, SecretState
from remora.jobs.sql import Locked
from remora.jobs.stores import Stores


def _secret(stores: Stores, actor: Actor, c: IntentId) -> tuple[bool, bool]:
    st = stores.vault.state(actor, c)
    return st is SecretState.LIVE, st is SecretState.DESTROYED


def prepare_credential(stores: Stores, actor: Actor, a: AttemptId) -> IntentId:
    """``PrepareCredentialIntent(c)``: the next intent of the job, owned by attempt ``a``."""
    change = stores.durable.transact(
        actor,
        a.job,
        lambda lk: stores.guards.prepare_credential(
            lk.job, lk.credentials, a.token, stores.config.max_credential_intents
        ),
    )
    return IntentId(a.job, int(change.result))


def begin_credential_write(stores: Stores, actor: Actor, c: IntentId) -> None:
    """``BeginCredentialWrite(c)``."""

    def decide(lk: Locked) -> Change:
        live, gone = _secret(stores, actor, c)
        return stores.guards.begin_credential_write(
            lk.credentials[c.sequence], secret_live=live, secret_gone=gone
        )

    stores.durable.transact(actor, c.job, decide)


def complete_credential_write(stores: Stores, actor: Actor, c: IntentId, secret: bytes) -> None:
    """``CompleteCredentialWrite(c)``: the vault write, under the job's durable lock (the
    intent must still be ``Writing``)."""

    def block(lk: Locked) -> None:
        live, gone = _secret(stores, actor, c)
        if not stores.guards.can_write_secret(
            lk.credentials[c.sequence], secret_live=live, secret_gone=gone
        ):
            raise NotEnabled(f"{c}: the vault write is not enabled")
        seq = actor.next_seq()
        stores.vault.write(actor, c, secret)
        actor.record(seq, Action.COMPLETE_CREDENTIAL_WRITE, {"c": str(c)})

    stores.durable.with_lock(actor, c.job, block)


def record_credential_write(stores: Stores, actor: Actor, c: IntentId) -> None:
    """``RecordCredentialWrite(c)``."""

    def decide(lk: Locked) -> Change:
        live, _ = _secret(stores, actor, c)
        return stores.guards.record_credential_write(lk.credentials[c.sequence], secret_live=live)

    stores.durable.transact(actor, c.job, decide)


def commit_credential_version(stores: Stores, actor: Actor, c: IntentId) -> None:
    """``CommitCredentialVersion(c)``."""

    def decide(lk: Locked) -> Change:
        live, _ = _secret(stores, actor, c)
        return stores.guards.commit_credential_version(lk.credentials[c.sequence], secret_live=live)

    stores.durable.transact(actor, c.job, decide)


def write_credential(stores: Stores, actor: Actor, a: AttemptId, secret: bytes) -> IntentId:
    """The whole write: prepare, begin, vault write, record, commit."""
    c = prepare_credential(stores, actor, a)
    begin_credential_write(stores, actor, c)
    complete_credential_write(stores, actor, c, secret)
    record_credential_write(stores, actor, c)
    commit_credential_version(stores, actor, c)
    return c


__all__ = [
    "begin_credential_write",
    "commit_credential_version",
    "complete_credential_write",
    "prepare_credential",
    "record_credential_write",
    "write_credential",
]
