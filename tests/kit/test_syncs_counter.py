"""The sync counter's own machinery: the compute device and CUDA's debug mode as asked, torch.cuda.synchronize counted
and put back, note_sync, calls run unchanged inside the block, and the call forms the classifier must read (a mask in a
tuple index, a device given by keyword, meta, a pinned non-blocking copy to another tensor's device, repeat_interleave
of counts alone)."""
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
