"""tfm_lab — the lab around the reference model: the synthetic tasks the chapter models learn (`tfm_lab.tasks`),
the trainer and the benchmark (``python -m tfm_lab.train``, ``python -m tfm_lab.bench``), the recorded results and
the shipped checkpoint (`tfm_lab.pretrained`). It builds on `tfm_ref`, which knows nothing of it.
"""
