"""The sync counter's own machinery: the compute device and CUDA's debug mode as asked, torch.cuda.synchronize counted
and put back, note_sync, calls run unchanged inside the block, and the call forms the classifier must read (a mask in a
tuple index, a device given by keyword, meta, a pinned non-blocking copy to another tensor's device, repeat_interleave
of counts alone)."""
import pytest
import torch

from perflab.kit.syncs import count_host_syncs, note_sync, pin_memory


def test_the_compute_device_is_the_one_asked_for():
    x = torch.ones(3)
    with count_host_syncs("cpu") as cpu_run:
        x.to("cpu")                     # a CPU run: the host is the compute device, the copy is the GPU run's copy
    with count_host_syncs("cuda") as gpu_run:
        x.to("cpu")                     # a GPU run: a copy that stays on the host crosses nothing
    assert (cpu_run.device, gpu_run.device) == (torch.device("cpu"), torch.device("cuda"))
    assert (cpu_run.total, gpu_run.total) == (1, 0)
    assert (cpu_run.cuda_debug, gpu_run.cuda_debug, cpu_run.cuda_debug_warnings) == (False, False, 0)   # no CUDA


def test_cuda_debug_mode_by_default_only_where_the_device_is_cuda(monkeypatch):
    modes = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    assert count_host_syncs().device == torch.device("cuda")             # the default: CUDA where there is one
    assert [count_host_syncs(d, cuda_debug=flag).cuda_debug for d, flag in
            (("cuda", None), ("cpu", None), ("cuda", False), ("cpu", True))] == [True, False, False, True]
    with count_host_syncs("cuda"):
        pass
    assert modes == ["warn", 0]                                          # warn inside, the previous mode after


def test_torch_cuda_synchronize_is_counted_passed_on_and_put_back(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: calls.append((a, k)))
    original = torch.cuda.synchronize
    with count_host_syncs("cpu", cuda_debug=False) as c:
        torch.cuda.synchronize("cuda:0")
        torch.cuda.synchronize(device="cuda:1")
    assert c.by_op == {"synchronize": 2} and calls == [(("cuda:0",), {}), ((), {"device": "cuda:1"})]
    assert torch.cuda.synchronize is original


def test_note_sync_adds_to_every_active_counter_and_repr_says_the_counts():
    with count_host_syncs("cpu") as c:
        note_sync("barrier")
        note_sync("barrier")
    note_sync("barrier")                                                 # outside: nobody counts it
    assert c.by_op == {"barrier": 2}
    assert repr(c) == "HostSyncCounter(total=2, by_op={'barrier': 2})"


def test_calls_inside_the_block_keep_their_keyword_arguments():
    x = torch.arange(6.0).view(2, 3)
    with count_host_syncs("cpu") as c:
        s = torch.sum(x, dim=0, keepdim=True)
    assert s.tolist() == [[3.0, 5.0, 7.0]] and c.total == 0


def test_the_call_forms_the_classifier_reads():
    x, y = torch.randn(4, 3), torch.zeros(2)
    mask = torch.tensor([True, False, True, False])
    with count_host_syncs("cpu") as c:
        x[mask, :]                                  # a bool mask inside a tuple index
        x.to(device="cpu")                          # the device by keyword
        x.to("meta")                                # meta holds no data: nothing crosses
        pin_memory(x).to(y, True)                   # to another tensor's device, pinned and non-blocking: async
        x.to(y, True)                               # the same from pageable memory: blocking
        torch.repeat_interleave(torch.tensor([1, 2]))   # counts alone: the output size is read
    assert c.by_op == {"__getitem__[bool mask]": 1, "to(device) from host": 2, "repeat_interleave": 1}, c.by_op


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")
def test_host_data_given_by_keyword_is_counted_as_given_by_position():
    # a mutant (len(args) >= 1 for new_tensor) showed new_tensor(data=...) went uncounted: the same copy from the host
    x = torch.zeros(2)
    with count_host_syncs("cpu") as c:
        x.new_tensor(data=[1, 2])
        torch.tensor(data=[1, 2], device=x.device)
        torch.asarray(obj=[1.0], device=x.device)
        torch.as_tensor(data=x, device=x.device)        # a tensor already: no host data
        x.new_tensor(x)
    assert c.by_op == {"tensor(host list) -> device": 3}, c.by_op


def test_the_conditional_syncs_in_their_keyword_forms():
    x = torch.randn(6)
    mask, counts = x > 0, torch.tensor([1, 2, 0, 1, 1, 2])
    with count_host_syncs("cpu") as c:
        torch.where(mask)                                      # where(cond): the indices' count is read
        torch.where(mask, x, 0.0)                              # three arguments: no sync
        torch.repeat_interleave(x, repeats=counts)             # repeats by keyword
        torch.repeat_interleave(x, repeats=counts, output_size=7)   # the size given: no sync
        x.clone().index_put_((mask,), values=torch.tensor(0.0))     # a bool mask, the values by keyword
        x.clone().index_put_((torch.tensor([0, 2]),), torch.tensor(1.0))   # integer indices: no sync
        x.clone().index_put_((torch.tensor([1]),), torch.tensor(2.0))
        x.clone().index_put_((torch.tensor([3]),), torch.tensor(2.0))     # 3 integer-index calls, 2 bool-mask ones
        x.clone().index_put_(indices=(mask,), values=torch.tensor(0.0))    # the indices by keyword too
        torch.repeat_interleave(input=x, repeats=counts)                    # every argument by keyword
        torch.repeat_interleave(torch.zeros(6, 0), repeats=counts, dim=0)   # the repeats, not the (empty) input
    assert c.by_op == {"where(cond)": 1, "repeat_interleave": 3, "index_put[bool mask]": 2}, c.by_op


class _OnGPU(torch.Tensor):
    """A host tensor that says it lives on CUDA: the classifier reads only .device (no CUDA needed here)."""
    device = torch.device("cuda")


def test_copies_and_cuda_calls_between_host_and_device_are_classified_by_direction():
    from perflab.kit.syncs import _classify

    host, gpu = torch.zeros(2), torch.zeros(2).as_subclass(_OnGPU)
    pinned, cuda = pin_memory(torch.zeros(2)), torch.device("cuda")
    copy_, to_cuda = torch.Tensor.copy_, torch.Tensor.cuda
    assert [_classify(copy_, args, kw, cuda) for args, kw in [
        ((host, gpu), {}),                       # device -> host: waits for the device
        ((gpu, host), {}),                       # pageable host -> device: blocking
        ((gpu, host, True), {}),                 # non_blocking from pageable memory is still blocking
        ((gpu, pinned, True), {}),               # pinned and non-blocking: asynchronous
        ((gpu, pinned), {"non_blocking": True}),
        ((host, host), {}), ((torch.zeros(2, device="meta"), host), {}),   # nothing crosses
        ((gpu,), {"src": host}), ((host,), {"src": gpu}),                   # the source by keyword
        ((gpu,), {"src": pinned, "non_blocking": True}),
    ]] == ["copy_(to cpu)", "copy_(from host)", "copy_(from host)", None, None, None, None,
           "copy_(from host)", "copy_(to cpu)", None]
    assert [_classify(to_cuda, args, kw, cuda) for args, kw in [
        ((host,), {}), ((pinned,), {"non_blocking": True}), ((pinned, None, True), {}), ((host, None, True), {}),
    ]] == ["to(device) from host", None, None, "to(device) from host"]
    assert _classify(torch.Tensor.add, (host, gpu), {}, cuda) is None


def test_host_operands_are_counted_per_call_and_the_counter_reads_back():
    from perflab.kit.syncs import assert_no_host_syncs, count_host_operands

    x = torch.zeros(4, device="meta")
    with count_host_operands() as c:
        x + torch.tensor(1.0)                              # a 0-dim host tensor: a transfer on a device
        x + torch.tensor(1.0)                              # a 0-dim host tensor: a transfer on a device
    assert c.by_op == {"add": 2} and repr(c) == "HostOperandCounter(total=2, by_op={'add': 2})"
    try:                                                   # an error inside the block is the block's, not a sync
        with assert_no_host_syncs("cpu"):
            torch.ones(1).item()
            raise KeyError("inside")
    except KeyError:
        pass


def test_repeat_interleave_by_a_tensor_of_one_repeat_or_none_is_a_sync_too():
    """The output's size is read from the device for a tensor of repeats of any size: a 0-d or one-element one (its
    value times the input's size) and an empty one, as meta shows (it refuses each without output_size); repeats
    given as a Python int, or the size given, are no sync. (The counter counted only more than one repeat: a 0-d
    tensor's sync went unreported.)"""
    x = torch.arange(3)
    with count_host_syncs("cpu") as c:
        torch.repeat_interleave(x, torch.tensor(2))
        x.repeat_interleave(torch.tensor([2]))
        torch.repeat_interleave(torch.zeros(0), torch.tensor([], dtype=torch.long))
        torch.repeat_interleave(x, 2)                                   # an int: the size is known
        torch.repeat_interleave(x, torch.tensor(2), output_size=6)      # the size given
    assert c.by_op == {"repeat_interleave": 3}, c.by_op
    for r in (torch.tensor(2), torch.tensor([2]), torch.tensor([], dtype=torch.long)):
        with pytest.raises(RuntimeError, match="without output_size"):   # meta agrees: each needs its size read
            torch.repeat_interleave(torch.ones(0 if r.numel() == 0 else 3, device="meta"), r.to("meta"))
