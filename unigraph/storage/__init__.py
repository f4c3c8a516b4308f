"""Graphs larger than memory: a chunked on-disk format (:mod:`.chunked`), arrays mapped from disk
(:mod:`.mapped`), conversions and a streaming generator, bounded-memory CSR building, and
out-of-core training (see ``docs/out_of_core.md``)."""
