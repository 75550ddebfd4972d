"""The house's layering, read from the source (imports inside functions included): no import cycle, no import that
points up a layer (:data:`tools.import_graph.LAYERS`), every module placed in a layer. Evaluating and translating a
checkpoint need nothing of training; the config loads no JAX when imported."""

import os
import subprocess
import sys
import textwrap

import pytest

from tools import import_graph

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _problems(root: str = import_graph.ROOT) -> list[str]:
  """Every cycle and upward import of the attnjax tree under ``root``, one line each, naming both modules."""
  files = import_graph.modules(root=root)
  found = import_graph.edges(files)
  graph = import_graph.graph_of(found)
  out = [f"import cycle: {' -> '.join(import_graph.one_cycle(c, graph))}" for c in import_graph.cycles(graph)]
  layers = import_graph.LAYERS
  for e in import_graph.upward(found):
    out.append(f"{e.source} (line {e.line}{', inside a function' if e.in_function else ''}) imports {e.target}: "
               f"layer '{layers[import_graph.layer_of(e.target)][0]}' is above "
               f"'{layers[import_graph.layer_of(e.source)][0]}'")
  out += [f"{m} is in no layer of tools.import_graph.LAYERS" for m in import_graph.unplaced(files)]
  return out


def test_no_import_cycle_and_no_import_up_a_layer_counting_imports_inside_functions():
  assert _problems() == []


def _plant(tmp_path, files: dict[str, str]) -> str:
  """A copy of the attnjax tree with ``files`` (path -> source) written over it."""
  import shutil  # pylint: disable=g-import-not-at-top
  shutil.copytree(os.path.join(ROOT, "attnjax"), tmp_path / "attnjax",
                  ignore=shutil.ignore_patterns("__pycache__"))
  for path, text in files.items():
    with open(tmp_path / path, "a", encoding="utf-8") as f:
      f.write(textwrap.dedent(text))
  return str(tmp_path)


def test_a_planted_function_level_upward_import_is_named(tmp_path):
  root = _plant(tmp_path, {"attnjax/config.py": """

      def _planted():
        from attnjax.report import figures  # pylint: disable=g-import-not-at-top
        return figures
      """})
  problems = _problems(root)
  assert len(problems) == 1, problems
  assert problems[0].startswith("attnjax.config (line ") and "inside a function) imports attnjax.report.figures" \
      in problems[0] and "layer 'report and planning' is above 'config'" in problems[0]


def test_a_planted_cycle_is_named(tmp_path):
  # attnjax.data.squad imports attnjax.data.config_keys at module level: one layer, now a circle
  root = _plant(tmp_path, {"attnjax/data/config_keys.py": """

      def _planted():
        from attnjax.data import squad  # pylint: disable=g-import-not-at-top
        return squad
      """})
  problems = _problems(root)
  assert problems == ["import cycle: attnjax.data.config_keys -> attnjax.data.squad -> attnjax.data.config_keys"]


def test_a_module_without_a_layer_is_named(tmp_path):
  root = _plant(tmp_path, {"attnjax/newthing.py": "X = 1\n"})
  assert _problems(root) == ["attnjax.newthing is in no layer of tools.import_graph.LAYERS"]


@pytest.mark.parametrize("module", ["attnjax.evaluate", "attnjax.translate", "attnjax.inference", "attnjax.scoring"])
def test_evaluation_and_translation_load_no_training_module(module):
  script = (f"import sys, {module}\n"
            "print(','.join(sorted(m for m in sys.modules if m.startswith(('attnjax.training', 'attnjax.report')))))")
  proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                        env=dict(os.environ, JAX_PLATFORMS="cpu"))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.strip() == "", f"{module} loads {proc.stdout.strip()}"


def test_importing_the_config_loads_no_jax_and_nothing_of_the_models_or_the_runtime():
  """An experiment file, the launcher and the report read configs: importing it must not pull in JAX, models or the
  runtime (its validation asks the task families at run time)."""
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
