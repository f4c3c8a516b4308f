from unigraph.function import *  # noqa: F403
