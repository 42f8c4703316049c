"""turnlog's version, for the modules that report it.

A module of its own, with no imports, so that a module below the public
face (the traces name it as their instrumentation scope's version) can
name it without importing ``turnlog``, which imports them, back.
"""

__version__ = "0.1.0"
