"""Who runs where in a partitioned job: machines, their graph server, trainers and sampler processes.

A job runs on ``M`` machines. The partition set's ``P`` parts are dealt out in contiguous runs,
``P / M`` per machine (machine ``m`` holds parts ``m*P/M .. (m+1)*P/M - 1``, so it owns one
contiguous range of the partition-major global ids, and the *machine book* is every
``P/M``-th partition offset). Each machine runs, in this order of ranks::

    server                       holds the machine's parts in shared memory and answers the other
                                 machines' requests (:mod:`unigraph.distributed.server`)
    trainer 0, its S samplers    trainers train on a share of the machine's training nodes,
    trainer 1, its S samplers    samplers sample their trainer's batches (optional, S >= 0)
    ...

so a machine runs ``1 + T (1 + S)`` processes and process ``r`` of the job is process
``r % (1 + T (1 + S))`` of machine ``r // (1 + T (1 + S))`` (``torchrun --nproc-per-node`` with that
number keeps every machine's processes together). Trainer ``t`` of machine ``m`` is trainer
``m T + t`` of the job; the machine's training nodes (in global id order) are cut into ``T``
near-equal contiguous shares (:func:`shares`), the first ``n % T`` one node larger.
"""
from __future__ import annotations

import dataclasses

import torch


def _positive(name: str, value, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def shares(count: int, ways: int) -> list[int]:
    """Sizes of ``count`` items cut into ``ways`` near-equal contiguous shares (``tensor_split``'s)."""
    return [count // ways + (1 if i < count % ways else 0) for i in range(ways)]


@dataclasses.dataclass(frozen=True)
class Role:
    """What process ``rank`` does: ``kind`` is ``"server"``, ``"trainer"`` or ``"sampler"``;
    ``trainer`` is the trainer's index on its machine (the sampler's trainer), ``sampler`` the
    sampler's index among its trainer's."""

    rank: int
    machine: int
    kind: str
    trainer: int | None = None
    sampler: int | None = None

    @property
    def is_server(self) -> bool:
        return self.kind == "server"

    @property
    def is_trainer(self) -> bool:
        return self.kind == "trainer"

    @property
    def name(self) -> str:
        """The process's RPC name."""
        if self.kind == "server":
            return server_name(self.machine)
        if self.kind == "trainer":
            return trainer_name(self.machine, self.trainer)
        return sampler_name(self.machine, self.trainer, self.sampler)


def server_name(machine: int) -> str:
    """The RPC name of machine ``machine``'s graph server (it answers for every node the machine owns)."""
    return f"server{machine}"


def trainer_name(machine: int, trainer: int) -> str:
    return f"trainer{machine}_{trainer}"


def sampler_name(machine: int, trainer: int, index: int) -> str:
    """The RPC name of sampler process ``index`` of trainer ``trainer`` of machine ``machine``."""
    return f"sampler{machine}_{trainer}_{index}"


@dataclasses.dataclass(frozen=True)
class JobLayout:
    """``num_parts`` partitions on ``num_machines`` machines, each with a server,
    ``trainers_per_machine`` trainers and ``samplers_per_trainer`` sampler processes per trainer."""

    num_parts: int
    num_machines: int = 1
    trainers_per_machine: int = 1
    samplers_per_trainer: int = 0

    def __post_init__(self) -> None:
        _positive("num_parts", self.num_parts)
        _positive("num_machines (--nnodes)", self.num_machines)
        _positive("trainers_per_machine", self.trainers_per_machine)
        _positive("samplers_per_trainer (--num-samplers)", self.samplers_per_trainer, 0)
        if self.num_parts % self.num_machines:
            raise ValueError(f"{self.num_parts} partitions cannot be dealt out evenly to {self.num_machines} machines: "
                             "partition again with --parts a multiple of the number of machines")

    @property
    def parts_per_machine(self) -> int:
        return self.num_parts // self.num_machines

    @property
    def processes_per_machine(self) -> int:
        return 1 + self.trainers_per_machine * (1 + self.samplers_per_trainer)

    @property
    def world_size(self) -> int:
        return self.num_machines * self.processes_per_machine

    @property
    def num_trainers(self) -> int:
        return self.num_machines * self.trainers_per_machine

    def machine_parts(self, machine: int) -> list[int]:
        k = self.parts_per_machine
        return list(range(machine * k, (machine + 1) * k))

    def machine_offsets(self, part_offsets) -> list[int]:
        """The machine book: the first global id of each machine, and the number of nodes."""
        return [int(part_offsets[m * self.parts_per_machine]) for m in range(self.num_machines)] + \
            [int(part_offsets[-1])]

    def role(self, rank: int) -> Role:
        if not 0 <= rank < self.world_size:
            raise ValueError(f"a job of {self.num_machines} machine(s) x (1 server + {self.trainers_per_machine} "
                             f"trainer(s) x (1 + {self.samplers_per_trainer} sampler(s))) has {self.world_size} "
                             f"processes; rank {rank} is not one of them")
        machine, local = divmod(rank, self.processes_per_machine)
        if local == 0:
            return Role(rank, machine, "server")
        trainer, position = divmod(local - 1, 1 + self.samplers_per_trainer)
        if position == 0:
            return Role(rank, machine, "trainer", trainer)
        return Role(rank, machine, "sampler", trainer, position - 1)

    def server_rank(self, machine: int) -> int:
        return machine * self.processes_per_machine

    def trainer_rank(self, machine: int, trainer: int) -> int:
        return machine * self.processes_per_machine + 1 + trainer * (1 + self.samplers_per_trainer)

    def trainer_ranks(self) -> list[int]:
        return [self.trainer_rank(m, t) for m in range(self.num_machines) for t in range(self.trainers_per_machine)]

    def check_world_size(self, world_size: int) -> None:
        if world_size != self.world_size:
            raise ValueError(
                f"this job needs {self.num_machines} machine(s) x (1 server + {self.trainers_per_machine} trainer(s) x "
                f"(1 + {self.samplers_per_trainer} sampler(s))) = {self.world_size} processes, got WORLD_SIZE="
                f"{world_size}")

    def trainer_share(self, machine_nodes: torch.Tensor, trainer: int) -> torch.Tensor:
        """Trainer ``trainer``'s contiguous share of its machine's ``machine_nodes``."""
        return torch.tensor_split(machine_nodes, self.trainers_per_machine)[trainer]

    def seed_counts(self, train_per_part: list[int]) -> list[int]:
        """Training seeds of every trainer of the job (in trainer order) from the parts' counts."""
        k = self.parts_per_machine
        counts = []
        for m in range(self.num_machines):
            counts += shares(sum(train_per_part[m * k:(m + 1) * k]), self.trainers_per_machine)
        return counts
