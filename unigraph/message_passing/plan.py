"""What a message-passing call compiled to, in words: the answer of ``unigraph.explain(layer)``."""
from __future__ import annotations

import dataclasses

from unigraph.message_passing.lazy import Record
from unigraph.message_passing.tracing import DOMAIN_NAMES, Traced

FUSED = "fused"                  # g-SpMM (and g-SDDMM dot) only: no per-edge message tensor
FUSED_EDGE_TENSORS = "g-SDDMM"   # node data never gathered, but g-SDDMM built per-edge tensors
MATERIALIZED = "materialized"    # node features gathered per edge for some call, then run as written
EAGER = "eager"                  # not traced at all: the message ran on gathered inputs

MODE_DESCRIPTIONS = {
    FUSED: "fused: compiled to g-SpMM/g-SDDMM primitives, no per-edge message tensor",
    FUSED_EDGE_TENSORS: "fused with per-edge tensors: node data is never gathered, but g-SDDMM builds per-edge values",
    MATERIALIZED: "materialized: node features are gathered per edge for part of the message (fallback)",
    EAGER: "eager: the message ran as written on gathered per-edge inputs (fallback: see why below)",
}


@dataclasses.dataclass
class MessagePlan:
    """How one propagate / update_all / apply_edges call ran.

    ``mode`` is one of ``"fused"``, ``"g-SDDMM"``, ``"materialized"``, ``"eager"`` (see
    :data:`MODE_DESCRIPTIONS`); ``steps`` lists the primitive calls in order; ``reasons`` says why
    anything was materialized; ``code`` is the traced message.
    """

    owner: str
    mode: str
    source: Traced | str  # the traced message (its code is rendered on demand) or a description
    steps: list[tuple]
    gathered: list[tuple]
    edge_tensors: list[tuple]
    reasons: list[str]

    @classmethod
    def from_record(cls, owner: str, source: Traced | str, record: Record) -> "MessagePlan":
        if record.gathered:
            mode = MATERIALIZED
        elif record.edge_tensors:
            mode = FUSED_EDGE_TENSORS
        else:
            mode = FUSED
        return cls(owner, mode, source, record.steps, record.gathered, record.edge_tensors, record.reasons)

    @classmethod
    def eager(cls, owner: str, reason: str) -> "MessagePlan":
        return cls(owner, EAGER, "", [("gather inputs",), ("gspmm", "copy_e", "(aggregate)")], [], [], [reason])

    @property
    def code(self) -> str:
        """The traced message, one call per line (or the built-in function's name)."""
        return self.source.code() if isinstance(self.source, Traced) else self.source

    @property
    def fused(self) -> bool:
        return self.mode == FUSED

    def primitive_calls(self) -> list[str]:
        """The g-SpMM/g-SDDMM calls, e.g. ``["gspmm u_mul_e sum"]``."""
        return [" ".join(step) for step in self.steps if step[0] in ("gspmm", "gsddmm")]

    def __str__(self) -> str:
        lines = [f"{self.owner}: {MODE_DESCRIPTIONS[self.mode]}"]
        if self.code:
            lines.append("traced message:")
            lines += [f"  {line}" for line in self.code.splitlines()]
        lines.append("ran:")
        lines += [f"  {' '.join(str(part) for part in step)}" for step in self.steps]
        for why, domain, shape in self.gathered:
            lines.append(f"  gathered {DOMAIN_NAMES[domain]} rows per edge for {why}: tensor {list(shape)}")
        for what, shape in self.edge_tensors:
            lines.append(f"  per-edge tensor {what}: {list(shape)}")
        if self.reasons:
            lines.append("because:")
            lines += [f"  {reason}" for reason in self.reasons]
        return "\n".join(lines)
