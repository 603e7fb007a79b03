"""Reward scoring: answer extraction, math-verify grading, a process pool and a toy reward."""

from relay.scoring.answer import extract_answer, extract_last_number, normalize_answer
from relay.scoring.blocklist import apply_blocklist, blocked_mask
from relay.scoring.grader import MATH_VERIFY_TIMEOUT_S, grade
from relay.scoring.pool import GraderPool
from relay.scoring.toy import token_share

__all__ = [
    "MATH_VERIFY_TIMEOUT_S",
    "GraderPool",
    "apply_blocklist",
    "blocked_mask",
    "extract_answer",
    "extract_last_number",
    "grade",
    "normalize_answer",
    "token_share",
]
