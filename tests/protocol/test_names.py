"""Every TLA+ definition has a Python counterpart findable by its name (and in the docs)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from remora.protocol.config import NAMED_CONFIGS
from remora.protocol.explore import ExploreOptions, explore
from remora.protocol.names import TLA_TO_PYTHON
from remora.protocol.spec import VARIABLES, Remora, credentialVars

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "remora" / "protocol" / "Remora.tla"


def _definitions() -> set[str]:
    text = SPEC.read_text()
    names = {
        re.sub(r"\(.*", "", line.split(" ==")[0])
        for line in text.splitlines()
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\(.*\))? ==", line)
    }
    consts = re.search(r"CONSTANTS\n(.*?)\nASSUME", text, re.S)
    assert consts is not None
    names |= {n.strip() for n in consts.group(1).replace("\n", " ").split(",")}
    return names


def test_vendored_spec_is_the_shared_one() -> None:
    shared = ROOT.parent / "shared" / "spec" / "Remora.tla"
    if shared.exists():
        assert shared.read_text() == SPEC.read_text()


def test_every_definition_is_mapped_and_resolves() -> None:
    defs = _definitions() | set(VARIABLES)
    assert defs <= set(TLA_TO_PYTHON), sorted(defs - set(TLA_TO_PYTHON))
    instance = Remora(NAMED_CONFIGS["tiny"])
    for tla, path in TLA_TO_PYTHON.items():
        module, attr = path.split(":")
        obj: object = importlib.import_module(module)
        parts = attr.split(".")
        if parts[0] == "Remora" and len(parts) == 2:
            obj = instance
            parts = parts[1:]
        for p in parts:
            if p in getattr(obj, "_fields", ()):  # a NamedTuple field
                break
            obj = getattr(obj, p)
        assert tla in attr or tla in ("JobNext", "CredentialNext", "SafetySpec", "Spec"), path


def test_docs_table_lists_every_definition() -> None:
    doc = (ROOT / "docs" / "protocol.md").read_text()
    for tla in TLA_TO_PYTHON:
        assert f"| `{tla}` |" in doc, tla


def test_job_actions_leave_credential_vars_unchanged() -> None:
    """``JobStep(A) == A /\\ UNCHANGED credentialVars`` is ``A`` for every job action."""
    m = Remora(NAMED_CONFIGS["credentials"]._replace(MaxCredentialIntents=1))
    r = explore(m, "c1", ExploreOptions(keep_graph=True, max_states=20000))
    assert r.graph is not None
    cred = [VARIABLES.index(v) for v in credentialVars]
    credential_actions = {st.name for st in m.CredentialNextSteps()}
    for i, edges in enumerate(r.graph.succ):
        s = r.graph.states[i]
        for j, k in edges:
            if r.graph.steps[k].name not in credential_actions:
                t = r.graph.states[j]
                assert all(s[x] == t[x] for x in cred)
