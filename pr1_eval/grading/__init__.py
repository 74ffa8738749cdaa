"""The one grader: answer extraction, math-verify equivalence in killable worker processes,
and the paper's string checker beside it. The RL reward in ``repro`` calls this same code.

Public API (import from here):

- ``extract_answer(response) -> ExtractedAnswer`` (answer text or None, and its source)
- ``paper_correct(response, gold) -> bool`` (the paper's checker)
- ``GradeResult``; ``grade_responses(pairs, workers=None, timeout_s=...) -> list[GradeResult]``
- ``grade_response(response, gold) -> GradeResult`` (safe from any thread)
- ``answer_classes(answers, timeout_s=...) -> list[int | None]`` (math-equivalence classes for maj@k)

Also: ``GradingPool`` and ``shared_pool()``/``close_shared_pool()`` (the killable workers),
``math_equal`` (math-verify on this main thread), ``normalize_final_answer`` (the paper's
normaliser). Modules: ``extract`` (where the
answer is), ``answer_text`` (how an answer line is read: boxes, sets, trailing prose, sentences),
``paper``, ``verify`` (math-verify calls), ``pool``, ``shared`` and ``worker`` (processes),
``grade`` (the API above).
"""

from pr1_eval.grading.extract import ExtractedAnswer, extract_answer
from pr1_eval.grading.grade import GradeResult, answer_classes, grade_response, grade_responses
from pr1_eval.grading.paper import normalize_final_answer, paper_correct
from pr1_eval.grading.pool import GradingPool
from pr1_eval.grading.shared import close_shared_pool, shared_pool
from pr1_eval.grading.verify import Verdict, math_equal

__all__ = [
    "ExtractedAnswer",
    "GradeResult",
    "GradingPool",
    "Verdict",
    "answer_classes",
    "close_shared_pool",
    "extract_answer",
    "grade_response",
    "grade_responses",
    "math_equal",
    "normalize_final_answer",
    "paper_correct",
    "shared_pool",
]
