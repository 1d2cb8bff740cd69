import torch

from perflab.kit.profiling import profile


def _inner(x):
    s = 0.0
    for i in range(3000):
        s += x[i % 100].item()
        torch.repeat_interleave(torch.arange(64), torch.full((64,), 3))
    return s


def _outer():
    return _inner(torch.randn(100))


def test_profile_writes_html_and_text_and_ranks_frames(tmp_path):
    prof = profile(_outer, out_dir=tmp_path, name="demo", interval=0.0005)
    assert prof.html_path.read_text().lstrip().lower().startswith("<!doctype html")
    assert "_inner" in prof.text_path.read_text()
    t = prof.table
    assert {"function", "file", "seconds", "share", "self_seconds"} <= set(t.columns)
    assert prof.share("_outer") > 0.9 and prof.share("_inner") > 0.9   # inclusive shares
    assert 0 < prof.share("torch.repeat_interleave") < prof.share("_inner")
    assert prof.share("no_such_function") == 0.0
    assert isinstance(prof.result, float)
