"""Models the demo, the benchmarks and the tests build through transformers.

transformers imports torchao whenever torchao is installed (its quantizer registry, on the first
model class imported), so loading any model here imports torchao, which these models never use.
torchao's import then logs two kinds of messages that read like a failure of this package:

* ``Failed to load .../torchao/_C_*.so``: its optional compiled extensions (CUDA kernels such as
  mxfp8 or CUTLASS sm90a) that this torch build cannot load; torchao runs without them.
* torch's pytree: ``<enum ...> is an Enum subclass ... register_constant() ... deprecated``, about
  torchao's own enums: a deprecation addressed to torchao.

Both are dropped here, only those messages, from importing this package on; every other record of
those loggers passes.
"""

from __future__ import annotations

import enum
import logging


def _torchao_extension_not_loaded(record: logging.LogRecord) -> bool:
    msg = str(record.msg)
    return msg.startswith("Failed to load ") and "/torchao/_C" in msg


def _torchao_enum_registered(record: logging.LogRecord) -> bool:
    args = record.args if isinstance(record.args, tuple) else ()
    cls = args[0] if args else None
    return ("is an Enum subclass" in str(record.msg) and isinstance(cls, type) and issubclass(cls, enum.Enum)
            and cls.__module__.startswith("torchao."))


class _Drop(logging.Filter):
    def __init__(self, match):
        super().__init__()
        self.match = match

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.match(record)


logging.getLogger("torchao").addFilter(_Drop(_torchao_extension_not_loaded))
logging.getLogger("torch.utils._pytree").addFilter(_Drop(_torchao_enum_registered))
