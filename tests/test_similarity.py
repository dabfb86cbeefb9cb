"""Near copies are flagged with what they resemble; short code everyone writes alike, and the stub
every student starts from, are not."""
import inspect
import re
import textwrap

import tfm_ref
from autograde.similarity import MIN_FINGERPRINTS, fingerprints, similar_to, similarity_flags

STUB = 'def rms_norm(x, weight, eps=1e-6):\n    """RMSNorm over the last axis."""\n    # YOUR CODE HERE\n    raise NotImplementedError()\n'


def _row(student, code, assignment="ch07_norms"):
    return {"student_id": student, "assignment": assignment, "code": {"rms_norm": code}}


def _renamed_copy_of_tfm_ref() -> str:
    """tfm_ref's greedy decoding with every local name changed and the comments dropped."""
    source = inspect.getsource(tfm_ref.greedy_decode)
    for old, new in [("memory", "enc"), ("finished", "done"), ("out", "result"), ("next_token", "tok"), ("logits", "z")]:
        source = source.replace(old, new)
    return "\n".join(line.split("#")[0] for line in source.splitlines())


def test_a_renamed_copy_of_tfm_ref_is_flagged_with_the_function_it_copies():
    flags = similarity_flags([_row("a", _renamed_copy_of_tfm_ref())], {})
    assert "similar-to:tfm_ref.decoding.greedy_decode" in flags[0]


def test_two_students_with_the_same_long_solution_flag_each_other_only():
    copied = _renamed_copy_of_tfm_ref()
    own = ("def rms_norm(x, weight, eps=1e-6):\n    ms = (x.float() ** 2).mean(-1, keepdim=True)\n"
           "    return (x.float() * torch.rsqrt(ms + eps)).to(x.dtype) * weight\n")
    flags = similarity_flags([_row("a", copied), _row("b", copied + "\n# tidied\n"), _row("c", own)], {})
    assert "similar-to:b@rms_norm" in flags[0] and "similar-to:a@rms_norm" in flags[1]  # the cell alike too
    assert flags[2] == set()


def test_a_flag_says_whose_cell_it_resembles_and_flags_written_before_cells_were_named_still_read():
    assert similar_to("similar-to:bob@softmax") == ("bob", "softmax")
    assert similar_to("similar-to:jane@uni.example@softmax", {"softmax"}) == ("jane@uni.example", "softmax")
    assert similar_to("similar-to:jane@uni.example", {"softmax"}) == ("jane@uni.example", None)  # an older run's
    assert similar_to("similar-to:bob") == ("bob", None)
    assert similar_to("similar-to:tfm_ref.decoding.greedy_decode") == ("tfm_ref.decoding.greedy_decode", None)


def test_short_solutions_and_the_released_stub_are_not_evidence():
    short = "def split_heads(x, n_heads):\n    B, T, D = x.shape\n    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)\n"
    assert len(fingerprints(short)) < MIN_FINGERPRINTS
    flags = similarity_flags([_row("a", short), _row("b", short), _row("c", STUB), _row("d", STUB)],
                             {("ch07_norms", "rms_norm"): STUB})
    assert flags == [set(), set(), set(), set()]


def test_the_same_cell_of_another_assignment_is_not_compared():
    copied = _renamed_copy_of_tfm_ref()
    flags = similarity_flags([_row("a", copied, "ch07_norms"), _row("b", copied, "ch08_encoder_decoder")], {})
    assert not any(f.startswith("similar-to:a") or f.startswith("similar-to:b") for f in flags[0] | flags[1])


def test_an_overlong_line_never_reaches_the_tokenizer_and_hides_no_copy_beside_it(monkeypatch):
    from autograde import similarity
    seen = []
    tokens = similarity._tokens
    monkeypatch.setattr(similarity, "_tokens", lambda source: seen.append(source) or tokens(source))
    # an unterminated string of escaped quotes: Python's tokenizer takes minutes over it, quadratically
    stall = "x = '" + "\\'" * 40_000  # 80 000 characters: under the cap of an audited cell
    flags = similarity_flags([_row("a", _renamed_copy_of_tfm_ref() + "\n" + stall)], {})
    assert max(len(line) for source in seen for line in source.split("\n")) <= similarity.MAX_LINE_CHARS
    assert "similar-to:tfm_ref.decoding.greedy_decode" in flags[0]


def test_a_likeness_that_the_instructors_own_solution_shares_is_not_evidence():
    """ch08's greedy loop written the natural way is tfm_ref's: the instructor's solution is flagged against
    it too, so a student's is not; a copy of a piece the solution does not resemble still is."""
    import nbformat

    from autograde.notebook import solution_sources
    from editions.assignments import ROOT
    from autograde.release import source_notebook

    cell = ("ch08_encoder_decoder", "greedy")
    solution = solution_sources(nbformat.read(source_notebook(cell[0], ROOT / "solutions"), 4))[cell[1]]
    # the released stub, as nbgrader cuts it (the fingerprints of its signature and docstring are no evidence)
    stubs = {cell: re.sub(r"### BEGIN SOLUTION.*### END SOLUTION", "raise NotImplementedError()", solution, flags=re.S)}
    rows = [{"student_id": "a", "assignment": cell[0], "code": {cell[1]: solution}}]
    assert "similar-to:tfm_ref.decoding.greedy_decode" in similarity_flags(rows, stubs)[0], "it does resemble tfm_ref"
    assert similarity_flags(rows, stubs, solutions={cell: solution}) == [set()]
    copied = [{"student_id": "b", "assignment": cell[0], "code": {cell[1]: inspect.getsource(tfm_ref.beam_search)}}]
    assert any(f.startswith("similar-to:tfm_ref.beam_search") for f in similarity_flags(copied, stubs, solutions={cell: solution})[0])
    # closer to tfm_ref than the course's own solution comes: tfm_ref's loop pasted whole, its docstring changed
    pasted = re.sub(r'"""[\s\S]*?"""', '"""Mine."""', inspect.getsource(tfm_ref.greedy_decode), count=1)
    rows = [{"student_id": "c", "assignment": cell[0], "code": {cell[1]: pasted}}]
    assert "similar-to:tfm_ref.decoding.greedy_decode" in similarity_flags(rows, stubs, solutions={cell: solution})[0]


def test_a_piece_of_tfm_ref_pasted_whole_beside_other_code_is_flagged():
    """Most of the cell is other code, so little of it is the piece; but all of the piece is in it."""
    own = inspect.getsource(textwrap.TextWrapper)  # any long code of one's own
    pasted = own + "\n" + inspect.getsource(tfm_ref.scaled_dot_product_attention)
    flags = similarity_flags([{"student_id": "a", "assignment": "ch01_attention", "code": {"attention": pasted}}], {})
    assert "similar-to:tfm_ref.attention.scaled_dot_product_attention" in flags[0]
