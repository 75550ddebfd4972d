"""The transfer study on SQuAD's official protocol (``bert_scratch_budget.py``): the reader fine-tuned from the same
masked-LM recipe pre-trained on the task's own text (``bert_mlm_task_text.py``: the paragraphs of the train split),
read from its Hugging Face export under ``results/``.

    python -m attnjax.export --workdir=runs/transfer/squad_v1_official/bert_mlm_task_text/single/default \\
        --out=results/transfer_official/encoders/task_text --dtype=bfloat16
    python -m launch.launch --workdir_root=runs/transfer_official \\
        --experiment=experiments/squad_v1_official/bert_from_task_text_mlm.py --split=validation,test
"""

from experiments.squad_v1_official import bert_from_wikipedia_mlm

ENCODER = "results/transfer_official/encoders/task_text"


def get_config():
  config = bert_from_wikipedia_mlm.get_config()
  config.train.init_encoder_from = ENCODER
  return config
