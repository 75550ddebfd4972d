"""The house's layering, as the architecture describes it: evaluating and translating a checkpoint need nothing of
training (its optimiser, steps, loop, watchdog); the mesh, the sharding rules and checkpoint reading live below
both, in attnjax.runtime."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("module", ["attnjax.evaluate", "attnjax.translate", "attnjax.inference", "attnjax.scoring"])
def test_evaluation_and_translation_load_no_training_module(module):
  script = (f"import sys, {module}\n"
            "print(','.join(sorted(m for m in sys.modules if m.startswith('attnjax.training'))))")
  proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                        env=dict(os.environ, JAX_PLATFORMS="cpu"))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.strip() == "", f"{module} loads {proc.stdout.strip()}"


def test_the_runtime_imports_nothing_of_training_and_training_reaches_it_directly():
  import attnjax.runtime  # pylint: disable=g-import-not-at-top
  root = os.path.dirname(attnjax.runtime.__file__)
  for name in sorted(os.listdir(root)):
    if name.endswith(".py"):
      text = open(os.path.join(root, name), encoding="utf-8").read()
      assert "attnjax.training" not in text.replace("of :mod:`attnjax.training`", ""), name


def test_the_config_imports_nothing_above_the_data_layer():
  """An experiment file, the launcher and the report read configs: that must not pull in JAX, models or runtime."""
  script = ("import sys, attnjax.config\n"
            "print(','.join(sorted(m for m in sys.modules if m.startswith('attnjax.') and not m.startswith("
            "('attnjax.data', 'attnjax.fs', 'attnjax.tokens', 'attnjax.config')))))\n"
            "print(','.join(m for m in ('jax', 'flax', 'optax', 'orbax') if m in sys.modules))")
  proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                        env=dict(os.environ, JAX_PLATFORMS="cpu"))
  assert proc.returncode == 0, proc.stderr[-2000:]
  above, frameworks = proc.stdout.split("\n")[:2]
  assert above == "", f"attnjax.config loads {above}"
  assert frameworks == "", f"attnjax.config loads {frameworks}"
