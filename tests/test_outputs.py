"""Issue 11, item 3: one output writer (:mod:`remora.outputs`) — atomic over a missing path
or a regular file, written through a symlink, a character device or a FIFO, refused over a
directory; new files honour the umask; Remora's own artifacts never overwrite a different
file."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from remora.cli import main
from remora.outputs import OutputError, check_output, write_new, write_output


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.usefixtures("umask_027")
def test_a_new_file_honours_the_umask_and_a_replaced_one_keeps_its_mode(tmp_path: Path) -> None:
    new = write_output(tmp_path / "new.json", "{}\n")
    assert stat.S_IMODE(new.stat().st_mode) == 0o640  # mkstemp's 0600 would fail this
    kept = tmp_path / "kept.json"
    kept.write_text("old")
    kept.chmod(0o604)
    write_output(kept, "new")
    assert kept.read_text() == "new" and stat.S_IMODE(kept.stat().st_mode) == 0o604
    assert leftovers(tmp_path) == []


def test_a_regular_file_is_replaced_atomically(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old")
    before = target.stat().st_ino
    write_output(target, "new")
    assert target.read_text() == "new" and target.stat().st_ino != before  # renamed over


def test_a_symlink_is_written_through_not_replaced(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_output(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "made.json")
    write_output(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "made.json").read_text() == "made"


def test_a_fifo_is_written_through_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_output(fifo, "through the pipe")
    reader.join(10)
    assert got == [b"through the pipe"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_character_device_is_written_through_not_replaced(tmp_path: Path) -> None:
    """As root, ``--report /dev/stdout`` used to replace the device with a regular file;
    here a private node of the null device stands in for it."""
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    write_output(node, "discarded")
    assert stat.S_ISCHR(os.lstat(node).st_mode)


@pytest.mark.parametrize("make", ["directory", "missing-folder", "file-as-folder"])
def test_refused_outputs_are_one_line_errors(tmp_path: Path, make: str) -> None:
    if make == "directory":
        target = tmp_path / "d"
        target.mkdir()
        reason = "is a directory"
    elif make == "missing-folder":
        target = tmp_path / "nowhere" / "r.json"
        reason = "does not exist"
    else:
        (tmp_path / "f").write_text("")
        target = tmp_path / "f" / "r.json"
        reason = "Not a directory"
    for attempt in (lambda: check_output(target), lambda: write_output(target, "x")):
        with pytest.raises(OutputError, match=reason) as exc:
            attempt()
        assert str(exc.value).startswith(str(target)) and "\n" not in str(exc.value)
    assert not (tmp_path / "nowhere").exists() and leftovers(tmp_path) == []


def test_parents_are_made_only_when_asked(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "r.json"
    write_output(target, "x", parents=True)
    assert target.read_text() == "x"


def test_write_new_never_overwrites_a_different_file(tmp_path: Path) -> None:
    first = write_new(tmp_path / "t.json", "one")
    assert first == tmp_path / "t.json"
    assert write_new(tmp_path / "t.json", "one") == first  # identical: reused
    second = write_new(tmp_path / "t.json", "two")
    assert second == tmp_path / "t-2.json" and first.read_text() == "one"
    (tmp_path / "t-3.json").symlink_to(tmp_path / "elsewhere")
    assert write_new(tmp_path / "t.json", "three") == tmp_path / "t-4.json"
    assert not (tmp_path / "elsewhere").exists() and leftovers(tmp_path) == []


# -- on the command line ----------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--report", "--save"])
def test_sim_worker_refuses_a_directory_or_missing_folder_before_running(
    tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for target, reason in [
        (tmp_path, "is a directory"),
        (tmp_path / "missing" / "r.json", "does not exist"),
    ]:
        assert main(["sim-worker", "--seed", "1", flag, str(target)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and reason in err
    assert list(tmp_path.iterdir()) == []


def test_run_json_and_explore_json_refuse_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["explore", "--config", "tiny", "--quiet", "--json", str(tmp_path)]
    assert main(args) == 2
    assert "is a directory" in capsys.readouterr().err


def test_report_to_a_fifo_is_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "report"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main(["sim-worker", "--seed", "17", "--report", str(fifo)]) == 0
    reader.join(30)
    assert json.loads(got[0])["status"] == "PASS" and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert capsys.readouterr().out.encode() == got[0]


def test_reduce_never_overwrites_and_same_names_do_not_collide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    art = tmp_path / "art"
    monkeypatch.setenv("REMORA_ARTIFACT_DIR", str(art))
    seeds = []
    for seed in range(1, 40):
        code = main(
            [
                "sim-worker",
                "--mutation",
                "skip-cancel-check-after-wakeup",
                "--seed",
                str(seed),
                "--steps",
                "40",
            ]
        )
        capsys.readouterr()
        if code == 1:
            seeds.append(seed)
        if len(seeds) == 2:
            break
    saved = sorted(art.glob("sim-worker-skip-cancel-check-after-wakeup-valid-seed-*.json"))
    assert len(saved) == 2  # the class is in the name
    a, b = tmp_path / "a" / "x.json", tmp_path / "b" / "x.json"
    for path, src in ((a, saved[0]), (b, saved[1])):
        path.parent.mkdir()
        path.write_bytes(src.read_bytes())
    assert main(["reduce", str(a)]) == 0
    assert main(["reduce", str(b)]) == 0  # same name, another folder: no collision
    capsys.readouterr()
    assert (art / "x.json").read_bytes() == a.read_bytes()
    assert (art / "x-2.json").read_bytes() == b.read_bytes()
    reduced_a = (art / "x-reduced.json").read_bytes()
    assert (art / "x-reduced-2.json").read_bytes() != reduced_a  # b's, beside a's
    # Reducing a reduced trace keeps the original it came from.
    assert main(["reduce", str(art / "x-reduced.json")]) == 0
    assert (art / "x.json").read_bytes() == a.read_bytes()
    assert (art / "x-reduced.json").read_bytes() == reduced_a
