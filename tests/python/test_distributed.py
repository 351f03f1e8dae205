"""test_distributed.py - the checks of checks.py on 2 and 3 CPU processes
joined by gloo (tpla's cross-process host executor underneath): a peer
that exits (an error, not a hang), Newton-Schulz vs a float64 NumPy reference, error translation and bad
inputs, the overlapped GEMMs and the tensor-parallel layers vs
torch.nn.Linear (forward, backward, gathered-dy reuse), Muon vs a plain
PyTorch Muon, and a small MLP trained under tensor parallelism."""
import pytest

import checks
import dist_util

WORLDS = [2, 3]


@pytest.mark.parametrize("world", WORLDS)
def test_communicator(world):
    dist_util.run(world, checks.check_communicator, "cpu")


@pytest.mark.parametrize("world", WORLDS)
def test_peer_exit_is_an_error_not_a_hang(world):
    res = dist_util.run(world, checks.check_peer_exit, "cpu", timeout=120)
    assert res[-1] is None and all(r is not None for r in res[:-1])
    print(res[0])


@pytest.mark.parametrize("world", WORLDS)
def test_newton_schulz_matches_numpy(world):
    errs = dist_util.run(world, checks.check_ns_numerics, "cpu")[0]
    print("relative max errors:", errs)


@pytest.mark.parametrize("world", WORLDS)
def test_newton_schulz_errors(world):
    dist_util.run(world, checks.check_ns_errors, "cpu")


@pytest.mark.parametrize("world", WORLDS)
def test_overlap_ops(world):
    dist_util.run(world, checks.check_overlap_ops, "cpu")


@pytest.mark.parametrize("world", WORLDS)
def test_parallel_layers_match_linear(world):
    print(dist_util.run(world, checks.check_layers_vs_linear, "cpu")[0])


@pytest.mark.parametrize("world", WORLDS)
def test_parallel_layers_initialize_one_full_matrix(world):
    dist_util.run(world, checks.check_layer_init, "cpu")


@pytest.mark.parametrize("world", WORLDS)
def test_muon_matches_reference(world):
    print(dist_util.run(world, checks.check_muon_vs_reference, "cpu")[0])


@pytest.mark.parametrize("world", WORLDS)
def test_mlp_training_matches_single_process(world):
    print(dist_util.run(world, checks.check_mlp_training, "cpu")[0])
