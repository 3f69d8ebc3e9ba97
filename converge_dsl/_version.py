"""The package's version, in a module of its own.

Modules of any layer read it from here: importing it from the root package
would draw an import from their layer up to the root, whose names for type
checkers come from the batch layer.
"""

from __future__ import annotations

__version__ = "0.1.0"
