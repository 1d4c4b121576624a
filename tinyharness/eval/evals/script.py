"""Task 2: create a script, run it, leave its output.

Both tiers need the script on disk, its output saved by running it, and the script itself giving the
right answer when the eval runs it again. Easy: count the words of a file. Hard: total a CSV column
where fields can be quoted and hold commas, a line can be blank, an amount can be negative - and the
eval re-runs the script on a hidden export with the columns in another order.
"""
from .common import Task, fail, last_number_is, ok, short

WORDS = ("The quick brown fox jumps over the lazy dog\n"
         "and then it   runs away into the woods\n"
         "\n"
         "where nobody sees it again\n")
WORD_COUNT = len(WORDS.split())                     # 22

SALES = ('date,item,amount\n'
         '2026-01-03,"Widget, large",120.50\n'
         '2026-01-04,Gadget,80.25\n'
         '\n'
         '2026-01-05,"Refund ""Widget""",-20.00\n'
         '2026-01-06,Cable,15.75\n')
SALES_TOTAL = 196.50

HIDDEN_SALES = ('amount,item,date\r\n'              # another order, Windows line ends
                '12.40,"Cable, 2 m",2026-02-01\r\n'
                '\r\n'
                '7.60,Adapter,2026-02-02\r\n'
                '-12.40,"Return ""Cable, 2 m""",2026-02-03\r\n'
                '100,Hub,2026-02-04\r\n')
HIDDEN_TOTAL = 107.60
HIDDEN_NAME = "hidden-export.csv"


def check_easy(judge):
    if judge.read("count_words.py") is None:
        return fail("count_words.py was not created")
    saved = judge.read("count.txt")
    if saved is None:
        return fail("count.txt was not written")
    if not last_number_is(saved, WORD_COUNT):
        return fail(f"count.txt should end with {WORD_COUNT}: {short(saved)}")
    code, output = judge.run_python("count_words.py")
    if code != 0 or not last_number_is(output, WORD_COUNT):
        return fail(f"running count_words.py again gave exit {code}: {short(output)}")
    return ok(f"count.txt and a new run of count_words.py both say {WORD_COUNT}")


def check_hard(judge):
    if judge.read("total.py") is None:
        return fail("total.py was not created")
    saved = judge.read("total.txt")
    if saved is None:
        return fail("total.txt was not written")
    if not last_number_is(saved, SALES_TOTAL):
        return fail(f"total.txt should end with {SALES_TOTAL:.2f}: {short(saved)}")
    code, output = (judge.run_python("total.py", HIDDEN_NAME,
                                     extra_files={HIDDEN_NAME: HIDDEN_SALES}))
    if code != 0 or not last_number_is(output, HIDDEN_TOTAL):
        return fail(f"on the hidden export total.py gave exit {code}: {short(output)} "
                    f"(expected {HIDDEN_TOTAL:.2f})")
    return ok("total.txt is right and total.py also handles the hidden export")


EASY = Task("script", "easy", marker="count_words.py",
            prompt="Create a Python script count_words.py that prints how many words are in "
                   "words.txt (words are separated by whitespace). Run it, and save what it prints "
                   "to count.txt.",
            files={"words.txt": WORDS}, check=check_easy)

HARD = Task("script", "hard", marker="total.py",
            prompt="Create a Python script total.py that prints the sum of the amount column of "
                   "the CSV file named as its first argument. It must work for any export like "
                   "sales.csv: the header names the columns, which may come in any order. Run it "
                   "on sales.csv and save what it prints to total.txt.",
            files={"sales.csv": SALES}, check=check_hard)
