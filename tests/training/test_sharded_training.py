"""The same 20 steps give the same losses on 1 device, on 8 simulated devices (data, data×tensor, fsdp) and on two
processes joined by gloo collectives: sharding is a deployment choice, not a change to the maths."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

# one worker runs this module's tests (make test: --dist=loadgroup), so its module fixture is built once
pytestmark = pytest.mark.xdist_group("tests/training/test_sharded_training.py")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(mesh, devices, model="transformer", extra=(), env_extra=None, wait=True):
  env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
  env.update(env_extra or {})
  cmd = [sys.executable, "-m", "tests.training.run_steps", f"--mesh={mesh}", "--steps=20", f"--model={model}",
         *extra]
  proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  return proc if not wait else _result(proc)


def _result(proc):
  out, err = proc.communicate(timeout=600)
  assert proc.returncode == 0, err[-3000:]
  return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def single_device():
  return {model: _run("1,1,1", 8, model)["losses"]
          for model in ("transformer", "rnn_bahdanau", "span_qa", "transformer_copy")}


@pytest.mark.parametrize("mesh", ["8,1,1", "4,1,2", "2,2,2"])
def test_transformer_losses_match_one_device_on_eight_devices(single_device, mesh):
  result = _run(mesh, 8)
  assert result["devices"] == 8
  np.testing.assert_allclose(result["losses"], single_device["transformer"], rtol=1e-5, atol=1e-5)


def test_lstm_attention_losses_match_one_device_on_eight_devices(single_device):
  # the pointer-generator with coverage: its mixture and its coverage loss sharded too
  result = _run("8,1,1", 8, "rnn_bahdanau")
  np.testing.assert_allclose(result["losses"], single_device["rnn_bahdanau"], rtol=1e-5, atol=1e-5)


def test_transformer_copy_losses_match_one_device_with_the_vocabulary_split_over_the_tensor_axis(single_device):
  result = _run("4,1,2", 8, "transformer_copy")
  np.testing.assert_allclose(result["losses"], single_device["transformer_copy"], rtol=1e-5, atol=1e-5)
  assert result["losses"][-1] < result["losses"][0]


def test_span_qa_losses_match_one_device_on_a_data_by_tensor_mesh(single_device):
  result = _run("4,1,2", 8, "span_qa")
  np.testing.assert_allclose(result["losses"], single_device["span_qa"], rtol=1e-5, atol=1e-5)
  assert result["losses"][-1] < result["losses"][0]


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_two_processes_with_gloo_match_one_process(single_device):
  port = _free_port()
  procs = [_run("4,1,1", 2, extra=(f"--process_id={i}", "--num_processes=2", f"--port={port}"), wait=False)
           for i in range(2)]
  results = [_result(p) for p in procs]
  for result in results:
    assert result["processes"] == 2 and result["devices"] == 4
    np.testing.assert_allclose(result["losses"], single_device["transformer"], rtol=1e-5, atol=1e-5)


def test_checkpoint_from_a_data_parallel_mesh_restores_onto_a_data_tensor_mesh():
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
  proc = subprocess.run([sys.executable, "-m", "tests.training.run_steps", "--reshard_check"], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result["step"] == 5 and result["mesh"] == {"data": 2, "fsdp": 1, "tensor": 4}
  assert result["max_diff"] == 0.0
  assert any("tensor" in spec for spec in result["specs"])  # the restored params really are sharded differently
