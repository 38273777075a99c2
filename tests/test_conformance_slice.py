"""A fast slice of the ONNX conformance run (`make conformance` runs every node case of the
installed onnx package): cases of the ops issue 7 added and of the core set, which must keep
passing on both targets, run through the same code as the full run."""
import pytest

from tests.conformance import run as conformance

pytestmark = [pytest.mark.check, pytest.mark.facts]  # make check and the full tier: the conformance runner's own path (the fast tier covers the cases in families)

SLICE = [
    "test_abs", "test_add_bcast", "test_matmul_2d", "test_reshape_negative_dim", "test_slice_default_axes",
    "test_nonzero_example", "test_range_float_type_positive_delta", "test_where_long_example",
    "test_if", "test_loop11", "test_scan9_sum",
    "test_unique_sorted_with_axis", "test_compress_0", "test_top_k", "test_onehot_with_axis",
    "test_nonmaxsuppression_two_batches", "test_tile", "test_edge_pad", "test_split_variable_parts_2d_opset18",
    "test_resize_upsample_scales_linear", "test_cumsum_1d_exclusive", "test_scatternd",
    "test_gathernd_example_int32_batch_dim1", "test_gather_elements_1", "test_triu_neg",
    "test_string_concat_broadcasting", "test_string_split_maxsplit", "test_equal_string_broadcast",
    "test_strnormalizer_export_monday_casesensintive_upper", "test_regex_full_match_email_domain",
    "test_image_decoder_decode_png_rgb", "test_image_decoder_decode_jpeg_rgb",
]


@pytest.fixture(scope="module")
def cases():
    conformance._init(None)
    return conformance._CASES


@pytest.mark.parametrize("name", SLICE)
def test_case_passes(name, target, cases, tmp_path):
    assert name in cases, f"{name} is not a node test case of the installed onnx package"
    outcome, detail = conformance.run_case((name, target, str(tmp_path)))
    assert outcome == "pass", f"{name} on {target}: {outcome}: {detail}"


def test_exclusions_give_reasons():
    for name, reason in conformance.exclusions().items():
        assert reason != "(no reason given)", name


def test_known_failures_give_reasons_and_match_cases(cases):
    """Each line explains something real: a reason, a pattern that matches some case, and no
    case that exclusions.txt skips (a case is skipped or explained, never both)."""
    excluded = set(conformance.exclusions())
    for pattern, reason in conformance.known_failures():
        assert reason != "(no reason given)", pattern.pattern
        matched = [n for n in cases if pattern.fullmatch(n)]
        assert matched, f"known_failures.txt: {pattern.pattern!r} matches no case"
        assert not excluded & set(matched), f"{pattern.pattern!r} also matches excluded cases"


def test_explain_accepts_only_named_refusals(monkeypatch, tmp_path):
    """A refusal a line names is explained; a wrong result under the same pattern, or a
    refusal no line names, is not; a line no failure uses is stale."""
    known = tmp_path / "known.txt"
    known.write_text("test_string_.*  # strings are not supported\ntest_gone  # fixed long ago\n")
    monkeypatch.setattr(conformance, "KNOWN_FAILURES", known)
    outcome = {
        ("test_string_concat", "wasm32"): ("unsupported", "input 'x' has dtype STRING"),
        ("test_string_split", "native"): ("wrong", "output 0 differs"),
        ("test_abs", "native"): ("compile error", "something new"),
        ("test_add", "native"): ("pass", ""),
    }
    unexplained, stale = conformance.explain(outcome)
    assert [u.split(":")[0] for u in unexplained] == ["test_abs [native]", "test_string_split [native]"]
    assert stale == ["test_gone  # fixed long ago"]
