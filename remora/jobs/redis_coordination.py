"""The coordination store on Redis (redis-py): every operation is one Lua script.

Each script evaluates the same condition as the ``can_*`` function of
:mod:`remora.jobs.guards` that :class:`~remora.jobs.coordination.MemoryCoordination` uses
(the contract suite runs both), applies the change, and appends the spec action to the
coordination log — the stream ``<ns>:log`` — *in the same script*, so the stream's ids
order the coordination steps.  Scripts compare tokens: ``ActivateAttempt`` the reservation
id and the mirrored floor/cancel mark, ``RenewLease`` and ``ReportProgress`` the floor.
Nothing here is a lock: a Redis key never fences a durable write.

Keys (one hash tag, so a cluster keeps them on one slot): ``queued`` (set), ``res`` (hash
job → ``worker|rid|at``), ``lease`` (hash attempt → ``worker|at|live``), ``live`` (set: the
attempts whose lease is live — an index, so that the scripts and reads that need the live
leases do not scan the released and expired ones, which ``lease`` keeps), ``notice`` (set),
``progress`` (hash job → ``attempt|n``), ``floor`` (hash job → token), ``cancel`` (set),
``queues`` (set: the queue names used), ``jobq`` (hash job → its queue) and ``q:<queue>``
(sorted set: the queued jobs of a queue by rank, ``-priority`` then submission order — an
index of ``queued`` for :meth:`RedisCoordination.candidates`, kept by ``Enqueue``,
``Reserve`` and ``CleanTerminalCoordination``), ``down`` (set: incarnations declared
down — marked before the declaration commits;
``Reserve``, ``ActivateAttempt``, ``RenewLease`` and ``ReportProgress`` of a marked
incarnation are refused), ``downby`` (set of ``<worker>\\n<holder>``: who holds each
down mark — a declarer whose declaration may still commit, or ``@durable`` for a mark
republished from the durable store; ``UnmarkDown`` lets go of one declarer's marks and
lifts a mark none holds any more), ``marks`` (present while the down marks are in place: a wipe
removes it, and ``Enqueue`` is refused until the marks are republished),
``rid`` (counter), ``log`` (stream).

Reads: :meth:`RedisCoordination.snapshot` (everything, for status and tests),
:meth:`~RedisCoordination.view` (one job), :meth:`~RedisCoordination.active` (the
reconciler's: no dead leases, no mirror) — read-only scripts, one round trip and one atomic
view each — and :meth:`~RedisCoordination.candidates` (a random sample of the queue, for
dispatch).

Time: with a ``clock`` the caller's clock is passed to every script (tests, simulation);
without one the scripts read the Redis server's ``TIME`` — one clock for every worker.

A wipe (``LoseCoordinationState``) deletes every key of the namespace, or runs
``FLUSHALL`` when the store owns the server (``flush_all=True``).  A connection lost while
a script ran leaves its effect unknown: the stream is searched for the call's
``(actor, seq)`` to resolve it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import redis

from remora.clock import Clock
from remora.errors import InvalidInput, Unavailable, UnknownResult
from remora.jobs.actions import Action
from remora.jobs.coordination import read_back as _read_back
from remora.jobs.coordination import record_cleans
from remora.jobs.io import Actor, JobOperation, io_call
from remora.jobs.model import (
    DEFAULT_QUEUE,
    AttemptId,
    CoordEntry,
    CoordSnapshot,
    JobsConfig,
    Lease,
    LiveProgress,
    Reservation,
)

PRELUDE = r"""
local ns = KEYS[1]
local function k(name) return ns .. ':' .. name end
local dry = ARGV[1] == '1'
local now = tonumber(ARGV[2])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local tick = tonumber(ARGV[3])
local function split(s)
  local out = {}
  for part in string.gmatch(s, '([^|]+)') do table.insert(out, part) end
  return out
end
local function age(at, limit)
  local a = math.floor((now - at) / tick)
  if a < 0 then a = 0 end
  if a > limit then a = limit end
  return a
end
local function log(action, params, seq)
  if dry then return '' end
  return redis.call('XADD', k('log'), '*', 'action', action, 'params', params,
                    'actor', ARGV[4], 'seq', seq or ARGV[5])
end
local function is_down(worker)
  return redis.call('SISMEMBER', k('down'), worker) == 1
end
local function floor_ok(job, token, running)
  local f = tonumber(redis.call('HGET', k('floor'), job) or '0')
  if token <= f then return false end
  if running and redis.call('SISMEMBER', k('cancel'), job) == 1 then return false end
  return true
end
-- ``live`` indexes the live leases (``lease`` keeps released and expired ones too): the
-- scripts that need every live lease read it, so their cost follows the work in flight,
-- not the history.
local function live_count()
  return redis.call('HLEN', k('res')) + redis.call('SCARD', k('live'))
end
-- a job leaves its queue's ranking when it leaves ``queued``
local function unrank(job)
  local q = redis.call('HGET', k('jobq'), job)
  if q then
    redis.call('ZREM', k('q:' .. q), job)
    redis.call('HDEL', k('jobq'), job)
  end
end
-- CleanTerminalCoordination's coordination conjunct, and its effect
local function dirty(job)
  return redis.call('SISMEMBER', k('queued'), job) == 1 or redis.call('HEXISTS', k('res'), job) == 1
     or redis.call('SISMEMBER', k('notice'), job) == 1
     or redis.call('HEXISTS', k('progress'), job) == 1
end
local function clean(job)
  redis.call('SREM', k('queued'), job)
  unrank(job)
  redis.call('HDEL', k('res'), job)
  redis.call('SREM', k('notice'), job)
  redis.call('HDEL', k('progress'), job)
end
"""

# ARGV: 1 dry, 2 now, 3 tick, 4 actor, 5 seq, 6 params (json), then per script.
SCRIPTS: dict[str, str] = {
    Action.ENQUEUE: r"""
local job = ARGV[7]
if redis.call('EXISTS', k('marks')) == 0 then return {0, ''} end
if redis.call('SISMEMBER', k('queued'), job) == 1 or redis.call('HEXISTS', k('res'), job) == 1
then return {0, ''} end
if not dry then
  redis.call('SADD', k('queued'), job)
  -- its queue's ranking (not a spec variable): Coordination.candidates reads it
  local queue = ARGV[8]
  redis.call('SADD', k('queues'), queue)
  redis.call('HSET', k('jobq'), job, queue)
  redis.call('ZADD', k('q:' .. queue), ARGV[9], job)
  -- a wake-up for one idle worker (Coordination.await_work); not a spec variable
  redis.call('LPUSH', k('wake'), '1')
  redis.call('LTRIM', k('wake'), 0, 63)
end
return {1, log('Enqueue', ARGV[6])}
""",
    Action.RESERVE: r"""
local job, worker = ARGV[7], ARGV[8]
local executing, local_limit = tonumber(ARGV[9]), tonumber(ARGV[10])
local global_limit = tonumber(ARGV[11])
if is_down(worker) or redis.call('SISMEMBER', k('queued'), job) == 0
   or redis.call('HEXISTS', k('res'), job) == 1 then return {0, ''} end
local mine = 0
for _, v in ipairs(redis.call('HVALS', k('res'))) do
  if split(v)[1] == worker then mine = mine + 1 end
end
if live_count() >= global_limit or mine + executing >= local_limit then return {0, ''} end
if dry then return {1, ''} end
-- unique across wipes: a FLUSHALL resets the counter, not the server's clock
local t = redis.call('TIME')
local rid = 'r' .. t[1] .. '.' .. t[2] .. '-' .. redis.call('INCR', k('rid'))
redis.call('SREM', k('queued'), job)
unrank(job)
redis.call('HSET', k('res'), job, worker .. '|' .. rid .. '|' .. now)
return {rid, log('Reserve', ARGV[6])}
""",
    # Reserve for each job of ARGV[12..] (triples: job, seq, params) in order until ARGV[11]
    # are reserved, each guarded as Reserve is on the state the earlier ones left (a dry
    # run counts them without writing), each logged as a Reserve of its own sequence
    # number: the replies are (job, rid, log id) triples.
    "ReserveBatch": r"""
local worker = ARGV[7]
local executing, local_limit = tonumber(ARGV[8]), tonumber(ARGV[9])
local global_limit, limit = tonumber(ARGV[10]), tonumber(ARGV[11])
if is_down(worker) then return {} end
local mine = 0
for _, v in ipairs(redis.call('HVALS', k('res'))) do
  if split(v)[1] == worker then mine = mine + 1 end
end
local live = live_count()
local taken = {}
local out = {}
local t = redis.call('TIME')
for i = 12, #ARGV, 3 do
  if #out >= 3 * limit then break end
  local job = ARGV[i]
  if not taken[job] and redis.call('SISMEMBER', k('queued'), job) == 1
     and redis.call('HEXISTS', k('res'), job) == 0
     and live < global_limit and mine + executing < local_limit then
    taken[job] = true
    mine = mine + 1
    live = live + 1
    local rid = ''
    if not dry then
      rid = 'r' .. t[1] .. '.' .. t[2] .. '-' .. redis.call('INCR', k('rid'))
      redis.call('SREM', k('queued'), job)
      unrank(job)
      redis.call('HSET', k('res'), job, worker .. '|' .. rid .. '|' .. now)
    end
    table.insert(out, job)
    table.insert(out, rid)
    table.insert(out, log('Reserve', ARGV[i + 2], ARGV[i + 1]))
  end
end
return out
""",
    Action.ACTIVATE_ATTEMPT: r"""
local job, a, token = ARGV[7], ARGV[8], tonumber(ARGV[9])
local worker, rid, progress = ARGV[10], ARGV[11], ARGV[12]
local r = redis.call('HGET', k('res'), job)
if not r then return {0, ''} end
local parts = split(r)
if parts[1] ~= worker or parts[2] ~= rid or is_down(worker) or not floor_ok(job, token, true)
then return {0, ''} end
-- stronger than the spec: no other attempt of the job holds a live lease
for _, b in ipairs(redis.call('SMEMBERS', k('live'))) do
  if b ~= a and string.match(b, '^(.*)#%d+$') == job then
    local v = redis.call('HGET', k('lease'), b)
    if v and split(v)[3] == '1' then return {0, ''} end
  end
end
if not dry then
  redis.call('HDEL', k('res'), job)
  redis.call('HSET', k('lease'), a, worker .. '|' .. now .. '|1')
  redis.call('SADD', k('live'), a)
  redis.call('HSET', k('progress'), job, a .. '|' .. progress)
end
return {1, log('ActivateAttempt', ARGV[6])}
""",
    Action.RENEW_LEASE: r"""
local job, a, token = ARGV[7], ARGV[8], tonumber(ARGV[9])
local worker, limit = ARGV[10], tonumber(ARGV[11])
local l = redis.call('HGET', k('lease'), a)
if not l then return {0, ''} end
local parts = split(l)
if parts[3] ~= '1' or parts[1] ~= worker or is_down(worker) or age(tonumber(parts[2]), limit) == 0
   or not floor_ok(job, token, false) then return {0, ''} end
if not dry then redis.call('HSET', k('lease'), a, worker .. '|' .. now .. '|1') end
return {1, log('RenewLease', ARGV[6])}
""",
    Action.REPORT_PROGRESS: r"""
local job, a, token, progress = ARGV[7], ARGV[8], tonumber(ARGV[9]), ARGV[10]
local l = redis.call('HGET', k('lease'), a)
if not l or split(l)[3] ~= '1' or is_down(split(l)[1]) or not floor_ok(job, token, true)
then return {0, ''} end
local cur = redis.call('HGET', k('progress'), job)
if cur == a .. '|' .. progress then return {0, ''} end
if not dry then redis.call('HSET', k('progress'), job, a .. '|' .. progress) end
return {1, log('ReportProgress', ARGV[6])}
""",
    Action.EXPIRE_LEASE: r"""
local a, limit = ARGV[7], tonumber(ARGV[8])
local l = redis.call('HGET', k('lease'), a)
if not l then return {0, ''} end
local parts = split(l)
if parts[3] ~= '1' or age(tonumber(parts[2]), limit) ~= limit then return {0, ''} end
if not dry then
  redis.call('HSET', k('lease'), a, parts[1] .. '|' .. parts[2] .. '|0')
  redis.call('SREM', k('live'), a)
end
return {1, log('ExpireLease', ARGV[6])}
""",
    Action.EXPIRE_RESERVATION: r"""
local job, limit = ARGV[7], tonumber(ARGV[8])
local r = redis.call('HGET', k('res'), job)
if not r or age(tonumber(split(r)[3]), limit) ~= limit then return {0, ''} end
if not dry then redis.call('HDEL', k('res'), job) end
return {1, log('ExpireReservation', ARGV[6])}
""",
    Action.RELEASE_LEASE: r"""
local a = ARGV[7]
local l = redis.call('HGET', k('lease'), a)
if not l then return {0, ''} end
local parts = split(l)
if parts[3] ~= '1' then return {0, ''} end
if not dry then
  redis.call('HSET', k('lease'), a, parts[1] .. '|' .. parts[2] .. '|0')
  redis.call('SREM', k('live'), a)
end
return {1, log('ReleaseLease', ARGV[6])}
""",
    Action.RELEASE_RESERVATION: r"""
local job, rid = ARGV[7], ARGV[8]
local r = redis.call('HGET', k('res'), job)
if not r or (rid ~= '' and split(r)[2] ~= rid) then return {0, ''} end
if not dry then redis.call('HDEL', k('res'), job) end
return {1, log('ReleaseReservation', ARGV[6])}
""",
    Action.PUBLISH_CANCEL_NOTICE: r"""
local job = ARGV[7]
if redis.call('SISMEMBER', k('notice'), job) == 1 then return {0, ''} end
if not dry then redis.call('SADD', k('notice'), job) end
return {1, log('PublishCancelNotice', ARGV[6])}
""",
    Action.CLEAN_TERMINAL_COORDINATION: r"""
local job = ARGV[7]
if not dirty(job) then return {0, ''} end
if not dry then clean(job) end
return {1, log('CleanTerminalCoordination', ARGV[6])}
""",
    # Coordination.clean_terminal_batch: ARGV[7..] are (job, seq, params) triples; each
    # dirty job is cleaned (on the state the earlier ones left) and logged as a
    # CleanTerminalCoordination of its own sequence number: the replies are (job, log id)
    # pairs (a dry run logs nothing and cleans nothing).
    "CleanTerminalBatch": r"""
local out = {}
local seen = {}
for i = 7, #ARGV, 3 do
  local job = ARGV[i]
  if not seen[job] and dirty(job) then
    seen[job] = true
    if not dry then clean(job) end
    table.insert(out, job)
    table.insert(out, log('CleanTerminalCoordination', ARGV[i + 2], ARGV[i + 1]))
  end
end
return out
""",
    Action.CLEAR_STALE_LIVE_PROGRESS: r"""
local job, authority = ARGV[7], ARGV[8]
local p = redis.call('HGET', k('progress'), job)
if not p then return {0, ''} end
local a = split(p)[1]
local l = redis.call('HGET', k('lease'), a)
if a == authority and l and split(l)[3] == '1' then return {0, ''} end
if not dry then redis.call('HDEL', k('progress'), job) end
return {1, log('ClearStaleLiveProgress', ARGV[6])}
""",
    "RaiseFloor": r"""
local job, token = ARGV[7], tonumber(ARGV[8])
local f = tonumber(redis.call('HGET', k('floor'), job) or '0')
if not dry and token > f then redis.call('HSET', k('floor'), job, token) end
return {0, ''}
""",
    "MarkCancel": r"""
if not dry then redis.call('SADD', k('cancel'), ARGV[7]) end
return {0, ''}
""",
    "MarkDown": r"""
if not dry then
  redis.call('SADD', k('down'), ARGV[7])
  redis.call('SADD', k('downby'), ARGV[7] .. '\n' .. ARGV[8])
end
return {0, ''}
""",
    "UnmarkDown": r"""
if not dry then
  local by = ARGV[7]
  for i = 8, #ARGV do
    local w = ARGV[i]
    redis.call('SREM', k('downby'), w .. '\n' .. by)
    local held = false
    for _, m in ipairs(redis.call('SMEMBERS', k('downby'))) do
      if string.sub(m, 1, #w + 1) == w .. '\n' then held = true break end
    end
    if not held then
      redis.call('SREM', k('down'), w)
    end
  end
end
return {0, ''}
""",
    "PublishDown": r"""
if not dry then
  for i = 7, #ARGV do
    redis.call('SADD', k('down'), ARGV[i])
    redis.call('SADD', k('downby'), ARGV[i] .. '\n@durable')
  end
  redis.call('SET', k('marks'), '1')
end
return {0, ''}
""",
}

# Read-only scripts (one round trip, one atomic view); ARGV as above, dry.
READS: dict[str, str] = {
    # Coordination.view: one job, the leases of the attempts given in ARGV[8..].
    "View": r"""
local job = ARGV[7]
local leases = {}
local downs = {}
for i = 8, #ARGV do
  local v = redis.call('HGET', k('lease'), ARGV[i])
  if v then
    table.insert(leases, ARGV[i]); table.insert(leases, v)
    -- the down marks of these leases' holders (CooperativeStop reads them)
    if is_down(split(v)[1]) then table.insert(downs, split(v)[1]) end
  end
end
return {redis.call('SISMEMBER', k('queued'), job), redis.call('HGET', k('res'), job) or '',
        redis.call('SISMEMBER', k('notice'), job), redis.call('HGET', k('progress'), job) or '',
        redis.call('HGET', k('floor'), job) or '', redis.call('SISMEMBER', k('cancel'), job),
        leases, string.format('%d', now), downs}
""",
    # Coordination.active: everything but dead leases and the mirror.
    "Active": r"""
local leases = {}
for _, a in ipairs(redis.call('SMEMBERS', k('live'))) do
  local v = redis.call('HGET', k('lease'), a)
  if v then table.insert(leases, a); table.insert(leases, v) end
end
return {redis.call('SMEMBERS', k('queued')), redis.call('HGETALL', k('res')),
        redis.call('SMEMBERS', k('notice')), redis.call('HGETALL', k('progress')),
        leases, string.format('%d', now)}
""",
    # Coordination.candidates: the first ARGV[7] jobs by rank of the queues ARGV[8..]
    # (every queue when none is given), as [job, score, queue, ...].
    "Ranked": r"""
local count = tonumber(ARGV[7])
local queues = {}
for i = 8, #ARGV do table.insert(queues, ARGV[i]) end
if #queues == 0 then queues = redis.call('SMEMBERS', k('queues')) end
local out = {}
for _, q in ipairs(queues) do
  local got = redis.call('ZRANGE', k('q:' .. q), 0, count - 1, 'WITHSCORES')
  for i = 1, #got, 2 do table.insert(out, {got[i], tonumber(got[i + 1]), q}) end
end
table.sort(out, function(a, b)
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[1] < b[1]
end)
local flat = {}
for i = 1, math.min(count, #out) do
  table.insert(flat, out[i][1])
end
return flat
""",
}

KEY_NAMES = (
    "wake",
    "queued",
    "queues",
    "jobq",
    "res",
    "lease",
    "live",
    "notice",
    "progress",
    "floor",
    "cancel",
    "down",
    "downby",
    "marks",
    "rid",
    "log",
)
#: The longest ranking window a worker reads when it accepts none of the first jobs (its
#: handlers' jobs behind others': ``candidates``).
MAX_WINDOW = 4096

#: Each queue's ranking is a sorted set ``<namespace>:q:<queue>`` (the queue names in
#: ``queues``): the keys of a namespace are :data:`KEY_NAMES` and these.
QUEUE_KEY_PREFIX = "q:"

#: A rank as a sorted-set score: ``-priority`` then the submission order (exact in a
#: double: |priority| <= :data:`~remora.jobs.model.MAX_PRIORITY` and order < 2**32).
SCORE_SHIFT = 1 << 32


def rank_score(priority: int, order: int) -> int:
    """The sorted-set score of a job's rank (ascending: highest priority first, then the
    submission order; equal scores by id, as :class:`~remora.jobs.coordination.Rank`)."""
    return -priority * SCORE_SHIFT + order % SCORE_SHIFT


def namespace_keys(client: Any, ns: str) -> list[str]:
    """Every key a namespace's store may hold (its fixed keys and its queues' rankings)."""
    names = client.smembers(f"{ns}:queues") or ()
    return [f"{ns}:{k}" for k in KEY_NAMES] + [f"{ns}:{QUEUE_KEY_PREFIX}{_d(q)}" for q in names]


class RedisCoordination:
    """A :class:`~remora.jobs.coordination.Coordination` on Redis."""

    def __init__(
        self,
        url: str,
        config: JobsConfig,
        *,
        namespace: str = "remora:jobs",
        clock: Clock | None = None,
        flush_all: bool = False,
        socket_timeout: float = 5.0,
    ) -> None:
        self.config = config
        self.ns = "{" + namespace + "}"
        self.clock = clock
        self.flush_all = flush_all
        try:
            self.client: redis.Redis = redis.Redis.from_url(
                url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout
            )
        except ValueError as exc:
            raise InvalidInput(f"bad Redis URL {url!r}: {exc}") from None
        self.url = url
        self._scripts = {
            name: self.client.register_script(PRELUDE + body)
            for name, body in (*SCRIPTS.items(), *READS.items())
        }

    def ping(self) -> None:
        try:
            self.client.ping()
        except redis.RedisError as exc:
            raise Unavailable(f"cannot reach Redis at {self.url}: {exc}") from None

    # -- plumbing -------------------------------------------------------------------------
    def _now(self) -> str:
        return "" if self.clock is None else str(round(self.clock.now() * 1000))

    def _op(
        self,
        actor: Actor,
        action: str,
        params: dict[str, Any],
        key: str,
        script: str,
        extra: list[Any],
    ) -> Any:
        seq = actor.next_seq()
        text = json.dumps(params, sort_keys=True)

        def run(dry: bool) -> list[Any]:
            args = [
                "1" if dry else "0",
                self._now(),
                self.config.tick_ms,
                actor.name,
                seq,
                text,
                *extra,
            ]
            try:
                out: list[Any] = self._scripts[script](keys=[self.ns], args=args)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                raise UnknownResult(f"redis {script}: {exc}") from exc
            except redis.RedisError as exc:
                raise Unavailable(f"redis {script}: {exc}") from exc
            return out

        def effect(commit: bool) -> list[Any]:
            return run(not commit)

        try:
            result, order = io_call(actor, JobOperation.COORD_WRITE, key, effect)
        except UnknownResult:
            found = self._find(actor.name, seq)
            if found is None:
                raise Unavailable(f"redis {script}: not applied (re-read the log)") from None
            result, order = b"1", found
        order_s = order.decode() if isinstance(order, bytes) else str(order)
        value = result.decode() if isinstance(result, bytes) else result
        if order_s and action:
            actor.record(seq, action, params, store="coordination", order=order_s)
        return value

    def _batch_call(
        self, actor: Actor, script: str, jobs: Sequence[str], args: list[Any]
    ) -> list[Any] | None:
        """One call of a batch script (its per-job arguments in ``args``, each job's
        sequence number among them): its flat reply, or ``None`` when the reply was lost
        (the caller resolves each job from the stream)."""

        def effect(commit: bool) -> list[Any]:
            try:
                out: list[Any] = self._scripts[script](
                    keys=[self.ns],
                    args=[
                        "0" if commit else "1",
                        self._now(),
                        self.config.tick_ms,
                        actor.name,
                        "",
                        "",
                        *args,
                    ],
                )
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                raise UnknownResult(f"redis {script}: {exc}") from exc
            except redis.RedisError as exc:
                raise Unavailable(f"redis {script}: {exc}") from exc
            return out

        try:
            return io_call(actor, JobOperation.COORD_WRITE, jobs[0] if jobs else "", effect)
        except UnknownResult:
            return None

    def _find(self, actor: str, seq: int) -> str | None:
        try:
            entries: Any = self.client.xrevrange(f"{self.ns}:log", count=5000)
        except redis.RedisError as exc:
            raise UnknownResult(f"cannot resolve an unknown result: {exc}") from exc
        for entry_id, fields in entries or []:
            f = {_d(k): _d(v) for k, v in fields.items()}
            if f.get("actor") == actor and f.get("seq") == str(seq):
                return _d(entry_id)
        return None

    # -- spec actions ---------------------------------------------------------------------
    def enqueue(
        self,
        actor: Actor,
        job: str,
        *,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        order: int = 0,
    ) -> bool:
        extra = [job, queue, rank_score(priority, order)]
        return bool(
            int(self._op(actor, Action.ENQUEUE, {"j": job}, job, Action.ENQUEUE, extra) or 0)
        )

    def reserve(
        self, actor: Actor, job: str, worker: str, executing: int, local_limit: int
    ) -> str | None:
        out = self._op(
            actor,
            Action.RESERVE,
            {"j": job, "w": worker},
            job,
            Action.RESERVE,
            [job, worker, executing, local_limit, self.config.global_limit],
        )
        if out == "1":  # a lost reply, resolved from the stream: the id was in the reply
            return _read_back(self, actor, job, worker)
        return None if out in (0, "0", None) else str(out)

    def reserve_batch(
        self,
        actor: Actor,
        jobs: Sequence[str],
        worker: str,
        executing: int,
        local_limit: int,
        limit: int,
    ) -> list[tuple[str, str]]:
        seqs = [actor.next_seq() for _ in jobs]
        texts = [json.dumps({"j": job, "w": worker}, sort_keys=True) for job in jobs]
        args: list[Any] = [worker, executing, local_limit, self.config.global_limit, limit]
        for job, seq, text in zip(jobs, seqs, texts, strict=True):
            args += [job, seq, text]

        index = {job: i for i, job in enumerate(jobs)}
        got: list[tuple[str, str]] = []
        steps: list[tuple[int, str]] = []  # (index into jobs, log id) of each reservation
        flat = self._batch_call(actor, "ReserveBatch", jobs, args)
        if flat is not None:
            for n in range(0, len(flat), 3):
                job, rid, order = (_d(x) for x in flat[n : n + 3])
                if order:  # a dry run logs nothing and reserves nothing
                    got.append((job, rid))
                    steps.append((index[job], order))
        else:
            # Resolved from the stream, job by job: the logged ones were reserved (their
            # ids were in the lost reply: read back); none logged, the call did not apply.
            for i, job in enumerate(jobs):
                found = self._find(actor.name, seqs[i])
                if found is None:
                    continue
                steps.append((i, found))
                back = _read_back(self, actor, job, worker)
                if back is not None:
                    got.append((job, back))
            if not steps:
                raise Unavailable("redis ReserveBatch: not applied (re-read the log)") from None
        for i, order in steps:
            actor.record(
                seqs[i],
                Action.RESERVE,
                {"j": jobs[i], "w": worker},
                store="coordination",
                order=order,
            )
        return got

    def activate(self, actor: Actor, a: AttemptId, worker: str, rid: str, progress: int) -> bool:
        out = self._op(
            actor,
            Action.ACTIVATE_ATTEMPT,
            {"a": str(a)},
            a.job,
            Action.ACTIVATE_ATTEMPT,
            [a.job, str(a), a.token, worker, rid, progress],
        )
        return _truthy(out)

    def renew(self, actor: Actor, a: AttemptId, worker: str) -> bool:
        out = self._op(
            actor,
            Action.RENEW_LEASE,
            {"a": str(a)},
            a.job,
            Action.RENEW_LEASE,
            [a.job, str(a), a.token, worker, self.config.lease_ticks],
        )
        return _truthy(out)

    def report_progress(self, actor: Actor, a: AttemptId, progress: int) -> bool:
        out = self._op(
            actor,
            Action.REPORT_PROGRESS,
            {"a": str(a)},
            a.job,
            Action.REPORT_PROGRESS,
            [a.job, str(a), a.token, progress],
        )
        return _truthy(out)

    def expire_lease(self, actor: Actor, a: AttemptId) -> bool:
        out = self._op(
            actor,
            Action.EXPIRE_LEASE,
            {"a": str(a)},
            a.job,
            Action.EXPIRE_LEASE,
            [str(a), self.config.lease_ticks],
        )
        return _truthy(out)

    def expire_reservation(self, actor: Actor, job: str) -> bool:
        out = self._op(
            actor,
            Action.EXPIRE_RESERVATION,
            {"j": job},
            job,
            Action.EXPIRE_RESERVATION,
            [job, self.config.reservation_ticks],
        )
        return _truthy(out)

    def release_lease(self, actor: Actor, a: AttemptId) -> bool:
        out = self._op(
            actor, Action.RELEASE_LEASE, {"a": str(a)}, a.job, Action.RELEASE_LEASE, [str(a)]
        )
        return _truthy(out)

    def release_reservation(self, actor: Actor, job: str, rid: str | None) -> bool:
        out = self._op(
            actor,
            Action.RELEASE_RESERVATION,
            {"j": job},
            job,
            Action.RELEASE_RESERVATION,
            [job, rid or ""],
        )
        return _truthy(out)

    def publish_cancel_notice(self, actor: Actor, job: str) -> bool:
        out = self._op(
            actor,
            Action.PUBLISH_CANCEL_NOTICE,
            {"j": job},
            job,
            Action.PUBLISH_CANCEL_NOTICE,
            [job],
        )
        return _truthy(out)

    def clean_terminal(self, actor: Actor, job: str) -> bool:
        out = self._op(
            actor,
            Action.CLEAN_TERMINAL_COORDINATION,
            {"j": job},
            job,
            Action.CLEAN_TERMINAL_COORDINATION,
            [job],
        )
        return _truthy(out)

    def clean_terminal_batch(self, actor: Actor, jobs: Sequence[str]) -> list[str]:
        seqs = [actor.next_seq() for _ in jobs]
        args: list[Any] = []
        for job, seq in zip(jobs, seqs, strict=True):
            args += [job, seq, json.dumps({"j": job}, sort_keys=True)]
        flat = self._batch_call(actor, "CleanTerminalBatch", jobs, args)
        index = {job: i for i, job in enumerate(jobs)}
        steps: list[tuple[int, str]] = []  # (index into jobs, log id) of each clean
        if flat is None:
            # A lost reply, resolved from the stream job by job: the logged ones were
            # cleaned; none logged, the call did not apply.
            steps = [(i, o) for i in range(len(jobs)) if (o := self._find(actor.name, seqs[i]))]
            if not steps:
                raise Unavailable(
                    "redis CleanTerminalBatch: not applied (re-read the log)"
                ) from None
        else:
            for n in range(0, len(flat), 2):
                job, order = (_d(x) for x in flat[n : n + 2])
                if order:  # a dry run logs nothing
                    steps.append((index[job], order))
        return record_cleans(actor, jobs, seqs, steps)

    def clear_stale_progress(self, actor: Actor, job: str, authority: AttemptId | None) -> bool:
        out = self._op(
            actor,
            Action.CLEAR_STALE_LIVE_PROGRESS,
            {"j": job},
            job,
            Action.CLEAR_STALE_LIVE_PROGRESS,
            [job, str(authority) if authority else ""],
        )
        return _truthy(out)

    def raise_floor(self, actor: Actor, job: str, token: int) -> None:
        self._op(actor, "", {"j": job, "floor": token}, job, "RaiseFloor", [job, token])

    def mark_cancel(self, actor: Actor, job: str) -> None:
        self._op(actor, "", {"j": job, "cancel": True}, job, "MarkCancel", [job])

    def mark_down(self, actor: Actor, worker: str) -> None:
        self._op(actor, "", {"w": worker, "down": True}, "", "MarkDown", [worker, actor.name])

    def unmark_down(self, actor: Actor, workers: Iterable[str]) -> None:
        """Let go of ``actor``'s own down marks of ``workers`` (see
        :meth:`MemoryCoordination.unmark_down`): the ``downby`` set names each mark's
        holders (``<worker>\\n<declarer>``); a mark with none left is lifted."""
        ids = sorted(workers)
        self._op(actor, "", {"up": ids}, "", "UnmarkDown", [actor.name, *ids])

    def publish_down(self, actor: Actor, workers: Iterable[str]) -> None:
        ids = sorted(workers)
        self._op(actor, "", {"down": ids}, "", "PublishDown", ids)

    def is_marked(self, actor: Actor) -> bool:
        def read(commit: bool) -> bool:
            try:
                return bool(self.client.exists(f"{self.ns}:marks"))
            except redis.RedisError as exc:
                raise Unavailable(f"redis marks: {exc}") from exc

        return bool(io_call(actor, JobOperation.COORD_READ, "", read))

    # -- faults and reads -----------------------------------------------------------------
    def wipe(self, actor: Actor) -> None:
        """``LoseCoordinationState``: a real wipe, then the wipe is logged."""
        seq = actor.next_seq()

        def effect(commit: bool) -> str:
            if not commit:
                return ""
            try:
                if self.flush_all:
                    self.client.flushall()
                else:
                    self.client.delete(*namespace_keys(self.client, self.ns))
                entry = self.client.xadd(
                    f"{self.ns}:log",
                    {
                        "action": Action.LOSE_COORDINATION_STATE,
                        "params": "{}",
                        "actor": actor.name,
                        "seq": str(seq),
                    },
                )
            except redis.RedisError as exc:
                raise Unavailable(f"redis wipe: {exc}") from exc
            return str(entry.decode() if isinstance(entry, bytes) else entry)

        order = io_call(actor, JobOperation.COORD_WRITE, "", effect)
        actor.record(seq, Action.LOSE_COORDINATION_STATE, {}, store="coordination", order=order)

    def snapshot(self, actor: Actor | None = None) -> CoordSnapshot:
        def read(commit: bool = True) -> CoordSnapshot:
            try:
                pipe = self.client.pipeline(transaction=True)
                for name in (
                    "queued",
                    "res",
                    "lease",
                    "notice",
                    "progress",
                    "floor",
                    "cancel",
                    "down",
                ):
                    key = f"{self.ns}:{name}"
                    if name in ("queued", "notice", "cancel", "down"):
                        pipe.smembers(key)
                    else:
                        pipe.hgetall(key)
                pipe.time()
                queued, res, lease, notice, progress, floor, cancel, down, t = pipe.execute()
            except redis.RedisError as exc:
                raise Unavailable(f"redis snapshot: {exc}") from exc
            now = (
                round(self.clock.now() * 1000)
                if self.clock is not None
                else int(t[0]) * 1000 + int(t[1]) // 1000
            )
            snap = _snapshot(queued, res, lease, notice, progress, floor, cancel, now)
            return attrs.evolve(snap, down=frozenset(_d(x) for x in down))

        if actor is None:
            return read()
        return io_call(actor, JobOperation.COORD_READ, "", read)

    def _read(self, script: str, extra: list[Any]) -> Any:
        args = ["1", self._now(), self.config.tick_ms, "", 0, "{}", *extra]
        try:
            return self._scripts[script](keys=[self.ns], args=args)
        except redis.RedisError as exc:
            raise Unavailable(f"redis {script}: {exc}") from exc

    def view(
        self, actor: Actor | None, job: str, attempts: Iterable[AttemptId] = ()
    ) -> CoordSnapshot:
        keys = [str(a) for a in attempts]

        def read(commit: bool = True) -> CoordSnapshot:
            queued, res, notice, progress, floor, cancel, leases, now, downs = self._read(
                "View", [job, *keys]
            )
            snap = _snapshot(
                [job] if int(queued) else [],
                {job: res} if _d(res) else {},
                _pairs(leases),
                [job] if int(notice) else [],
                {job: progress} if _d(progress) else {},
                {job: floor} if _d(floor) else {},
                [job] if int(cancel) else [],
                int(_d(now)),
            )
            return attrs.evolve(snap, down=frozenset(_d(w) for w in downs or ()))

        if actor is None:
            return read()
        return io_call(actor, JobOperation.COORD_READ, job, read)

    def active(self, actor: Actor | None = None) -> CoordSnapshot:
        def read(commit: bool = True) -> CoordSnapshot:
            queued, res, notice, progress, leases, now = self._read("Active", [])
            return _snapshot(
                queued,
                _pairs(res),
                _pairs(leases),
                notice,
                _pairs(progress),
                {},
                [],
                int(_d(now)),
            )

        if actor is None:
            return read()
        return io_call(actor, JobOperation.COORD_READ, "", read)

    def await_work(self, actor: Actor, timeout: float) -> bool:
        """Block until an ``Enqueue`` pushed a wake-up (True) or ``timeout`` passed."""

        def read(commit: bool) -> bool:
            try:
                # at most a second: well within the client's socket timeout
                wait = min(max(timeout, 0.001), 1.0)
                got: Any = self.client.blpop([f"{self.ns}:wake"], timeout=wait)
            except redis.RedisError as exc:
                raise Unavailable(f"redis wait for work: {exc}") from exc
            return got is not None

        return bool(io_call(actor, JobOperation.COORD_READ, "", read))

    def candidates(
        self,
        actor: Actor,
        limit: int,
        accept: Callable[[str], bool] | None = None,
        queues: Iterable[str] | None = None,
        prefetch: Callable[[Sequence[str]], None] | None = None,
    ) -> list[str]:
        names = [] if queues is None else sorted(set(queues))
        if queues is not None and not names:
            return []
        count = limit if accept is None else limit * 8
        while True:
            # With a filter, a longer list: jobs of handlers this worker lacks are skipped
            # (they stay queued for a worker that has them) — and when none of the first
            # ones is accepted, a window eight times longer, up to MAX_WINDOW, so that a
            # worker's jobs behind many others' are still found.
            def read(commit: bool, count: int = count) -> list[str]:
                return [_d(x) for x in self._read("Ranked", [count, *names]) or []]

            got: list[str] = io_call(actor, JobOperation.COORD_READ, "", read)
            if accept is None:
                jobs = got
            else:
                if prefetch is not None:
                    prefetch(got)
                jobs = []
                for j in got:  # asked only until ``limit`` are accepted
                    if len(jobs) >= limit:
                        break
                    if accept(j):
                        jobs.append(j)
            if jobs or accept is None or len(got) < count or count >= MAX_WINDOW:
                return jobs[:limit]
            count *= 8

    def log(self) -> list[CoordEntry]:
        out = []
        entries: Any = self.client.xrange(f"{self.ns}:log")
        for entry_id, fields in entries or []:
            f = {_d(k): _d(v) for k, v in fields.items()}
            out.append(
                CoordEntry(
                    _d(entry_id),
                    f["action"],
                    json.loads(f["params"]),
                    f["actor"],
                    int(f["seq"]),
                )
            )
        return out

    def close(self) -> None:
        self.client.close()


def _d(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _pairs(flat: Any) -> dict[Any, Any]:
    """A flat ``[k1, v1, k2, v2, …]`` script reply as a dict."""
    items = list(flat or [])
    return dict(zip(items[0::2], items[1::2], strict=True))


def _snapshot(
    queued: Any,
    res: Any,
    lease: Any,
    notice: Any,
    progress: Any,
    floor: Any,
    cancel: Any,
    now: int,
) -> CoordSnapshot:
    reservations = {}
    for job, v in res.items():
        w, rid, at = _d(v).split("|")
        reservations[_d(job)] = Reservation(w, rid, int(at))
    leases = {}
    for a, v in lease.items():
        w, at, live = _d(v).split("|")
        leases[AttemptId.parse(_d(a))] = Lease(w, int(at), live == "1")
    prog = {}
    for job, v in progress.items():
        a, n = _d(v).split("|")
        prog[_d(job)] = LiveProgress(AttemptId.parse(a), int(n))
    return CoordSnapshot(
        frozenset(_d(x) for x in queued),
        reservations,
        leases,
        frozenset(_d(x) for x in notice),
        prog,
        {_d(j): int(_d(t)) for j, t in floor.items()},
        frozenset(_d(x) for x in cancel),
        now,
    )


def _truthy(out: Any) -> bool:
    return out not in (0, "0", None, b"0")


__all__ = [
    "KEY_NAMES",
    "QUEUE_KEY_PREFIX",
    "READS",
    "SCRIPTS",
    "RedisCoordination",
    "namespace_keys",
    "rank_score",
]
