"""Starting a partitioned job on several machines from one command: a hosts file, one command per machine.

``unigraph train --partitions DIR --hosts hosts.txt ...`` (:func:`run_cluster`) turns itself into
one ``unigraph train --partitions DIR --nnodes M --node-rank m --master-addr HOST0 --master-port
PORT ...`` per machine (:func:`machine_commands`): the same options, machine ``m`` being the
``m``-th address of the hosts file (machine 0 hosts the rendezvous). Each machine's command then
starts that machine's server, trainers and samplers (:mod:`unigraph.distributed.layout`).

* **Hosts file**: one address (or host name) per line; blank lines and ``#`` comments are
  ignored; an address listed twice is refused (two "machines" would share one server's memory).
* **How commands start** (``--launch``): ``print`` writes them, one per line, to run by hand on
  each machine (or under a scheduler); ``ssh`` runs ``ssh -o BatchMode=yes HOST 'cd CWD && COMMAND'``;
  ``--remote TEMPLATE`` runs any other wrapper (``{host}``, ``{index}`` and ``{command}`` are
  filled in: e.g. ``ip netns exec m{index} sh -c {command}``). Started commands run side by side;
  the first to fail stops the others and is named (the per-machine launcher names the rank).
* **The partition set**: by default every machine reads ``DIR`` (shared storage, e.g. NFS);
  ``--ship REMOTE_DIR`` first copies to each machine only the parts it loads and the metadata
  (``scp``, or ``--copy TEMPLATE`` with ``{host}``, ``{index}``, ``{files}`` and ``{dest}``), and the
  machines read ``REMOTE_DIR``.
* **Network interfaces**: ``--ifname NAME`` sets ``GLOO_SOCKET_IFNAME`` (gloo) and
  ``TP_SOCKET_IFNAME`` (TensorPipe, the RPC) for every process, the interface their connections
  use (machines with several networks, or containers); without it each library picks the
  interface its host name resolves to.
"""
from __future__ import annotations

import os
import pathlib
import shlex
import signal
import subprocess
import sys
import time

from unigraph.distributed import format as fmt
from unigraph.distributed.layout import JobLayout

LAUNCHES = ("ssh", "print")
SSH = "ssh -o BatchMode=yes {host} {command}"
SCP = "scp -q -r {files} {host}:{dest}"


def read_hosts(path: str | os.PathLike) -> list[str]:
    """The machines' addresses, in order (see the module docstring)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"hosts file {path} does not exist")
    hosts = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        host = line.split("#", 1)[0].strip()
        if not host:
            continue
        if len(host.split()) != 1 or host.startswith("-"):
            raise ValueError(f"{path}, line {number}: one address per line, got {line.strip()!r}")
        if host in hosts:
            raise ValueError(f"{path}, line {number}: {host} is listed twice (each machine once)")
        hosts.append(host)
    if not hosts:
        raise ValueError(f"hosts file {path} lists no machine")
    return hosts


def strip_options(argv: list[str], options: dict[str, bool]) -> list[str]:
    """``argv`` without the ``options`` (name -> takes a value), in ``--name value`` or ``--name=value`` form."""
    out, skip = [], False
    for item in argv:
        if skip:
            skip = False
            continue
        name = item.split("=", 1)[0]
        if name in options:
            skip = options[name] and "=" not in item
            continue
        out.append(item)
    return out


# options of the cluster launcher itself (name -> takes a value), not passed on to the machines
LAUNCHER_OPTIONS = {"--hosts": True, "--launch": True, "--remote": True, "--ship": True, "--copy": True,
                    "--nnodes": True, "--node-rank": True, "--master-addr": True, "--master-port": True,
                    "--partitions": True}


def machine_commands(train_argv: list[str], hosts: list[str], port: int, partitions: str, *,
                     program: list[str] | None = None) -> list[list[str]]:
    """One ``unigraph train`` command per machine: ``train_argv`` (the ``train`` options, launcher
    options removed) with the machine's place in the job."""
    program = program or [sys.executable, "-m", "unigraph.cli"]
    rest = strip_options(train_argv, LAUNCHER_OPTIONS)
    return [program + ["train", "--partitions", partitions] + rest +
            ["--nnodes", str(len(hosts)), "--node-rank", str(m), "--master-addr", hosts[0], "--master-port", str(port)]
            for m in range(len(hosts))]


def ship_plan(info: fmt.PartitionSetInfo, layout: JobLayout) -> list[list[pathlib.Path]]:
    """Per machine, the files it needs: the metadata and the parts it loads."""
    return [[info.directory / fmt.METADATA] + [info.directory / fmt.part_file(p, info.layout)
                                                   for p in layout.machine_parts(m)]
            for m in range(layout.num_machines)]


def wrap(template: str, host: str, index: int, command: list[str]) -> list[str]:
    """``template`` (``{host}``, ``{index}``, ``{command}``) filled in, as an argument list; the
    command goes in as one quoted word (a remote shell runs it)."""
    inner = f"cd {shlex.quote(os.getcwd())} && {shlex.join(command)}"
    return [part.format(host=host, index=index, command=inner) for part in shlex.split(template)]


def run_commands(commands: list[list[str]], *, timeout: float, names: list[str]) -> int:
    """Run ``commands`` side by side; the first that fails stops the others. Returns 0 or the
    failed command's exit code (printed with its machine's name)."""
    started = [subprocess.Popen(command, start_new_session=True) for command in commands]
    deadline = time.monotonic() + timeout
    failed = None
    try:
        while any(p.poll() is None for p in started) and failed is None:
            if time.monotonic() > deadline:
                print(f"unigraph train: the machines did not finish within {timeout:.0f} s; stopping them",
                      file=sys.stderr, flush=True)
                failed = (None, 1)
                break
            for index, process in enumerate(started):
                if process.poll() not in (None, 0):
                    failed = (index, process.returncode)
                    break
            time.sleep(0.1)
        if failed is None:
            for index, process in enumerate(started):
                if process.returncode:
                    failed = (index, process.returncode)
                    break
    finally:
        for process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    if failed is None:
        return 0
    index, code = failed
    if index is not None:
        print(f"unigraph train: machine {index} ({names[index]}) failed first (exit code {code}); the other machines "
              "were stopped", file=sys.stderr, flush=True)
    return code or 1
