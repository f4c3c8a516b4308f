"""DGL's ``dgl.base`` names."""
NID = "_ID"
EID = "_ID"
ALL = "__ALL__"


class DGLError(Exception):
    pass


def is_internal_column(name):
    return name in ("_ID", "_TYPE")
