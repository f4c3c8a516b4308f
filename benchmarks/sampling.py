"""Neighbour-sampling throughput: unigraph's NeighborSampler beside DGL's and PyG's, in one run.

Case (issue 5 / issue 7): fanouts [25, 10], batches of 1,024 seeds, on an R-MAT power-law graph
(Graph500 parameters, nodes relabelled at random) of 200,000 nodes and 4,000,000 directed edges.
Target: unigraph at least as fast as DGL's CPU sampler (C++ with OpenMP).

Equal work: unigraph and DGL read ``[25, 10]`` in layer order (10 in-neighbours of each seed,
then 25 of each node of the first block); PyG's ``num_neighbors`` lists hops from the seeds
outwards, so it gets ``[10, 25]``. Every library gets the same graph and the same seed batches,
samples without replacement, has its structures (CSC, CSR) built before timing, and returns what
a model consumes:

* unigraph: ``NeighborSampler.sample`` -> ``Blocks`` (bipartite ``Graph`` blocks, relabelled ids);
  the numba path (default on the CPU) with its default single thread (the row the target is read
  from), with ``--threads`` numba threads, and, as a reference, the pure-torch path.
* DGL: ``dgl.dataloading.NeighborSampler.sample_blocks`` -> message-flow blocks (``to_block``),
  with ``--threads`` OpenMP threads (the target) and with one.
* PyG: iterating ``torch_geometric.loader.NeighborLoader`` (torch-sparse's sampler here; no
  pyg-lib) -> a relabelled ``Data`` per batch, its batch assembly included. PyG samples the second
  hop only for the nodes the first hop found (one subgraph for all layers), not again for the
  seeds as message-flow blocks need, so it samples somewhat fewer edges (see the table).

No features are gathered (structure only, for all three). Timing (the shared rule of
:mod:`unigraph.benchmarking.timing`): after a warm-up round (numba loads its compiled kernels),
``--rounds`` rounds; in each round every library samples the same ``--batches`` batches, in an
order that rotates between rounds, so slow spells of a shared machine hit every library alike. Reported: batches/s per round, median and range; the ratio
unigraph / DGL uses the medians, against the faster of DGL's two thread settings in the run
(an OpenMP team of two threads slows down many-fold when the cores are busy; one thread does not). The machine's load average before and after is recorded.
Threads: every library gets ``--threads`` (torch intra-op, numba, DGL's OpenMP).

    python benchmarks/sampling.py --out benchmarks/results   # the full case (~2-3 min on 2 cores)
    python benchmarks/sampling.py --quick                     # a smoke run (results/scratch), seconds
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import statistics
import sys
import warnings
from typing import Callable

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/sampling.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from benchmarks.environment import add_out_argument, machine, out_dir, versions  # noqa: E402
from unigraph.benchmarking.output import write_json, write_text  # noqa: E402
from unigraph.benchmarking.timing import interleaved  # noqa: E402
from benchmarks.peers import load_dgl, load_pyg  # noqa: E402
from unigraph.data import rmat  # noqa: E402
from unigraph.sampling import NeighborSampler  # noqa: E402

FANOUTS = [25, 10]  # layer order (unigraph, DGL); PyG gets them reversed
FULL = dict(nodes=200_000, edges=4_000_000, batch_size=1024, batches=20, rounds=5)
QUICK = dict(nodes=5_000, edges=50_000, batch_size=256, batches=3, rounds=2)
TARGET = ("unigraph", "dgl", 1.0)  # unigraph batches/s >= 1.0 x DGL's
# What the project measured on this machine before this benchmark existed (issue 7), for context.
PROJECT_REFERENCE = {"dgl": 136.0, "pyg": 6.5}


def unigraph_sampler(graph, path: str, num_threads: int | None = 1) -> Callable:
    sampler = NeighborSampler(FANOUTS, path=path, num_threads=num_threads)

    def sample(seeds: torch.Tensor) -> int:
        batch = sampler.sample(graph, seeds)
        return sum(block.num_edges for block in batch.blocks)
    return sample


def dgl_sampler(dgl, graph, threads: int) -> Callable:
    dgl_graph = dgl.graph((graph.src, graph.dst), num_nodes=graph.num_nodes).formats(["csc"])
    dgl_graph.create_formats_()
    sampler = dgl.dataloading.NeighborSampler(FANOUTS)

    def sample(seeds: torch.Tensor) -> int:
        dgl.utils.set_num_threads(threads)  # DGL's OpenMP team is process-wide: set it for this sampler
        _, _, blocks = sampler.sample_blocks(dgl_graph, seeds)
        return sum(block.num_edges() for block in blocks)
    return sample


def pyg_sampler(graph, batches: list[torch.Tensor]) -> Callable:
    """PyG's loader iterates its own input nodes: give it every batch's seeds in order, then
    hand out its batches one by one (each call pulls the next one from the loader)."""
    from torch_geometric.data import Data  # noqa: PLC0415 - optional peer
    from torch_geometric.loader import NeighborLoader  # noqa: PLC0415
    data = Data(edge_index=graph.edge_index, num_nodes=graph.num_nodes)
    with warnings.catch_warnings():  # "without pyg-lib ... deprecated": known, and said in the results
        warnings.filterwarnings("ignore", message=".*without a 'pyg-lib' installation", category=UserWarning)
        loader = NeighborLoader(data, num_neighbors=FANOUTS[::-1], batch_size=batches[0].numel(),
                                input_nodes=torch.cat(batches), shuffle=False)
    state = {"iterator": iter(loader)}

    def sample(seeds: torch.Tensor) -> int:
        try:
            batch = next(state["iterator"])
        except StopIteration:
            state["iterator"] = iter(loader)
            batch = next(state["iterator"])
        assert torch.equal(batch.n_id[: seeds.numel()], seeds), "PyG's batches out of step with the seeds"
        return batch.edge_index.shape[1]
    return sample


def sampled_edges(sample: Callable, batches: list[torch.Tensor]) -> Callable[[], int]:
    """One round: every batch through ``sample``; returns the sampled edges (checked equal work)."""
    def round_() -> int:
        return sum(sample(seeds) for seeds in batches)
    return round_


def run(config: dict, threads: int) -> dict:
    torch.set_num_threads(threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))  # DGL's OpenMP reads it at load
    started = datetime.datetime.now().isoformat(timespec="seconds")
    loadavg_start = os.getloadavg()
    graph = rmat(config["nodes"], config["edges"], seed=0)
    graph.in_csr()
    order = torch.randperm(config["nodes"], generator=torch.Generator().manual_seed(1))
    size = config["batch_size"]
    batches = [order[i * size:(i + 1) * size] for i in range(config["batches"])]

    samplers: dict[str, Callable] = {"unigraph": unigraph_sampler(graph, "auto"),
                                     f"unigraph ({threads} numba threads)": unigraph_sampler(graph, "auto", threads),
                                     "unigraph (torch path)": unigraph_sampler(graph, "torch")}
    skipped = {}
    numba_used = NeighborSampler(FANOUTS)
    numba_used.sample(graph, batches[0])
    dgl = load_dgl()
    if dgl is not None:
        samplers["dgl"] = dgl_sampler(dgl, graph, threads)
        samplers["dgl (1 thread)"] = dgl_sampler(dgl, graph, 1)
    else:
        skipped["dgl"] = "DGL not importable (see benchmarks/peers.py)"
    if load_pyg() is not None:
        samplers["pyg"] = pyg_sampler(graph, batches)
    else:
        skipped["pyg"] = "torch_geometric not installed"

    rounds_ = {name: sampled_edges(sample, batches) for name, sample in samplers.items()}
    edges = {name: round_() / len(batches) for name, round_ in rounds_.items()}  # also the warm-up round
    # the shared rule: rounds interleaved, each sampler's turn rotating (PyG's loader holds exactly
    # one round of batches, so every round starts it at the first batch again)
    timings = interleaved(rounds_, config["rounds"], warmup=0,
                          progress=lambda name: print(f"  {name}: round done", flush=True))
    rounds = {name: [len(batches) / (ms / 1e3) for ms in t.runs_ms] for name, t in timings.items()}
    results = {name: {"batches_per_s_rounds": rates, "median": statistics.median(rates), "min": min(rates),
                      "max": max(rates), "sampled_edges_per_batch": edges[name]} for name, rates in rounds.items()}
    stats = graph.stats()
    verdict, best_dgl = None, None
    ours, peer, needed = TARGET
    dgl_rows = [name for name in results if name.startswith(peer)]
    if dgl_rows:  # the target is read against DGL's faster configuration in this run
        best_dgl = max(dgl_rows, key=lambda name: results[name]["median"])
        ratio = results[ours]["median"] / results[best_dgl]["median"]
        verdict = {"ratio": ratio, "needed": needed, "met": ratio >= needed, "against": best_dgl,
                   "text": (f"TARGET MET: unigraph samples {ratio:.2f}x the batches/s of DGL's faster configuration "
                            f"here ('{best_dgl}'; target >= {needed:.1f}x)" if ratio >= needed else
                            f"TARGET MISSED: unigraph samples {ratio:.2f}x the batches/s of DGL's faster configuration "
                            f"here ('{best_dgl}'), {(1 - ratio / needed) * 100:.0f}% short of the target {needed:.1f}x")}
    return {
        "benchmark": "sampling", "started": started, "machine": machine(torch.device("cpu")), "versions": versions(),
        "threads": threads, "loadavg_start": loadavg_start, "loadavg_end": os.getloadavg(),
        "config": {**config, "fanouts_layer_order": FANOUTS, "pyg_num_neighbors": FANOUTS[::-1],
                   "graph": f"R-MAT (a=0.57, b=c=0.19), {stats.num_src_nodes} nodes, {stats.num_edges} edges, "
                            f"max in-degree {stats.max_in_degree}, in-degree CV {stats.cv_in_degree:.2f}",
                   "unigraph_path": f"{numba_used.path_used} ({numba_used.path_reason})"},
        "results": results, "skipped": skipped, "target": verdict,
        "ratios_vs_dgl": ({n: r["median"] / results[best_dgl]["median"] for n, r in results.items()}
                          if best_dgl else {}),
        "project_reference_batches_per_s": PROJECT_REFERENCE,
    }


def markdown(result: dict) -> str:
    cfg, res = result["config"], result["results"]
    lines = ["# Neighbour sampling on the CPU", "",
             f"{cfg['graph']}; fanouts {cfg['fanouts_layer_order']} in layer order (PyG: num_neighbors "
             f"{cfg['pyg_num_neighbors']}); {cfg['batch_size']} seeds per batch, "
             f"{cfg['batches']} batches x {cfg['rounds']} rounds, interleaved; {result['threads']} threads; "
             f"unigraph kernels: {cfg['unigraph_path']}.", "",
             "| sampler | batches/s (median) | range over rounds | vs DGL's faster row | sampled edges per batch |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, r in res.items():
        vs = result["ratios_vs_dgl"].get(name)
        lines.append(f"| {name} | {r['median']:.1f} | {r['min']:.1f} - {r['max']:.1f} | "
                     f"{'' if vs is None else f'{vs:.2f}x'} | {r['sampled_edges_per_batch']:,.0f} |")
    lines += [""]
    if result["target"] is not None:
        lines += [f"**{result['target']['text']}.**", ""]
    for name, why in result["skipped"].items():
        lines.append(f"- {name} skipped: {why}")
    m, v = result["machine"], result["versions"]
    noise = max((r["max"] - r["min"]) / r["median"] for r in res.values())
    lines += ["## Machine and noise", "",
              f"- {m['cpu']} ({m['cpu_count']} cores), {m['memory_gb']} GB, {m['platform']}, Python {m['python']}",
              "- " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
              f"- load average (1/5/15 min) {tuple(round(x, 2) for x in result['loadavg_start'])} at the start, "
              f"{tuple(round(x, 2) for x in result['loadavg_end'])} at the end; the machine is shared, and the "
              f"largest spread between rounds of one sampler was {noise * 100:.0f}% of its median.",
              f"- For context, the project's earlier measurements here: DGL "
              f"{result['project_reference_batches_per_s']['dgl']} and PyG "
              f"{result['project_reference_batches_per_s']['pyg']} batches/s (another synthetic graph; "
              "compare ratios from one run, not numbers across runs).",
              f"- Run: `python benchmarks/sampling.py` ({result['started']})."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tiny graph and few batches (smoke run)")
    parser.add_argument("--rounds", type=int, help="timed rounds per sampler")
    parser.add_argument("--batches", type=int, help="batches per round")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for every library")
    add_out_argument(parser)
    args = parser.parse_args(argv)
    try:
        out = out_dir(args)
    except ValueError as err:
        parser.error(str(err))
    config = dict(QUICK if args.quick else FULL)
    for key in ("rounds", "batches"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    result = run(config, args.threads)
    write_json(out / "sampling_cpu.json", result)
    write_text(out / "sampling_cpu.md", markdown(result))
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
