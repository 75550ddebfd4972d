"""``make mutants`` can only kill a mutant whose original line is still in the code: each mutant's original occurs
exactly once in its file (a refactor that moves or rewrites the line must move the mutant with it), and the tests
meant to kill it exist."""

from __future__ import annotations

import os

import pytest

from tools import mutation_check

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("mutant", mutation_check.MUTANTS, ids=lambda m: m.name)
def test_every_mutant_applies_to_one_line_of_its_file_and_names_tests_that_exist(mutant):
  with open(os.path.join(ROOT, mutant.path), encoding="utf-8") as f:
    source = f.read()
  assert source.count(mutant.original) == 1, f"{mutant.name}: its original is not once in {mutant.path}"
  assert mutant.replacement != mutant.original and mutant.tests
  for test in mutant.tests:
    assert os.path.exists(os.path.join(ROOT, test.split("::")[0].split("[")[0])), f"{mutant.name}: no {test}"
