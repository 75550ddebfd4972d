"""The same 20 steps give the same losses on 1 device, on 8 simulated devices (data, data×tensor, fsdp) and on two
processes joined by gloo collectives: sharding is a deployment choice, not a change to the maths."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from tests.devices import cpu_devices_env

# one worker runs this module's tests (make test: --dist=loadgroup), so its module fixture is built once
pytestmark = pytest.mark.xdist_group("tests/training/test_sharded_training.py")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _spawn(devices, *args):
  env = cpu_devices_env(devices)
  return subprocess.Popen([sys.executable, "-m", "tests.training.run_steps", "--steps=20", *args], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc):
  out, err = proc.communicate(timeout=600)
  assert proc.returncode == 0, err[-3000:]
  return json.loads(out.strip().splitlines()[-1])


def _losses(result, devices):
  """``{(mesh, model): losses}`` of a process's runs, each checked to have trained on ``devices`` of its mesh."""
  assert result["processes"] == 1 and result["devices"] == 8
  for run in result["runs"]:
    assert run["mesh_devices"] == devices[run["mesh"]], run
  return {(run["mesh"], run["model"]): run["losses"] for run in result["runs"]}


SHARDED = [("8,1,1", "transformer"), ("4,1,2", "transformer"), ("2,2,2", "transformer"), ("8,1,1", "rnn_bahdanau"),
           ("4,1,2", "transformer_copy"), ("4,1,2", "span_qa")]


@pytest.fixture(scope="module")
def single_device():
  """The 1-device losses of each model: a 1,1,1 mesh, in a process of its own."""
  models = ("transformer", "rnn_bahdanau", "span_qa", "transformer_copy")
  losses = _losses(_result(_spawn(8, *(f"--run=1,1,1:{model}" for model in models))), {"1,1,1": 1})
  return {model: losses["1,1,1", model] for (_, model) in losses}


@pytest.fixture(scope="module")
def sharded():
  """Every 8-device run of the module, one after the other in one process (a JAX start-up, not one per run), and the
  checkpoint of a data-parallel run restored onto a data×tensor mesh."""
  result = _result(_spawn(8, *(f"--run={mesh}:{model}" for mesh, model in SHARDED), "--reshard_check"))
  return _losses(result, {"8,1,1": 8, "4,1,2": 8, "2,2,2": 8}), result["reshard_check"]


@pytest.mark.parametrize("mesh", ["8,1,1", "4,1,2", "2,2,2"])
def test_transformer_losses_match_one_device_on_eight_devices(single_device, sharded, mesh):
  np.testing.assert_allclose(sharded[0][mesh, "transformer"], single_device["transformer"], rtol=1e-5, atol=1e-5)


def test_lstm_attention_losses_match_one_device_on_eight_devices(single_device, sharded):
  # the pointer-generator with coverage: its mixture and its coverage loss sharded too
  np.testing.assert_allclose(sharded[0]["8,1,1", "rnn_bahdanau"], single_device["rnn_bahdanau"], rtol=1e-5, atol=1e-5)


def test_transformer_copy_losses_match_one_device_with_the_vocabulary_split_over_the_tensor_axis(single_device,
                                                                                                  sharded):
  losses = sharded[0]["4,1,2", "transformer_copy"]
  np.testing.assert_allclose(losses, single_device["transformer_copy"], rtol=1e-5, atol=1e-5)
  assert losses[-1] < losses[0]


def test_span_qa_losses_match_one_device_on_a_data_by_tensor_mesh(single_device, sharded):
  losses = sharded[0]["4,1,2", "span_qa"]
  np.testing.assert_allclose(losses, single_device["span_qa"], rtol=1e-5, atol=1e-5)
  assert losses[-1] < losses[0]


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_two_processes_with_gloo_match_one_process(single_device):
  port = _free_port()
  procs = [_spawn(2, "--mesh=4,1,1", f"--process_id={i}", "--num_processes=2", f"--port={port}") for i in range(2)]
  results = [_result(p) for p in procs]
  for result in results:
    assert result["processes"] == 2 and result["devices"] == 4 and result["mesh_devices"] == 4
    np.testing.assert_allclose(result["losses"], single_device["transformer"], rtol=1e-5, atol=1e-5)


def test_checkpoint_from_a_data_parallel_mesh_restores_onto_a_data_tensor_mesh(sharded):
  result = sharded[1]
  assert result["step"] == 5 and result["mesh"] == {"data": 2, "fsdp": 1, "tensor": 4}
  assert result["max_diff"] == 0.0
  assert any("tensor" in spec for spec in result["specs"])  # the restored params really are sharded differently
