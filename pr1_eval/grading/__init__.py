"""The one grader: answer extraction, math-verify equivalence in killable worker processes,
and the paper's string checker beside it. The RL reward in ``repro`` calls this same code.

Public API (import from here):

- ``extract_answer(response) -> ExtractedAnswer`` (answer text or None, and its source)
- ``paper_correct(response, gold) -> bool`` (the paper's checker)
- ``GradeResult``; ``grade_responses(pairs, workers=None, timeout_s=...) -> list[GradeResult]``
- ``grade_response(response, gold) -> GradeResult`` (safe from any thread)
- ``answer_classes(answers, timeout_s=...) -> list[int | None]`` (math-equivalence classes for maj@k)
"""
