"""Every diagnostic code of every stage, one constant each, documented in docs/errors.md.

A code never changes meaning once published; a retired code is never reused.
One section per range (add a constant in its range, document it with an
example in docs/errors.md, and add a pipeline to tests/data/invalid/ when
`validate` can report it):

- CD0xx load: strict YAML (pipelines, packs, model scripts)
- CD1xx schema: JSON Schema violations, and the schemas pipelines and packs supply;
  CD446 (`KEY_SCHEMA_DANGLING_REF`) is one of these, given a number that was free
  in the CD4xx range, and is defined in this section
- CD2xx semantic errors of the front end; 250 to 259 the data-flow analysis (errors,
  warnings and notes); 260 to 269 the tool servers (`tools:`) and the tools named
- CD3xx semantic warnings of the front end (exit 1 under --strict); 320 to 339 refusals
  of the command line and what it drives (packs, batches), errors
- CD4xx agent checks (converge_dsl.agents); 433 to 435 `serve --executor` and
  436 to 445 `serve --mcp`, whose refusals are the service's, not validate's
  (CD446 is a schema code: see CD1xx)
- CD5xx pack checks: the pipeline side from 500, pack.yaml from 550
- CD6xx compile and run time: 600 to 649 belong to the compiler
- CD7xx model scripts and model configuration (converge_dsl.models)
- CD9xx run failures reported by the runtime

tests/frontend/test_codes.py checks that every code string in converge_dsl/ is defined
here, that no two constants share a code, and that each is documented.
"""

from __future__ import annotations

# --- CD0xx load (strict YAML) ------------------------------------------------
YAML_SYNTAX = "CD001"  # the file is not well-formed YAML
DUPLICATE_KEY = "CD002"  # a mapping has the same key twice
TAB_INDENT = "CD003"  # a tab where YAML needs spaces
FORBIDDEN_TAG = "CD004"  # a tag outside the core schema (!!python/..., custom tags)
MULTIPLE_DOCUMENTS = "CD005"  # more than one YAML document in the file
NOT_UTF8 = "CD006"  # the file is not UTF-8
YAML11_BOOLEAN = "CD007"  # yes/no/on/off/y/n that YAML 1.1 reads as a boolean
YAML11_NUMBER = "CD008"  # a number YAML 1.1 and 1.2 read differently (octal, 0o, 1e3), or hex
ALIAS_BUDGET = "CD009"  # aliases expand beyond the budget (billion laughs)
TOO_DEEP = "CD010"  # nesting deeper than the limit
TOO_LARGE = "CD011"  # the file is over the size limit
BAD_KEY = "CD012"  # a mapping key that is not a plain string
EMPTY_DOCUMENT = "CD013"  # the file holds no document
UNREADABLE = "CD014"  # the file cannot be read
NUMBER_OUT_OF_RANGE = "CD015"  # an integer beyond 64 bits, a float beyond a double's range
TAG_MISMATCH = "CD016"  # an explicit tag (!!null, !!int...) that its text does not match
FORBIDDEN_CHARACTER = "CD017"  # a character YAML does not allow (NUL, control characters)

# --- CD1xx schema -------------------------------------------------------------
UNKNOWN_FIELD = "CD100"  # a key the schema does not know
MISSING_FIELD = "CD101"  # a required key is absent
WRONG_TYPE = "CD102"  # a value of the wrong JSON type
NOT_ALLOWED_VALUE = "CD103"  # a value outside the enum / const
BAD_FORMAT = "CD104"  # a string that does not match its pattern or format
OUT_OF_RANGE = "CD105"  # a number outside its bounds
BAD_SIZE = "CD106"  # a list, string or mapping of the wrong size
SCHEMA_OTHER = "CD107"  # any other schema violation
VERSION_AS_NUMBER = "CD108"  # a version specifier written as a number
KEY_SCHEMA_INVALID = "CD109"  # a key or output schema that is not valid JSON Schema 2020-12
KEY_SCHEMA_REMOTE_REF = "CD110"  # a $ref in a key, output or pack schema that points outside it
KEY_SCHEMA_DANGLING_REF = "CD446"  # a local $ref in a key, output or pack schema naming no schema
NUMBER_TEXT_LOST = "CD111"  # a float in free-form data whose text is lost (1.10 read as 1.1)
SCHEMA_REGEX_NOT_LINEAR = "CD120"  # a schema pattern RE2 cannot run (backreference, lookaround)
SCHEMA_TOO_LARGE = "CD130"  # a key, output or pack schema wider than a documented limit

# --- CD2xx semantic errors ------------------------------------------------------
DUPLICATE_NAME = "CD200"  # two suggestors share a name
DUPLICATE_KEY_DECLARATION = "CD201"  # a key declared twice, or a built-in key declared
DUPLICATE_CONTRIBUTOR = "CD202"  # two contributors of one agent share a name
UNKNOWN_CONTEXT_KEY = "CD203"  # a context key neither built in nor declared
UNKNOWN_MODEL = "CD204"  # a model name not declared under models:
UNDECLARED_PACK = "CD205"  # use: names a pack not declared under packs:
TEMPLATE_SYNTAX = "CD206"  # a Jinja template does not compile
EXPRESSION_SYNTAX = "CD207"  # a when/check expression does not compile
UNKNOWN_NAME = "CD208"  # a template reads a name not valid where it sits
UNKNOWN_FILTER = "CD209"  # a template uses a filter outside the sandbox's list
MISSING_FILE = "CD210"  # a model script or cassette file does not exist
DUPLICATE_INVARIANT = "CD211"  # two invariants share a name
BAD_SPECIFIER = "CD212"  # a packs: specifier is not PEP 440
UNKNOWN_INPUT = "CD213"  # a template reads inputs.X for an undeclared input
UNKNOWN_TEST = "CD214"  # a template uses a test (`x is ...`) the sandbox does not offer
UNKNOWN_DATA_FIELD = "CD215"  # a template reads a data field its key's schema does not have
UNKNOWN_FACT_ATTRIBUTE = "CD216"  # a template reads an attribute facts do not have
DATA_NOT_VALID = "CD217"  # constant data (seed, emit) does not match its key's schema
REFERENCE_OUTSIDE_ROOTS = "CD220"  # a file the pipeline names resolves outside its folder
REFERENCE_NOT_REGULAR = "CD221"  # a file the pipeline names is a FIFO, a device or a hard link
REFERENCE_NOT_YAML = "CD222"  # a referenced YAML file (a model script) does not load as a mapping
TEST_FILE_MISSING = "CD230"  # a file a test file names (pipeline, script, cassette) is not there
TEST_UNKNOWN_NAME = "CD231"  # a test names a key, input, model or invariant the pipeline lacks
TEST_BAD_REGEX = "CD232"  # a test's `matches` is not a regular expression RE2 can run
TEST_DUPLICATE_CASE = "CD233"  # two cases of a test file share a name
TEST_BAD_MODEL = "CD234"  # a test's model gives none or several of script, cassette, rules
KIND_NOT_LOADED = "CD240"  # an installed distribution's suggestor kind does not load
HELPER_ARGUMENTS = "CD286"  # count, has, fact or data_of called with arguments it does not take
LITERAL_INDEX = "CD287"  # warning: an item of a number, boolean or none literal (`2[0]`)
# Data flow (250 to 269): what templates read, against keys, dependencies and schemas.
UNKNOWN_READ_KEY = "CD250"  # a template reads a context key neither built in nor declared
KEY_NAMED_AT_RUN_TIME = "CD251"  # note: a key read is named at run time (the analysis stops)
READ_NOT_DEPENDENCY = "CD252"  # warning: a suggestor reads a key it is not re-run on
READ_NEVER_WRITTEN = "CD253"  # warning: a template reads a key nothing writes
FIELD_NOT_IN_SCHEMA = "CD254"  # warning: a template reads a field its (open) schema never names
TYPE_MISMATCH = "CD255"  # warning: a field ordered or computed with a literal of another type
SAME_ID_OTHER_CONTENT = "CD256"  # warning: two emits give one literal id other literal content
REFIRES_ON_OWN_OUTPUT = "CD257"  # warning: a suggestor re-runs on its own output, unguarded
UNKNOWN_TOOL_SERVER = "CD260"  # mcp:SERVER/... names a server not declared under tools:
TOOL_NOT_ALLOWED = "CD261"  # mcp:SERVER/TOOL names a tool outside the server's allow-list
TOOL_HOST_NOT_DECLARED = "CD262"  # an HTTP tool server's url reaches a host its hosts omit
TOOL_CWD_REFUSED = "CD263"  # a stdio tool server's cwd is outside the roots or not a folder
TOOL_ENV_TWICE = "CD264"  # a stdio tool server's variable is both passed and set
TOOL_NOT_OFFERED = "CD265"  # a tool a pipeline names is not in its server's locked tool list
TOOL_SERVER_NOT_LOCKED = "CD266"  # warning: a tool server is not in the lock (or not as declared)
TOOL_LIST_CHANGED = "CD267"  # at run: a server's tool list differs from the one locked
PACK_TOOL_OUTSIDE = "CD268"  # a pack's stdio tool server's cwd or program leaves the pack's folder
PACK_TOOL_UNTRUSTED = "CD269"  # a pipeline uses a pack's tool server it does not trust
PACK_TOOL_UNKNOWN = "CD270"  # mcp:PACK/SERVER/... or trust: names a pack server that is not there
TOOL_OFFLINE_UNLOCKED = "CD271"  # --offline and a tool server the lock does not pin (none started)
FACT_ID_REFUSED = "CD272"  # a literal fact id with a NUL, control or hidden character, or '..'

# --- CD3xx semantic warnings ------------------------------------------------------
NEVER_RUNS = "CD300"  # nothing can produce any of a suggestor's dependencies
UNUSED_MODEL = "CD301"  # a declared model nothing uses
UNUSED_KEY = "CD302"  # a declared key nothing reads or writes
UNUSED_INPUT = "CD303"  # a declared input no template reads
OUTSIDE_ENUM = "CD304"  # a data field compared with a literal outside its enum
MISMATCHED_LITERAL = "CD305"  # a data field compared with a literal of another type
OBJECT_CONTENT = "CD306"  # a JSON object given as content (deprecated: give it as data)
# `converge-dsl serve`: what its HTTP requests carry beside their body's JSON (307 to 319)
SERVE_UNSUPPORTED_MEDIA = "CD307"  # a served request's body is compressed or not JSON (415)
SERVE_BODY_TIMEOUT = "CD308"  # a served request's body did not arrive in time (408)
SERVE_BAD_PARAMETER = "CD309"  # a served request's ?wait= or Last-Event-ID is not of its form
# 320 to 339: refusals of the command line and what it drives (not validate's warnings)
PACK_ARCHIVE_REFUSED = "CD320"  # a pack archive is corrupt, or a member is unsafe or not allowed
RESULTS_OF_ANOTHER_PIPELINE = "CD321"  # --resume: a line of --out is of another or edited pipeline
# Pack commands (lock, pack ..., run's pack checks): refusals that had no code of their own
PACK_FILE_NOT_WRITTEN = "CD322"  # a file of the pack cache, a repository or a lock: not written
LOCK_FILE_BUSY = "CD323"  # another converge-dsl process held the lock file past the wait
REPOSITORY_UNREADABLE = "CD324"  # a repository file cannot be read, is not JSON, or is malformed
REPOSITORY_NOT_FOUND = "CD325"  # a folder repository does not exist, or is not a folder
PIPELINE_PACKS_MALFORMED = "CD326"  # pipeline, packs:, repositories: or tools: not as lock reads
REPOSITORY_UNREACHABLE = "CD327"  # an HTTP repository: not asked, not reached, or an error answered
SOLVER_NOT_LOADED = "CD328"  # an installed solver fails to load, or is not a Solver
PACK_RESOLUTION_GAVE_UP = "CD329"  # pack resolution gave up after its step limit
SIGNING_KEY_MALFORMED = "CD330"  # a signing or trusted key is not an ed25519 key of its form
PUBLISH_VERSION_EXISTS = "CD331"  # pack publish: the version is published with another digest
PACK_FILE_NOT_FOUND = "CD332"  # the pipeline or pack.yaml a pack command reads does not exist
# Refusals of the command line (and of the Python API) that had no code of their own, by
# what the user must fix (333 to 339, 360 and 361)
ARGUMENTS_REFUSED = "CD333"  # an option or argument is unknown, out of range, or not to combine
PATH_NOT_FOUND = "CD334"  # a file or folder a command is given does not exist, or is not its kind
FILE_UNREADABLE = "CD335"  # a file a command reads cannot be read, or does not hold what it must
OUTPUT_REFUSED = "CD336"  # an output would overwrite an input or a file, or cannot be written
FOLDER_IN_USE = "CD337"  # a checkpoint folder or journal is held by another run
INPUT_REFUSED = "CD338"  # a run's inputs, models or decisions: unknown, missing or malformed
API_MISUSE = "CD339"  # the Python API called against its contract (a name twice, in a loop)
PART_NOT_INSTALLED = "CD360"  # an extra, schema or documentation file this needs is not installed
ENVIRONMENT_FAILED = (
    "CD361"  # the system refused a file, folder or disk a command used (an OSError)
)

# --- CD4xx agent checks ------------------------------------------------------------
COMPACTION_ORDER = "CD410"  # compaction.emergency is below compaction.threshold
SUMMARIZER_NEVER_CALLED = "CD420"  # warning: the summarizer budget never allows a call
REMINDER_NEVER_FIRES = "CD421"  # warning: a reminder's every >= max_turns
TURNS_NEVER_CLEARED = "CD422"  # warning: clear_turns_older_than >= max_turns
AGENT_CANNOT_PROPOSE = "CD423"  # warning: the agent has no context.propose tool
# `converge-dsl serve --executor` (433 to 435)
EXECUTOR_OPTION_ALONE = "CD433"  # an executor's option given without its --executor
EXECUTOR_WORKER_LOST = "CD434"  # the worker running a run died too many times: the run failed
# `converge-dsl serve --mcp`: the pipelines and their runs as MCP tools (436 to 440),
# and the service's HTTP edge (441 to 445, 447 to 449; CD446 is not one of them: a
# schema code, in the CD1xx section)
SERVE_MCP_TOOL_NAME_TAKEN = "CD436"  # two served pipelines give one MCP tool name
SERVE_MCP_UNKNOWN_TOOL = "CD437"  # an MCP tool call names no listed tool
SERVE_MCP_NOT_INSTALLED = "CD438"  # `serve --mcp` without the mcp extra installed
SERVE_MCP_BAD_IDEMPOTENCY_KEY = "CD439"  # an MCP call's `_meta` idempotency key is not short text
SERVE_MCP_BAD_ARGUMENTS = "CD440"  # a run-control MCP tool call's arguments are not of its shape
SERVE_BAD_HTTP = "CD441"  # a served request is not valid HTTP/1.1 (its line, a header, a length)
SERVE_HEAD_TOO_LARGE = "CD442"  # a served request's line and headers are over the cap (431)
SERVE_HEAD_TIMEOUT = "CD443"  # a served request's line and headers did not arrive in time (408)
SERVE_MCP_HOST_REFUSED = "CD444"  # an MCP request's Host or Origin is not the loopback server's own
SERVE_INTERNAL_ERROR = "CD445"  # a fault of the service on a request (500; traceback in its log)
SERVE_BUSY = "CD447"  # a request past the connections the server takes at once (503, Retry-After)
SERVE_UVICORN_UNSUPPORTED = "CD448"  # the installed uvicorn lacks a part the HTTP edge uses
SERVE_MCP_NOT_ACCEPTABLE = "CD449"  # an MCP POST's Accept lacks JSON or SSE (406)
SERVE_MCP_PROTOCOL_VERSION = "CD460"  # an MCP POST's MCP-Protocol-Version is not one spoken (400)
# `converge-dsl serve`: more refusals of a served request (461 to 469)
SERVE_TOKENS_UNUSABLE = "CD461"  # the --token-file went missing or bad while serving (503)
SERVE_EVENT_NOT_GIVEN = "CD462"  # a Last-Event-ID past every event the run has been given (400)
SERVE_MCP_STOPPING = "CD463"  # an MCP tool call answered as the server stops, its run unfinished

# --- CD5xx pack checks --------------------------------------------------------------
LOCK_MISSING = "CD500"  # the pipeline declares packs but its lock file is missing
LOCK_STALE = "CD501"  # the lock file is stale or unreadable
PACK_NOT_INSTALLABLE = "CD502"  # a locked pack cannot be installed (digest, signature, archive)
UNKNOWN_PACK_SUGGESTOR = "CD503"  # use: names a suggestor the pack does not offer
BAD_PACK_PARAMETER = "CD504"  # a with: parameter does not fit the pack suggestor's schema
SOLVER_NOT_INSTALLED = "CD505"  # the pack suggestor names a solver no distribution registers
PACK_NOT_FETCHED = "CD506"  # a locked pack is not in the pack cache (validate never fetches)
PACK_BAD_VERSION = "CD550"  # pack.yaml: the version is not a version
PACK_BAD_REQUIRES = "CD551"  # pack.yaml: a requires specifier is not PEP 440
PACK_BAD_FILE = "CD552"  # pack.yaml: a named file is missing, outside the pack, or not JSON
PACK_UNKNOWN_SUGGESTOR = "CD553"  # pack.yaml: an invariant names an unknown suggestor
PACK_BAD_CHECK = "CD554"  # pack.yaml: an invariant check does not compile
# Pack I/O and trust refusals (lock, pack fetch, run): 560 to 579.
PACK_ARCHIVE_TOO_LARGE = "CD560"  # an archive expands past a cap (total, member, member count)
REPOSITORY_NOT_REGULAR = "CD561"  # a folder repository file is a link, FIFO, device or folder
REPOSITORY_TOO_LARGE = "CD562"  # a repository file or HTTP answer is over its byte cap
REPOSITORY_TOO_SLOW = "CD563"  # a repository read or request missed its total deadline
REPOSITORY_REDIRECT_REFUSED = "CD564"  # an HTTP redirect to another host, scheme, or too many
LOCK_DOWNGRADE_REFUSED = "CD565"  # lock would move a pin to a lower version
LOCK_REPIN_REFUSED = "CD566"  # lock would pin the same version to a different digest
PACK_UNSATISFIABLE = "CD567"  # no version of a pack fits every requirement, or no repository has it
REPOSITORY_ARCHIVE_MISMATCH = "CD570"  # a repository's archive does not match the lock or its index
REPOSITORY_INDEX_MISMATCH = "CD571"  # a repository index lost a locked version or its digest
LOCKED_PIN_YANKED = "CD572"  # warning: the lock pins a version its repository has yanked
PACK_VERSION_UNKNOWN = "CD573"  # pack info NAME@VERSION: the repository has no such version
PACK_UNKNOWN = "CD574"  # pack info: the repository has no such pack, or not a pack name
PUBLISH_KEY_UNUSED = "CD575"  # warning: pack publish --sign-key signed nothing (already published)
PACK_FROM_EARLIER_REPOSITORY = "CD576"  # warning: pack add --repo: an earlier repository has it
NEWER_VERSION_AVAILABLE = "CD577"  # note: lock keeps a pin although a newer version fits

# --- CD6xx compile and run time (600 to 649: the compiler) -------------------------
COMPILE_TEMPLATE_SYNTAX = "CD600"  # a template or expression does not compile (compiler)
COMPILE_UNKNOWN_NAME = "CD601"  # a template reads a name its scope does not provide (compiler)
COMPILE_KIND_UNAVAILABLE = "CD602"  # a suggestor kind whose builder is not installed
COMPILE_UNKNOWN_MODEL = "CD603"  # an llm suggestor names a model that was not built
COMPILE_BAD_OUTPUT_SCHEMA = "CD604"  # an llm output.schema is not a valid JSON Schema
COMPILE_BAD_KEY_SCHEMA = "CD605"  # a key's schema (keys[].schema) is not a valid JSON Schema
COMPILE_MISSING_FIELD = "CD606"  # a pack's template lacks a field its suggestor kind requires

# --- CD7xx model scripts and model configuration -----------------------------------
MODEL_SCRIPT_BAD_REGEX = "CD701"  # a model script rule's match.regex does not compile
# Retired: regexes run on RE2 (linear time), so no pattern can backtrack.
MODEL_SCRIPT_SLOW_REGEX = "CD702"  # a model script regex could backtrack exponentially
MODEL_SCRIPT_REGEX_NOT_LINEAR = "CD703"  # a model script regex RE2 cannot run (backreference)
MODEL_KEY_ENV_REFUSED = "CD710"  # an account's api_key_env does not name an API key variable
AGENT_TOOL_CHOICE_UNAVAILABLE = "CD720"  # an agent's tool_choice names a tool it does not have

# --- CD9xx run failures --------------------------------------------------------------
RUN_ERROR = "CD900"  # the run stopped on an error located in the pipeline
STOP_CYCLE_BUDGET = "CD901"  # max_cycles reached (names the suggestors that kept running)
STOP_FACT_BUDGET = "CD902"  # max_facts reached (names the suggestors that promoted them)
STOP_TOKEN_BUDGET = "CD903"  # max_tokens reached (names the suggestors that spent them)
STOP_MODEL_CALL_BUDGET = "CD904"  # max_model_calls reached (names the suggestors that called)
STOP_TIME_BUDGET = "CD905"  # max_wall_s reached (names the suggestors in flight or refused)
STOP_INVARIANT_VIOLATED = "CD906"  # a critical invariant does not hold
STOP_HITL_PAUSE = "CD907"  # warning: the run paused for a human decision
STOP_CANCELLED = "CD908"  # the run was cancelled
STOP_CONFLICT = "CD909"  # a suggestor proposed an existing id with other content or data
STOP_KERNEL_RULE = "CD910"  # a suggestor broke another rule of the engine contract
STOP_MODEL_FAILED = "CD911"  # a model call failed (timeout, provider, wire, auth, script)
STOP_SUGGESTOR_FAILED = "CD912"  # a suggestor raised an error that has no source location
STOP_INVARIANT_FAILED = "CD913"  # an invariant's check itself failed
STOP_RUN_FAILED = "CD914"  # the run failed outside any suggestor or invariant
NOT_RUN_USAGE = "CD920"  # the run did not start: the command line is wrong
NOT_RUN_ERROR = "CD921"  # the run did not start or could not finish (pack, model, trace, ...)
AGENT_NO_PROPOSAL = "CD922"  # warning fact: an agent ended without proposing anything
AGENT_TOOL_ERRORS = "CD923"  # warning fact: every tool call of an agent's execution failed
TOKEN_CAP_IGNORED = "CD924"  # warning fact: an answer passed the max_tokens it was sent with
READ_NOT_REGULAR = "CD930"  # a file to read is a FIFO, device, socket or a link to one
READ_TOO_LARGE = "CD931"  # a file to read is over the cap of what it is read as
DECISIONS_REFUSED = "CD932"  # decisions in a checkpoint folder not sealed for this pause
API_KEY_WHITESPACE = "CD940"  # warning: an API key's variable holds whitespace around it (stripped)
CHECKPOINT_TAMPERED = "CD950"  # a checkpoint record's MAC does not verify (edited, dropped, moved)
CHECKPOINT_CORRUPT = "CD951"  # a checkpoint is torn, not a journal, or a record is malformed
CHECKPOINT_FOREIGN = "CD952"  # a checkpoint of another pipeline or other inputs
CHECKPOINT_OTHER_KEY = "CD953"  # a checkpoint sealed with another user's key
CHECKPOINT_KEY_UNUSABLE = "CD954"  # the checkpoint key cannot be read, created, or is not private
EVAL_DATASET_MISSING = "CD800"  # the dataset an evaluation file names is not there or not JSONL/CSV
EVAL_BAD_CASE = "CD801"  # a dataset line is not a case (not JSON, not an object, no inputs)
EVAL_NO_CASES = "CD340"  # an evaluation's dataset holds no case (its metrics would pass over none)
EVAL_NOT_EVALUATION = (
    "CD341"  # a file given to `eval` is a pipeline, test file, model script or pack
)
EVAL_UNKNOWN_NAME = "CD802"  # a metric's key or expected value, a case's input (eval, run --cases)
EVAL_BAD_REGEX = "CD803"  # a metric's pattern is not a regular expression RE2 can run
EVAL_DUPLICATE = "CD804"  # two metrics, or two dataset cases, share a name
EVAL_BAD_METRIC = "CD805"  # a metric gives none or several measures
EVAL_BAD_VERDICT = "CD806"  # a judge's answer is not a verdict (JSON, score in [0, 1], reason)
EVAL_JUDGE_FAILED = "CD807"  # a judge's model call failed (provider error, replay or cache miss)
EVAL_BAD_RUBRIC = "CD808"  # a judge's rubric is not a template, or reads a name it is not given
EVAL_UNKNOWN_MODEL = "CD809"  # a judge or configuration names a model not declared
EVAL_BAD_MODEL = "CD810"  # a judge's or configuration's model declaration cannot be built
EVAL_BAD_CONFIGURATION = "CD811"  # two configurations share a name
EVAL_NOT_JUDGED = "CD812"  # a judge call was refused: the evaluation's caps are spent
CASE_CASSETTE_MISSING = "CD813"  # --replay DIR holds no cassette for a case (batch or evaluation)
CASE_CASSETTE_CLASH = "CD814"  # two cases of a batch or evaluation would share one cassette file
EVAL_BAD_SCHEMA = "CD815"  # a schema metric's schema is not valid or not checkable in bounded time
DIFF_BAD_RESULT_LINE = "CD816"  # a line of a results file given to `diff` is not a result line
DIFF_DUPLICATE_CASE = "CD817"  # two lines of a results file given to `diff` name one case
NOT_A_PIPELINE = "CD818"  # `run` was given another kind of converge-dsl file (an evaluation...)
TEST_FAILED = "CD960"  # an expectation of a pipeline test does not hold
TEST_CASE_ERROR = "CD961"  # a test case could not run (its inputs or models are refused)
INIT_WOULD_OVERWRITE = "CD962"  # `init` would overwrite a file that is already there
TOOL_SERVER_NOT_STARTED = "CD963"  # a tool server did not start (not found, exited, timed out)
TOOL_CALL_TIMED_OUT = "CD964"  # a tool call passed its server's call_timeout_s (server stopped)
TOOL_SERVER_GONE = "CD965"  # a tool server exited or closed the connection during a call
TOOL_HOST_REFUSED = "CD966"  # an HTTP tool server's client was sent to a host not declared
STOP_TOOL_CALL_BUDGET = "CD967"  # max_tool_calls reached (a tool suggestor's call was refused)
TOOL_REPLAY_MISS = "CD968"  # a replayed run made a tool call (or start) its cassette lacks
TOOL_CASSETTE_INVALID = "CD969"  # a tool line of a cassette is not a recording
SCHEMA_WORK_EXCEEDED = "CD970"  # checking one value against a schema crossed its work bound
SCHEMA_RUN_WORK_EXCEEDED = "CD971"  # the run's schema checks crossed their total bound
SCHEMA_DEADLINE_PASSED = "CD972"  # the run's deadline passed while data was checked
CACHE_OFFLINE_MISS = "CD973"  # --offline and no cached answer for a model call
CACHE_ENTRY_UNREADABLE = "CD974"  # warning: a cached answer failed its check (or the store failed)
CACHE_STORE_FAILED = "CD975"  # the answer cache cannot be opened or used
CACHE_BAD_MODE = "CD976"  # CONVERGE_DSL_CACHE_MODE is not read-write, read-only or off
CACHE_NO_ENTRY = "CD977"  # `cache show KEY`: no cached answer has that key
RUN_CONFIG_BAD_CACHE_MODE = "CD978"  # a run configuration's cache.mode is none of the three
RUN_CONFIG_BAD_CACHE_DIR = "CD979"  # a run configuration's cache.dir names a file, not a folder
OTEL_NOT_INSTALLED = "CD980"  # --otel (or OTEL_* variables) without the OpenTelemetry SDK installed
OTEL_BAD_CONFIG = "CD981"  # an OTEL_* variable asks for an unsupported exporter or is malformed
OTEL_EXPORT_FAILED = "CD982"  # warning: spans could not be delivered to the collector in time
# `converge-dsl serve`: a request refused, or a service that cannot start (983 to 999)
SERVE_BAD_BODY = "CD983"  # a request body is not a JSON object of the expected shape
SERVE_UNKNOWN_INPUT = "CD984"  # a request names an input the pipeline does not declare
SERVE_MISSING_INPUT = "CD985"  # a request lacks an input the pipeline requires
SERVE_BUDGET_RAISED = "CD986"  # a request's budget is above the pipeline's own
SERVE_UNAUTHORIZED = "CD987"  # a request without a valid bearer token
SERVE_QUEUE_FULL = "CD988"  # a pipeline's run queue is full (429 with Retry-After)
SERVE_BODY_TOO_LARGE = "CD989"  # a request body is over the cap
SERVE_NOT_FOUND = "CD990"  # no such pipeline, run or route
SERVE_BAD_DECISION = "CD991"  # decisions for a run that is not paused, or unknown proposal ids
SERVE_TOKEN_FILE = "CD992"  # the --token-file cannot be read or holds no token
SERVE_STATE_UNUSABLE = "CD993"  # the --state folder or its database cannot be used
SERVE_DUPLICATE_PIPELINE = "CD994"  # two served pipelines share one name
SERVE_NOT_INSTALLED = "CD995"  # `serve` without the serve extra installed
SERVE_RUN_FAILED = "CD996"  # a run stopped on an error inside the service (message redacted)
SERVE_IDEMPOTENCY_CONFLICT = "CD997"  # an Idempotency-Key reused with another request body
SERVE_BAD_IDEMPOTENCY_KEY = "CD998"  # an Idempotency-Key header that is empty, too long or not text
EXECUTOR_UNUSABLE = "CD999"  # `serve --executor`: Ray missing or unreachable, a worker not starting
