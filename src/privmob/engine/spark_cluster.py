"""A Spark standalone cluster on this machine: a master and workers from the installed pyspark.

For trying privmob on a real cluster without one, and for the cluster tests and benchmark
(tests/engine/test_spark_cluster.py, benchmarks/bench_spark_cluster.py): every process is
started with pyspark's own ``spark-class`` (``org.apache.spark.deploy.master.Master`` and
``...worker.Worker``), listens on the loopback interface only (``SPARK_LOCAL_IP=127.0.0.1``,
``--host 127.0.0.1``, free ports) and keeps its files (logs, the workers' work directories
with the executors' logs, the executors' local directories with shuffle and spill files)
under one directory of mode 0700::

    with StandaloneCluster(root, workers=2, cores=1, memory="2g") as cluster:
        engine = make_engine("spark", master=cluster.url, conf=cluster.client_conf())

:meth:`StandaloneCluster.stop` ends every process it started (the executors end with their
workers) and waits for them; the directory stays for inspection and is the caller's to remove.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType

from privmob.errors import EngineError

LOOPBACK = "127.0.0.1"


def spark_home() -> Path:
    """The installed pyspark's directory (it holds ``bin/spark-class`` and the jars)."""
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - depends on the installation
        from privmob.extras import install_hint

        raise EngineError("PySpark is not installed", hint=install_hint("spark")) from exc
    return Path(pyspark.__file__).parent


def _end_with_parent() -> None:
    """In the daemon before it starts: SIGTERM when the process that started it dies (Linux),
    so that a killed test run or benchmark leaves no JVM behind (the workers' shutdown stops
    their executors)."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def free_port() -> int:
    """A TCP port of the loopback interface that nothing listens on now."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def cluster_processes(root: Path, pids: list[int]) -> list[str]:
    """Processes still running that belong to a cluster: one of ``pids`` (the master and the
    workers), or any process whose working directory or command line is under ``root`` (the
    executors run in the workers' work directories). Linux (``/proc``); one line each."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        if int(entry.name) in pids or str(root) in cmd or cwd.startswith(str(root)):
            found.append(f"{entry.name}: {cmd[:200]}")
    return found


class StandaloneCluster:
    """A standalone master and ``workers`` workers of ``cores`` cores and ``memory`` each."""

    def __init__(
        self,
        root: Path,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "2g",
        daemon_memory: str = "256m",
        timeout: float = 180.0,
    ) -> None:
        self.root = Path(root)
        self.n_workers = workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.timeout = timeout
        self.port = 0
        self.webui_port = 0
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def worker_dirs(self) -> list[Path]:
        """Each worker's work directory (executors' logs) and local directory (shuffle,
        spill and cached blocks of the executors)."""
        out = []
        for i in range(self.n_workers):
            out += [self.root / f"worker{i}" / "work", self.root / f"worker{i}" / "local"]
        return out

    def client_conf(self, executor_memory: str | None = None) -> dict[str, str]:
        """Settings for a driver on this machine: loopback, executors of one worker's size."""
        return {
            "spark.driver.host": LOOPBACK,
            "spark.driver.bindAddress": LOOPBACK,
            "spark.executor.memory": executor_memory or self.memory,
            "spark.executor.cores": str(self.cores),
            "spark.cores.max": str(self.cores * self.n_workers),
            "spark.sql.shuffle.partitions": str(2 * self.cores * self.n_workers),
            "spark.default.parallelism": str(2 * self.cores * self.n_workers),
        }

    def _env(self, local_dir: Path | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("SPARK_HOME", None)  # spark-class finds the installed pyspark's own home
        env |= {
            "SPARK_LOCAL_IP": LOOPBACK,  # every listener (RPC, web UI) on the loopback only
            "SPARK_CONF_DIR": str(self.root / "conf"),  # no spark-defaults / env from elsewhere
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_LOG_DIR": str(self.root / "logs"),
            "PYSPARK_PYTHON": sys.executable,  # executors' Python, if a query needs one
        }
        if local_dir is not None:
            env["SPARK_LOCAL_DIRS"] = str(local_dir)
        return env

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> None:
        log = (self.root / "logs" / f"{name}.log").open("wb")
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        try:  # spark-class execs java: the pid is the daemon's, its own process group
            proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_end_with_parent,
            )
        finally:
            log.close()
        self.procs.append(proc)

    def start(self) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)
        for sub in ("conf", "logs", *(str(d.relative_to(self.root)) for d in self.worker_dirs())):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.port, self.webui_port = free_port(), free_port()
        master = [
            "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
            "--port", str(self.port), "--webui-port", str(self.webui_port),
        ]  # fmt: skip
        try:
            self._spawn("master", master, self._env())
            self._wait(lambda state: state is not None, "the master to start")
            for i in range(self.n_workers):
                w = self.root / f"worker{i}"
                worker = [
                    "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                    "--port", str(free_port()), "--webui-port", str(free_port()),
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--work-dir", str(w / "work"), self.url,
                ]  # fmt: skip
                self._spawn(f"worker{i}", worker, self._env(local_dir=w / "local"))
            self._wait(
                lambda state: state is not None and state.get("aliveworkers") == self.n_workers,
                f"{self.n_workers} workers to register",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict[str, object] | None:
        """The master's status (its web UI's JSON), or None while it does not answer."""
        try:
            with urllib.request.urlopen(
                f"http://{LOOPBACK}:{self.webui_port}/json/", timeout=5
            ) as r:
                return dict(json.load(r))
        except (OSError, ValueError):
            return None

    def _wait(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise EngineError(
                    f"a Spark daemon exited while waiting for {what}",
                    hint=f"see the logs in {self.root / 'logs'}",
                )
            if ready(self.state()):  # type: ignore[operator]
                return
            time.sleep(0.5)
        raise EngineError(
            f"timed out after {self.timeout:.0f} s waiting for {what}",
            hint=f"see the logs in {self.root / 'logs'}",
        )

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        """End the workers (and with them their executors), then the master; wait for all."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs = []

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
