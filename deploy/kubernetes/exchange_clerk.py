"""The exchange's clerk: when each submission reached nbgrader's exchange, recorded on the hub's side,
where no student writes, as the grader's times file (``python -m autograde grade submitted --submitted-at``).

    python exchange_clerk.py --exchange /srv/nbgrader/exchange --course COURSE_ID --records /srv/course-records

It runs beside the hub (values.yaml, hub.extraContainers) and looks at ``<exchange>/<course>/inbound/`` every
``--every`` seconds. Each submission folder there (``<student>+<assignment>+<time>+<random>``, the name
written by the student's ``nbgrader submit``) is fingerprinted by its files' names, sizes and change
times (``fingerprint``); a fingerprint the clerk has not seen before gets the time it was read. A student's
time for an assignment is the latest such time over their folders, so editing a submission after the
deadline makes it late, and nothing a student writes (a folder's name, ``timestamp.txt``, a file's mtime)
makes it earlier. A folder whose owner is not the uid the hub gave the student it names (``users.json``,
course_hub.py) counts for no one and is named on the terminal. Written to ``--records``: ``times.csv``
(student_id, assignment, time in UTC) and ``seen.json`` (the fingerprints and their times, so a restart
forgets nothing).
"""
import argparse
import csv
import hashlib
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


def fingerprint(folder: Path) -> str:
    """A digest of each file's path, size, inode and change time (ctime) under ``folder``. A student can set a
    file's mtime but not its ctime: any write, rename or chmod sets it to now. So the digest changes with the
    files, without reading them (an exchange of 10,000 students is looked at every few seconds)."""
    entries, start = [], len(str(folder)) + 1
    for top, folders, files in os.walk(folder):  # os.walk, not Path.rglob: a third of the time
        for path in (os.path.join(top, name) for name in folders + files):
            status = os.lstat(path)
            entries.append(f"{path[start:]}\0{status.st_size}\0{status.st_ino}\0{status.st_ctime_ns}")
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


class Clerk:
    """The record of one course's inbound folder, kept in ``records``."""

    def __init__(self, exchange: Path, course: str, records: Path):
        self.inbound, self.records = exchange / course / "inbound", records
        seen = records / "seen.json"
        self.seen: dict[str, dict] = json.loads(seen.read_text()) if seen.exists() else {}

    def look(self, clock=lambda: datetime.now(timezone.utc)) -> list[str]:
        """Record what changed in the inbound folder since the last look; rewrite times.csv. A change gets the
        time ``clock`` tells once its folder is read: never before the change, however long the look takes.

        Returns:
            The folders that name a student other than their owner (each is left out of the times).
        """
        users_file = self.records / "users.json"
        uids = json.loads(users_file.read_text()) if users_file.exists() else {}
        folders = sorted(self.inbound.iterdir()) if self.inbound.is_dir() else []
        for folder in folders:
            if not folder.is_dir() or folder.name.count("+") < 2:
                continue
            digest = fingerprint(folder)
            entry = self.seen.get(folder.name)
            if entry is None or entry["fingerprint"] != digest:
                stamp = clock().astimezone(timezone.utc).isoformat(timespec="microseconds")  # sorts by time
                self.seen[folder.name] = {"fingerprint": digest, "time": stamp, "owner": folder.stat().st_uid}
        forged = [name for name, entry in self.seen.items() if uids.get(name.split("+")[0]) != entry["owner"]]
        times: dict[tuple[str, str], str] = {}
        for name, entry in self.seen.items():
            if name not in forged:
                student, assignment = name.split("+")[:2]
                times[student, assignment] = max(times.get((student, assignment), ""), entry["time"])
        self._write("seen.json", lambda f: json.dump(self.seen, f, indent=1, sort_keys=True))
        self._write("times.csv", lambda f: csv.writer(f).writerows(
            [("student_id", "assignment", "time"), *((s, a, t) for (s, a), t in sorted(times.items()))]))
        return forged

    def _write(self, name: str, write) -> None:
        """``records/name``, replaced whole: an instructor never reads half a file."""
        partial = self.records / f".{name}.partial"
        with partial.open("w", newline="") as f:
            write(f)
        partial.replace(self.records / name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchange", type=Path, required=True, help="nbgrader's exchange root (Exchange.root)")
    parser.add_argument("--course", required=True, help="the course id (CourseDirectory.course_id)")
    parser.add_argument("--records", type=Path, required=True, help="where users.json is and the record goes")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between looks [10]")
    args = parser.parse_args(argv)
    for folder, mode in ((args.exchange, 0o777), (args.records, 0o1777)):  # as deploy/jupyterhub makes the exchange
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(mode)
    clerk = Clerk(args.exchange, args.course, args.records)
    reported: set[str] = set()
    while True:
        for name in set(clerk.look()) - reported:
            print(f"{name}: not owned by the uid the hub gave its student; left out of times.csv", file=sys.stderr)
            reported.add(name)
        time.sleep(args.every)


if __name__ == "__main__":
    main()
