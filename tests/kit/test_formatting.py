import dataclasses


def test_a_count_of_one_is_in_the_singular():
    # 03's card read "1 graphs per new tail" (grading, 2026-12-03); units of measure and ratios are left as they are
    from perflab.kit.formatting import value_text, with_unit

    assert with_unit(1, "graphs per new tail") == "1 graph per new tail"
    assert value_text(1, 1, 1, "launches per step") == "1 launch per step"
    assert with_unit(2, "graphs") == "2 graphs" and with_unit(1, "syncs per call") == "1 sync per call"
    assert with_unit(1, "ms") == "1 ms" and with_unit(1, "s/epoch") == "1 s/epoch" and with_unit(1, "x") == "1x"
    assert with_unit(1.0, "coordinates", measured=True) == "1.00 coordinates"   # a measured 1.00 is no count
    assert with_unit(1.96, "x less activation memory", measured=True) == "1.96x less activation memory"


def test_a_decisions_blocks_read_in_seconds_past_a_second():
    from perflab.kit.verdicts import Decision

    d = Decision("holds", 3.4, 3.1, 3.8, 8, 44.1, 0.99, "speedup", calls=(1, 5), block=2.38)
    assert "(blocks of 2.38 s)" in d.how and "e+03" not in d.how
    assert "(blocks of 5 ms)" in dataclasses.replace(d, block=0.005).how
