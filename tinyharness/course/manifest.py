"""The course's manifest: every file of every stage, and its role. One table that the stage READMEs,
`tinyharness course files` and `course diff`, `python -m benchmarks.size` and tests/test_size.py
read.

Each stage file is one of three things:
- lesson: what the README's "How it works" teaches. Read it first; it is what the budgets measure.
- armour: hardening for real servers and hostile input (odd replies, error bodies, cut replies,
  FIFOs, endless output). Read it after the lesson, when a real server surprises you.
- cli: the command line (flags, usage checks, exit codes) and the package's scaffolding.

The budgets (lines of lesson code, as `wc -l` counts them) keep each stage readable in one sitting:
the source article's whole core was about 400 lines and its loop under 30.
"""
LESSON, ARMOUR, CLI = "lesson", "armour", "cli"
ROLES = (LESSON, ARMOUR, CLI)

_M0 = {"llm.py": LESSON, "wire.py": ARMOUR, "__main__.py": CLI, "__init__.py": CLI}
_M1 = {**_M0, "loop.py": LESSON, "tools.py": LESSON, "edges.py": ARMOUR}
_M2 = {**_M1, "safeio.py": ARMOUR}
_M3 = {**_M2, "hooks.py": LESSON, "fences.py": ARMOUR}
_M4 = {**_M3, "guards.py": LESSON}
_M5 = {**_M4, "context.py": LESSON}
_M6 = {**_M5, "verify.py": LESSON}
# The eval's lesson is its machine (the runner, the task record, the judge, the claim check); its
# armour is what keeps a run contained (runs.py) and the five tasks' material: notes, CSVs, hidden
# tests and traps, read when you write a task of your own.
_EVALS = {"__init__.py": LESSON, "claims.py": LESSON, "common.py": LESSON, "runs.py": ARMOUR,
          "fact.py": ARMOUR, "folder.py": ARMOUR, "function.py": ARMOUR, "hook.py": ARMOUR,
          "script.py": ARMOUR}
_M7 = {**_M6, "eval.py": LESSON, **{f"evals/{name}": role for name, role in _EVALS.items()}}
_M8 = {**_M7, "vision.py": LESSON, "imageload.py": ARMOUR, "arrival.py": ARMOUR}

# stage folder -> {file, relative to the stage folder: role}
FILES = {"m0_llm": _M0, "m1_loop": _M1, "m2_tools": _M2, "m3_hooks": _M3, "m4_guards": _M4,
         "m5_context": _M5, "m6_verify": _M6, "m7_eval": _M7, "m8_vision": _M8}

# The m7 eval is measured on its own: a harness for measuring, not part of the agent's core.
EVAL_FILES = ("eval.py", "evals/")

BUDGETS = {
    "first": {"m0_llm": 80, "m1_loop": 200},  # the whole lesson of the first two stages
    "added": 150,                             # lesson lines each later stage may add to the core
    "eval": 400,                              # m7's eval (eval.py and evals/), in m7 and m8
    "core": {"m8_vision": 800},               # the last stage's whole lesson, the eval aside
    "function": 40,                           # every key function (an exercise) and run_agent
}


# Where each armour file's copies must be byte-identical: for each file, the groups of holders
# (stage folders, and "tinyharness" when the package keeps a copy under the same name) that share
# one content, each with why it is a version of its own. tests/test_armour.py hashes every copy and
# fails when the copies fall into other groups: a copy edited alone, or a fix carried to only some
# stages.
_M0_ON = ("m0_llm", "m1_loop", "m2_tools", "m3_hooks", "m4_guards", "m5_context", "m6_verify",
          "m7_eval", "m8_vision")
_SHARED_EVAL = ("the eval's armour: one copy in m7, m8 and the package (they judge alike; fix all "
                "three at once)")
ARMOUR_COPIES = {
    "wire.py": {_M0_ON: "one copy in every stage: no lesson changes what servers send or how the "
                        "door survives it (the package has no wire.py: llm.py, llm/reply.py and "
                        "llm/stream.py hold it, grown)"},
    "edges.py": {
        ("m1_loop", "m2_tools", "m3_hooks"): "m1's: the loop's edge cases behind names (a reply "
                                             "cut at the length limit, a call the door could not "
                                             "read), the [tool] lines, the transcript, [stats], "
                                             "Stopped",
        ("m4_guards",): "m4's guards: an empty answer nudged once, a reply bounded by the time "
                        "left (ask), the repeat warning and stop (steer); Stopped moves to "
                        "guards.py; Record keeps what the run did",
        ("m5_context", "m6_verify", "m7_eval"): "m5's context: watch_context warns when the "
                                                "context fills or the server cut it; Stats sums "
                                                "cached_tokens",
        ("m8_vision",): "m8's vision: ArrivalWatch warns when a picture never reached the model",
        ("tinyharness",): "the package's: one Edges per run from RunSettings and its extensions "
                          "(stop hooks, --max-tokens, overflow's cut and retry, subagents), not "
                          "the stages' loose arguments",
    },
    "safeio.py": {
        ("m2_tools",): "m2's tools: a command's output held from both ends (Output) and decoded "
                       "without a crash, arguments parsed and checked",
        ("m3_hooks", "m4_guards"): "m3's hooks: reads that never wait on a FIFO (read_regular), "
                                   "writes renamed over the target (replace_file)",
        _M0_ON[5:]: "m5's context: append_note never writes the notes file through a link (the "
                    "package has no safeio.py: tools.py and the file door, filedoor.py, hold it)",
    },
    "fences.py": {_M0_ON[3:]: "one copy from m3 on: the hooks' fences never change with a later "
                              "lesson (the package has no fences.py: hooks.py holds them)"},
    "imageload.py": {("m8_vision", "tinyharness"): "one copy in m8 and the package: a fix goes "
                                                   "into both"},
    "arrival.py": {("m8_vision", "tinyharness"): "one copy in m8 and the package: a fix goes into "
                                                 "both"},
    **{f"evals/{name}": {("m7_eval", "m8_vision", "tinyharness"): _SHARED_EVAL}
       for name, role in _EVALS.items() if role == ARMOUR},
}


def package_path(name):
    """Where the package keeps its copy of a stage file: the stages' evals/ lives in the package's
    eval family (tinyharness/eval/evals/), every other copy under the same name."""
    return "eval/" + name if name.startswith("evals/") else name


# A stage the manifest does not list (a learner's own, a test's fake one): roles by file name.
DEFAULT_ROLES = {"__main__.py": CLI, "__init__.py": CLI, "wire.py": ARMOUR, "edges.py": ARMOUR,
                 "safeio.py": ARMOUR,
                 "fences.py": ARMOUR, "imageload.py": ARMOUR, "arrival.py": ARMOUR}


def role_of(stage, path):
    """The role of one file (relative to its stage folder) of a stage folder name."""
    return FILES.get(stage, {}).get(path) or DEFAULT_ROLES.get(path, LESSON)


def roles(stage):
    """{file: role} of a stage folder name (m3_hooks) or short name (m3); KeyError for an unknown
    one."""
    for name, files in FILES.items():
        if stage in (name, name.split("_")[0]):
            return dict(files)
    raise KeyError(stage)


def is_eval(path):
    return any(path == f or (f.endswith("/") and path.startswith(f)) for f in EVAL_FILES)
