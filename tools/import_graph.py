"""attnjax's module graph as its source says it, imports inside functions included: cycles and what a command loads.

    python -m tools.import_graph [--from=attnjax.evaluate] [--edges]

reads every module under ``attnjax/`` with :mod:`ast` (nothing is imported), resolves each ``import`` and ``from ...
import`` to the attnjax modules it names, at module level or inside a function, and prints: the number of modules and
edges (function-level ones apart), every import cycle (a strongly connected component of more than one module, with
one cycle through it), every import that points up a layer of :data:`LAYERS`, and the modules reachable from ``--from`` (each entry point's run-time closure: what Python
may load once every function has run). An import at module level is what ``import`` loads; one inside a function is
what the function loads when it runs, which a check of ``sys.modules`` after import does not see.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Edge:
  source: str
  target: str
  line: int
  in_function: bool  # the import sits inside a function (run time), not at module level (import time)


def modules(package: str = "attnjax", root: str = ROOT) -> dict[str, str]:
  """``{module name: file}`` for every module of ``package`` (a package is its ``__init__``)."""
  out = {}
  base = os.path.join(root, *package.split("."))
  for directory, _, files in os.walk(base):
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(directory, name)
        parts = os.path.relpath(path, root)[:-3].split(os.sep)
        if parts[-1] == "__init__":
          parts = parts[:-1]
        out[".".join(parts)] = path
  return out


def _targets(node: ast.AST, module: str, is_package: bool, known: set[str]) -> list[str]:
  """The known modules an import statement names (``from a import b`` names ``a.b`` if it is a module, else ``a``)."""
  if isinstance(node, ast.Import):
    names = [alias.name for alias in node.names]
    return [_longest_known(name, known) for name in names if _longest_known(name, known)]
  assert isinstance(node, ast.ImportFrom)
  if node.level:
    package = module if is_package else module.rpartition(".")[0]
    for _ in range(node.level - 1):
      package = package.rpartition(".")[0]
    base = f"{package}.{node.module}" if node.module else package
  else:
    base = node.module or ""
  out = []
  for alias in node.names:
    candidate = f"{base}.{alias.name}"
    found = candidate if candidate in known else _longest_known(base, known)
    if found:
      out.append(found)
  return out


def _longest_known(name: str, known: set[str]) -> str | None:
  parts = name.split(".")
  for n in range(len(parts), 0, -1):
    if ".".join(parts[:n]) in known:
      return ".".join(parts[:n])
  return None


def edges(files: dict[str, str]) -> list[Edge]:
  """Every import edge between the modules of ``files`` (self-imports and ``TYPE_CHECKING`` blocks left out)."""
  known = set(files)
  out = []
  for module, path in sorted(files.items()):
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    is_package = path.endswith("__init__.py")

    def visit(node: ast.AST, in_function: bool) -> None:
      for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
          continue  # never run
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if isinstance(child, (ast.Import, ast.ImportFrom)):
          for target in _targets(child, module, is_package, known):
            if target != module and not module.startswith(f"{target}."):  # a package's own parents: no edge
              out.append(Edge(module, target, child.lineno, in_function))
        visit(child, inner)

    visit(tree, False)
  return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """The strongly connected components of more than one module (Tarjan), each sorted; sorted by their first name."""
  index, low, stack, on_stack, out = {}, {}, [], set(), []
  counter = [0]

  def connect(v: str) -> None:
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on_stack.add(v)
    for w in sorted(graph.get(v, ())):
      if w not in index:
        connect(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        component.append(w)
        if w == v:
          break
      if len(component) > 1:
        out.append(sorted(component))

  sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
  for v in sorted(graph):
    if v not in index:
      connect(v)
  return sorted(out)


def one_cycle(component: list[str], graph: dict[str, set[str]]) -> list[str]:
  """A shortest cycle through the component's first module, as a path that ends where it starts."""
  start, members = component[0], set(component)
  previous, frontier = {start: None}, [start]
  while frontier:
    nxt = []
    for v in frontier:
      for w in sorted(graph.get(v, ()) & members):
        if w == start:
          path = [v]
          while previous[path[-1]] is not None:
            path.append(previous[path[-1]])
          return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, v, start]
        if w not in previous:
          previous[w] = v
          nxt.append(w)
    frontier = nxt
  return component


# attnjax's layers, bottom first: a module may import its own layer and the layers below, never one above. A module
# belongs to the layer of its longest prefix here (a package, or a module of its own); "attnjax", the package's own
# __init__, is itself only.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("attnjax.fs", "attnjax.tokens", "attnjax.progress", "attnjax.targets", "attnjax.visualize",
              "attnjax.program_loader")),
    ("data, metrics, kernels", ("attnjax.data", "attnjax.metrics", "attnjax.kernels")),
    ("layers", ("attnjax.layers", "attnjax.demo")),
    ("models", ("attnjax.models", "attnjax.recipes")),
    ("runtime, transfer", ("attnjax.runtime", "attnjax.transfer")),
    ("decoding and prediction", ("attnjax.decoding", "attnjax.generation", "attnjax.inference")),
    ("task families", ("attnjax.families",)),
    ("config", ("attnjax.config",)),
    ("evaluation", ("attnjax.trained", "attnjax.scoring", "attnjax.cli", "attnjax.serving")),
    ("training", ("attnjax.training",)),
    ("report and planning", ("attnjax.report", "attnjax.compile", "attnjax.baselines")),
    ("analysis", ("attnjax.analysis", "attnjax.quickstart")),
    ("commands", ("attnjax.train", "attnjax.evaluate", "attnjax.translate", "attnjax.generate", "attnjax.sts",
                  "attnjax.export", "attnjax.export_program")),
    ("the package's own names", ("attnjax",)),  # attnjax.load, imported on first use
)


def layer_of(module: str, layers=LAYERS) -> int | None:
  """The index in ``layers`` of the module's longest listed prefix; None when none lists it."""
  best, rank = -1, None
  for i, (_, prefixes) in enumerate(layers):
    for prefix in prefixes:
      inside = module.startswith(f"{prefix}.") and "." in prefix
      if (module == prefix or inside) and len(prefix) > best:
        best, rank = len(prefix), i
  return rank


def upward(all_edges: list[Edge], layers=LAYERS) -> list[Edge]:
  """The edges from a module to one of a higher layer (function-level ones included)."""
  return [e for e in all_edges if layer_of(e.source, layers) is not None and layer_of(e.target, layers) is not None
          and layer_of(e.target, layers) > layer_of(e.source, layers)]


def unplaced(files: dict[str, str], layers=LAYERS) -> list[str]:
  """The modules no layer lists."""
  return sorted(m for m in files if layer_of(m, layers) is None)


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
  seen, todo = {start}, [start]
  while todo:
    for w in graph.get(todo.pop(), ()):
      if w not in seen:
        seen.add(w)
        todo.append(w)
  return seen


def graph_of(all_edges: list[Edge], *, functions: bool = True) -> dict[str, set[str]]:
  graph: dict[str, set[str]] = {}
  for e in all_edges:
    if functions or not e.in_function:
      graph.setdefault(e.source, set()).add(e.target)
  return graph


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--from", dest="starts", action="append", default=None,
                      help="an entry point whose run-time closure to list (repeatable); default: attnjax.evaluate")
  parser.add_argument("--edges", action="store_true", help="also print every function-level edge")
  args = parser.parse_args(argv)
  files = modules()
  found = edges(files)
  graph = graph_of(found)
  inside = [e for e in found if e.in_function]
  print(f"{len(files)} modules, {len({(e.source, e.target) for e in found})} import edges "
        f"({len({(e.source, e.target) for e in inside})} only or also inside functions, from {len(inside)} statements)")
  for label, g in (("import time", graph_of(found, functions=False)), ("run time", graph)):
    components = cycles(g)
    print(f"\ncycles at {label}: {len(components)}")
    for component in components:
      print(f"  {len(component)} modules: {' -> '.join(one_cycle(component, g))}")
  up = upward(found)
  print(f"\nimports that point up a layer: {len(up)}")
  for e in up:
    print(f"  {e.source}:{e.line} ({LAYERS[layer_of(e.source)][0]}) -> {e.target} ({LAYERS[layer_of(e.target)][0]})"
          f"{' inside a function' if e.in_function else ''}")
  for module in unplaced(files):
    print(f"  no layer lists {module}")
  for start in args.starts or ["attnjax.evaluate"]:
    closure = sorted(reachable(graph, start) - {start})
    groups = sorted({m.split(".")[1] if m.count(".") else m for m in closure})
    print(f"\n{start} may load {len(closure)} attnjax modules at run time: {', '.join(groups)}")
    for bad in ("attnjax.training", "attnjax.report"):
      hits = [m for m in closure if m == bad or m.startswith(f"{bad}.")]
      if hits:
        print(f"  of {bad}: {', '.join(hits)}")
  if args.edges:
    print("\nfunction-level edges:")
    for e in inside:
      print(f"  {e.source}:{e.line} -> {e.target}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
