import pytest
import torch

from perflab.kit.env import device_kind, fingerprint, pick_device


def test_auto_and_cpu():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a host without CUDA")
@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "CUDA:1"])
def test_cuda_on_a_cpu_host_is_a_clear_error(spec):
    with pytest.raises(ValueError, match="no CUDA device is visible"):
        pick_device(spec)


@pytest.mark.parametrize("spec", ["gpu", "tpu", "", 3])
def test_unknown_device_names_the_choices(spec):
    with pytest.raises(ValueError, match="device"):
        pick_device(spec)


def test_fingerprint_has_what_a_result_needs():
    fp = fingerprint("cpu")
    for key in ("time", "host", "torch", "cuda", "device", "device_name", "commit", "dirty", "torch_threads"):
        assert key in fp
    assert fp["torch"] == torch.__version__ and fp["device"] == "cpu"
    assert device_kind("cpu") == "cpu"


def _git(cwd, *args):
    import subprocess

    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": __import__("os").environ["PATH"]})


def test_a_copy_without_git_inside_another_repository_is_not_stamped_with_its_commit(tmp_path, monkeypatch):
    # a GPU host's work folder: the project copied without .git into a folder another repository holds
    from perflab.kit.env import git_commit

    outer = tmp_path / "host-repo"
    copy = outer / "w"
    copy.mkdir(parents=True)
    (outer / "README").write_text("another project\n")
    _git(outer, "init", "-q")
    _git(outer, "add", "README")
    _git(outer, "commit", "-qm", "theirs")
    (copy / "pyproject.toml").write_text('[project]\nname = "perflab"\n')
    monkeypatch.delenv("PERFLAB_COMMIT", raising=False)
    git_commit.cache_clear()
    assert git_commit(str(copy)) == {"commit": None, "dirty": None}
    monkeypatch.setenv("PERFLAB_COMMIT", "1a70d9c-dirty")   # what tools/gpu-session.sh passes along
    git_commit.cache_clear()
    assert git_commit(str(copy)) == {"commit": "1a70d9c", "dirty": True}
    _git(outer, "add", "w/pyproject.toml")                   # the project tracked by the repository it sits in
    _git(outer, "commit", "-qm", "ours")
    git_commit.cache_clear()
    got = git_commit(str(copy))
    assert len(got["commit"]) == 40 and got["dirty"] is False
    git_commit.cache_clear()


def test_the_commit_at_a_commands_start_wins_over_the_tree_it_rewrites(monkeypatch):
    from perflab.kit.env import git_commit

    monkeypatch.setenv("PERFLAB_COMMIT_AT_START", "1a70d9c")
    git_commit.cache_clear()
    assert git_commit() == {"commit": "1a70d9c", "dirty": False}
    monkeypatch.setenv("PERFLAB_COMMIT_AT_START", "1a70d9c-dirty")
    git_commit.cache_clear()
    assert git_commit() == {"commit": "1a70d9c", "dirty": True}
    monkeypatch.setenv("PERFLAB_COMMIT_AT_START", "not a commit")   # ignored: the checkout's own state
    git_commit.cache_clear()
    assert git_commit()["commit"] != "not a commit"
    git_commit.cache_clear()
