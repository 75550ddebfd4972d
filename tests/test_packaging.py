"""What someone adopting the package relies on: the license text its metadata names, a citation and a changelog of the
package's version, a console script for every command, and the PEP 561 marker. Read from the files, nothing imported
but the package's version (a wheel of it is built, installed and run by .ci/wheel_check)."""

import ast
import configparser
import hashlib
import os
import re

import yaml

import attnjax

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# sha256 of the Apache License 2.0 as the Apache Software Foundation publishes it (LICENSE-2.0.txt)
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def _read(name: str) -> str:
  with open(os.path.join(ROOT, name), encoding="utf-8") as f:
    return f.read()


def _setup_cfg() -> configparser.ConfigParser:
  cfg = configparser.ConfigParser(interpolation=None)
  cfg.read(os.path.join(ROOT, "setup.cfg"), encoding="utf-8")
  return cfg


def _lines(value: str) -> list[str]:
  """A setup.cfg list: one item a line (or comma-separated), comments and blank lines left out."""
  items = [item.strip() for line in value.splitlines() for item in line.split(",")]
  return [item for item in items if item and not item.startswith("#")]


def _console_scripts() -> dict[str, str]:
  scripts = {}
  for line in _lines(_setup_cfg()["options.entry_points"]["console_scripts"]):
    name, _, target = line.partition("=")
    scripts[name.strip()] = target.strip()
  return scripts


def _module_path(module: str) -> str:
  path = os.path.join(ROOT, *module.split("."))
  return os.path.join(path, "__init__.py") if os.path.isdir(path) else path + ".py"


def _main_guard(tree: ast.Module) -> ast.If | None:
  for node in tree.body:
    if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__" and isinstance(node.test.comparators[0], ast.Constant)
        and node.test.comparators[0].value == "__main__"):
      return node
  return None


def _command_modules() -> list[str]:
  """Every module of the package that runs as a program: an ``if __name__ == "__main__":`` block, or a package's
  ``__main__.py``."""
  modules = []
  for directory, _, files in os.walk(os.path.join(ROOT, "attnjax")):
    for name in sorted(files):
      if not name.endswith(".py"):
        continue
      path = os.path.join(directory, name)
      with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
      if name == "__main__.py" or _main_guard(tree) is not None:
        modules.append(os.path.relpath(path, ROOT)[:-3].replace(os.sep, "."))
  return sorted(modules)


def test_license_is_apache_2_0_as_the_metadata_says():
  text = _read("LICENSE")
  assert "Apache License" in text and "Version 2.0, January 2004" in text
  assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text and "END OF TERMS AND CONDITIONS" in text
  assert hashlib.sha256(text.encode("utf-8")).hexdigest() == APACHE_2_0_SHA256, "LICENSE differs from the standard text"
  metadata = _setup_cfg()["metadata"]
  assert metadata["license"] == "Apache-2.0"
  assert "LICENSE" in _lines(metadata["license_files"]), "the wheel and the sdist must carry LICENSE"


def test_versions_agree():
  assert _setup_cfg()["metadata"]["version"] == attnjax.__version__


def test_citation_cff_is_valid_and_names_the_version():
  citation = yaml.safe_load(_read("CITATION.cff"))
  assert citation["cff-version"] == "1.2.0"
  for key in ("message", "title"):
    assert isinstance(citation[key], str) and citation[key].strip(), key
  assert citation["authors"] == [{"name": "the attnjax authors"}]
  assert str(citation["version"]) == attnjax.__version__
  assert citation["license"] == _setup_cfg()["metadata"]["license"]
  # a repository URL only where the package's metadata names one
  assert "repository-code" not in citation or citation["repository-code"] == _setup_cfg()["metadata"].get("url")


def test_changelog_has_an_entry_for_the_version():
  headings = re.findall(r"^## \[([^\]]+)\]", _read("CHANGELOG.md"), flags=re.MULTILINE)
  assert attnjax.__version__ in headings, f"CHANGELOG.md has no '## [{attnjax.__version__}]' entry"


def test_every_console_script_points_to_a_function_that_takes_no_argument():
  scripts = _console_scripts()
  assert {"attnjax-train", "attnjax-evaluate", "attnjax-translate", "attnjax-generate", "attnjax-export"} <= set(scripts)
  for name, target in scripts.items():
    assert name.startswith("attnjax-"), name
    module, _, function = target.partition(":")
    path = _module_path(module)
    assert os.path.exists(path), f"{name}: no module {module}"
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    defs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert function in defs, f"{name}: {module} has no top-level function {function}"
    args = defs[function].args
    required = len(args.posonlyargs) + len(args.args) - len(args.defaults)
    required += sum(default is None for default in args.kw_defaults)
    assert required == 0, f"{name}: {target} needs arguments; a console script calls it with none"


def test_every_command_module_has_a_console_script():
  """A new command cannot be forgotten: each module that runs as a program has a console script, and its
  ``__main__`` block calls the function the console script calls."""
  targets = {}
  for target in _console_scripts().values():
    module, _, function = target.partition(":")
    targets[module] = function
  missing = []
  for module in _command_modules():
    with open(_module_path(module), encoding="utf-8") as f:
      tree = ast.parse(f.read())
    guard = _main_guard(tree)
    if guard is None:  # a package's __main__.py that hands over to a module of its package: that module's script
      package = module.rpartition(".")[0]
      if not any(m.startswith(package + ".") and m != module for m in targets):
        missing.append(module)
      continue
    if module not in targets:
      missing.append(module)
      continue
    calls = [s.value.func.id for s in guard.body
             if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name)]
    assert calls == [targets[module]], (
        f"{module}: its __main__ block should only call {targets[module]}(), what its console script runs")
  assert not missing, f"command modules without a console script in setup.cfg: {missing}"


def test_py_typed_is_package_data():
  assert os.path.exists(os.path.join(ROOT, "attnjax", "py.typed"))
  assert "py.typed" in _lines(_setup_cfg()["options.package_data"]["attnjax"])
