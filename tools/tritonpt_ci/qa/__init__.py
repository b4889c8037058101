"""Triton's own QA tests of the pytorch backend (the server repository's ``qa/L0_libtorch_*`` at r25.10 and
``qa/L0_torch_aoti`` at r26.05), held against the builds ``invoke build-backend`` makes: ``nox -s triton-qa``.

Modules, in the order they import each other: ``plan`` (what runs, what does not and why, how checks are
counted), ``adapt`` (the reviewed substitutions and what is done around the files), ``generate`` (upstream's
model generators, cached by their inputs), ``run`` (one suite: files, builds, wrapper, each test.sh), ``report``
(``reports/triton-qa.md`` and ``.json``, the ``triton-qa`` reliability part) and ``__main__``.
"""
