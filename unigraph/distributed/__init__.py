"""Graphs larger than one machine: partition sets, a partitioned graph and feature store, distributed
sampling and training on ``torch.distributed`` (see ``docs/distributed.md``)."""
