"""What the probe child drops from a row (svcposture/probe/scrub.py): a string from a reply that shares
eight or more consecutive characters with any secret it holds, whole or in pieces over several names."""
from __future__ import annotations

from svcposture.probe.scrub import MIN_SECRET_PART, scrub_row, secret_runs, shares_a_run

SECRET = "gho_16C7e42F292c6912E7710c838347Ae178B4a"


def test_a_run_of_a_secret_is_found_and_a_shorter_one_is_not():
    runs = secret_runs([SECRET, None, "short"])
    assert shares_a_run("xx" + SECRET[10:18] + "yy", runs)
    assert not shares_a_run("xx" + SECRET[10:10 + MIN_SECRET_PART - 1] + "yy", runs)
    assert not shares_a_run(None, runs) and not shares_a_run(12345678, runs)
    assert secret_runs(["abc"]) == frozenset()


def test_a_row_loses_the_names_and_plan_word_that_carry_a_piece_of_a_secret():
    row = {"planType": "pro-" + SECRET[:9], "extraWindows": [{"name": SECRET[5:20]}, {"name": "premium_interactions"}],
           "codeReview": [{"name": "x" + SECRET[-8:]}], "error": None}
    runs = scrub_row(row, [SECRET], ("extraWindows", "codeReview"))
    assert row["planType"] is None and [w["name"] for w in row["extraWindows"]] == [None, "premium_interactions"]
    assert row["codeReview"][0]["name"] is None and shares_a_run(SECRET, runs)


def test_a_row_without_a_piece_of_a_secret_is_left_as_it_is():
    row = {"planType": "individual_pro", "extraWindows": [{"name": "chat"}, "not a window"]}
    scrub_row(row, [SECRET])
    assert row == {"planType": "individual_pro", "extraWindows": [{"name": "chat"}, "not a window"]}
