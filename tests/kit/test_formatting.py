

def test_a_count_of_one_is_in_the_singular():
    # 03's card read "1 graphs per new tail" (grading, 2026-12-03); units of measure and ratios are left as they are
    from perflab.kit.formatting import value_text, with_unit

    assert with_unit(1, "graphs per new tail") == "1 graph per new tail"
    assert value_text(1, 1, 1, "launches per step") == "1 launch per step"
    assert with_unit(2, "graphs") == "2 graphs" and with_unit(1, "syncs per call") == "1 sync per call"
    assert with_unit(1, "ms") == "1 ms" and with_unit(1, "s/epoch") == "1 s/epoch" and with_unit(1, "x") == "1x"
    assert with_unit(1.0, "coordinates", measured=True) == "1.00 coordinates"   # a measured 1.00 is no count
    assert with_unit(1.96, "x less activation memory", measured=True) == "1.96x less activation memory"
