"""Cross-check ``remora explore`` against TLC on the named configurations.

Writes a TLC model (``.cfg``) per configuration next to a copy of ``Remora.tla`` and, given a
``tla2tools.jar``, runs TLC and compares distinct states, states generated and depth with the
explorer's (and, with ``--liveness``, TLC's verdict on the temporal properties)::

    python benchmarks/protocol_tlc.py --out /tmp/remora-tlc                   # only write models
    python benchmarks/protocol_tlc.py --jar tla2tools.jar tiny retry credentials
    python benchmarks/protocol_tlc.py --jar tla2tools.jar --liveness tiny retry

Safety runs use ``SafetySpec`` with every invariant and the four action properties (TLC checks
deadlock by default); ``--liveness`` uses ``Spec`` and adds the six liveness properties.
Both checkers run with two workers, one after the other; the wall time of each and their
ratio are printed (TLC's includes its JVM start-up).  Exit status 1 if any number differs.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from remora.protocol.config import NAMED_CONFIGS
from remora.protocol.liveness import LIVENESS_PROPERTIES
from remora.protocol.parallel import explore_parallel
from remora.protocol.spec import ACTION_PROPERTIES, INVARIANTS, Constants, Remora

SPEC = Path(__file__).resolve().parents[1] / "remora" / "protocol" / "Remora.tla"


def tla_set(names: list[str], quoted: bool = False) -> str:
    items = [f'"{n}"' if quoted else n for n in names]
    return "{" + ", ".join(items) + "}"


def cfg_text(k: Constants, liveness: bool) -> str:
    models = [*k.Jobs, *k.Workers, k.NoJob, k.NoWorker]
    lines = ["CONSTANTS"]
    lines += [f"  {m} = {m}" for m in models]
    lines += [
        f"  Jobs = {tla_set(list(k.Jobs))}",
        f"  Workers = {tla_set(list(k.Workers))}",
        f"  InitialWorkers = {tla_set(sorted(k.InitialWorkers))}",
        f"  MaxAttempts = {k.MaxAttempts}",
        f"  MaxProgress = {k.MaxProgress}",
        f"  LeaseLimit = {k.LeaseLimit}",
        f"  ReservationLimit = {k.ReservationLimit}",
        f"  LocalLimit = {k.LocalLimit}",
        f"  GlobalLimit = {k.GlobalLimit}",
        f"  FaultsEnabled = {'TRUE' if k.FaultsEnabled else 'FALSE'}",
        f"  FaultServices = {tla_set(sorted(k.FaultServices), quoted=True)}",
        f"  MaxCoordLosses = {k.MaxCoordLosses}",
        f"  MaxPartitions = {k.MaxPartitions}",
        f"  MaxCredentialIntents = {k.MaxCredentialIntents}",
        f"SPECIFICATION {'Spec' if liveness else 'SafetySpec'}",
        "INVARIANTS " + " ".join(INVARIANTS),
        "PROPERTIES " + " ".join([*ACTION_PROPERTIES, *(LIVENESS_PROPERTIES if liveness else ())]),
    ]
    return "\n".join(lines) + "\n"


def run_tlc(jar: str, workdir: Path, name: str) -> dict[str, object]:
    cmd = [
        "java", "-XX:+UseParallelGC", "-cp", jar, "tlc2.TLC", "-workers", "2",
        "-config", f"{name}.cfg", "-metadir", str(workdir / f"states-{name}"), "Remora.tla",
    ]  # fmt: skip
    started = time.monotonic()
    out = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True).stdout
    seconds = time.monotonic() - started
    (workdir / f"{name}.out").write_text(out)
    stats = re.findall(r"([\d,]+) states generated, ([\d,]+) distinct states found, 0 states", out)
    depth = re.search(r"depth of the complete state graph search is (\d+)", out)
    result: dict[str, object] = {
        "temporal_violation": "Temporal properties were violated" in out,
        "seconds": round(seconds, 2),
    }
    if stats:
        gen, dist = stats[-1]
        result["generated"] = int(gen.replace(",", ""))
        result["distinct"] = int(dist.replace(",", ""))
    if depth:
        result["depth"] = int(depth.group(1))
    result["error"] = bool(re.search(r"^Error:", out, re.M))
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*", default=list(NAMED_CONFIGS))
    ap.add_argument("--jar", default=None, help="path to tla2tools.jar (omit to only write)")
    ap.add_argument("--out", default="artifacts/protocol-tlc")
    ap.add_argument("--liveness", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(SPEC, out / "Remora.tla")
    failed = False
    for name in a.configs:
        k = NAMED_CONFIGS[name]
        (out / f"{name}.cfg").write_text(cfg_text(k, a.liveness))
        print(f"wrote {out / (name + '.cfg')}")
        if a.jar is None:
            continue
        tlc = run_tlc(a.jar, out, name)
        model = Remora(k)
        started = time.monotonic()
        r, _ = explore_parallel(model, name, workers=2)
        seconds = time.monotonic() - started
        mine = {"distinct": r.distinct, "generated": r.generated, "depth": r.depth}
        if tlc.get("temporal_violation"):
            print(f"{name}: TLC reports a temporal property violation (see {name}.out)")
        same = all(tlc.get(key) == mine[key] for key in mine) or (
            a.liveness and tlc.get("temporal_violation")
        )
        print(f"{name}: TLC {tlc} explorer {mine} -> {'same' if same else 'DIFFERENT'}")
        tlc_s = float(tlc["seconds"])  # type: ignore[arg-type]
        print(
            f"{name}: wall time, 2 workers each: TLC {tlc_s:.1f} s, explorer {seconds:.1f} s "
            f"(explorer/TLC {seconds / tlc_s:.2f}; {r.distinct / seconds:,.0f} vs "
            f"{r.distinct / tlc_s:,.0f} distinct states/s)"
        )
        failed |= not same
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
