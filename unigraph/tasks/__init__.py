"""Tasks beyond node classification.

* :mod:`unigraph.tasks.link` - link prediction: edge splits, negative sampling, the link loader,
  decoders.
* :mod:`unigraph.tasks.metrics` - OGB's evaluation metrics (accuracy, ROC-AUC, Hits@K, MRR) and
  its ``Evaluator`` interface, without the ``ogb`` package.

Graph classification lives with the data it needs: :class:`unigraph.data.GraphDataset`,
:class:`unigraph.loader.GraphLoader`, :mod:`unigraph.nn.pool`, :class:`unigraph.models.GINClassifier`.
"""
