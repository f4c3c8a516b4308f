from unigraph.nn import *  # noqa: F403
