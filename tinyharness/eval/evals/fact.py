"""Task 1: read a fact from a file and write it to an answer file.

Easy: one note among three holds the testing budget. Hard: four notes talk about budgets - last
year's, a March draft that was later voided, a marketing budget - and only one states the approved
figure; the answer file must give that one and none of the distractors.
"""
from .common import Task, fail, mentions_amount, ok, short

ANSWER = 4750
DISTRACTORS = (3900, 5200, 2800)

EASY_NOTES = {
    "notes/ideas.md": "# Ideas\n\n- A dark mode for the dashboard.\n- An export button for the "
                      "weekly report.\n",
    "notes/meeting-2026-04-14.md": "# Lab meeting, 14 April 2026\n\n- The demo moves to Friday.\n"
                                   "- Testing budget: 4,750 EUR, for GPU hours and spare cables.\n",
    "notes/recipes.md": "# Pancakes\n\n250 g flour, 2 eggs, 500 ml milk. Rest for 20 minutes.\n",
}

HARD_NOTES = {
    "notes/budget-2025.md": "# Budget 2025 (closed)\n\nLast year's testing budget: 2,800 EUR. All "
                            "spent.\n",
    "notes/ideas.md": EASY_NOTES["notes/ideas.md"],
    "notes/marketing-plan.md": "# Marketing plan 2026\n\nLaunch campaign budget: 5,200 EUR, "
                               "approved in March.\n",
    "notes/meeting-2026-03-02.md": "# Lab meeting, 2 March 2026\n\n- Draft testing budget: 3,900 "
                                   "EUR, to be confirmed at the April meeting.\n",
    "notes/meeting-2026-04-14.md": "# Lab meeting, 14 April 2026\n\n- The March draft for testing "
                                   "is void.\n- Approved testing budget for this year: 4,750 "
                                   "EUR.\n",
}


def check_easy(judge):
    text = judge.read("budget.md")
    if text is None:
        return fail("budget.md was not written")
    if not mentions_amount(text, ANSWER):
        return fail(f"budget.md does not state 4,750: {short(text)}")
    return ok("budget.md states 4,750")


def check_hard(judge):
    passed, reason = check_easy(judge)
    if not passed:
        return passed, reason
    wrong = [f"{n:,}" for n in DISTRACTORS if mentions_amount(judge.read("budget.md"), n)]
    if wrong:
        return fail(f"budget.md also states a distractor: {', '.join(wrong)}")
    return ok("budget.md states the approved 4,750 and no distractor")


EASY = Task("fact", "easy", marker="Find the testing budget in my notes",
            prompt="Find the testing budget in my notes (the notes/ folder) and save the amount to "
                   "budget.md.",
            files=EASY_NOTES, check=check_easy)

HARD = Task("fact", "hard", marker="this year's approved testing budget",
            prompt="What is this year's approved testing budget? It is somewhere in notes/. "
                   "Save just that amount to budget.md.",
            files=HARD_NOTES, check=check_hard)
