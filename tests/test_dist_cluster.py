"""The cluster launcher (unigraph.distributed.cluster, ``unigraph train --partitions DIR --hosts FILE``):
its pieces here, and (slow, root only) a job across two Linux network namespaces joined by a bridge,
each namespace a "machine" with its own address, its own copy of its parts and its own mounts."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from unigraph.cli import main
from unigraph.data import planted_partition
from unigraph.distributed import cluster
from unigraph.distributed.partition import partition_dataset
from unigraph.train.launch import free_port


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    directory = tmp_path_factory.mktemp("parts")
    partition_dataset(planted_partition(400, num_features=6, num_val=60, num_test=60, seed=0), 2, directory,
                      method="lp")
    return directory


def test_hosts_file(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("# the cluster\n10.0.0.1\n\n  node-b.example  # second\n")
    assert cluster.read_hosts(path) == ["10.0.0.1", "node-b.example"]
    for text, message in (("a\na\n", "line 2: a is listed twice"), ("a b\n", "line 1: one address per line"),
                          ("# nothing\n", "lists no machine")):
        path.write_text(text)
        with pytest.raises(ValueError, match=message):
            cluster.read_hosts(path)
    with pytest.raises(FileNotFoundError, match="hosts file .* does not exist"):
        cluster.read_hosts(tmp_path / "missing")


def test_each_machine_gets_the_job_options_and_its_place(parts, tmp_path, capsys):
    hosts = tmp_path / "hosts"
    hosts.write_text("10.0.0.1\n10.0.0.2\n")
    assert main(["train", "--partitions", str(parts), "--hosts", str(hosts), "--launch", "print", "--master-port",
                 "29400", "--epochs", "1", "--ifname=eth1", "--trainers-per-machine", "2"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
    assert len(lines) == 2
    for rank, line in enumerate(lines):
        words = shlex.split(line)
        assert words[:3] == [sys.executable, "-m", "unigraph.cli"]
        tail = words[3:]
        assert tail[:3] == ["train", "--partitions", str(parts.resolve())]
        assert "--hosts" not in tail and "--launch" not in tail
        assert tail[-8:] == ["--nnodes", "2", "--node-rank", str(rank), "--master-addr", "10.0.0.1", "--master-port",
                             "29400"]
        assert "--ifname=eth1" in tail and tail[tail.index("--trainers-per-machine") + 1] == "2"


def test_wrapping_and_shipping_plans(parts):
    command = cluster.wrap("ip netns exec m{index} sh -c {command}", "10.0.0.2", 1, ["echo", "a b"])
    assert command[:5] == ["ip", "netns", "exec", "m1", "sh"] and command[-1].endswith("&& echo 'a b'")
    from unigraph.distributed import format as fmt
    from unigraph.distributed.layout import JobLayout
    info = fmt.read_metadata(parts)
    plan = cluster.ship_plan(info, JobLayout(2, 2))
    assert [[p.name for p in files] for files in plan] == [["partitions.json", "part-0.npz"],
                                                          ["partitions.json", "part-1.npz"]]


def test_a_failing_machine_stops_the_others_and_is_named(capfd):
    code = cluster.run_commands([[sys.executable, "-c", "import time; time.sleep(60)"],
                                 [sys.executable, "-c", "import sys; sys.exit(3)"]], timeout=120, names=["a", "b"])
    assert code == 3
    assert "machine 1 (b) failed first (exit code 3)" in capfd.readouterr().err


# ---------------------------------------------------------------------- two network namespaces
def _can_make_namespaces() -> str | None:
    """Why two network namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (ip netns add)"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "needs iproute2's ip and util-linux's unshare"
    probe = f"ugprobe{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True)


@pytest.fixture
def two_machines():
    """Namespaces ``{tag}m0``, ``{tag}m1`` with interface ``ug0`` at 10.29.0.1 and .2 on a bridge."""
    reason = _can_make_namespaces()
    if reason:
        pytest.skip(reason)
    tag = f"u{os.getpid() % 100000}"
    bridge, made = f"{tag}br", []
    try:
        _run("ip", "link", "add", bridge, "type", "bridge")
        made.append(("link", bridge))
        _run("ip", "link", "set", bridge, "up")
        for m in range(2):
            namespace, outside = f"{tag}m{m}", f"{tag}v{m}"
            _run("ip", "netns", "add", namespace)
            made.append(("netns", namespace))
            _run("ip", "link", "add", outside, "type", "veth", "peer", "name", f"{tag}p{m}")
            made.append(("link", outside))
            _run("ip", "link", "set", f"{tag}p{m}", "netns", namespace)
            _run("ip", "link", "set", outside, "master", bridge, "up")
            inside = ["ip", "netns", "exec", namespace, "ip"]
            _run(*inside, "link", "set", f"{tag}p{m}", "name", "ug0")
            _run(*inside, "addr", "add", f"10.29.0.{m + 1}/24", "dev", "ug0")
            _run(*inside, "link", "set", "ug0", "up")
            _run(*inside, "link", "set", "lo", "up")
        yield tag
    finally:
        for kind, name in reversed(made):
            subprocess.run(["ip", kind, "del", name], capture_output=True)


def _bridge_bytes(tag: str) -> int:
    stats = json.loads(subprocess.run(["ip", "-s", "-j", "link", "show", f"{tag}v1"], capture_output=True,
                                      text=True, check=True).stdout)[0]["stats64"]
    return stats["rx"]["bytes"] + stats["tx"]["bytes"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_job_across_two_network_namespaces_with_shipped_parts(parts, tmp_path, two_machines):
    """Each namespace is a machine: its own address (the rendezvous on machine 0's), the interface
    chosen by --ifname, its own copy of only its parts (--ship, each machine's copy bound over the
    same path in its own mount namespace), and traffic that crosses the bridge."""
    tag = two_machines
    hosts = tmp_path / "hosts"
    hosts.write_text("10.29.0.1\n10.29.0.2\n")
    remote, disks = tmp_path / "remote", tmp_path / "disk"
    remote.mkdir()
    copy = f'sh -c "mkdir -p {disks}{{index}} && cp {{files}} {disks}{{index}}/"'
    run = (f'ip netns exec {tag}m{{index}} unshare -m sh -c "mount --bind {disks}{{index}} {remote} && '
           '{command}"')
    before = _bridge_bytes(tag)
    command = [sys.executable, "-m", "unigraph.cli", "train", "--partitions", str(parts), "--hosts", str(hosts),
               "--remote", run, "--ship", str(remote), "--copy", copy, "--master-port", str(free_port()),
               "--ifname", "ug0", "--model", "sage", "--epochs", "2", "--batch-size", "16", "--fanouts", "4,3",
               "--progress", "off", "--cache-size", "10", "--timeout", "120"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("done: 2 epochs") == 2                           # one summary per machine
    assert "machine 0: " in done.stdout and "machine 1: " in done.stdout
    assert sorted(p.name for p in (tmp_path / "disk0").iterdir()) == ["part-0.npz", "partitions.json"]
    assert sorted(p.name for p in (tmp_path / "disk1").iterdir()) == ["part-1.npz", "partitions.json"]
    assert not any(remote.iterdir())                                          # the bind mounts stayed private
    assert _bridge_bytes(tag) - before > 100_000                              # gradients, features, rendezvous
