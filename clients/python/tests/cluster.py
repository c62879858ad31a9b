"""A real three-node limitnode cluster for the tests: the limitnode binary
(LIMITNODE_BIN, or built from this repository with ``go build``), each node
on ports the OS picks, with its own data directory, its log kept for a
failing test; with API tokens when a test asks for them."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

REPO_ROOT = Path(__file__).resolve().parents[3]

_SERVING = re.compile(r'msg="limitnode serving".* http=(\S+)')


def wait_for(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll check every 50 ms until it holds, or fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:  # a node not answering yet is a check that does not hold
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def get_json(addr: str, path: str, token: Optional[str] = None) -> Tuple[int, Any]:
    """GET http://addr/path (with token, when given): its status and parsed body."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    try:
        with urllib.request.urlopen(urllib.request.Request(f"http://{addr}{path}", headers=headers), timeout=5) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as error:
        body = error.read()
        try:
            return error.code, json.loads(body)
        except ValueError:
            return error.code, body.decode()


class RunningNode:
    """A started node: its ID, HTTP address once it serves, process and log."""

    def __init__(self, node_id: str, process: subprocess.Popen[str]) -> None:
        self.id = node_id
        self.process = process
        self.http = ""
        self.log: List[str] = []
        self.serving = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line.rstrip("\n"))
            m = _SERVING.search(line)
            if m and not self.serving.is_set():
                self.http = m.group(1)
                self.serving.set()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


def _state(task: Path) -> str:
    """A thread's state letter in /proc (T: stopped)."""
    stat = (task / "stat").read_text()
    return stat[stat.rindex(")") + 2]


def _binary(directory: str) -> str:
    given = os.environ.get("LIMITNODE_BIN")
    if given:
        return given
    out = os.path.join(directory, "limitnode")
    built = subprocess.run(["go", "build", "-o", out, "./cmd/limitnode"], cwd=REPO_ROOT, capture_output=True, text=True)
    if built.returncode != 0:
        raise RuntimeError(f"LIMITNODE_BIN is unset and go build failed:\n{built.stderr}")
    return out


class Cluster:
    """Three limitnode processes forming one cluster.

    ``flags`` go to every node besides its own; ``tokens`` (roles by name)
    makes API tokens, each one's secret then ``token(name)``, and runs the
    nodes with -auth."""

    def __init__(self, flags: Sequence[str] = (), tokens: Optional[Dict[str, List[str]]] = None) -> None:
        self.dir = tempfile.mkdtemp(prefix="limitnode-py-")
        self.bin = _binary(self.dir)
        self.nodes: List[RunningNode] = []
        self.flags = list(flags)
        self._tokens: Dict[str, str] = {}
        self._operator: Optional[str] = None  # the admin token the nodes join with and this helper reads with
        if tokens is not None:
            entries = []
            for name, roles in {**tokens, "operator": ["admin"]}.items():
                secret = secrets.token_hex(24)
                self._tokens[name] = secret
                entries.append({"name": name, "sha256": hashlib.sha256(secret.encode()).hexdigest(), "roles": roles})
            token_file = os.path.join(self.dir, "tokens.json")
            join_file = os.path.join(self.dir, "join-token")
            self._operator = self._tokens["operator"]
            for path, text in ((token_file, json.dumps({"tokens": entries})), (join_file, self._operator + "\n")):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                    f.write(text)
            self.flags += ["-auth", token_file, "-join-token-file", join_file]

    @classmethod
    def start(cls, flags: Sequence[str] = (), tokens: Optional[Dict[str, List[str]]] = None) -> Cluster:
        """Start n1, which bootstraps, then n2 and n3, which join it, and wait until all three are ready."""
        c = cls(flags, tokens)
        try:
            n1 = c._start_node("n1", [])
            for node_id in ("n2", "n3"):
                c._start_node(node_id, ["-join", n1.http])

            def ready() -> bool:
                status, body = get_json(n1.http, "/v1/cluster", c._operator)
                return status == 200 and len(body["nodes"]) == 3 and all(get_json(n.http, "/readyz")[0] == 200 for n in c.nodes)

            wait_for("three members, each ready", ready)
        except BaseException:
            logs = c.logs()
            c.stop()
            raise RuntimeError(f"the cluster did not start:\n{logs}")
        return c

    def _start_node(self, node_id: str, extra: List[str]) -> RunningNode:
        args = [self.bin, "-id", node_id, "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", os.path.join(self.dir, node_id), *self.flags, *extra]
        process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        node = RunningNode(node_id, process)
        self.nodes.append(node)
        if not node.serving.wait(30) or not node.alive:
            raise RuntimeError(f"{node_id} did not serve:\n" + "\n".join(node.log))
        return node

    def token(self, name: str) -> str:
        """The secret of the token made under name."""
        return self._tokens[name]

    def addresses(self) -> List[str]:
        return [n.http for n in self.nodes]

    def live(self) -> List[RunningNode]:
        return [n for n in self.nodes if n.alive]

    def leader(self) -> RunningNode:
        """The node every live node names as leader, once they agree."""
        found: List[Optional[RunningNode]] = [None]

        def agreed() -> bool:
            ids = {get_json(n.http, "/v1/cluster", self._operator)[1]["leader"] for n in self.live()}
            leaders = [n for n in self.live() if ids == {n.id}]
            found[0] = leaders[0] if leaders else None
            return found[0] is not None

        wait_for("a leader", agreed)
        assert found[0] is not None
        return found[0]

    def followers(self) -> List[RunningNode]:
        leader = self.leader()
        return [n for n in self.live() if n is not leader]

    def pause(self, node: RunningNode) -> None:
        """SIGSTOP: its kernel still takes connections, and nothing answers
        them. It returns once every thread of the node is stopped (the
        signal stops them one by one), where /proc tells."""
        node.process.send_signal(signal.SIGSTOP)
        tasks = Path(f"/proc/{node.process.pid}/task")
        if tasks.is_dir():
            wait_for(f"{node.id} to stop", lambda: all(_state(t) == "T" for t in tasks.iterdir()), timeout=10)

    def resume(self, node: RunningNode) -> None:
        """SIGCONT: a paused node goes on."""
        node.process.send_signal(signal.SIGCONT)

    def kill(self, node: RunningNode) -> None:
        """SIGKILL, as a crash; wait for it to die."""
        node.process.kill()
        node.process.wait()

    def stop(self) -> None:
        for n in self.nodes:
            if n.alive:
                n.process.kill()
            n.process.wait()
            n.reader.join(5)
            if n.process.stderr is not None:
                n.process.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self) -> str:
        return "\n".join(f"--- {n.id}\n" + "\n".join(n.log) for n in self.nodes)
