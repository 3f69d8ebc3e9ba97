"""The stable diagnostic codes of the front end, each documented in docs/errors.md.

A code never changes meaning once published. Load problems are `CD0xx`,
schema violations `CD1xx`, semantic errors `CD2xx`, warnings `CD3xx`.
Other stages that add semantic checks take the next free number in the
matching range and document it in docs/errors.md.
"""

from __future__ import annotations

# --- load (strict YAML) -----------------------------------------------------
YAML_SYNTAX = "CD001"
DUPLICATE_KEY = "CD002"
TAB_INDENT = "CD003"
FORBIDDEN_TAG = "CD004"
MULTIPLE_DOCUMENTS = "CD005"
NOT_UTF8 = "CD006"
YAML11_BOOLEAN = "CD007"
YAML11_NUMBER = "CD008"
ALIAS_BUDGET = "CD009"
TOO_DEEP = "CD010"
TOO_LARGE = "CD011"
BAD_KEY = "CD012"
EMPTY_DOCUMENT = "CD013"
UNREADABLE = "CD014"

# --- schema -----------------------------------------------------------------
UNKNOWN_FIELD = "CD100"
MISSING_FIELD = "CD101"
WRONG_TYPE = "CD102"
NOT_ALLOWED_VALUE = "CD103"
BAD_FORMAT = "CD104"
OUT_OF_RANGE = "CD105"
BAD_SIZE = "CD106"
SCHEMA_OTHER = "CD107"
VERSION_AS_NUMBER = "CD108"

# --- semantic errors --------------------------------------------------------
DUPLICATE_NAME = "CD200"
DUPLICATE_KEY_DECLARATION = "CD201"
DUPLICATE_CONTRIBUTOR = "CD202"
UNKNOWN_CONTEXT_KEY = "CD203"
UNKNOWN_MODEL = "CD204"
UNDECLARED_PACK = "CD205"
TEMPLATE_SYNTAX = "CD206"
EXPRESSION_SYNTAX = "CD207"
UNKNOWN_NAME = "CD208"
UNKNOWN_FILTER = "CD209"
MISSING_FILE = "CD210"
DUPLICATE_INVARIANT = "CD211"
BAD_SPECIFIER = "CD212"
UNKNOWN_INPUT = "CD213"

# --- warnings ---------------------------------------------------------------
NEVER_RUNS = "CD300"
UNUSED_MODEL = "CD301"
UNUSED_KEY = "CD302"
UNUSED_INPUT = "CD303"
