"""The rendezvous store listens on the master address only (torch's own listens on every
interface), and a master address or port that cannot work is refused before any process waits on
it: one line, exit status 2."""
from __future__ import annotations

import pytest

from dist_helpers import store_listeners
from proc_helpers import needs_proc
from unigraph.cli import main
from unigraph.data import planted_partition
from unigraph.distributed.partition import partition_dataset
from unigraph.train import launch
from unigraph.train.distributed import listen_on_master, resolve_master


@needs_proc
@pytest.mark.timeout(180)
def test_the_store_of_a_one_machine_job_listens_on_loopback_only():
    rank0, rank1 = launch(store_listeners, 2, timeout=150)
    assert rank0 == ["0100007F"], rank0          # 127.0.0.1, not 0.0.0.0 or ::
    assert rank1 == ["lo", "lo"]                 # gloo and TensorPipe on the loopback interface too


@pytest.mark.parametrize("address, port, message", [
    ("bad host name", 29500, "does not resolve"),
    ("127.0.0.1", 99999, "must be in 1..65535"),
    ("127.0.0.1", 0, "must be in 1..65535"),
])
def test_addresses_that_cannot_work_are_named(address, port, message):
    with pytest.raises(ValueError, match=message):
        resolve_master(address, port)


def test_the_master_must_be_an_address_of_this_machine():
    with pytest.raises(ValueError, match="is not an address of this machine"):
        listen_on_master("192.0.2.123", None)   # TEST-NET-1: never assigned
    sock = listen_on_master("127.0.0.1", None)
    try:
        with pytest.raises(ValueError, match="is already in use"):
            listen_on_master("127.0.0.1", sock.getsockname()[1])
    finally:
        sock.close()


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    directory = tmp_path_factory.mktemp("parts")
    partition_dataset(planted_partition(300, num_features=6, num_val=60, num_test=60, seed=0), 2, directory,
                      method="random")
    return str(directory)


@pytest.mark.parametrize("arguments, message", [
    (["--master-port", "99999"], "--master-port must be in 1..65535, got 99999"),
    (["--master-addr", "bad host name"], "--master-addr bad host name: the master address 'bad host name' does not "
                                         "resolve"),
    (["--master-addr", "192.0.2.123"], "is not an address of this machine"),
])
def test_the_command_line_checks_the_master_before_any_process_starts(parts, capsys, arguments, message):
    with pytest.raises(SystemExit) as stop:
        main(["train", "--partitions", parts, "--model", "sage", *arguments])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err and len(err.strip().splitlines()) == 2, err
