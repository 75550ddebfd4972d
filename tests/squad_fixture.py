"""A small, learnable SQuAD-format dataset written by the tests themselves (no real data is needed to test).

Each paragraph states a few facts "<name> is <value> ." and a filler sentence; a question asks "what is <name> ?"
and its answer is <value>, so answering means matching the name in the question against the
context: what an extractive QA model's attention must learn. With ``unanswerable`` > 0 (SQuAD 2.0) that fraction of
questions asks about a name the paragraph does not mention.
"""

import json

import numpy as np

NAMES = ["alpha", "bravo", "delta", "echo", "golf", "hotel", "india", "kilo", "lima", "mike", "oscar", "papa",
         "romeo", "sierra", "tango", "victor"]
VALUES = ["red", "blue", "green", "black", "white", "pink", "gold", "grey", "brown", "cyan"]
FILLER = ["it rained", "all was fine", "nobody came", "the shop was closed"]


def synthetic_squad(num_paragraphs: int, *, seed: int = 0, unanswerable: float = 0.0, facts: int = 3,
                    questions_per_paragraph: int = 2, paragraphs_per_article: int = 1) -> dict:
  rng = np.random.default_rng(seed)
  data = []
  for p in range(num_paragraphs):
    names = rng.choice(NAMES, facts + 1, replace=False)
    values = rng.choice(VALUES, facts)
    sentences = [f"{n} is {v} ." for n, v in zip(names[:facts], values)]
    sentences += [f"{f} ." for f in rng.choice(FILLER, 1)]
    order = rng.permutation(len(sentences))
    context = " ".join(sentences[i] for i in order)
    qas = []
    for q in range(questions_per_paragraph):
      qid = f"p{p}q{q}"
      if rng.random() < unanswerable:
        qas.append({"id": qid, "question": f"what is {names[facts]} ?", "answers": [],
                    "is_impossible": True})
        continue
      k = int(rng.integers(facts))
      fact = f"{names[k]} is {values[k]} ."
      start = context.index(fact) + len(fact) - len(values[k]) - 2
      assert context[start:start + len(values[k])] == values[k]
      qa = {"id": qid, "question": f"what is {names[k]} ?",
            "answers": [{"text": values[k], "answer_start": start}]}
      if unanswerable:
        qa["is_impossible"] = False
      qas.append(qa)
    if p % paragraphs_per_article == 0:
      data.append({"title": f"article {p // paragraphs_per_article}", "paragraphs": []})
    data[-1]["paragraphs"].append({"context": context, "qas": qas})
  return {"version": "2.0" if unanswerable else "1.1", "data": data}


def write_squad(path, dataset) -> str:
  with open(path, "w", encoding="utf-8") as f:
    json.dump(dataset, f)
  return str(path)
