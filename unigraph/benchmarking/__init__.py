"""The rules every unigraph benchmark follows, in one place (used by ``benchmarks/*.py`` and by the
``unigraph bench`` command, which is why they live in the installed package).

* :mod:`~unigraph.benchmarking.timing` - every figure is taken **interleaved**: repeat ``r`` runs
  each implementation once, in an order rotated by ``r``, so a slow spell of the machine hits all of
  them alike; reported as min / median / max over the repeats.
* :mod:`~unigraph.benchmarking.environment` - what is written beside every figure: the machine,
  library versions, every thread pool's size, the load average, peak memory.
* :mod:`~unigraph.benchmarking.bandwidth` - a STREAM-like copy / triad measurement (GB/s per thread
  count): the machine's memory-bandwidth ceiling every kernel report states.
* :mod:`~unigraph.benchmarking.traffic` - the bytes each graph op must move (one read of each
  gathered row, the indices, the output), forward and backward: a floor time at the measured
  bandwidth and the GB/s an implementation achieved.
* :mod:`~unigraph.benchmarking.output` - where results go: a run without an explicit ``--out``
  (and any ``--quick`` run) never overwrites the committed ``benchmarks/results``; writes are atomic.
* :mod:`~unigraph.benchmarking.op_cases` - the graph ops as benchmark cases (inputs, the unigraph
  call, DGL's and PyG's equivalents), shared by ``unigraph bench`` and the kernel suite.
"""
