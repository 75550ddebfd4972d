"""``python -m attnjax.train`` for the fault harness: the same command line, and a process that stops itself
(SIGSTOP) at the mark in ``ATTNJAX_FAULT_MARK``, so that the harness strikes there on a machine of any speed:

* ``step:N``: right after optimizer step N;
* a phase of the loop, as the loop names it for the peer watchdog: ``evaluating step N``, ``saving step N``,
  ``finishing the checkpoint writes after step N``, or ``exiting after training`` (the watchdog stopped: what is left
  is the process's exit).

The process prints ``fault mark reached: <mark>`` to its log and stops; the harness, seeing it stopped, delivers
the fault (or SIGCONT). A run that ends without reaching its mark prints nothing, and the harness counts a miss.
"""

import os
import signal
import sys


MARK = os.environ.get("ATTNJAX_FAULT_MARK", "")
_REACHED: list = []


def _stop_here(where: str) -> None:
  if _REACHED:
    return
  _REACHED.append(where)
  print(f"fault mark reached: {where}", file=sys.stderr, flush=True)
  os.kill(os.getpid(), signal.SIGSTOP)


def main():
  from attnjax import cli, train  # pylint: disable=g-import-not-at-top
  from attnjax.training import loop, watchdog  # pylint: disable=g-import-not-at-top
  if MARK.startswith("step:"):
    step = int(MARK[len("step:"):])
    original = train.train_and_evaluate

    def aimed(*args, **kwargs):
      return original(*args, on_step=lambda s: s == step and _stop_here(MARK), **kwargs)

    train.train_and_evaluate = aimed
  elif MARK:

    class AimedWatchdog(watchdog.PeerWatchdog):
      """Stops the process when the loop says it has begun the marked phase."""

      @property
      def where(self):
        return self.__dict__.get("_where", "starting")

      @where.setter
      def where(self, text):
        self.__dict__["_where"] = text
        if text.startswith(MARK):
          _stop_here(text)

    loop.PeerWatchdog = AimedWatchdog
  cli.run(train.main, config_flag="config")


if __name__ == "__main__":
  main()
