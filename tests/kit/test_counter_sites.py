"""The kit's counters with the user's line (what perflab.kit.diagnose is built on): syncs and launches record their
sites, compiles their reasons and graph breaks; the sites change no count."""
import sys

import torch

from perflab.kit.compiles import count_compiles
from perflab.kit.frames import Site, boundary, library, short_path, user_stack
from perflab.kit.launches import count_launches
from perflab.kit.syncs import count_host_syncs

HERE = __file__


def _line(fn, text: str) -> int:
    """The line of `fn`'s source holding `text`."""
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, t in enumerate(lines) if text in t)


def _work(x):
    s = 0.0
    for i in range(5):
        s += x[i].item()
    y = (x * 2).sum()
    return s + float(y)


def test_syncs_record_the_op_and_the_users_line_and_count_the_same():
    x = torch.arange(8.0)
    with count_host_syncs("cpu") as plain:
        _work(x)
    with count_host_syncs("cpu", sites=True) as sited:
        _work(x)
    assert sited.by_op == plain.by_op
    sites = sited.sites()
    assert sites[("item", Site(HERE, _line(_work, "x[i].item()"), "_work"))] == 5
    assert sites[("__float__", Site(HERE, _line(_work, "float(y)"), "_work"))] == 1
    assert sum(sites.values()) == sited.total


def test_an_optimizers_step_counter_reads_are_kept_apart_as_host_reads():
    lin = torch.nn.Linear(4, 4)
    opt = torch.optim.Adam(lin.parameters(), foreach=False)
    for _ in range(2):
        lin(torch.ones(2, 4)).sum().backward()
        with count_host_syncs("cpu", sites=True) as c:
            opt.step()
    assert c.total == 2 and c.by_op["item"] == 2        # the kit's count is unchanged
    assert not c.by_site and sum(c.host_reads.values()) == 2


def test_launch_sites_credit_every_op_counted_to_its_line():
    x = torch.arange(8.0)
    with count_launches("cpu") as plain:
        _work(x)
    with count_launches("cpu", sites=True) as sited:
        _work(x)
    assert sited.total == plain.total and sited.by_op == plain.by_op   # the raw reader counts what torch's does
    assert sum(sited.by_site.values()) == sited.total
    per_line = sited.sites()
    assert per_line[Site(HERE, _line(_work, "x[i].item()"), "_work")] == 10   # select + item, 5 times
    assert per_line[Site(HERE, _line(_work, "(x * 2).sum()"), "_work")] == 2


def test_what_dynamo_runs_while_compiling_is_not_counted():
    f = torch.compile(lambda t: (t * 2).sin().sum(), backend="eager")
    x = torch.ones(4)
    f(x)
    with count_launches("cpu") as plain:
        f(x)
    with count_launches("cpu", sites=True) as sited:   # the mode makes dynamo compile again, inside the block
        f(x)
    assert sited.total == plain.total, (sited.by_op, plain.by_op)


def _shape(t):
    y = t + 1
    print("", end="")
    return y * 2


def test_compiles_keep_the_callers_line_the_recompile_reason_and_the_graph_breaks():
    f = torch.compile(_shape, backend="eager", dynamic=False)
    with count_compiles(details=True) as cc:
        for n in (3, 3, 5):
            f(torch.ones(n))  # the call
    call = _line(test_compiles_keep_the_callers_line_the_recompile_reason_and_the_graph_breaks, "# the call")
    first = cc.events[0]
    assert first.stack[0] == Site(HERE, call, first.stack[0].function) and not first.recompile
    assert first.code.function == "_shape" and first.seconds > 0
    reasons = cc.reasons()   # the function's frame and the resume function after its break, each recompiled
    assert reasons["tensor 't' size mismatch at index 0. expected 3, actual 5"] == 1, reasons
    breaks = {(b.site.line, b.reason) for b in cc.graph_breaks}
    assert any(line == _line(_shape, "print(") and "print" in r for line, r in breaks), breaks


def test_the_users_stack_skips_torch_and_the_kit_and_stops_at_a_boundary(tmp_path):
    def inner():
        return user_stack()

    stack = inner()
    assert stack[0].function.endswith("inner") and stack[0].file == HERE
    with boundary(sys._getframe()):
        assert inner() == stack[:1]        # the test's own frame and its callers are cut
    assert short_path(HERE).endswith("test_counter_sites.py")
    with library(HERE):
        assert all(s.file != HERE for s in inner())
