"""``python -m attnjax.report --runs=DIR[,DIR...] --out=DIR``: see :mod:`attnjax.report`."""

from absl import app, flags

from attnjax import cli
from attnjax.report import write_report

_RUNS = flags.DEFINE_list("runs", None, "launch roots or run workdirs (local paths or URLs), comma-separated")
_OUT = flags.DEFINE_string("out", None, "directory for results.md, results.json and the plots (a local path or URL)")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    markdown = write_report(_RUNS.value, _OUT.value)
  except (FileNotFoundError, NotADirectoryError, ValueError) as e:
    raise SystemExit(f"error: {e}") from None
  print(markdown, end="")


def run() -> None:
  """The command line: the ``attnjax-report`` console script, and ``python -m attnjax.report``."""
  flags.mark_flags_as_required(["runs", "out"])
  cli.run(main)


if __name__ == "__main__":
  run()
