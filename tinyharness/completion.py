"""Shell completion: `tinyharness completion bash|zsh|fish` prints a script that completes the
command line.

The problem. Fifteen commands, some with forty flags, and flags whose values are a short list
(`--api auto|openai|ollama`, `--sandbox on|off`, a course stage): a user types them from memory or
from `--help`, and a script written by hand next to the parser goes stale with the first new flag.

The mechanism. The script is made from the parser itself (parsers.build_parser with every command's
flags, and the own parsers of `doctor` and `eval`): `commands` walks it into {command: (its flags,
the flags that take a value, {flag: its choices}, the words its positionals may be)}, `course`'s
actions one level deeper as `course ACTION`; a positional named `stage` (or a and b of `course
diff`) may be a stage folder's name or its short form (m0_llm, m0), found beside the package. Bash
gets one function: it finds the command (and the course action) among the words before the cursor,
skipping each flag's value, then offers the choices of the flag just typed, else the words its
positionals may be (its flags when there are none, or when the word begins with a dash); `complete
-o default` leaves paths and free text to bash's own file completion. zsh loads the same function
through its bashcompinit; fish gets `complete -c` lines, one a flag, conditioned on the command.
A flag that takes a value in one command is taken to take one in every command.

What it cannot do. It completes words, not meanings: no model names (`tinyharness models` lists
them; asking the server at each Tab would be slow), no session ids, no MCP server names. In fish,
course's actions' flags are offered under `course` as a whole. The script reflects the installed
version: print it again after an upgrade.
"""
import argparse
import shlex

from .parsers import build_parser

COURSE = "course"


def stage_names():
    """The stage folders beside the package, and their short forms: m0_llm, m0, ..."""
    from .course import ROOT
    folders = sorted(p.name for p in ROOT.glob("m[0-9]_*") if p.is_dir())
    return folders + [name.split("_")[0] for name in folders]


def describe(parser, stages):
    """(flags, flags that take a value, {flag: choices}, positional words) of one parser."""
    flags, valued, choices, words = [], [], {}, []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            words += list(action.choices)
        elif action.option_strings:
            flags += action.option_strings
            if action.nargs != 0:
                valued += action.option_strings
                for flag in action.option_strings:
                    if action.choices:
                        choices[flag] = [str(c) for c in action.choices]
        elif action.choices:
            words += [str(c) for c in action.choices]
        elif action.dest in ("stage", "a", "b"):
            words += stages
    return flags, valued, choices, list(dict.fromkeys(words))


def commands():
    """{command (or "course ACTION"): describe()}, "" for the top level."""
    from .doctor import build_parser as doctor_parser
    from .eval.args import build_parser as eval_parser
    parser, stages = build_parser(None), stage_names()
    found = {"": describe(parser, stages)}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    own = {"doctor": doctor_parser(), "eval": eval_parser()}
    for name, command in sub.choices.items():
        found[name] = describe(own.get(name, command), stages)
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                for act, each in action.choices.items():
                    found[f"{name} {act}"] = describe(each, stages)
    return found


def words(items):
    return " ".join(items)


def bash():
    """The bash function and its `complete` line."""
    table = commands()
    valued = sorted({flag for entry in table.values() for flag in entry[1]})
    values, offers = [], []
    for name, (flags, _, choices, positional) in table.items():
        key = name.replace(" ", ":")
        for flag, options in choices.items():
            values.append(f'        "{key}|{flag}") words="{words(options)}" ;;')
        offers.append(f'        "{key}") pos="{words(positional)}" flags="{words(flags)}" ;;')
    return BASH.format(valued=words(valued), values="\n".join(values), offers="\n".join(offers))


BASH = """# tinyharness completion for bash: source <(tinyharness completion bash)
_tinyharness() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    local valued=" {valued} " cmd="" act="" words="" i w
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        [[ $w == -* || $valued == *" ${{COMP_WORDS[i-1]}} "* ]] && continue
        if [[ -z $cmd ]]; then cmd=$w; elif [[ $cmd == course && -z $act ]]; then act=$w; fi
    done
    local key="$cmd"
    [[ -n $act ]] && key="$cmd:$act"
    case "$key|$prev" in
{values}
        *) if [[ $valued == *" $prev "* ]]; then COMPREPLY=(); return; fi ;;
    esac
    if [[ -z $words ]]; then
        local pos="" flags=""
        case "$key" in
{offers}
        esac
        words=$pos
        [[ $cur == -* || -z $pos ]] && words=$flags
    fi
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F _tinyharness tinyharness
"""


def zsh():
    """zsh runs the bash function through bashcompinit."""
    return ("# tinyharness completion for zsh: source <(tinyharness completion zsh)\n"
            "autoload -U +X compinit && compinit\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + bash().split("\n", 1)[1])


def fish():
    """One `complete -c` line a command and a flag."""
    table = commands()
    lines = [("# tinyharness completion for fish: tinyharness completion fish > "
              "~/.config/fish/completions/tinyharness.fish"), "complete -c tinyharness -f"]
    top = table[""][3]
    for name in top:
        lines.append(f"complete -c tinyharness -n '__fish_use_subcommand' -f -a {name}")
    for name, (flags, valued, choices, positional) in table.items():
        if not name:
            continue
        command = name.split(" ")[0]
        when = f"-n '__fish_seen_subcommand_from {command}'"
        if positional:
            lines.append(f"complete -c tinyharness {when} -f -a {shlex.quote(words(positional))}")
        for flag in flags:
            kind = "-l " + flag[2:] if flag.startswith("--") else "-s " + flag[1:]
            value = (f" -x -a {shlex.quote(words(choices[flag]))}" if flag in choices
                     else " -r -F" if flag in valued else "")
            lines.append(f"complete -c tinyharness {when} {kind}{value}")
    return "\n".join(dict.fromkeys(lines)) + "\n"


def script(shell):
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell]()
