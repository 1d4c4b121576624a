"""`tinyharness completion bash|zsh|fish` (issue 39, 9): a completion script made from the command line's own
parser. The bash one is loaded in a real `bash` and asked as bash asks it (COMP_WORDS, COMP_CWORD, the function
`complete -p` names); zsh and fish are not installed here, so their scripts are checked for what they hold."""
import os
import shutil
import subprocess
import sys

import pytest

from tests.ladder import ROOT, STAGES

PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def script(shell):
    done = subprocess.run([PY, "-m", "tinyharness", "completion", shell], capture_output=True, text=True,
                          timeout=60, env=ENV)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory):
    if not shutil.which("bash"):
        pytest.skip("no bash")
    path = tmp_path_factory.mktemp("completion") / "tinyharness.bash"
    path.write_text(script("bash"))
    return path


def complete(bash_script, line):
    """What bash offers for LINE (the cursor at its end), asked as bash's programmable completion asks."""
    program = ('source "$1"; shift\n'
               'spec=$(complete -p tinyharness) || exit 3\n'
               'fn=$(sed -E "s/.* -F ([^ ]+) .*/\\1/" <<<"$spec")\n'
               'COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}\n'
               '"$fn" tinyharness "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    words = line.split(" ")
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", program, "complete", str(bash_script), *words],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return sorted(word for word in done.stdout.splitlines() if word)


def test_bash_registers_the_function(bash_script):
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", f'source "{bash_script}"; complete -p tinyharness'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "-F " in done.stdout and done.stdout.strip().endswith(" tinyharness")


def test_bash_completes_commands_flags_and_their_values(bash_script):
    assert complete(bash_script, "tinyharness ru") == ["run"]
    assert {"models", "completion", "doctor", "course", "chat"} <= set(complete(bash_script, "tinyharness "))
    assert complete(bash_script, "tinyharness run --max-t") == ["--max-tokens", "--max-turns"]
    assert complete(bash_script, "tinyharness run --api ") == ["auto", "ollama", "openai"]
    assert complete(bash_script, "tinyharness chat --sandbox o") == ["off", "on"]
    assert complete(bash_script, "tinyharness completion ") == ["bash", "fish", "zsh"]
    assert "--compact-at" in complete(bash_script, "tinyharness chat --")
    assert "--compact-at" not in complete(bash_script, "tinyharness run --")
    # a flag's value is not taken for the command: after `--model x`, run's flags still
    assert "--max-turns" in complete(bash_script, "tinyharness run --model qwen3:8b --")
    assert "--timeout" in complete(bash_script, "tinyharness doctor --")


def test_bash_completes_course_actions_and_stage_names(bash_script):
    assert complete(bash_script, "tinyharness course ") == sorted(
        ["list", "diff", "files", "quiz", "start", "hint", "check", "workspace"])
    stages = complete(bash_script, "tinyharness course diff m")
    assert STAGES[0] in stages and "m0" in stages and "m8" in stages
    assert "--mine" in complete(bash_script, "tinyharness course check m3 --")


def test_zsh_and_fish_scripts_hold_the_commands_and_flags():
    zsh = script("zsh")
    assert "bashcompinit" in zsh and "complete -o default -F" in zsh and "--max-turns" in zsh
    fish = script("fish")
    assert "complete -c tinyharness -n '__fish_use_subcommand' -f -a run" in fish
    assert "__fish_seen_subcommand_from run' -l max-turns" in fish
    assert "__fish_seen_subcommand_from run' -l api -x -a 'auto openai ollama'" in fish


def test_an_unknown_shell_is_a_usage_error():
    done = subprocess.run([PY, "-m", "tinyharness", "completion", "tcsh"], capture_output=True, text=True,
                          timeout=60, env=ENV)
    assert done.returncode == 2 and "bash" in done.stderr and "Traceback" not in done.stderr
