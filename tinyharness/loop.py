"""The whole agent is a while loop: ask the model, run the tools it asks for, repeat.

The problem. A model only writes text. To act it asks for tool calls, and something must run them,
hand each result back, and ask again - until the model answers without calling anything. That
something is this loop; everything else in the package is a tool, a check, or armour around it.

The mechanism. `run_agent` takes the task, a client (the door to the model), the workspace and one
`RunSettings` (settings.py). Each turn it checks the budgets, cuts old tool results by the context
policy, asks the model, checks the reply (edges.py: a cut reply, an empty answer, a stop hook's
objection), and runs the calls. Every call, ours or an extension's, passes one choke point,
`CallRunner.checked_run`: the hooks, the permission prompt, the tool, the post hooks. The loop is
handed what it uses, as it is handed its client: the extensions in the settings; and when the model
calls `task`, the loop hands the subagent its own context - itself, the client, the workspace, the
stats and the settings (subagents.Parent) - so subagents.py never imports this module.

What it cannot do. The loop only stops between turns: a tool call that never returns is the shell
timeout's to end (tools.py), a reply that never ends the door's (llm/__init__.py). It trusts no
claim of the model's: "done" is the model's word, and checking the files is verify.py's and the
user's job.
"""
import itertools
from functools import partial

from .asking import for_call
from .checkpoints import around as checkpoint
from .context import POLICIES, cap_chars, cap_on_insert
from .counts import Stats
from .edges import NO_ANSWER, Edges, Report, garbled, save_transcript
from .extensions import RunHands
from .guards import Budget, RepeatGuard, Stopped
from .hooks import needs_permission, pre_tool_use
from .overflow import Model
from .parallel import batches, run_together
from .settings import RunSettings, system_prompt
from .subagents import Parent
from .tools import built_in, check_call, run_tool
from .verify import post_tool_use
from .vision import image_followup_message, user_message_with_image

# the context policies that cap a result before the model first sees it
CAPPING_POLICIES = ("cap", "batch+cap")


def run_agent(task, client, workspace, settings=None, stats=None, messages=None):
    """Loop until the model answers without tool calls; return that answer. Raise Stopped, with an
    account of what was done, when a budget runs out or the model keeps repeating itself. `settings`
    (settings.RunSettings): the limits, the context policy and window, the sandbox, the permission
    prompt, the extensions (MCP tools, the task tool, command hooks, parallel reads) and the
    callbacks; None = the CLI's defaults. `stats` counts the run for the [stats] line. `messages`: a
    conversation to continue (chat): the task is added to it, and it is kept up to date in place, so
    the caller still has the whole history when the run ends, stops or is interrupted."""
    settings, stats = settings or RunSettings(), stats or Stats()
    hands, report = RunHands(settings), Report(settings, stats)  # this run's state; what it shows
    messages = start(task, workspace, settings, hands, messages)  # Stopped: a hook refused the task
    edges, model = Edges(client, report, hands), Model(client, report)  # edges.py; overflow.py
    report.updated(messages)
    budget, repeats = Budget(settings, stats), RepeatGuard()  # every budget (guards.LIMITS)
    parent = Parent(run_agent, client, workspace, stats, settings, budget)  # a task tool child's
    runner = CallRunner(workspace, settings, hands, parent, report, budget)
    policy = POLICIES[settings.context_policy]  # how old tool results are cut (context.py)
    for turn in itertools.count():
        save_transcript(settings.transcript, messages, report.warn)  # a failed call leaves it
        edges.check_budget(budget, turn)  # between turns: the loop can stop only here
        window = model.window()  # the server's own, once it said it
        # Keep what the policy returns: a result cut once stays cut, the same bytes every turn.
        messages[:] = policy(messages, window)  # in place: a chat's caller holds this list
        tools = hands.ext.tools()  # asked every turn: an MCP server may have changed its list
        message, usage, finish_reason = model.ask(messages, window, budget, turn, tools)
        report.turn(usage, messages, tools, window)  # counted; warned: token budget, full window
        problems = message.pop("_problems", {})  # the door's notes on calls it could not read
        if edges.cut(finish_reason, message, messages):  # cut mid-reply: none of it runs
            continue
        messages.append(message)
        report.updated(messages)
        if not message.get("tool_calls"):  # no tool calls = done (finish_reason is not trusted)
            if edges.objection(message, messages) or edges.nudge(message, messages):
                continue  # a stop hook objected; an empty answer was nudged
            save_transcript(settings.transcript, messages, report.warn)
            return message["content"].strip() or NO_ANSWER
        runner.run_calls(message["tool_calls"], problems, repeats, messages)  # each answers a call
        edges.steer(repeats, messages)  # the same call again and again: a warning, then a stop


def start(task, workspace, settings, hands, messages=None):
    """The conversation the run starts from: the system prompt (or a chat's history), then the task
    with its picture (--image) and what the user_prompt_submit hooks added. Stopped when a hook
    refuses it."""
    refused = hands.user_prompt_submit(task, messages)  # a history: session_start says "resume"
    if refused:
        raise Stopped(f"a user_prompt_submit hook refused the task: {refused}",
                      "Tool calls: none.\nFiles written: none.")
    image = settings.image  # from --image
    first = user_message_with_image(task, image) if image else {"role": "user", "content": task}
    # what a user_prompt_submit hook printed: context, as in Claude Code
    first = hands.with_context(first)
    messages = ([{"role": "system", "content": system_prompt(workspace, settings)}]
                if messages is None else messages)
    messages.append(first)
    return messages


class CallRunner:
    """One run's hands: a reply's tool calls, each through the choke point with this run's
    workspace, settings and extensions (their configuration `ext`, this run's state `hands`); reads
    together, a write or a command alone."""

    def __init__(self, workspace, settings, hands, parent, report, budget=None):
        self.workspace, self.settings = workspace, settings
        self.parent, self.report = parent, report
        self.hands, self.ext = hands, hands.ext
        self.budget = budget  # what is left of the run's time bounds a command too
        # what the post_tool_use hooks remember during this run (failing writes per file)
        self.memory = {}
        window = settings.context_window
        self.cap = (cap_chars(window) if settings.context_policy in CAPPING_POLICIES and window
                    else None)

    def run_calls(self, calls, problems, repeats, messages):
        """Run one reply's calls and append each result, answering its call by the id the server
        gave it; the pictures they loaded follow all of the results. `problems`: the door's notes,
        by call id."""
        images = []  # (name, image part) for each picture view_image loads this turn
        # reads together; a write or command alone
        for group in batches(calls, partial(self.reads_only, problems)):
            if len(group) == 1:
                # before it runs: its permission prompt follows the [tool] line
                self.report.show(group[0])
            outcomes = run_together(group, partial(self.run_one, problems))
            for call, (result, loaded) in zip(group, outcomes):
                if len(group) > 1:
                    self.report.show(call)
                repeats.see(call, problems.get(call["id"]))
                self.report.ran(call, result)  # the -> line, the count, the record
                images += loaded
                # The one rule of the loop: each result answers its call by the id the server gave
                # that call. Stored as the model will be sent it: a policy that caps on insert caps
                # it here already, so the session file never holds more than the model saw (a capped
                # result stays as it is).
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": self.as_sent(result)})
                self.report.updated(messages)
        # after ALL of this turn's results: a message between two of them breaks the pairing
        if images:
            messages.append(image_followup_message([part for _, part in images],
                                                   [name for name, _ in images]))

    def reads_only(self, problems, call):
        """May this call run beside others? A read the door could read, when parallel reads are
        on."""
        return self.ext.parallel and call["id"] not in problems and \
            self.ext.read_only(call["function"]["name"], call["function"]["arguments"])

    def run_one(self, problems, call):
        """What one call returns, and the pictures it loaded (a list per call: calls may run in
        threads)."""
        name, arguments, problem = (call["function"]["name"], call["function"]["arguments"],
                                    problems.get(call["id"]))
        if problem:
            return garbled(problem), []
        loaded: list = []
        with checkpoint(self.settings, name, arguments, self.ext):  # what it changes can be undone
            return self.checked_run(name, arguments, loaded), loaded

    def as_sent(self, result):
        return result if self.cap is None else cap_on_insert(result, self.cap)

    def command_time(self):
        """The longest a command may run: the shell timeout, or what is left of the run's time
        (guards.Budget.remaining) when less."""
        left = self.budget.seconds_left() if self.budget else self.settings.shell_timeout
        return min(self.settings.shell_timeout, left)

    def checked_run(self, name, arguments, images):
        """The choke point: every call passes here after it is parsed and before it runs. The hooks
        come first, so a blocked call never reaches the user; then writes, commands and URLs need
        the user's yes. After the call ran, the post hooks may add what they found to its result:
        the model reads it next. A tool from extensions.py (MCP, task) passes the same hooks, prompt
        and post hooks as ours; the task tool gets this run's context (`parent`) to start its child
        from."""
        workspace, settings, ext, hands = self.workspace, self.settings, self.ext, self.hands
        ours = not ext.owns(name)
        arguments, problem = check_call(name, arguments) if ours else ext.check(name, arguments)
        if (problem and ours and built_in(name) is None
            and (more := [s["function"]["name"] for s in ext.schemas()])):
            # the list the model corrects itself from: all of them
            problem = f"{problem[:-1]}, {', '.join(more)}."
        if problem:
            return problem
        reason = pre_tool_use(workspace, name, arguments) or hands.pre_tool_use(name, arguments)
        if reason:
            return f"BLOCKED: {reason}"
        # --deny/--ask/--allow, settings' permissions and defaultMode: deny, then ask (at the
        # terminal, even under --yes), then allow (extensions.by_rules)
        asks = needs_permission(name, arguments) if ours else ext.needs_permission(name)
        refused, asks = ext.by_rules(name, arguments, asks)
        if refused:
            return refused
        # the question: a write's diff and size, and the rule an "always" would save (asking.py)
        if asks and not settings.approve(for_call(name, arguments, workspace, ext.rules)):
            return f"DENIED: the user did not allow this {name} call, so it did not run."
        timeout = self.command_time()
        if ours and name == "shell" and timeout <= 0:
            return (f"ERROR: the run's {settings.budget_name('max_seconds')} is spent, so the "
                    "command did not run.")
        result = run_tool(workspace, name, arguments, timeout, images, settings.sandbox) if ours \
            else hands.run(name, arguments, images, self.parent)
        return (hands.post_tool_use(name, arguments,
                                    post_tool_use(workspace, name, arguments, result, self.memory)))
