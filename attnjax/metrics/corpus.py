"""What every corpus metric shares: the :class:`MetricResult` it returns, the error of a missing optional tool, and the
checks of the hypothesis / reference layout.

``references`` is either

* one list of strings, ``references[i]`` being the single reference of ``hypotheses[i]``; or
* a list of reference *streams* as sacreBLEU lays them out, ``references[k][i]`` being the k-th reference of
  ``hypotheses[i]``; every stream has one entry per hypothesis, and with several streams an entry may be ``""`` or
  ``None`` where a segment has fewer references (sacreBLEU's convention for variable reference counts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Union

References = Union[Sequence[str], Sequence[Sequence[str]]]  # one reference per hypothesis, or reference streams


class MetricUnavailableError(RuntimeError):
  """An optional metric's library or data is not installed; the message says what is missing and how to install it."""


@dataclasses.dataclass(frozen=True)
class MetricResult:
  """One corpus-level score.

  Attributes:
    name: the metric as the tool names it ("BLEU", "chrF2", "TER", "METEOR").
    score: the corpus score on the tool's 0-100 scale (TER: edits per 100 reference words, lower is better).
    signature: the string that pins down how the score was computed (sacreBLEU's signature for BLEU/chrF/TER), to be
      reported next to the score.
    details: the metric's sufficient statistics or parameters (for BLEU: precisions, bp, sys_len, ref_len, ...).
  """
  name: str
  score: float
  signature: str = ""
  details: dict[str, Any] = dataclasses.field(default_factory=dict)

  def __str__(self) -> str:
    text = f"{self.name} = {self.score:.2f}"
    return f"{text} ({self.signature})" if self.signature else text


def check_hypotheses(hypotheses: Sequence[str]) -> list[str]:
  """``hypotheses`` as a list after checking it is a non-empty sequence of strings."""
  # A bare string is a sequence too: scoring its characters as segments would give a plausible-looking wrong number.
  if isinstance(hypotheses, str) or not isinstance(hypotheses, Sequence):
    raise TypeError(f"hypotheses must be a list of strings, got {type(hypotheses).__name__}")
  if not hypotheses:
    raise ValueError("hypotheses is empty: a corpus score needs at least one segment")
  for i, hyp in enumerate(hypotheses):
    if not isinstance(hyp, str):
      raise TypeError(f"hypotheses[{i}] must be a string, got {type(hyp).__name__}")
  return list(hypotheses)


def reference_streams(references: References, num_segments: int) -> list[list[str | None]]:
  """Brings ``references`` to sacreBLEU's list of streams, checking that every stream has one entry per hypothesis."""
  if isinstance(references, str) or not isinstance(references, Sequence):
    raise TypeError(f"references must be a list of strings or a list of reference streams, got "
                    f"{type(references).__name__}")
  if not references:
    raise ValueError("references is empty: give one reference per hypothesis, or a list of reference streams")
  single = all(isinstance(ref, str) for ref in references)
  if single:
    streams = [list(references)]
  elif all(isinstance(stream, Sequence) and not isinstance(stream, str) for stream in references):
    streams = [list(stream) for stream in references]
  else:
    raise TypeError("references must be either a list of strings (one reference per hypothesis) or a list of "
                    "reference streams (lists of strings), not a mixture")
  for k, stream in enumerate(streams):
    where = "references" if single else f"references[{k}]"
    if len(stream) != num_segments:
      raise ValueError(f"{where} has {len(stream)} segments but hypotheses has {num_segments}: each reference stream "
                       f"needs exactly one entry per hypothesis")
    for i, ref in enumerate(stream):
      # None marks a missing reference, which only means something when another stream has one for that segment.
      if not (isinstance(ref, str) or (ref is None and len(streams) > 1)):
        raise TypeError(f"{where}[{i}] must be a string, got {type(ref).__name__}")
  return streams


def references_per_segment(streams: list[list[str | None]]) -> list[list[str]]:
  """Transposes streams to each segment's references, dropping the ''/None fillers of variable reference counts."""
  per_segment = []
  for refs in zip(*streams):
    kept = [ref for ref in refs if ref] if len(refs) > 1 else [refs[0]]
    per_segment.append(kept or [""])
  return per_segment
