"""benchmarks/scaling.py: the report computes speedups from the measured throughputs and says what a
small CPU cannot show. (The benchmark itself runs with `python benchmarks/scaling.py --quick`.)"""
from __future__ import annotations

from benchmarks import scaling


def row(workload, name, processes, threads, throughput, stages=1, micro_batches=1):
    return dict(workload=workload, name=name, processes=processes, threads=threads, throughput=throughput,
                round_throughputs=[throughput * 0.9, throughput, throughput * 1.1], samples=throughput, steps=1000,
                stages=stages, replicas=1, micro_batches=micro_batches)


def test_report_speedups_and_caveats():
    rows = [row("gnn", "1 process", 1, 1, 100.0), row("gnn", "1 process", 1, 2, 160.0),
            row("gnn", "data parallel 2", 2, 1, 180.0),
            row("gnn", "pipeline 2 stages, 4 micro-batches", 2, 1, 50.0, stages=2, micro_batches=4),
            row("vig", "1 process", 1, 1, 10.0), row("vig", "1 process", 1, 2, 16.0),
            row("vig", "pipeline 2 stages, 5 micro-batches", 2, 1, 15.0, stages=2, micro_batches=5)]
    results = {"quick": True, "date": "today", "machine": {"cpu_count": 2, "cpu": "test cpu", "memory_gb": 1.0},
               "versions": {"torch": "x", "unigraph": "y"}, "sizes": scaling.QUICK, "load_before": [0, 0, 0],
               "load_after": [0, 0, 0], "rows": rows, "micro_batch_work": {"work": {4: 1.87}, "layer_rows": [900, 100, 10]}, "notes": scaling.notes(2)}
    text = scaling.report(results)
    assert "| data parallel 2 | 2 | 1 | 180.0 | 162-198 | 1.0 | 1.80x | 1.12x | 1.00 |" in text
    assert "| pipeline 2 stages, 4 micro-batches | 2 | 1 | 50.0 | 45-55 | 1.0 | 0.50x | 0.31x | 1.87 |" in text
    assert "| pipeline 2 stages, 5 micro-batches | 2 | 1 | 15.0 | 14-16 | 1.0 | 1.50x | 0.94x |" in text
    assert "a 2-core CPU cannot show GPU-like speedups" in text
    assert "Rows per layer of one batch (input of layer 0, layer 1, seeds): [900, 100, 10]." in text
    assert "cannot show" not in "\n".join(scaling.notes(16))


def test_jobs_are_interleaved_round_by_round_and_summarized_by_the_median():
    calls, rates = [], {(1, 1): [10.0, 30.0, 20.0], (1, 2): [15.0, 5.0, 25.0], (2, 1): [40.0, 40.0, 10.0]}

    def run_job(world, threads):
        calls.append((world, threads))
        rate = rates[(world, threads)][sum(c == (world, threads) for c in calls) - 1]
        return [dict(workload="gnn", name=f"{world} process", stages=1, replicas=world, micro_batches=1,
                     round_throughputs=[rate], throughput=rate, samples=1, steps=1)]

    rows = scaling.interleaved_jobs([(1, 1), (1, 2), (2, 1)], {"rounds": 3}, run_job)
    assert calls == [(1, 1), (1, 2), (2, 1), (1, 2), (2, 1), (1, 1), (2, 1), (1, 1), (1, 2)]   # rotating rounds
    by_job = {(r["processes"], r["threads"]): r for r in rows}
    assert by_job[(1, 1)]["round_throughputs"] == [10.0, 30.0, 20.0] and by_job[(1, 1)]["throughput"] == 20.0
    assert by_job[(1, 2)]["throughput"] == 15.0 and by_job[(2, 1)]["throughput"] == 40.0
