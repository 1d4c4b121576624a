"""The quiz runner: `python -m quizzes m1` asks the three questions in m1_loop/QUIZ.md."""
