"""tools/import_graph reads imports from the source, inside functions too: checked on a small package written here."""

from tools import import_graph


def test_function_level_imports_close_a_cycle_that_import_time_does_not_see(tmp_path):
  package = tmp_path / "pkg"
  (package / "sub").mkdir(parents=True)
  (package / "__init__.py").write_text("")
  (package / "sub" / "__init__.py").write_text("from . import c\n")
  (package / "a.py").write_text("from pkg import b\nimport pkg.sub.c as c\n")
  (package / "b.py").write_text("import os\n\ndef f():\n  from .a import name  # a name of pkg.a, not a module\n")
  (package / "sub" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n  from pkg import a\n"
                                        "from ..b import f\n")
  files = import_graph.modules("pkg", root=str(tmp_path))
  assert sorted(files) == ["pkg", "pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c"]
  found = import_graph.edges(files)
  assert sorted((e.source, e.target, e.in_function) for e in found) == [
      ("pkg.a", "pkg.b", False), ("pkg.a", "pkg.sub.c", False), ("pkg.b", "pkg.a", True),
      ("pkg.sub", "pkg.sub.c", False), ("pkg.sub.c", "pkg.b", False)]  # TYPE_CHECKING's import is never run
  assert import_graph.cycles(import_graph.graph_of(found, functions=False)) == []
  run_time = import_graph.graph_of(found)
  assert import_graph.cycles(run_time) == [["pkg.a", "pkg.b", "pkg.sub.c"]]  # a -> b -> a and a -> c -> b -> a
  assert import_graph.one_cycle(["pkg.a", "pkg.b", "pkg.sub.c"], run_time) == ["pkg.a", "pkg.b", "pkg.a"]
  assert import_graph.reachable(run_time, "pkg.sub") == {"pkg.sub", "pkg.sub.c", "pkg.b", "pkg.a"}
